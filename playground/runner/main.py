"""`python -m playground.run`: migrate, load the demo data once, then run web + worker + beat (+ Redis).

Order matters: Redis is settled first (settings read REDIS_URL when Django starts), then Django
is set up in this process for migrate / demo data / admin, then the children start with the same
environment, so the web server, the worker and this process agree on the database and Redis.
"""
from __future__ import annotations

import argparse
import inspect
import io
import logging
import os
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

from playground.runner.embedded_redis import DEFAULT_REDIS_URL, EmbeddedRedis, ensure_redis
from playground.runner.health import healthz_status
from playground.runner.supervisor import Supervisor

log = logging.getLogger("playground.run")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
READY_TIMEOUT_SECONDS = 90
# The run's state folder (ignored by git, as in the image's /app/var): the embedded Redis's data.
STATE_DIR = Path(__file__).resolve().parents[2] / "var"


def web_command(host: str, port: int) -> list[str]:
    """The ASGI server (HTTP + WebSockets): Daphne with the project's limits and access log
    (runner/web.py); docker-compose's `web` service runs the same."""
    return [sys.executable, "-m", "playground.runner.web", "-b", host, "-p", str(port), "playground.asgi:application"]


def worker_command(pool: str, concurrency: int) -> list[str]:
    """The Celery worker; docker-compose's `worker` service runs the same (prefork or solo pool, one
    process per core: each carries up to AGENT_RUNS_PER_PROCESS conversation runs at once on its own
    event loop, conversations/run_host.py; gevent/eventlet would patch that loop away)."""
    argv = [sys.executable, "-m", "celery", "-A", "playground.celery_app", "worker", "--loglevel", "INFO", "--pool", pool]
    if pool == "prefork":
        argv += ["--concurrency", str(concurrency)]
    return argv


