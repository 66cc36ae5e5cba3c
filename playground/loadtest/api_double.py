"""The project's model API double as its own HTTP process, for the load test's real provider path.

`python -m playground.loadtest.api_double --vendor anthropic --latency 2 --port 8901` serves
Anthropic's Messages API (or, `--vendor openai`, OpenAI's Responses and Chat Completions) with the
test doubles' validation (fake_api.py, fake_openai.py: a request the real API would reject gets the
real API's 400), and answers every valid call `--latency` seconds later as a model would: the
person's message gets a ToolSearch call when the request offers ToolSearch, a tool result gets a
short text reply. The workers reach it through the official SDK (ANTHROPIC_BASE_URL /
OPENAI_BASE_URL), exactly as they reach the real API. Requests are not kept (a load run sends
hundreds of bodies of ~600 KB).
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import deque
from http.server import ThreadingHTTPServer
from typing import Any

from playground.conversations.testing.fake_api import FakeMessagesAPI, text_reply, tool_use_reply
from playground.conversations.testing.fake_openai import (
    FakeOpenAIAPI, chat_reply, function_call_item, message_item, response_reply, tool_search_call_item,
)
from playground.engine.tools import TOOL_SEARCH_NAME

QUERY = {"query": "weather forecast"}
ANSWER = "Here is what I found for you."


def anthropic_answer(body: dict[str, Any]) -> dict[str, Any]:
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content") if isinstance(last.get("content"), list) else []
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return text_reply(ANSWER)
    if any(tool.get("name") == TOOL_SEARCH_NAME for tool in body.get("tools") or []):
        return tool_use_reply(TOOL_SEARCH_NAME, QUERY)
    return text_reply(ANSWER)


def _last_reply(items: list[Any]) -> dict[str, Any]:
    """The last item that is not a user, developer or system message: what the model did last, or
    what answered it (the wire may add a message after a tool's output, e.g. the tools it loaded)."""
    for item in reversed(items):
        if isinstance(item, dict) and item.get("role") not in ("user", "developer", "system"):
            return item
    return {}


def openai_answer(body: dict[str, Any]) -> dict[str, Any]:
    tools = body.get("tools") or []
    if "messages" in body:  # Chat Completions
        if _last_reply(body["messages"]).get("role") == "tool":
            return chat_reply(ANSWER)
        if any((t.get("function") or {}).get("name") == TOOL_SEARCH_NAME for t in tools):
            return chat_reply(tool_calls=[(TOOL_SEARCH_NAME, QUERY)])
        return chat_reply(ANSWER)
    items = body.get("input") if isinstance(body.get("input"), list) else []
    if _last_reply(items).get("type") in ("function_call_output", "tool_search_output"):
        return response_reply([message_item(ANSWER)])
    if any(t.get("type") == "tool_search" and t.get("execution") == "client" for t in tools):
        return response_reply([tool_search_call_item(QUERY)])
    if any(t.get("name") == TOOL_SEARCH_NAME for t in tools):
        return response_reply([function_call_item(TOOL_SEARCH_NAME, QUERY)])
    return response_reply([message_item(ANSWER)])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # hundreds of conversations connect at once


class _Endless:
    """A reply queue that never runs out: every call gets `answer`, `latency` seconds late."""

    def __init__(self, answer, latency: float) -> None:
        self.answer, self.latency = answer, latency

    def __bool__(self) -> bool:
        return True

    def popleft(self):
        def reply(body: dict[str, Any]) -> dict[str, Any]:
            time.sleep(self.latency)  # this request's own server thread: the model "thinking"
            return self.answer(body)
        return reply


def make_double(vendor: str, latency: float):
    double = FakeMessagesAPI() if vendor == "anthropic" else FakeOpenAIAPI()
    double.replies = _Endless(anthropic_answer if vendor == "anthropic" else openai_answer, latency)
    double.requests = deque(maxlen=0)  # validated and answered, never kept
    return double


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m playground.loadtest.api_double", description=__doc__.splitlines()[0])
    parser.add_argument("--vendor", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds before each answer (default 2)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one, printed)")
    args = parser.parse_args(argv)
    if args.latency < 0:
        parser.error("--latency must be 0 or more")
    double = make_double(args.vendor, args.latency)
    double._server.server_close()
    double._server = _Server(("127.0.0.1", args.port), double._handler_class())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"api double ({args.vendor}, {args.latency:g} s per call) at {double.url}", flush=True)
    try:
        double._server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
