"""A vendor API played by a local HTTP server, for the real SDKs in tests (fake_api.py: Anthropic's
Messages API; fake_openai.py: OpenAI's Responses and Chat Completions).

The server, its thread, the scripted replies and the recorded requests are the same for every
vendor; a subclass says how it validates and answers a request (`_answer`), what its API says to a
body that is not JSON, and how it names its request-id header.
"""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class EventStream:
    """A reply sent as server-sent events (`stream: true`): (event name, data) pairs, `delay` seconds
    apart, as a vendor streams a reply while its model writes it."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0


@dataclass
class RawBody:
    """A reply that is not JSON (a proxy's HTML page, a plain-text error), sent with its own content type."""

    text: str
    status: int = 200
    content_type: str = "text/html; charset=utf-8"


class LocalAPIDouble:
    """Use as a context manager; `url` is the SDK's base_url (`base_path` appended)."""

    base_path = ""
    thread_name = "api-double"
    request_id_header = "request-id"

    def __init__(self) -> None:
        self.replies: deque = deque()
        self.requests: list = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- scripting -----------------------------------------------------------------------------
    def script(self, *replies: Any) -> Self:
        with self._lock:
            self.replies.extend(replies)
        return self

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.base_path}"

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> Self:
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what a vendor's double says -------------------------------------------------------------
    def _answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        raise NotImplementedError

    def _invalid_json(self) -> dict[str, Any]:
        """The error body for a request whose body is not JSON (status 400)."""
        raise NotImplementedError

    def _request_id(self) -> str:
        raise NotImplementedError

    # -- HTTP ----------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    status, payload, extra = 400, api._invalid_json(), {}
                else:
                    status, payload, extra = api._answer(self.path.split("?")[0], {k.lower(): v for k, v in self.headers.items()}, body)
                if isinstance(payload, EventStream):
                    self._stream(status, payload, extra)
                    return
                content_type = "application/json"
                if isinstance(payload, RawBody):
                    status, content_type, data = payload.status, payload.content_type, payload.text.encode()
                else:
                    data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.send_header(api.request_id_header, api._request_id())
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, status: int, stream: EventStream, extra: dict[str, str]) -> None:
                # No content-length: the body ends when the connection closes, as an SSE reply may.
                self.close_connection = True
                self.send_response(status)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.send_header(api.request_id_header, api._request_id())
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                try:
                    for number, (event, data) in enumerate(stream.events):
                        if number and stream.delay:
                            time.sleep(stream.delay)
                        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a cancelled request): nothing more to send

        return Handler
