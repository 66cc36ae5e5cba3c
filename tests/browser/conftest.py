"""Browser end-to-end fixtures: Debian's Chromium through Playwright against the live ASGI server.

The live server is the real thing, not a test double: `daphne playground.asgi:application` and a
Celery worker in subprocesses (the commands `make run` starts), pointed at the *test* database
(PostgreSQL under CI, the file-based SQLite test database otherwise) and at this session's Redis.
Tests use `transactional_db` so what they create is committed and visible to those processes.

Waits are on `data-*` attributes the pages set (never on sleeps). Each main page is saved as a
screenshot in test-artifacts/. With UPDATE_DOC_SCREENSHOTS=1 the tests also refresh the README's
pictures in docs/img/ (`doc_screenshot`); without it they write nothing there.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from playground.runner.embedded_redis import forget_keys
from tests.browser.chromium import ChromiumUnavailable, ensure_chromium
from tests.conftest import IN_CI
from tests.live_server import database_url_for

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
DOC_IMAGES = ROOT / "docs" / "img"
DOC_VIEWPORT = {"width": 1280, "height": 800}
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
START_TIMEOUT_SECONDS = 90
DEFAULT_WAIT_MS = 20_000

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make between
# page actions are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"browser tests cannot run under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_executable() -> Path:
    try:
        return ensure_chromium()
    except ChromiumUnavailable as error:
        unavailable(str(error))


class SharedChromium:
    """One Chromium for a worker's browser tests in a row (run_tests.py puts them all in one worker).

    Started by the first browser test and closed as soon as the next test is not one (see
    pytest_runtest_teardown below), never held into other tests: Playwright's sync API keeps an
    asyncio loop running in this thread while it is started, which breaks async_to_sync in the
    (non-browser) tests. Each test still gets a fresh context (cookies, storage, pages)."""

    def __init__(self) -> None:
        self.playwright = None
        self.chromium = None

    def get(self, executable: Path):
        if self.chromium is None:
            try:
                from playwright.sync_api import sync_playwright
            except ImportError:
                unavailable("playwright is not installed (it is in the project's dev extra)")
            self.playwright = sync_playwright().start()
            try:
                self.chromium = self.playwright.chromium.launch(executable_path=str(executable), args=CHROMIUM_ARGS, headless=True)
            except BaseException:
                self.close()
                raise
        return self.chromium

    def close(self) -> None:
        chromium, playwright = self.chromium, self.playwright
        self.chromium = self.playwright = None
        try:
            if chromium is not None:
                chromium.close()
        finally:
            if playwright is not None:
                playwright.stop()


SHARED_CHROMIUM = SharedChromium()


def uses_the_browser(item) -> bool:
    return item is not None and "browser" in getattr(item, "fixturenames", ())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a browser test's own teardown: close Chromium unless the next test uses it too."""
    try:
        return (yield)
    finally:
        if not uses_the_browser(nextitem):
            SHARED_CHROMIUM.close()


@pytest.fixture
def browser(chromium_executable):
    return SHARED_CHROMIUM.get(chromium_executable)


@dataclass
class LiveServer:
    url: str
    worker_name: str
    log_dir: Path
    queue: str = ""  # the live worker's own Celery queue (a task the test itself sends must go there)

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}" for path in sorted(self.log_dir.glob("*.log")))


