"""What a browser does, through the real endpoints: log in, start a conversation, watch its socket.

HTTP goes through urllib (in threads, so the event loop keeps reading sockets); the socket through
a small client on asyncio streams (`Socket`), so no new dependency. The client never
follows a redirect: it reads the new conversation's id from the Location header instead of loading
the page, so the measured web work is the form post, the socket and its frames.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import http.cookiejar
import json
import os
import re
import ssl
import struct
import time
import urllib.error
import urllib.parse
import urllib.request

from playground.loadtest.stats import ConversationResult, read_frame

HTTP_TIMEOUT_SECONDS = 30
CONNECT_TIMEOUT_SECONDS = 30
CONVERSATION_URL = re.compile(r"/conversations/(\d+)/?$")
WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class LoadTestError(RuntimeError):
    pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Session:
    """One logged-in person: a cookie jar shared by every conversation of the run."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect())

    def _cookie(self, name: str) -> str:
        return next((cookie.value for cookie in self.jar if cookie.name == name), "")

    def cookie_header(self) -> str:
        return "; ".join(f"{cookie.name}={cookie.value}" for cookie in self.jar)

    def request(self, path: str, data: dict | None = None) -> tuple[int, dict[str, str], str]:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        headers = {"Origin": self.base_url, "Referer": self.base_url + path}
        request = urllib.request.Request(self.base_url + path, data=body, headers=headers)
        try:
            with self.opener.open(request, timeout=HTTP_TIMEOUT_SECONDS) as response:
                return response.status, dict(response.headers), response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:  # 3xx (not followed) and 4xx/5xx land here
            return error.code, dict(error.headers), error.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError) as error:
            raise LoadTestError(f"{self.base_url}{path}: {error}") from error

    def login(self, username: str, password: str) -> None:
        """The real login form: GET it for the CSRF cookie and token, POST the credentials."""
        status, _, page = self.request("/login/")
        if status != 200:
            raise LoadTestError(f"GET /login/ answered {status}")
        token = CSRF_INPUT.search(page)
        status, headers, _ = self.request("/login/", {
            "csrfmiddlewaretoken": token.group(1) if token else self._cookie("csrftoken"),
            "username": username, "password": password,
        })
        if status not in (301, 302, 303) or not self._cookie("sessionid"):
            raise LoadTestError(f"logging in as {username!r} failed (POST /login/ answered {status}; wrong user or password?)")

    def send_message(self, conversation_id: int, text: str) -> None:
        """The send form's POST (what the page falls back to without a socket)."""
        status, headers, body = self.request(f"/conversations/{conversation_id}/send/", {
            "csrfmiddlewaretoken": self._cookie("csrftoken"), "text": text,
        })
        if status not in (200, 302, 303):
            raise LoadTestError(f"POST /conversations/{conversation_id}/send/ answered {status}: {body[:200]!r}")

    def new_conversation(self) -> int:
        """The new-conversation form with no message (the message goes over the socket), the offline
        demo agent as provider (never a paid API), the default settings as profile."""
        status, headers, body = self.request("/conversations/new/", {
            "csrfmiddlewaretoken": self._cookie("csrftoken"), "profile": "", "provider": "demo", "message": "",
        })
        location = headers.get("Location", "")
        match = CONVERSATION_URL.search(urllib.parse.urlsplit(location).path)
        if status not in (302, 303) or match is None:
            raise LoadTestError(f"POST /conversations/new/ answered {status} {location!r}: {body[:200]!r}")
        return int(match.group(1))