def beat_command() -> list[str]:
    """Celery beat: sends the periodic background round (settings.CELERY_BEAT_SCHEDULE) to the workers;
    docker-compose's `beat` service runs the same. One per deployment: two would double the rounds."""
    return [sys.executable, "-m", "celery", "-A", "playground.celery_app", "beat", "--loglevel", "INFO"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m playground.run", description="Run the whole playground on this machine.")
    parser.add_argument("--host", default=os.environ.get("HOST", DEFAULT_HOST), help="address to bind (HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or DEFAULT_PORT), help="port (PORT, default 8000)")
    parser.add_argument("--no-demo-data", action="store_true", help="skip load_demo_data even on an empty registry")
    parser.add_argument("--prepare-only", action="store_true", help="migrate and load data, then exit (no servers)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[run] %(message)s")
    out = Supervisor()

    redis_url = os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
    embedded: EmbeddedRedis | None = None
    try:
        redis_url, embedded = ensure_redis(redis_url, data_dir=STATE_DIR / "redis")
    except RuntimeError as error:
        out.say(f"[run] no Redis answers at {redis_url} and none could be embedded: {error}")
        return 1
    if embedded is None:
        out.say(f"[run] Redis: using the server at {redis_url}")
    else:
        out.say(f"[run] Redis: none answered at {os.environ.get('REDIS_URL') or DEFAULT_REDIS_URL}; "
                f"started an embedded {embedded.description} → {redis_url}")
    os.environ["REDIS_URL"] = redis_url  # children inherit it; settings read it below

    try:
        login = prepare_database(out, load_demo=not args.no_demo_data)
        if args.prepare_only:
            return 0
        return serve(out, args.host, args.port, login)
    finally:
        if embedded is not None:
            embedded.stop()
            out.say(f"[run] embedded {embedded.kind} stopped")


def prepare_database(out: Supervisor, *, load_demo: bool) -> str:
    """Migrate, collect static files when DEBUG is off, load the demo data once; return the login text."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command, get_commands

    if not os.environ.get("SECRET_KEY"):
        out.say(f"[run] signing key: the random one in {settings.SECRET_KEY_FILE} (made on the first start; SECRET_KEY overrides it)")
    database = settings.DATABASES["default"]
    out.say(f"[run] database: {database['ENGINE'].rsplit('.', 1)[-1]} {database['NAME']}")
    call_command("migrate", interactive=False, verbosity=0)
    out.say("[run] migrations applied")
    if not settings.DEBUG:
        call_command("collectstatic", interactive=False, verbosity=0)
        out.say(f"[run] DEBUG is off: static files collected into {settings.STATIC_ROOT} (served by WhiteNoise)")

    commands = get_commands()
    if load_demo:
        if "load_demo_data" not in commands:
            out.say("[run] no load_demo_data command in this checkout: starting without demo data")
        elif registry_is_empty():
            call_command("load_demo_data")
            out.say("[run] demo data loaded (first run: the registry was empty)")
        else:
            out.say("[run] demo data already present (the registry has tools): not loading it again")

    if "ensure_admin" in commands:
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            call_command("ensure_admin", stdout=buffer)
        return buffer.getvalue().strip()
    return "no ensure_admin command in this checkout: create a user with `.venv/bin/python manage.py createsuperuser`"


def registry_is_empty() -> bool:
    """'Once' means: on a database whose registry has no tools yet (a fresh one)."""
    from playground.registry.models import Tool

    return not Tool.objects.exists()


def serve(out: Supervisor, host: str, port: int, login: str) -> int:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    pool = os.environ.get("CELERY_POOL", "prefork")
    concurrency = int(os.environ.get("CELERY_CONCURRENCY") or 2)
    out.install_signal_handlers()
    code = 1
    try:
        web = out.start("web", web_command(host, port), env=env)
        out.start("worker", worker_command(pool, concurrency), env=env)
        from django.conf import settings

        Path(settings.CELERY_BEAT_SCHEDULE_FILENAME).parent.mkdir(parents=True, exist_ok=True)
        out.start("beat", beat_command(), env=env)
        shown_host = f"[{host}]" if ":" in host else host
        probe_host = "127.0.0.1" if host in {"0.0.0.0", ""} else ("[::1]" if host == "::" else shown_host)
        if not wait_until_ready(out, f"http://{probe_host}:{port}"):
            return 1
        if not wait_for_worker(out):
            return 1
        trigger_mcp_sync(out)
        out.say("")
        out.say("=" * 72)
        out.say(f"  ToolSearch Playground is running at http://{shown_host}:{port}/")
        for line in login.splitlines():
            out.say(f"  {line}")
        out.say(f"  Redis {os.environ['REDIS_URL']} · web pid {web.process.pid} · Ctrl-C stops everything")
        out.say("=" * 72)
        code = out.wait()
        return code
    finally:
        out.stop_all()


def wait_until_ready(out: Supervisor, base_url: str) -> bool:
    """Poll /healthz until it answers 200 (the server is up and reaches the database)."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    status = None
    while time.monotonic() < deadline and not out.stop_requested.is_set():
        crashed = out.crashed()
        if crashed is not None:
            out.say(f"[run] !!! {crashed.name} exited with code {crashed.returncode} while starting")
            return False
        status = healthz_status(base_url, timeout=2)
        if status == 200:
            return True
        time.sleep(0.2)
    if not out.stop_requested.is_set():
        out.say(f"[run] !!! {base_url}/healthz did not answer 200 within {READY_TIMEOUT_SECONDS}s (last: {status})")
    return False


def wait_for_worker(out: Supervisor) -> bool:
    from playground.celery_app import app

    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline and not out.stop_requested.is_set():
        crashed = out.crashed()
        if crashed is not None:
            out.say(f"[run] !!! {crashed.name} exited with code {crashed.returncode} while starting")
            return False
        try:
            if app.control.ping(timeout=1.0):
                out.say("[run] Celery worker answers")
                return True
        except Exception as error:  # noqa: BLE001 - broker hiccups while starting: retry until the deadline
            log.debug("worker ping failed: %s", error)
        time.sleep(0.3)
    if not out.stop_requested.is_set():
        out.say(f"[run] !!! the Celery worker did not answer a ping within {READY_TIMEOUT_SECONDS}s")
    return False


MCP_SYNC_ALL_TASK_NAMES = ("sync_demo_servers", "sync_all_servers", "sync_servers", "sync_all")


def _required_parameters(task) -> list[str]:
    parameters = inspect.signature(task.run).parameters.values()
    return [p.name for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def find_mcp_sync_tasks():
    """(sync-everything task, sync-one-server task) of the MCP app, each None when the checkout has none."""
    try:
        from playground.mcp_servers import tasks
    except ImportError:
        return None, None
    named = [getattr(tasks, name, None) for name in MCP_SYNC_ALL_TASK_NAMES]
    others = [getattr(tasks, name) for name in sorted(dir(tasks)) if "sync" in name and name not in MCP_SYNC_ALL_TASK_NAMES]
    celery_tasks = [task for task in named + others if task is not None and hasattr(task, "delay") and hasattr(task, "run")]
    sync_all = next((task for task in celery_tasks if not _required_parameters(task)), None)
    sync_one = next((task for task in celery_tasks if _required_parameters(task) == ["server_id"]), None)
    return sync_all, sync_one


def trigger_mcp_sync(out: Supervisor) -> None:
    """Queue the MCP servers' tool sync in the worker, so the registry shows the demo servers' tools."""
    sync_all, sync_one = find_mcp_sync_tasks()
    if sync_all is not None:
        sync_all.delay()
        out.say(f"[run] queued {sync_all.name}: the MCP servers' tools sync in the worker")
    elif sync_one is not None:
        from playground.mcp_servers.models import McpServer

        servers = list(McpServer.objects.filter(enabled=True).values_list("pk", "name"))
        for pk, _name in servers:
            sync_one.delay(pk)
        names = ", ".join(name for _, name in servers) or "none registered"
        out.say(f"[run] queued {sync_one.name} for each enabled MCP server ({names})")
    else:
        out.say("[run] no MCP sync task in this checkout: MCP servers are not synced at start")
