"""The engine's command line, run in this process: `main(argv)` with its output captured.

Starting `python -m playground.toolsearch` costs a second or more per call (a fresh interpreter
importing the engine); the tests that check what a command prints and returns do not need that.
`tests/engine/test_cli.py` keeps one real subprocess run, so the module entry point is tested as
users run it.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Iterator

from playground.toolsearch.cli import main


@contextlib.contextmanager
def _environment(overrides: dict[str, str] | None) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in (overrides or {})}
    os.environ.update(overrides or {})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_cli(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """What `python -m playground.toolsearch ARGS` would give: exit code, stdout and stderr."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with _environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's usage errors and --help
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return subprocess.CompletedProcess(["playground.toolsearch", *argv], code or 0, out.getvalue(), err.getvalue())
