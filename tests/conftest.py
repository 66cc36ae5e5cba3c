"""Shared test fixtures: the small world of users, and service checks.

Services: under CI (CI=true) a missing PostgreSQL or Redis fails the run; on a developer's machine
tests that need them skip with a clear reason.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from playground.engine.catalog_io import toolsets_dir
from tests.durations_report import DurationsReport
from tests.otlp_receiver import fresh_provider, receiver  # noqa: F401 - fixtures: a local OTLP receiver (traces)

IN_CI = os.environ.get("CI", "").lower() == "true"
# One id per test process: its own Celery queue, Channels prefix and test database, so a playground
# running on the same Redis and PostgreSQL, a second test run, or another worker of this run can
# neither take this process's tasks nor see its events or rows. Under pytest-xdist (`make test`)
# the controller picks the run's id and each worker adds its name (gw0, gw1, …). Children (the live
# server, Celery workers) inherit the id through the environment.
# (TEST_RUN_BASE_ID keeps the run's id, so a child that imports this module again gets the same one.)
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
RUN_BASE_ID = os.environ.setdefault("TEST_RUN_BASE_ID", os.environ.get("TEST_RUN_ID") or uuid.uuid4().hex[:8])
RUN_ID = os.environ["TEST_RUN_ID"] = f"{RUN_BASE_ID}_{XDIST_WORKER}" if XDIST_WORKER else RUN_BASE_ID


# A request's texts are encoded one at a time in tests: `auto` (the default) takes a second thread
# only when the host has an idle core, which would make a test's path depend on the machine's load.
# The two paths give the same bits (tests/search/test_concurrency.py sets the variable itself).
os.environ.setdefault("TOOLSEARCH_QUERY_THREADS", "1")


def require_service(available: bool, what: str) -> None:
    if available:
        return
    if IN_CI:
        pytest.fail(f"{what} is required under CI=true but is not reachable")
    pytest.skip(f"{what} is not reachable on this machine")


@pytest.fixture
def shared_toolsets():
    """The shared labelled toolsets folder (TOOLSETS_DIR); skips when it is not on this machine."""
    folder = toolsets_dir()
    if not (folder / "mcp-combined" / "catalog.jsonl").exists():
        pytest.skip(f"the shared toolsets are not at {folder} (set TOOLSETS_DIR)")
    return folder


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_user("alice", "alice@example.com", "pw-alice-123", is_staff=True, is_superuser=True)


@pytest.fixture
def viewer_user(django_user_model):
    return django_user_model.objects.create_user("bob", "bob@example.com", "pw-bob-12345")


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def viewer_client(client, viewer_user):
    client.force_login(viewer_user)
    return client


# --- Session services: which database and Redis this run uses ---------------------------
# Under CI the suite must run on PostgreSQL with a real Redis: anything missing ends the run with a
# failure before the first test. On a developer's machine SQLite is fine, PostgreSQL-only tests
# (marker `postgres`) skip with a reason, and an embedded Redis is started when none answers —
# the same code `make run` uses (playground/runner/embedded_redis.py).

_SESSION_SERVICES: dict[str, object] = {}


def _database_description(per_worker: bool = False) -> tuple[str, bool]:
    from django.conf import settings

    database = settings.DATABASES["default"]
    is_postgres = "postgresql" in database["ENGINE"]
    test_name = database.get("TEST", {}).get("NAME") or database["NAME"]
    if per_worker:  # the controller's name, which each worker extends with its own (see RUN_ID)
        stem, dot, extension = str(test_name).rpartition(".") if not is_postgres else (test_name, "", "")
        test_name = f"{stem}_gwN{dot}{extension}"
    if is_postgres:
        where = f"{database.get('HOST') or 'localhost'}:{database.get('PORT') or 5432}"
        return f"PostgreSQL {where}/{database['NAME']} (tests create and drop {test_name})", True
    return f"SQLite {test_name} (test database file)", False


def postgres_answers(timeout: int = 3) -> tuple[bool, str]:
    """Whether the configured PostgreSQL server accepts a connection (to its maintenance database)."""
    from django.conf import settings

    import psycopg

    database = settings.DATABASES["default"]
    try:
        with psycopg.connect(
            host=database.get("HOST") or "localhost",
            port=int(database.get("PORT") or 5432),
            user=database.get("USER") or None,
            password=database.get("PASSWORD") or None,
            dbname="postgres",
            connect_timeout=timeout,
        ):
            return True, ""
    except psycopg.Error as error:
        return False, str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _use_redis_url(url: str) -> None:
    """Point this process (settings, Celery, Channels) and every child it starts at `url`."""
    from django.conf import settings

    os.environ["REDIS_URL"] = url
    settings.REDIS_URL = url
    settings.CELERY_BROKER_URL = url
    for layer in settings.CHANNEL_LAYERS.values():
        if "hosts" in layer.get("CONFIG", {}):
            layer["CONFIG"]["hosts"] = [url]
    from playground.celery_app import app

    app.conf.broker_url = url


def _isolate_run(settings) -> None:
    """This run's own queue, channel prefix and test database name (see RUN_ID)."""
    queue, prefix = f"test-{RUN_ID}", f"test-{RUN_ID}"
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = settings.CELERY_TASK_DEFAULT_QUEUE = queue
    os.environ["CHANNELS_PREFIX"] = prefix
    for layer in settings.CHANNEL_LAYERS.values():
        layer.setdefault("CONFIG", {})["prefix"] = prefix
    from playground.celery_app import app

    app.conf.task_default_queue = queue
    database = settings.DATABASES["default"]
    test = database.setdefault("TEST", {})
    if "postgresql" in database["ENGINE"]:
        test["NAME"] = f"test_{database['NAME']}_{RUN_ID}"
    else:
        test["NAME"] = str(settings.BASE_DIR / f"test_db_{RUN_ID}.sqlite3")
    # The demo agent answers at once in tests (children too): its readable streaming pace would make
    # every run seconds longer. Streaming tests turn it on for themselves.
    os.environ["DEMO_STREAM_WORDS_PER_SECOND"] = "0"
    settings.DEMO_STREAM_WORDS_PER_SECOND = 0.0
    # Test users log in thousands of times: a fast hasher (never used outside tests).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def pytest_configure(config):
    from django.conf import settings

    from playground.runner.embedded_redis import ensure_redis, redis_answers

    _isolate_run(settings)
    if not XDIST_WORKER:  # the process that sees every test's report: the slowest files and tests at the end
        config.pluginmanager.register(DurationsReport(), DURATIONS_PLUGIN)

    # Under xdist the controller runs this first, before it starts its workers: a failed check ends
    # the run once, and an embedded Redis it starts is the one every worker finds at REDIS_URL.
    database, is_postgres = _database_description(per_worker=_runs_workers(config))
    _SESSION_SERVICES["postgres"] = is_postgres
    if IN_CI:
        problems = []
        if not is_postgres:
            problems.append("DATABASE_URL must point to PostgreSQL under CI (.ci/run sets it)")
        else:
            ok, error = postgres_answers()
            if not ok:
                problems.append(f"PostgreSQL does not answer: {error}")
        if not redis_answers(settings.REDIS_URL):
            problems.append(f"Redis does not answer at {settings.REDIS_URL}")
        if problems:
            pytest.exit("CI=true and a required service is missing: " + "; ".join(problems), returncode=1)
        _SESSION_SERVICES["redis"] = f"{settings.REDIS_URL} (the machine's Redis)"
    else:
        if is_postgres:
            ok, error = postgres_answers()
            if not ok:
                pytest.exit(
                    f"DATABASE_URL points to PostgreSQL but it does not answer ({error}). "
                    "Unset DATABASE_URL to run on SQLite.",
                    returncode=1,
                )
        url, embedded = ensure_redis(settings.REDIS_URL)
        if embedded is not None:
            _SESSION_SERVICES["embedded_redis"] = embedded
            _use_redis_url(url)
            _SESSION_SERVICES["redis"] = f"{url} (embedded {embedded.kind}: none answered at the configured URL)"
        else:
            _SESSION_SERVICES["redis"] = f"{url} (already running)"
    _SESSION_SERVICES["database"] = database