@pytest.fixture(scope="session")
def asgi_server(django_db_setup, django_db_blocker, tmp_path_factory):
    """Daphne + a Celery worker (solo pool) on the test database and this session's Redis."""
    from django.conf import settings
    from django.db import connection

    from playground.celery_app import app
    from playground.runner.embedded_redis import free_port
    from playground.runner.health import healthz_status
    from playground.runner.main import web_command, worker_command

    port = free_port()
    run_id = uuid.uuid4().hex[:8]
    worker_name = f"browser-tests-{run_id}@%h"
    log_dir = tmp_path_factory.mktemp("live-server")
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "DEBUG": "true",  # static files through WhiteNoise's finders, no collectstatic needed
        # No cross-talk with other tests or runs on this Redis: own channel prefix, own task queue.
        "CHANNELS_PREFIX": f"browser-{run_id}",
        "CELERY_TASK_DEFAULT_QUEUE": f"browser-{run_id}",
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "playground.settings",
        # The demo agent streams its words, fast: a reply arrives as a few text deltas in well under a
        # second (the streaming test watches the text grow), so other tests wait no longer than before.
        "DEMO_STREAM_WORDS_PER_SECOND": "200",
        "DEMO_STREAM_MAX_SECONDS": "0.5",
        "STREAM_FLUSH_SECONDS": "0.05",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    # Conversations run the offline demo agent (on OpenAI's wire for a profile naming OpenAI).
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    processes: list[subprocess.Popen] = []
    server = LiveServer(url=f"http://127.0.0.1:{port}", worker_name=worker_name.replace("%h", os.uname().nodename), log_dir=log_dir,
                        queue=f"browser-{run_id}")
    try:
        for name, argv in (
            ("web", web_command("127.0.0.1", port)),
            ("worker", [*worker_command("solo", 1), "-n", worker_name, "-Q", f"browser-{run_id}"]),
        ):
            with open(log_dir / f"{name}.log", "wb") as log:
                processes.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while healthz_status(server.url, timeout=2) != 200:
            if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
                pytest.fail(f"the live ASGI server did not start:\n{server.logs()}")
            time.sleep(0.2)
        while not app.control.ping(destination=[server.worker_name], timeout=1.0):
            if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
                pytest.fail(f"the Celery worker did not start:\n{server.logs()}")
        yield server
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait(timeout=5)
        _forget_run_keys(settings.REDIS_URL, run_id)


def _forget_run_keys(redis_url: str, run_id: str) -> None:
    """Remove this run's keys from Redis: its Celery queue and bindings, its Channels groups."""
    forget_keys(redis_url, f"browser-{run_id}")


@pytest.fixture
def page(browser, asgi_server, transactional_db, request):
    context = browser.new_context(base_url=asgi_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(DEFAULT_WAIT_MS)
    page = context.new_page()
    console_errors: list[str] = []
    page.on("pageerror", lambda error: console_errors.append(str(error)))
    yield page
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    if failed:
        screenshot(page, f"FAILED-{request.node.name}")
    context.close()
    if failed:
        sys.stderr.write(f"\nJavaScript errors: {console_errors}\n{asgi_server.logs()}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def doc_screenshot(page, name: str, scroll_to: str | None = None) -> Path | None:
    """Save docs/img/<name>.png at 1280x800 when UPDATE_DOC_SCREENSHOTS=1; otherwise do nothing.

    The viewport is set to the documentation size for the picture and put back afterwards, so the
    test's own steps run as before. `scroll_to` (a selector) scrolls that element to the top first.
    """
    if os.environ.get("UPDATE_DOC_SCREENSHOTS") != "1":
        return None
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    path = DOC_IMAGES / f"{name}.png"
    previous = page.viewport_size
    page.set_viewport_size(DOC_VIEWPORT)
    try:
        if scroll_to:
            page.locator(scroll_to).first.evaluate("e => window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 48)")
        page.screenshot(path=str(path), full_page=False, animations="disabled")
    finally:
        if scroll_to:
            page.evaluate("window.scrollTo(0, 0)")
        if previous:
            page.set_viewport_size(previous)
    return path


def live_server_password(user, raw_password: str) -> None:
    """Store the password with PBKDF2, which the live server (production settings) accepts.

    The test process hashes with MD5 for speed (tests/conftest.py); the live server does not list
    that hasher, so a user created here could not log in through the real form. Few iterations: the
    live server verifies whatever count the hash records.
    """
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    hasher = PBKDF2PasswordHasher()
    user.password = hasher.encode(raw_password, hasher.salt(), iterations=1_000)
    user.save(update_fields=["password"])


@pytest.fixture
def admin_user(admin_user):
    live_server_password(admin_user, "pw-alice-123")
    return admin_user


@pytest.fixture
def viewer_user(viewer_user):
    live_server_password(viewer_user, "pw-bob-12345")
    return viewer_user


@pytest.fixture
def logged_in_page(page, admin_user, asgi_server):
    """The admin from tests/conftest.py, logged in, on the page the login form leads to (home).

    The session is made as the login form makes it (django.contrib.auth.login, through the test
    client) and its cookie handed to the browser. The form itself is used as a person uses it in
    test_overview_page, test_registry_pages and test_readme_demo_path; through it here, every
    browser test paid a full PBKDF2 rehash on the live server (~1 s of CPU, 5 s on a busy machine):
    Django upgrades the test's cheap hash to its own iteration count at each login."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(admin_user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": asgi_server.url}])
    page.goto("/")
    page.wait_for_selector("body[data-page]:not([data-page=login])")
    return page
