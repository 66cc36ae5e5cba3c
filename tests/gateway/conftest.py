"""Gateway fixtures: the project's ASGI application under Daphne (what `make run` starts) in a
subprocess on a free port, pointed at the test database, and a small world to serve: a profile
with one loaded built-in, two deferred built-ins and a deferred catalog-only MCP tool."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.live_server import database_url_for

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 60
PROMPT_TIMEOUT_SECONDS = 3  # the live server's wait for an answer under an "ask" rule


class LiveGateway:
    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def endpoint(self, profile_id: int) -> str:
        return f"{self.url}/gateway/mcp/{profile_id}/"

    def logs(self) -> str:
        return self.log.read_text(errors="replace")


def start_live_gateway(tmp_path_factory, name: str):
    """Daphne serving playground.asgi:application: the gateway has to start its session manager
    lazily there, since Daphne runs no ASGI lifespan. A generator: yields the server, then stops it."""
    from django.db import connection

    from playground.runner.embedded_redis import free_port
    from playground.runner.health import healthz_status
    from playground.runner.main import web_command

    port = free_port()
    log = tmp_path_factory.mktemp(name) / "web.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for(connection.settings_dict),
        "DEBUG": "true",
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "playground.settings",
        "TOOLSEARCH_LEARN_FROM_USAGE": "false",
        "GATEWAY_PERMISSION_TIMEOUT_SECONDS": str(PROMPT_TIMEOUT_SECONDS),
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    with open(log, "wb") as out:
        process = subprocess.Popen(web_command("127.0.0.1", port), cwd=ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    server = LiveGateway(f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while healthz_status(server.url, timeout=2) != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the ASGI server did not start:\n{server.logs()}")
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)


@pytest.fixture(scope="session")
def live_gateway(django_db_setup, django_db_blocker, tmp_path_factory):
    yield from start_live_gateway(tmp_path_factory, "gateway")


@pytest.fixture(scope="session")
def second_gateway(django_db_setup, django_db_blocker, tmp_path_factory):
    """Another web process on the same database and Redis, as a second node behind a balancer."""
    yield from start_live_gateway(tmp_path_factory, "gateway-node-b")


@pytest.fixture(autouse=True)
def _forget_failed_token_checks(settings):
    """Failed token checks are counted per client address for a minute, in Redis (auth_guard): each
    test starts with none, whatever the tests before it sent from the same address."""
    import redis

    from playground.gateway.auth_guard import key_prefix

    def forget():
        try:
            client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2)
            keys = list(client.scan_iter(f"{key_prefix()}*gateway-auth-failures*"))
            if keys:
                client.delete(*keys)
            client.close()
        except redis.RedisError:
            pass  # no Redis: nothing was counted

    forget()
    yield
    forget()


@pytest.fixture
def gateway_world(transactional_db, settings):
    """A profile with tool search on, its tools, and a token for it."""
    from playground.gateway.service import reset_usage_cache
    from playground.gateway.tokens import issue_token
    from playground.registry import adapter, backends
    from playground.registry.models import AgentProfile, Tool

    settings.TOOLSEARCH_LEARN_FROM_USAGE = False
    builtin = Tool.Source.BUILTIN
    Tool.objects.create(name="echo", description="Echo the given text back.", source=builtin,
                        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    Tool.objects.create(name="word_count", description="Count the words in a text.", source=builtin, should_defer=True,
                        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    Tool.objects.create(name="calculator", description="Evaluate an arithmetic expression such as 2 * (3 + 4).",
                        source=builtin, should_defer=True,
                        input_schema={"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]})
    Tool.objects.create(name="mcp__weather__get_forecast", description="Weather forecast for a city, by day.",
                        server_name="weather",
                        input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    profile = AgentProfile.objects.create(name="Gateway test profile", tool_search_mode="true", wire_style="native",
                                          search_backend="claude-code")
    other = AgentProfile.objects.create(name="Another profile", tool_search_mode="true")
    token_row, token = issue_token(profile, "pytest client")
    _, other_token = issue_token(other, "other client")
    adapter.reset_caches()
    backends.reset_caches()
    reset_usage_cache()
    yield {"profile": profile, "other": other, "token": token, "token_row": token_row, "other_token": other_token}
    adapter.reset_caches()
    backends.reset_caches()
    wait_for_the_live_server_to_let_go()


def wait_for_the_live_server_to_let_go(deadline_s: float = 15.0) -> None:
    """Before the test database is flushed: the live server may still be finishing a request (a
    session's last event, a pool connection's status) with locks held, and PostgreSQL's TRUNCATE would
    deadlock with it. Wait until no other connection to this database is busy; past the deadline,
    end the busy ones. (Ending idle ones too made the server log connection errors.)"""
    import time

    from django.db import connection

    if connection.vendor != "postgresql":
        return
    busy = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')")
    end = time.monotonic() + deadline_s
    with connection.cursor() as cursor:
        while time.monotonic() < end:
            cursor.execute(busy)
            if not cursor.fetchall():
                return
            time.sleep(0.1)
        cursor.execute(f"SELECT pg_terminate_backend(pid) FROM ({busy}) AS held")


@pytest.fixture
def redis_layer(settings):
    """The real channel layer (Redis, this run's prefix): a saved event's broadcast goes from the
    process's sender to the consumers through it (two in-memory layers would never meet)."""
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": settings.CHANNEL_LAYER_BACKEND,  # the deployment's layer, under this run's prefix
            "CONFIG": {"hosts": [settings.REDIS_URL], "prefix": os.environ["CHANNELS_PREFIX"]},
        }
    }
    channel_layers.backends.clear()
    yield settings.REDIS_URL
    channel_layers.backends.clear()