def _forget_run_keys() -> None:
    """Remove what this run left in Redis (its queue and bindings, its Channels groups)."""
    from django.conf import settings

    from playground.runner.embedded_redis import forget_keys

    forget_keys(settings.REDIS_URL, f"test-{RUN_ID}")


def pytest_unconfigure(config):
    _forget_run_keys()
    embedded = _SESSION_SERVICES.pop("embedded_redis", None)
    if embedded is not None:
        embedded.stop()


def _runs_workers(config) -> bool:
    """True in the controller of a pytest-xdist run: it runs no test, its workers (processes of
    their own, each with its own RUN_ID) do."""
    return not XDIST_WORKER and config.getoption("dist", "no") != "no"


@pytest.fixture(scope="session")
def django_db_modify_db_settings_xdist_suffix():
    """pytest-django would add `_gw0` to the test database's name under xdist: RUN_ID has it already."""


def pytest_sessionstart(session):
    """Say which services this run uses, even under -q (the report header is hidden there)."""
    if XDIST_WORKER:
        return  # the controller says it for the run
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if _runs_workers(session.config):
        isolation = f"one per worker: test-{RUN_ID}_gw0, test-{RUN_ID}_gw1, … (and a test database each)"
    else:
        isolation = f"test-{RUN_ID}"
    lines = [
        f"database: {_SESSION_SERVICES.get('database', '?')}",
        f"redis: {_SESSION_SERVICES.get('redis', '?')}, Celery queue and Channels prefix {isolation}",
        f"CI: {'yes (a missing service fails the run)' if IN_CI else 'no (PostgreSQL-only tests skip on SQLite)'}",
    ]
    for line in lines:
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line)


