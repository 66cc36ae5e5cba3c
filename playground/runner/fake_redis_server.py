"""Child process: fakeredis' TCP server, the embedded Redis when no redis-server binary exists.

`python -m playground.runner.fake_redis_server --host 127.0.0.1 --port 6390`
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)

    import lupa  # noqa: F401  - fail loudly here: channels-redis needs EVAL (fakeredis[lua])
    from fakeredis import TcpFakeServer

    server = TcpFakeServer((args.host, args.port), server_type="redis")
    server.daemon_threads = True  # connections must not keep the process alive after a stop

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"fakeredis listening on {args.host}:{args.port}", flush=True)
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
