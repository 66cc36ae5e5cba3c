"""The engine, its command line and its speed benchmarks are plain Python: importing them must not
import Django."""
from __future__ import annotations

import pkgutil
import subprocess
import sys

import playground.engine

from .conftest import REPO_ROOT

PLAIN_PYTHON_OUTSIDE_THE_ENGINE = ["playground.toolsearch", "playground.toolsearch.cli", "playground.bench.scorer", "playground.bench.search_speed"]


def test_no_engine_module_nor_the_cli_nor_its_benchmarks_imports_django():
    modules = [m.name for m in pkgutil.walk_packages(playground.engine.__path__, "playground.engine.")]
    assert "playground.engine.search.keyword" in modules and "playground.engine.requests" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules + PLAIN_PYTHON_OUTSIDE_THE_ENGINE!r}:\n"
        "    importlib.import_module(name)\n"
        "leaked = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        "print(len(leaked)); assert not leaked, leaked\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
