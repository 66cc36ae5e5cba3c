"""What a browser does, through the real endpoints: log in, start a conversation, watch its socket.

HTTP goes through urllib (in threads, so the event loop keeps reading sockets); the socket through
the `websockets` client (`Socket`; autobahn cannot be used here: daphne's Twisted side selects
txaio's Twisted flavour as soon as Django loads its app in this process). The client never
follows a redirect: it reads the new conversation's id from the Location header instead of loading
the page, so the measured web work is the form post, the socket and its frames.
"""
from __future__ import annotations

import asyncio
import http.cookiejar
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidMessage, InvalidStatus, InvalidURI

from playground.loadtest.stats import ConversationResult, read_frame

HTTP_TIMEOUT_SECONDS = 30
CONNECT_TIMEOUT_SECONDS = 30
SOCKET_ATTEMPTS = 4  # a handshake the server dropped is tried again (open_socket)
CONVERSATION_URL = re.compile(r"/conversations/(\d+)/?$")
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class LoadTestError(RuntimeError):
    pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Session:
    """One logged-in person: a cookie jar shared by every conversation of the run."""

    def __init__(self, base_url: str, provider: str = "demo") -> None:
        self.base_url = base_url.rstrip("/")
        self.provider = provider  # the new-conversation form's choice: "demo", or a vendor the stack points at its double
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
        """The new-conversation form with no message (the message goes over the socket), the session's
        provider (the offline demo agent unless the stack points a vendor at its local double), the
        default settings as profile."""
        status, headers, body = self.request("/conversations/new/", {
            "csrfmiddlewaretoken": self._cookie("csrftoken"), "profile": "", "provider": self.provider, "message": "",
        })
        location = headers.get("Location", "")
        match = CONVERSATION_URL.search(urllib.parse.urlsplit(location).path)
        if status not in (302, 303) or match is None:
            raise LoadTestError(f"POST /conversations/new/ answered {status} {location!r}: {body[:200]!r}")
        return int(match.group(1))


class Socket:
    """The conversation socket, on the `websockets` client (masking and framing in its C extension,
    not in Python on the cores being measured). `receive()` returns the next text message, or None
    once the server closed (its code in `close_code`)."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.close_code: int | None = None

    async def send_text(self, text: str) -> None:
        await self.connection.send(text)

    async def receive(self) -> str | None:
        try:
            message = await self.connection.recv()
        except ConnectionClosed as closed:
            self.close_code = closed.rcvd.code if closed.rcvd is not None else 1006
            return None
        return message if isinstance(message, str) else message.decode("utf-8", "replace")

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.connection.close(), 5)
        except (ConnectionError, asyncio.TimeoutError):
            pass


async def open_socket(session: Session, path: str) -> Socket:
    """Connect and complete the opening handshake with the session's cookie and our Origin (the
    server checks it against ALLOWED_HOSTS)."""
    parts = urllib.parse.urlsplit(session.base_url)
    url = f"{'wss' if parts.scheme == 'https' else 'ws'}://{parts.netloc}{path}"
    for attempt in range(1, SOCKET_ATTEMPTS + 1):
        try:
            connection = await connect(url, origin=session.base_url, additional_headers={"Cookie": session.cookie_header()},
                                       open_timeout=CONNECT_TIMEOUT_SECONDS, max_size=2**24, ping_interval=None,
                                       compression=None)
        except InvalidStatus as refused:
            raise LoadTestError(f"socket {path} refused: HTTP {refused.response.status_code}") from refused
        except InvalidMessage as error:
            # The server closed the connection before answering the handshake: daphne drops a socket
            # its application did not accept within its connect timeout (a web node short of CPU).
            # Try again, as a browser's reconnect would; the run's clock starts once the message is sent.
            if attempt == SOCKET_ATTEMPTS:
                raise LoadTestError(f"socket {path}: {error} ({attempt} attempts)") from error
            await asyncio.sleep(attempt)
        except (InvalidHandshake, InvalidURI) as error:
            raise LoadTestError(f"socket {path}: {error}") from error
        else:
            return Socket(connection)
    raise AssertionError("unreachable")


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
        await socket.send_text(json.dumps({"action": "hello", "last_sequence": 0}))
        result.sent_at = time.time()
        if watcher is None:
            await socket.send_text(json.dumps({"action": "send", "text": message}))
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
    except (LoadTestError, OSError) as error:
        result.error = result.error or f"{error.__class__.__name__}: {error}"
        return result
    finally:
        if socket is not None:
            await socket.close()


def _left(deadline: float) -> float:
    return max(0.01, deadline - time.monotonic())
