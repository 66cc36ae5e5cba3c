"""How a test process keeps to itself when several run at once (pytest-xdist workers, other runs):
its id, and what `make test` passes to pytest (scripts/run_tests.py)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.browser import chromium
from tests.conftest import RUN_ID, XDIST_WORKER

ROOT = Path(__file__).resolve().parents[1]


def fresh_environment() -> dict[str, str]:
    """This environment without this process's run id: a child given it is a run of its own (with
    the id, its clean-up at the end would delete this process's keys from Redis)."""
    return {k: v for k, v in os.environ.items() if k not in ("TEST_RUN_ID", "TEST_RUN_BASE_ID", "PYTEST_XDIST_WORKER")}


def load_run_tests():
    spec = importlib.util.spec_from_file_location("run_tests", ROOT / "scripts" / "run_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.django_db
def test_this_process_has_its_own_queue_prefix_and_test_database(settings):
    from django.db import connection

    from playground.celery_app import app

    if XDIST_WORKER:
        assert RUN_ID.endswith(f"_{XDIST_WORKER}")
    assert os.environ["TEST_RUN_ID"] == RUN_ID  # what the live servers and workers inherit
    assert settings.CELERY_TASK_DEFAULT_QUEUE == app.conf.task_default_queue == f"test-{RUN_ID}"
    assert os.environ["CHANNELS_PREFIX"] == f"test-{RUN_ID}"
    assert all(layer["CONFIG"]["prefix"] == f"test-{RUN_ID}" for layer in settings.CHANNEL_LAYERS.values()
               if "CONFIG" in layer)
    name = connection.settings_dict["NAME"]
    assert RUN_ID in name
    if XDIST_WORKER:
        assert name.count(f"_{XDIST_WORKER}") == 1  # pytest-django adds no second one


def test_two_workers_of_one_run_get_different_ids_and_a_child_keeps_its_workers():
    def run_id_of(env: dict[str, str]) -> str:
        done = subprocess.run([sys.executable, "-c", "from tests.conftest import RUN_ID; print(RUN_ID)"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.strip()

    controller = {**fresh_environment(), "TEST_RUN_ID": "cafe0001"}
    first = run_id_of({**controller, "PYTEST_XDIST_WORKER": "gw0"})
    second = run_id_of({**controller, "PYTEST_XDIST_WORKER": "gw1"})
    assert (first, second) == ("cafe0001_gw0", "cafe0001_gw1")
    # A process the worker starts inherits its environment; importing the module again keeps the id.
    child = {**controller, "PYTEST_XDIST_WORKER": "gw0", "TEST_RUN_BASE_ID": "cafe0001", "TEST_RUN_ID": first}
    assert run_id_of(child) == "cafe0001_gw0"
    assert run_id_of(controller) == "cafe0001"  # without xdist: the id as given


def test_make_test_runs_workers_unless_told_otherwise(monkeypatch):
    run_tests = load_run_tests()
    monkeypatch.setenv("TEST_WORKERS", "3")
    assert run_tests.parallel_args([]) == ["-n", "3", "--dist", "loadfile", "--no-loadscope-reorder"]
    assert run_tests.parallel_args(["tests/engine", "-q"]) == ["-n", "3", "--dist", "loadfile", "--no-loadscope-reorder"]
    for chosen in (["-n", "0"], ["-n2"], ["--numprocesses=2"], ["--dist", "load"], ["-p", "no:xdist"]):
        assert run_tests.parallel_args(chosen) == [], chosen
    monkeypatch.setenv("TEST_WORKERS", "1")
    assert run_tests.parallel_args([]) == []
    monkeypatch.delenv("TEST_WORKERS")
    assert 1 <= run_tests.worker_count() <= run_tests.MAX_DEFAULT_WORKERS
    for bad in ("two", "0"):
        monkeypatch.setenv("TEST_WORKERS", bad)
        with pytest.raises(SystemExit, match="TEST_WORKERS must be"):
            run_tests.parallel_args([])


def test_a_run_that_collects_nothing_fails():
    done = subprocess.run([sys.executable, "scripts/run_tests.py", "-q", "-p", "no:xdist", "tests/test_docs.py",
                           "-k", "no_test_has_this_name"], cwd=ROOT, env=fresh_environment(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "collected no tests" in done.stderr


class FakeItem:
    def __init__(self, nodeid: str, *markers: str) -> None:
        self.nodeid, self.markers = nodeid, set(markers)

    def get_closest_marker(self, name: str):
        return name if name in self.markers else None


class FakeCache(dict):
    def get(self, key, default):
        return super().get(key, default)


class FakeConfig:
    def __init__(self, cache) -> None:
        self.cache = cache


def test_workers_take_the_longest_files_first_and_keep_each_files_order(monkeypatch, tmp_path):
    import tests.conftest as root
    from tests.conftest import FILE_SECONDS_KEY, _longest_units_first

    monkeypatch.setattr(root, "FILE_SECONDS_HINT", tmp_path / "absent.json")

    def collected():
        return [FakeItem("tests/a.py::one"), FakeItem("tests/a.py::two"),
                FakeItem("tests/b.py::browser_one", "browser"), FakeItem("tests/b.py::two"),
                FakeItem("tests/c.py::only")]

    items = collected()  # nothing measured yet: estimated from the markers
    _longest_units_first(FakeConfig(None), items)
    assert [i.nodeid for i in items] == ["tests/b.py::browser_one", "tests/b.py::two", "tests/a.py::one",
                                         "tests/a.py::two", "tests/c.py::only"]
    items = collected()  # measured last time; a file not measured is estimated
    _longest_units_first(FakeConfig(FakeCache({FILE_SECONDS_KEY: {"tests/c.py": 90.0, "tests/a.py": 1.0}})), items)
    assert [i.nodeid.split("::")[0] for i in items] == ["tests/c.py", "tests/b.py", "tests/b.py", "tests/a.py", "tests/a.py"]
    # A fresh clone (no cache): the seconds measured on the development machine, kept in the repository.
    (tmp_path / "hint.json").write_text('{"tests/a.py": 500.0}')
    monkeypatch.setattr(root, "FILE_SECONDS_HINT", tmp_path / "hint.json")
    items = collected()
    _longest_units_first(FakeConfig(None), items)
    assert [i.nodeid.split("::")[0] for i in items] == ["tests/a.py", "tests/a.py", "tests/b.py", "tests/b.py", "tests/c.py"]


def test_a_stack_folders_files_go_out_as_one_unit_ordered_by_their_sum(monkeypatch, tmp_path):
    """tests/browser (live server, Chromium) and tests/gateway (Daphne) each start their stack once in the
    run: the scheduler sends each folder as one unit, and the workers collect its files one after another."""
    import tests.conftest as root
    from tests.conftest import FILE_SECONDS_KEY, _longest_units_first, pytest_xdist_make_scheduler, work_unit

    class XdistConfig:  # what xdist's scheduler reads of the run's options
        def __init__(self, dist: str) -> None:
            self.values = {"dist": dist, "tx": ["2*popen"]}

        def getvalue(self, name: str):
            return self.values[name]

    monkeypatch.setattr(root, "FILE_SECONDS_HINT", tmp_path / "absent.json")
    assert pytest_xdist_make_scheduler(XdistConfig("load"), None) is None  # another --dist: xdist's own
    split = pytest_xdist_make_scheduler(XdistConfig("loadfile"), None)._split_scope  # the unit xdist hands out
    assert split("tests/browser/test_x.py::test_a[1]") == split("tests/browser/test_y.py::test_b") == "tests/browser/"
    assert split("tests/gateway/test_z.py::test_c") == "tests/gateway/"
    assert split("tests/engine/test_cli.py::test_d") == split("tests/engine/test_cli.py::test_e") == "tests/engine/test_cli.py"
    assert work_unit("tests/browser/test_x.py") == "tests/browser/"  # the ordering below groups by the same rule
    seconds = {"tests/browser/test_x.py": 30.0, "tests/browser/test_y.py": 40.0, "tests/engine/test_cli.py": 60.0}
    items = [FakeItem("tests/engine/test_cli.py::d"), FakeItem("tests/browser/test_x.py::a"), FakeItem("tests/browser/test_y.py::b")]
    _longest_units_first(FakeConfig(FakeCache({FILE_SECONDS_KEY: seconds})), items)
    # the browser unit (70 s) before the 60 s file, its longer file first
    assert [i.nodeid for i in items] == ["tests/browser/test_y.py::b", "tests/browser/test_x.py::a", "tests/engine/test_cli.py::d"]


def test_the_run_ends_with_the_slowest_files_and_tests_and_keeps_them(monkeypatch, tmp_path):
    import tests.durations_report as report_module
    from tests.durations_report import DurationsReport

    class Report:
        def __init__(self, nodeid, when, duration, outcome="passed", worker="gw0"):
            self.nodeid, self.when, self.duration, self.outcome = nodeid, when, duration, outcome
            self.failed, self.skipped = outcome == "failed", outcome == "skipped"
            self.node = type("Node", (), {"gateway": type("Gateway", (), {"id": worker})()})()

    monkeypatch.setattr(report_module, "ARTIFACTS", tmp_path)
    report = DurationsReport()
    for nodeid, worker, phases in (("tests/a.py::slow", "gw0", (5.0, 20.0, 1.0)), ("tests/a.py::quick", "gw0", (0.0, 0.5, 0.0)),
                                   ("tests/b.py::mid[x@y]", "gw1", (0.0, 10.0, 0.0))):
        for when, duration in zip(("setup", "call", "teardown"), phases):
            failed = nodeid.endswith("quick") and when == "call"  # a failed call stays failed after a passed teardown
            report.pytest_runtest_logreport(Report(nodeid, when, duration, "failed" if failed else "passed", worker=worker))
    assert report.file_seconds() == {"tests/a.py": 26.5, "tests/b.py": 10.0}
    lines = report.lines(wall_seconds=30.0)
    assert lines[0] == "3 tests in 2 files: 36.5 s of test time in 30.0 s of wall time"
    assert lines[1] == "workers: gw0 26.5 s, gw1 10.0 s"
    assert "tests/a.py" in lines[3] and "tests/b.py" in lines[4]  # the slowest file first
    assert lines[-3].strip().startswith("26.0  (setup   5.0)  tests/a.py::slow")
    assert any(line.endswith("tests/b.py::mid[x@y]") for line in lines)
    report.write(lines, 30.0)
    assert (tmp_path / "durations.txt").read_text().splitlines() == lines
    kept = json.loads((tmp_path / "durations.json").read_text())
    assert [(t["nodeid"], t["outcome"], t["worker"]) for t in kept["tests"]] == [
        ("tests/a.py::slow", "passed", "gw0"), ("tests/b.py::mid[x@y]", "passed", "gw1"), ("tests/a.py::quick", "failed", "gw0")]
    assert json.loads((tmp_path / "file-seconds.json").read_text()) == {"tests/a.py": 26.5, "tests/b.py": 10.0}


def test_the_shared_chromium_is_closed_before_any_test_that_does_not_use_it(monkeypatch):
    """Consecutive browser tests keep one Chromium; it never stays open into another test (Playwright's
    event loop in the thread breaks async_to_sync there), even when the browser test failed."""
    from tests.browser import conftest as browser_conftest

    closed = []
    monkeypatch.setattr(browser_conftest.SHARED_CHROMIUM, "close", lambda: closed.append(True))

    class Item:
        def __init__(self, *fixturenames: str) -> None:
            self.fixturenames = fixturenames

    def tear_down_a_browser_test(nextitem, error: Exception | None = None) -> None:
        hook = browser_conftest.pytest_runtest_teardown(Item("browser", "page"), nextitem)
        next(hook)
        with pytest.raises(StopIteration if error is None else type(error)):
            hook.send(None) if error is None else hook.throw(error)

    tear_down_a_browser_test(Item("logged_in_page", "browser"))
    assert closed == []  # the next test uses it: kept
    tear_down_a_browser_test(Item("db"))
    tear_down_a_browser_test(None)  # the worker's last test
    tear_down_a_browser_test(Item("db"), RuntimeError("the teardown failed"))
    assert closed == [True, True, True]


def test_workers_that_need_chromium_at_once_install_it_once(tmp_path, monkeypatch):
    """Each xdist worker asks for Chromium at start; on a fresh machine their apt-get runs collided on
    dpkg's lock and all but one worker's browser tests failed. One installs; the others wait, then
    find it installed."""
    installed = tmp_path / "chromium"
    monkeypatch.setattr(chromium, "CHROMIUM_PATH", installed)
    monkeypatch.setattr(chromium, "INSTALL_LOCK", tmp_path / "install.lock")
    monkeypatch.setattr(chromium, "_privilege_prefix", lambda: [])
    monkeypatch.setattr(chromium.shutil, "which", lambda name: f"/usr/bin/{name}")
    running, calls = [], []

    def fake_apt(argv, **kwargs):
        calls.append(argv)
        running.append(1)
        assert len(running) == 1, "two apt-get runs at once"
        time.sleep(0.2)  # an install takes a while: the other threads arrive meanwhile
        installed.write_text("#!/bin/sh\n")
        running.pop()
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(chromium.subprocess, "run", fake_apt)
    results, errors = [], []

    def ask() -> None:
        try:
            results.append(chromium.ensure_chromium())
        except Exception as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors and results == [installed] * 3
    assert len(calls) == 1 and "install" in calls[0] and "DPkg::Lock::Timeout=450" in calls[0]


def test_a_lint_error_fails_the_run_before_any_test(monkeypatch):
    run_tests = load_run_tests()
    called = []

    def fake_call(args):
        called.append(args)
        return 1 if "ruff" in args else 0  # ruff finds something; pytest would pass

    monkeypatch.setattr(run_tests.subprocess, "call", fake_call)
    monkeypatch.setattr(run_tests.sys, "argv", ["run_tests.py", "tests/test_docs.py"])
    monkeypatch.delenv("LINT", raising=False)
    assert run_tests.main() == 1
    assert len(called) == 1 and called[0][1:4] == ["-m", "ruff", "check"]  # pytest never started


def test_the_project_config_makes_ruff_fail_on_an_unused_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--config", str(ROOT / "pyproject.toml"), str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "F401" in done.stdout
