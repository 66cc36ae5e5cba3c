"""The web server: Daphne, with its request-size limits and access log set for this project.

    python -m playground.runner.web -b 127.0.0.1 -p 8000 playground.asgi:application

takes Daphne's own arguments (`make run`, the Dockerfile and docker-compose start it this way).
What it changes, before Daphne starts:

- **Long URLs get an answer.** Twisted drops a connection whose request line passes 16 KB without
  a word (and answers a bare 400 once the request line and headers pass 16 KB together). Here the
  lines may be up to `MAX_LINE_BYTES`, so the application's own limit (`asgi.MAX_URL_BYTES`, a 414
  with a message) decides; a line longer still is answered 414 (or 431 for a header) with a message
  before the connection is closed.
- **The access log has no query strings**: they carry what people type (search queries, filters)
  and, for some clients, credentials. The path, status and size stay.
"""
from __future__ import annotations

MAX_LINE_BYTES = 64 * 1024
MAX_HEADER_BYTES = 128 * 1024


def _refuse_long_line(channel, line: bytes) -> None:
    first_line = getattr(channel, "_HTTPChannel__first_line", True)
    if first_line:
        status, message = b"414 URI Too Long", f"URI too long: the request line is over {MAX_LINE_BYTES // 1024} KB."
    else:
        status, message = b"431 Request Header Fields Too Large", f"A request header is over {MAX_LINE_BYTES // 1024} KB."
    body = message.encode()
    channel.transport.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
                            + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    channel.loseConnection()


def without_query(path: str) -> str:
    return path.split("?", 1)[0]


def configure_daphne() -> None:
    from daphne import access, cli
    from twisted.web import http

    http.HTTPChannel.MAX_LENGTH = MAX_LINE_BYTES
    http.HTTPChannel.totalHeadersSize = MAX_HEADER_BYTES
    http.HTTPChannel.lineLengthExceeded = _refuse_long_line

    class AccessLogWithoutQuery(access.AccessLogGenerator):
        def __call__(self, protocol, action, details):
            if isinstance(details.get("path"), str):
                details = {**details, "path": without_query(details["path"])}
            super().__call__(protocol, action, details)

    cli.AccessLogGenerator = AccessLogWithoutQuery


def main() -> None:
    configure_daphne()
    from daphne.cli import CommandLineInterface

    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