class Socket:
    """A minimal RFC 6455 client over asyncio streams: text frames out (masked), frames in.

    Written here rather than taken from autobahn: daphne's Twisted side selects txaio's Twisted
    flavour as soon as Django loads its app in this process, and autobahn's asyncio client then
    refuses to start. Enough for the conversation socket: text, continuation, ping/pong, close.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.close_code: int | None = None

    def send_text(self, text: str) -> None:
        self._send(0x1, text.encode())

    def _send(self, opcode: int, payload: bytes) -> None:
        header = bytearray([0x80 | opcode])
        length = len(payload)
        if length < 126:
            header.append(0x80 | length)
        elif length < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", length)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", length)
        mask = os.urandom(4)
        header += mask
        self.writer.write(bytes(header) + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    async def receive(self) -> str | None:
        """The next text message (fragments joined), or None once the server closes."""
        parts: list[bytes] = []
        while True:
            try:
                first, second = await self.reader.readexactly(2)
            except (asyncio.IncompleteReadError, ConnectionError):
                return None
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
            mask = await self.reader.readexactly(4) if second & 0x80 else b""
            payload = await self.reader.readexactly(length)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:  # close
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                return None
            if opcode == 0x9:  # ping
                self._send(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            parts.append(payload)
            if first & 0x80:  # FIN
                return b"".join(parts).decode("utf-8", "replace")

    async def close(self) -> None:
        try:
            self._send(0x8, struct.pack("!H", 1000))
            await asyncio.wait_for(self.writer.drain(), 5)
        except (ConnectionError, asyncio.TimeoutError):
            pass
        self.writer.close()


async def open_socket(session: Session, path: str) -> Socket:
    """Connect and complete the opening handshake with the session's cookie and our Origin (the
    server checks it against ALLOWED_HOSTS)."""
    parts = urllib.parse.urlsplit(session.base_url)
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(parts.hostname, port, ssl=ssl.create_default_context() if secure else None, limit=2**24),
        CONNECT_TIMEOUT_SECONDS,
    )
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((
        f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {session.base_url}\r\n"
        f"Cookie: {session.cookie_header()}\r\n\r\n"
    ).encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT_SECONDS)
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    accept = base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest()).decode()
    if " 101 " not in status_line + " " or accept.encode() not in head:
        writer.close()
        raise LoadTestError(f"socket {path} refused: {head.decode('latin-1')!r}")
    return Socket(reader, writer)


async def run_conversation(session: Session, message: str, deadline: float, result: ConversationResult,
                           watcher: Session | None = None) -> ConversationResult:
    """Start a conversation, open its socket, send the message, read frames until the run's final
    status event (or the deadline, a closed socket). Fills `result` as it goes, so a timeout still
    leaves what was received. With a `watcher` on another web node, the conversation is started and
    its message sent through `session`'s node (the form posts) and watched through the watcher's."""
    socket = None
    try:
        result.conversation_id = await asyncio.wait_for(asyncio.to_thread(session.new_conversation), _left(deadline))
        watching = watcher or session
        socket = await asyncio.wait_for(open_socket(watching, f"/ws/conversations/{result.conversation_id}/"), _left(deadline))
        socket.send_text(json.dumps({"action": "hello", "last_sequence": 0}))
        result.sent_at = time.time()
        if watcher is None:
            socket.send_text(json.dumps({"action": "send", "text": message}))
        else:
            await asyncio.wait_for(asyncio.to_thread(session.send_message, result.conversation_id, message), _left(deadline))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                result.error = "timed out before the run's final status"
                return result
            try:
                text = await asyncio.wait_for(socket.receive(), remaining)
            except asyncio.TimeoutError:
                result.error = "timed out before the run's final status"
                return result
            arrived = time.time()
            if text is None:
                result.error = f"socket closed (code {socket.close_code})"
                return result
            result.largest_frame = max(result.largest_frame, len(text.encode()))
            frame = read_frame(text)
            if frame is None:
                continue  # a notice (the "sent" acknowledgement, or an error to show)
            result.receipts.append((frame.sequence, arrived))
            if frame.final:
                result.finished_at = arrived
                result.completed = frame.status == "idle"
                if not result.completed:
                    result.error = f"the run ended with status {frame.status}"
                return result
    except asyncio.TimeoutError:
        result.error = "timed out before the conversation's socket was open"
        return result
    except (LoadTestError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as error:
        result.error = result.error or f"{error.__class__.__name__}: {error}"
        return result
    finally:
        if socket is not None:
            await socket.close()


def _left(deadline: float) -> float:
    return max(0.01, deadline - time.monotonic())