# --- Under xdist: a stack's tests in one worker, the longest units first -------------------
# run_tests.py runs `--dist loadfile`: xdist hands out whole files (a module's fixtures, such as an MCP
# server, start once), in collection order (--no-loadscope-reorder). Two folders share a session
# stack among their files, and each goes out as one unit instead (StackFolderScheduling below), so
# the stack starts once in the run: tests/browser (the live server and Chromium, which the browser
# tests keep from one test to the next: tests/browser/conftest.py) and tests/gateway (the gateway's
# Daphne). A long unit handed out last keeps one worker busy alone at the end, so units go out
# longest first: by the seconds their files took last time (kept in pytest's cache by the
# controller), else as measured on this machine (tests/file_seconds.json, for a fresh clone), else
# estimated from their markers.
FILE_SECONDS_KEY = "playground/file-seconds"
DURATIONS_PLUGIN = "playground-durations"
FILE_SECONDS_HINT = Path(__file__).resolve().parent / "file_seconds.json"
STACK_FOLDERS = ("tests/browser/", "tests/gateway/")


def work_unit(nodeid: str) -> str:
    """The unit of work a test goes out in: its stack's folder, else its file."""
    path = nodeid.split("::", 1)[0]
    return next((folder for folder in STACK_FOLDERS if path.startswith(folder)), path)


@pytest.hookimpl(optionalhook=True)  # unknown when xdist is off (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, with a stack folder's files as one unit (see above)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class StackFolderScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return StackFolderScheduling(config, log)


def _estimated_seconds(file_items) -> float:
    slow = sum(1 for item in file_items if item.get_closest_marker("slow") or item.get_closest_marker("browser"))
    return 20.0 * slow + 0.5 * len(file_items)


def _file_seconds_hint() -> dict[str, float]:
    try:
        return json.loads(FILE_SECONDS_HINT.read_text())
    except (OSError, ValueError):
        return {}


def _longest_units_first(config, items) -> None:
    """Every worker must collect the same order: ties are broken by name."""
    previous = config.cache.get(FILE_SECONDS_KEY, {}) if getattr(config, "cache", None) is not None else {}
    hint = _file_seconds_hint()
    by_file: dict[str, list] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    seconds = {path: previous.get(path, hint.get(path, _estimated_seconds(file_items))) for path, file_items in by_file.items()}
    units: dict[str, list[str]] = {}
    for path in by_file:
        units.setdefault(work_unit(path), []).append(path)
    unit_seconds = {unit: sum(seconds[path] for path in paths) for unit, paths in units.items()}
    items[:] = [
        item
        for unit in sorted(units, key=lambda u: (-unit_seconds[u], u))
        for path in sorted(units[unit], key=lambda p: (-seconds[p], p))
        for item in by_file[path]
    ]


def pytest_sessionfinish(session):
    report = session.config.pluginmanager.get_plugin(DURATIONS_PLUGIN)
    cache = getattr(session.config, "cache", None)  # none under -p no:cacheprovider
    if report is not None and report.tests and cache is not None:
        kept = cache.get(FILE_SECONDS_KEY, {})
        kept.update({path: round(seconds, 1) for path, seconds in report.file_seconds().items()})
        cache.set(FILE_SECONDS_KEY, kept)


def pytest_collection_modifyitems(config, items):
    if XDIST_WORKER:
        _longest_units_first(config, items)
    if _SESSION_SERVICES.get("postgres"):
        return
    reason = "needs PostgreSQL: this run uses SQLite (set DATABASE_URL=postgres://…, as .ci/run does)"
    for item in items:
        if item.get_closest_marker("postgres") is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
