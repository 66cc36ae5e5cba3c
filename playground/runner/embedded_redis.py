"""A Redis for development and tests when none answers at REDIS_URL.

Most faithful first: a `redis-server` binary on PATH, with its append-only file on (appendfsync
everysec, so a restart delivers what was queued) in `data_dir` (`make run`: the project's `var/redis`)
or a temporary directory; otherwise fakeredis' TCP server (which keeps nothing) (with Lua through `lupa`, which channels-redis needs for EVAL)
in a child process. Both are real processes speaking RESP on a TCP port, so the web server, the
Celery worker and the tests all reach the same one through an ordinary `redis://` URL.
"""
from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import redis

log = logging.getLogger("playground.run")

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", ""}


def redis_answers(url: str, timeout: float = 1.0) -> bool:
    """True when a Redis server answers PING at `url`."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return False


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def with_address(url: str, host: str, port: int) -> str:
    """`url` with its host and port replaced, keeping the scheme, password and database number."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@{host}:{port}" if credentials else f"{host}:{port}"
    return urlunsplit((parts.scheme or "redis", netloc, parts.path, parts.query, parts.fragment))


@dataclass
class EmbeddedRedis:
    """A Redis server this process started; `stop()` ends it and removes its directory."""

    kind: str  # "redis-server" or "fakeredis"
    url: str
    process: subprocess.Popen
    workdir: str
    description: str = field(default="")
    keep_workdir: bool = False  # a data directory given by the caller outlives the server

    def stop(self, timeout: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_embedded_redis(url: str = DEFAULT_REDIS_URL, *, prefer: str | None = None, timeout: float = 15.0,
                         data_dir: str | os.PathLike | None = None) -> EmbeddedRedis:
    """Start a Redis on the URL's port when it is local and free, else on a free port.

    `prefer` ("redis-server" or "fakeredis") overrides the choice, e.g. for tests; the environment
    variable EMBEDDED_REDIS does the same for `make run`. `data_dir` keeps redis-server's data across
    restarts (created if missing, left in place by `stop()`); without it a temporary directory is used.
    """
    parts = urlsplit(url)
    host = "127.0.0.1"
    wanted_port = parts.port or 6379
    port = wanted_port if (parts.hostname or "") in LOCAL_HOSTS and port_is_free(host, wanted_port) else free_port(host)
    kind = prefer or os.environ.get("EMBEDDED_REDIS", "") or ("redis-server" if shutil.which("redis-server") else "fakeredis")
    if data_dir is not None:
        os.makedirs(data_dir, exist_ok=True)
    workdir = str(data_dir) if data_dir is not None else tempfile.mkdtemp(prefix="playground-redis-")
    if kind == "redis-server":
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("EMBEDDED_REDIS=redis-server but no redis-server binary is on PATH")
        argv = [
            binary, "--bind", host, "--port", str(port), "--save", "", "--appendonly", "yes",
            "--appendfsync", "everysec", "--dir", workdir, "--daemonize", "no", "--loglevel", "warning",
        ]
        description = f"redis-server ({binary}) on {host}:{port}, append-only file in {workdir}"
    elif kind == "fakeredis":
        argv = [sys.executable, "-m", "playground.runner.fake_redis_server", "--host", host, "--port", str(port)]
        description = f"fakeredis TcpFakeServer (pure Python, Lua via lupa) on {host}:{port}"
    else:
        raise ValueError(f"EMBEDDED_REDIS must be 'redis-server' or 'fakeredis', not {kind!r}")
    log_file = open(os.path.join(workdir, "server.log"), "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(argv, cwd=workdir, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    log_file.close()
    embedded = EmbeddedRedis(kind=kind, url=with_address(url, host, port), process=process, workdir=workdir,
                             description=description, keep_workdir=data_dir is not None)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = _read_log(workdir)
            embedded.stop()
            raise RuntimeError(f"embedded {kind} exited with code {process.returncode}: {output}")
        if redis_answers(embedded.url, timeout=0.5):
            return embedded
        time.sleep(0.1)
    output = _read_log(workdir)
    embedded.stop()
    raise RuntimeError(f"embedded {kind} did not answer within {timeout:.0f}s: {output}")


def _read_log(workdir: str) -> str:
    try:
        with open(os.path.join(workdir, "server.log"), encoding="utf-8", errors="replace") as handle:
            return handle.read()[-2000:].strip() or "(no output)"
    except OSError:
        return "(no output)"


def ensure_redis(url: str, *, data_dir: str | os.PathLike | None = None) -> tuple[str, EmbeddedRedis | None]:
    """The URL to use and the embedded server started for it (None when a Redis already answered)."""
    if redis_answers(url):
        return url, None
    embedded = start_embedded_redis(url, data_dir=data_dir)
    return embedded.url, embedded


def forget_keys(redis_url: str, name: str) -> None:
    """Delete a run's keys (its Celery queue and bindings, its Channels groups: every key naming
    `name`) from a shared Redis; a Redis that does not answer is left as it is."""
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=5)
    try:
        keys = list(client.scan_iter(match=f"*{name}*", count=500))
        if keys:
            client.delete(*keys)
    except redis.RedisError:
        pass
    finally:
        client.close()
