"""An embedded stack for one load-test run, started through `playground.runner` (what `make run` uses).

Isolation, so the run talks only to what it started and never to a playground or a test run that
shares the machine: its own database (an SQLite file in a temporary directory, or a PostgreSQL
database created for the run on the server `--database-url` names — only its host, port, user and
options are used — and dropped afterwards; with `template_database`, cloned from that prepared
database on the same server instead of migrated and filled: set-up in seconds, not half a minute), its own
Channels prefix and Celery queue on the Redis at REDIS_URL (an embedded one on a free port when none
answers), its own worker name, and the web server on a free port. Redis keys carrying the run's id
are deleted at the end.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from playground.runner.embedded_redis import (
    DEFAULT_REDIS_URL, EmbeddedRedis, forget_keys, free_port, redis_answers, start_embedded_redis, with_address,
)
from playground.runner.main import beat_command, prepare_database, wait_until_ready, web_command, worker_command
from playground.runner.supervisor import Child, Supervisor

READY_TIMEOUT_SECONDS = 120
USERNAME = "loadtest"
# A database name this module puts in SQL itself (CREATE DATABASE … TEMPLATE …): plain identifiers only.
DATABASE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class StackError(RuntimeError):
    pass


def run_database_url(server_url: str, name: str) -> str:
    """`server_url` with its database name replaced by `name`."""
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


class EmbeddedStack:
    def __init__(self, *, workers: int = 2, pool: str = "prefork", database_url: str | None = None, log=print,
                 web_nodes: int = 1, worker_nodes: int = 1, existing_database_url: str = "", beat: bool = False,
                 provider: str = "demo", model_latency: float = 2.0, code_dir: str = "", template_database: str = "") -> None:
        self.run_id = uuid.uuid4().hex[:8]
        self.name = f"loadtest-{self.run_id}"
        self.workers = workers
        self.pool = pool
        # Celery beat beside the workers, as `make run` starts it: its background round releases and
        # carries on work whose worker died (task runs use it; the load levels measure without it).
        self.beat = beat
        self.server_database_url = database_url
        # A database prepared beforehand (a grown catalog, python -m playground.bench.scale): used as it is,
        # never created or dropped here.
        self.existing_database_url = existing_database_url
        # A database on the --database-url server already migrated, with the demo data and its search
        # index (tests/loadtest_template.py makes one): the run's own database is a copy of it, so the
        # set-up's migrate and demo-data steps find nothing to do and no index build is queued.
        if template_database and not DATABASE_NAME.match(template_database):
            raise StackError(f"the template database name {template_database!r} is not a plain identifier")
        if template_database and not (database_url or "").startswith(("postgres://", "postgresql://")):
            raise StackError("a template database needs a PostgreSQL --database-url (the copy is made on that server)")
        self.template_database = template_database
        self.say = log
        self.workdir = Path(tempfile.mkdtemp(prefix="playground-loadtest-"))
        self.log_path = self.workdir / "stack.log"
        self.supervisor: Supervisor | None = None
        self.redis: EmbeddedRedis | None = None
        self.redis_url = ""
        self.created_database = ""
        self.web: Child | None = None
        self.worker: Child | None = None
        self.worker_name = f"{self.name}@{os.uname().nodename}"
        # More nodes, as more machines would run them: each web node its own daphne on its own port,
        # each worker node its own Celery worker, all on the one database and Redis.
        self.web_nodes, self.worker_nodes = max(1, web_nodes), max(1, worker_nodes)
        self.ports = [free_port() for _ in range(self.web_nodes)]
        self.port = self.ports[0]
        self.base_urls = [f"http://127.0.0.1:{port}" for port in self.ports]
        self.base_url = self.base_urls[0]
        self.worker_names = [self.worker_name] + [f"{self.name}-{i}@{os.uname().nodename}" for i in range(2, self.worker_nodes + 1)]
        self.children: list[Child] = []
        # "anthropic" / "openai": the workers reach the project's API double, its own process answering
        # each call `model_latency` s late, through the official SDK (api_double.py); "demo": the offline agent.
        self.provider, self.model_latency = provider, model_latency
        self.api_port = free_port() if provider != "demo" else 0
        # Another checkout's code for the stack's processes (side-by-side benchmarks against an older commit).
        self.code_dir = code_dir
        self.username = USERNAME
        self.password = secrets.token_urlsafe(16)
        self._log_file = None

    @property
    def maintenance_url(self) -> str:
        """The server's `postgres` database: the one in --database-url may not exist (CI's does not)."""
        return run_database_url(self.server_database_url or "", "postgres")

    # -- start -------------------------------------------------------------------------------------
    def start(self) -> None:
        self._settle_redis()
        self._settle_database()
        os.environ.update({
            "CHANNELS_PREFIX": self.name,
            "CELERY_TASK_DEFAULT_QUEUE": self.name,
            "CELERY_BROKER_URL": self.redis_url,
            "REDIS_URL": self.redis_url,
            # What `make run` gives by default (static files through the finders, no collectstatic).
            "DEBUG": "true",
            "DJANGO_SETTINGS_MODULE": "playground.settings",
            "PYTHONUNBUFFERED": "1",
        })
        for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"):
            os.environ.pop(name, None)  # never a paid API: the offline demo agent, or the local API double
        if self.provider == "anthropic":
            os.environ.update({"ANTHROPIC_API_KEY": "sk-loadtest", "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{self.api_port}"})
        elif self.provider == "openai":
            os.environ.update({"OPENAI_API_KEY": "sk-loadtest", "OPENAI_BASE_URL": f"http://127.0.0.1:{self.api_port}/v1"})
        self._log_file = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        self.supervisor = Supervisor(out=self._log_file)
        self.say(f"[load] preparing the database (migrate, demo data): log in {self.log_path}")
        # The management commands print to stdout, which belongs to the table or --json: into the log.
        with contextlib.redirect_stdout(self._log_file):
            prepare_database(self.supervisor, load_demo=True)
        self._create_user()
        self._start_processes()

    def _settle_redis(self) -> None:
        url = os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
        if redis_answers(url):
            self.redis_url = url
            self.say(f"[load] Redis at {url} (prefix and queue {self.name})")
            return
        # Not on the default port even when it is free: a playground started later would share it
        # and lose it when this run ends.
        self.redis = start_embedded_redis(with_address(url, "127.0.0.1", free_port()))
        self.redis_url = self.redis.url
        self.say(f"[load] no Redis at {url}: started an embedded {self.redis.description}")

    def _settle_database(self) -> None:
        if self.existing_database_url:
            os.environ["DATABASE_URL"] = self.existing_database_url
            self.say("[load] database: the one given (kept)")
            return
        if not self.server_database_url or self.server_database_url.startswith("sqlite"):
            path = self.workdir / "loadtest.sqlite3"
            os.environ["DATABASE_URL"] = f"sqlite:///{path}"
            self.say(f"[load] database: SQLite {path}")
            return
        import psycopg

        name = self.name.replace("-", "_")
        template = f' TEMPLATE "{self.template_database}"' if self.template_database else ""
        with psycopg.connect(self.maintenance_url, autocommit=True, connect_timeout=10) as connection:
            connection.execute(f'CREATE DATABASE "{name}"{template}')
        self.created_database = name
        os.environ["DATABASE_URL"] = run_database_url(self.server_database_url, name)
        copied = f", a copy of {self.template_database}" if self.template_database else ""
        self.say(f"[load] database: PostgreSQL {name} (created for this run{copied}, dropped at the end)")

    def _create_user(self) -> None:
        """The person the clients log in as. PBKDF2 with few iterations (as the browser tests do):
        the login is the real form, but a 600,000-iteration hash would only measure the hasher."""
        from django.contrib.auth import get_user_model
        from django.contrib.auth.hashers import PBKDF2PasswordHasher

        user, _ = get_user_model().objects.get_or_create(username=self.username)
        hasher = PBKDF2PasswordHasher()
        user.password = hasher.encode(self.password, hasher.salt(), iterations=1_000)
        user.save(update_fields=["password"])
        from django.db import connections

        connections.close_all()  # the children open their own; SQLite must not see this one hold a lock

    def _start_processes(self) -> None:
        assert self.supervisor is not None
        env = dict(os.environ)
        # `python -m` puts the working directory first on sys.path: the other checkout's processes start in it.
        code_cwd = self.code_dir or None
        if self.code_dir:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [self.code_dir, env.get("PYTHONPATH", "")]))
        if self.provider != "demo":
            self.children.append(self.supervisor.start("api", [
                sys.executable, "-m", "playground.loadtest.api_double", "--vendor", self.provider,
                "--latency", f"{self.model_latency:g}", "--port", str(self.api_port)], env=dict(os.environ)))
        for number, port in enumerate(self.ports, start=1):
            name = "web" if number == 1 else f"web{number}"
            self.children.append(self.supervisor.start(name, web_command("127.0.0.1", port), env=env, cwd=code_cwd))
        for number, worker_name in enumerate(self.worker_names, start=1):
            name = "worker" if number == 1 else f"worker{number}"
            self.children.append(self.supervisor.start(
                name, [*worker_command(self.pool, self.workers), "-n", worker_name, "-Q", self.name], env=env, cwd=code_cwd))
        first = 1 if self.provider != "demo" else 0
        self.web, self.worker = self.children[first], self.children[first + self.web_nodes]
        if self.beat:
            self.children.append(self.supervisor.start(
                "beat", [*beat_command(), "-s", str(self.workdir / "beat-schedule")], env=env, cwd=code_cwd))
        for base_url in self.base_urls:
            if not wait_until_ready(self.supervisor, base_url):
                raise StackError(f"the web server at {base_url} did not start\n{self.log_tail()}")
        for worker_name in self.worker_names:
            self._wait_for_worker(worker_name)
        self.say(f"[load] stack up: web {', '.join(self.base_urls)}, worker {', '.join(self.worker_names)} "
                 f"({self.pool}, {self.workers} processes each)")

    def _wait_for_worker(self, worker_name: str) -> None:
        from playground.celery_app import app

        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            crashed = self.supervisor.crashed() if self.supervisor else None
            if crashed is not None:
                raise StackError(f"{crashed.name} exited with code {crashed.returncode}\n{self.log_tail()}")
            try:
                # Only this run's worker: others may listen on the same Redis.
                if app.control.ping(destination=[worker_name], timeout=1.0):
                    return
            except Exception:  # noqa: BLE001 - the broker may hiccup while starting: retry until the deadline
                pass
            time.sleep(0.3)
        raise StackError(f"the Celery worker did not answer within {READY_TIMEOUT_SECONDS}s\n{self.log_tail()}")

    def wait_for_search_index(self, timeout: float = READY_TIMEOUT_SECONDS) -> str:
        """Wait until the worker has built the current catalog's search index (the demo data's vectors
        after the import): a build is set-up after a catalog change, not a cost of the events measured.
        The build's status at the end ("" when nothing is built in the background)."""
        from django.db import connections

        from playground.registry import index_builds
        from playground.registry.models import SearchIndexBuild

        deadline = time.monotonic() + timeout
        status = ""
        try:
            while time.monotonic() < deadline:
                if not index_builds.builds_in_background():
                    return ""
                row = index_builds.current_build()
                status = row.status if row is not None else ""
                if status in (SearchIndexBuild.Status.DONE, SearchIndexBuild.Status.FAILED):
                    return status
                if self.crashed():
                    return status
                time.sleep(0.5)
            return status
        finally:
            connections.close_all()

    # -- measure -----------------------------------------------------------------------------------
    def memory_mb(self) -> dict[str, dict[str, float]]:
        """Each child's resident memory now and at its peak (VmRSS, VmHWM), in MB: the largest single
        process of its tree (the worker's pool processes each hold their own catalog and index)."""
        readings: dict[str, dict[str, float]] = {}
        for child in self.children:
            best = {"rss_mb": 0.0, "peak_mb": 0.0}
            for pid in process_tree_pids([child.process.pid]):
                status = process_status(pid)
                if status:
                    best["rss_mb"] = max(best["rss_mb"], status.get("VmRSS", 0) / 1024)
                    best["peak_mb"] = max(best["peak_mb"], status.get("VmHWM", 0) / 1024)
            readings[child.name] = {key: round(value, 1) for key, value in best.items()}
        return readings

    def node_memory_mb(self, name: str) -> float:
        """Resident memory (VmRSS) of child `name` and every process below it, summed, in MB."""
        child = next((c for c in self.children if c.name == name), None)
        if child is None:
            return 0.0
        total = sum(process_status(pid).get("VmRSS", 0) for pid in process_tree_pids([child.process.pid]))
        return round(total / 1024, 1)

    def database_connections(self) -> int | None:
        """Connections open to the run's PostgreSQL database now (None on SQLite)."""
        if not self.created_database and not (self.existing_database_url or "").startswith("postgres"):
            return None
        import psycopg

        url = run_database_url(self.server_database_url, self.created_database) if self.created_database \
            else self.existing_database_url
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as connection:
            row = connection.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                     "AND pid <> pg_backend_pid()").fetchone()
        return int(row[0])

    def cpu_seconds(self) -> dict[str, float | None]:
        """CPU time (user + system, with reaped children) of the web server and of the worker, each
        with every process below it (the prefork pool). None where /proc cannot be read."""
        return {child.name: process_tree_cpu_seconds([child.process.pid]) for child in self.children}

    def event_facts(self, conversation_ids: list[int]) -> tuple[dict[tuple[int, int], float], dict[int, int]]:
        """From the database: each event's saved time (wall clock) and each conversation's event count."""
        from django.db import connections

        from playground.conversations.models import Event

        created: dict[tuple[int, int], float] = {}
        counts: dict[int, int] = {}
        rows = Event.objects.filter(conversation_id__in=conversation_ids).values_list("conversation_id", "sequence", "created_at")
        for conversation_id, sequence, created_at in rows:
            created[(conversation_id, sequence)] = created_at.timestamp()
            counts[conversation_id] = max(counts.get(conversation_id, 0), sequence)
        for conversation_id in conversation_ids:
            counts.setdefault(conversation_id, 0)
        connections.close_all()
        return created, counts

    def crashed(self) -> str | None:
        child = self.supervisor.crashed() if self.supervisor else None
        return None if child is None else f"{child.name} exited with code {child.returncode}"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            if self._log_file is not None:
                self._log_file.flush()
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    # -- stop --------------------------------------------------------------------------------------
    def stop(self, *, keep_log: bool = False) -> None:
        """Stop the children, forget the run's Redis keys, drop its database; safe to call twice."""
        if self.supervisor is not None:
            self.supervisor.stop_all()
            self.supervisor = None
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001 - Django may never have been set up
            pass
        if self.redis_url and self.redis is None:
            forget_keys(self.redis_url, self.name)
        if self.redis is not None:
            self.redis.stop()
            self.redis = None
        if self.created_database and self.server_database_url and not self.existing_database_url:
            try:
                import psycopg

                with psycopg.connect(self.maintenance_url, autocommit=True, connect_timeout=10) as connection:
                    connection.execute(f'DROP DATABASE IF EXISTS "{self.created_database}" WITH (FORCE)')
            except Exception as error:  # noqa: BLE001 - report, never hide the run's own result
                self.say(f"[load] could not drop database {self.created_database}: {error}")
            self.created_database = ""
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if keep_log:  # a failed run: keep the children's output, drop the database file
            for path in self.workdir.glob("loadtest.sqlite3*"):
                path.unlink(missing_ok=True)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)


def process_tree_cpu_seconds(root_pids: list[int]) -> float | None:
    """Sum of utime + stime + cutime + cstime over the roots and all their descendants (Linux /proc)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    stats: dict[int, tuple[int, float]] = {}  # pid → (parent pid, cpu seconds)
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        fields = raw[raw.rindex(")") + 2:].split()  # the command name may hold spaces: cut after it
        # After the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14)
        stats[int(entry.name)] = (int(fields[1]), sum(int(value) for value in fields[11:15]) / ticks)
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    total, todo, seen = 0.0, [pid for pid in root_pids if pid in stats], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += stats[pid][1]
        todo.extend(children.get(pid, []))
    return total if seen else None


def process_tree_pids(root_pids: list[int]) -> list[int]:
    """The roots and all their descendants that are alive (Linux /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(raw[raw.rindex(")") + 2:].split()[1])
    found, todo = [], [pid for pid in root_pids if pid in parents]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(child for child, parent in parents.items() if parent == pid)
    return found


def process_status(pid: int) -> dict[str, int]:
    """The kB figures of /proc/<pid>/status (VmRSS, VmHWM, ...); {} when the process is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    values = {}
    for line in lines:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            values[key] = int(parts[0])
    return values
