"""A prepared database for the load test's own stacks, made once per test module (tests/test_loadtest.py).

Each end-to-end test of the load test starts a stack of its own on a database of its own. Preparing that
database — every migration, the demo data, and the search index the worker builds from it (707 tools
through the encoder) — took most of each test's time. This makes it once: a PostgreSQL database
migrated, filled and indexed exactly as `EmbeddedStack.start` prepares one (`prepare_database`, then
the build the import queued, run here instead of in a worker); each stack is then created as a copy of
it (`--database-template`). The stacks still run `migrate` and the demo-data step, which find nothing
to do, and still wait for the index, which is already built.

    python -m tests.loadtest_template --database-url postgres://… --name loadtest_template_x

It prints nothing on stdout and exits non-zero, with the reason on stderr, when a step fails. The
caller drops the database (`drop_template`).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys


def create_template(server_url: str, name: str) -> None:
    import psycopg

    from playground.loadtest.stack import run_database_url

    with psycopg.connect(run_database_url(server_url, "postgres"), autocommit=True, connect_timeout=10) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')


def drop_template(server_url: str, name: str) -> None:
    import psycopg

    from playground.loadtest.stack import run_database_url

    with psycopg.connect(run_database_url(server_url, "postgres"), autocommit=True, connect_timeout=10) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()

    from playground.loadtest.stack import DATABASE_NAME, run_database_url

    if not DATABASE_NAME.match(args.name):
        parser.error(f"--name {args.name!r} is not a plain identifier")
    os.environ.update({
        "DATABASE_URL": run_database_url(args.database_url, args.name),
        "DJANGO_SETTINGS_MODULE": "playground.settings",
        "DEBUG": "true",  # as the stack runs: no collectstatic
        # The build the import queues goes to a queue of this name, which no worker reads; forgotten below.
        "CELERY_TASK_DEFAULT_QUEUE": args.name,
        "CHANNELS_PREFIX": args.name,
    })
    create_template(args.database_url, args.name)

    from playground.runner.main import prepare_database
    from playground.runner.supervisor import Supervisor

    with contextlib.redirect_stdout(sys.stderr):  # the management commands print
        prepare_database(Supervisor(out=sys.stderr), load_demo=True)
    from django.conf import settings
    from django.db import connections

    from playground.registry import indexing
    from playground.registry.models import SearchIndexBuild
    from playground.runner.embedded_redis import forget_keys

    try:
        row = indexing.schedule_index_build()
        if row is None:
            print("no search index is built in the background here: nothing to prepare", file=sys.stderr)
        else:
            row = indexing.build_index(row.version)
            if row is None or row.status != SearchIndexBuild.Status.DONE:
                print(f"the search index build ended {getattr(row, 'status', None)!r}: {getattr(row, 'error', '')}", file=sys.stderr)
                return 1
            print(f"search index built: {row.encoded} tools encoded", file=sys.stderr)
    finally:
        connections.close_all()  # a database with a connection open cannot be copied
        forget_keys(settings.REDIS_URL, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
