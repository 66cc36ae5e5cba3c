from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import pytest

from playground.engine.tokens import IMAGE_TOKENS, AnthropicTokenCounter, CharEstimateCounter, count_messages, without_image_data

TOOLS = [{"name": "alpha", "description": "x" * 100, "input_schema": {"type": "object", "properties": {}}}]


def test_the_estimate_is_characters_divided_by_two_and_a_half_rounded_up():
    counter = CharEstimateCounter()
    assert counter.count_text("abcde") == 2
    assert counter.count_text("abcdef") == 3
    assert counter.count_tools([]) == 0
    assert counter.count_tools(TOOLS) == -(-len(json.dumps(TOOLS, sort_keys=True, separators=(",", ":"))) // 2.5)


class _CountTokensHandler(BaseHTTPRequestHandler):
    """Speaks /v1/messages/count_tokens: one token per 4 bytes of the request's tools and messages."""

    fail = False
    calls = 0

    def do_POST(self):
        type(self).calls += 1
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path != "/v1/messages/count_tokens" or self.fail:
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"type":"error","error":{"type":"api_error","message":"down"}}')
            return
        if any("defer_loading" in t for t in body.get("tools", [])):
            self.send_response(400)
            self.end_headers()
            return
        tokens = len(json.dumps(body.get("tools", []))) // 4 + len(json.dumps(body["messages"])) // 4
        payload = json.dumps({"input_tokens": tokens}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def count_tokens_server():
    handler = type("Handler", (_CountTokensHandler,), {"fail": False, "calls": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, handler
    server.shutdown()
    server.server_close()


def _client(server):
    return anthropic.Anthropic(api_key="test", base_url=f"http://127.0.0.1:{server.server_address[1]}", max_retries=0)


def test_the_api_counter_subtracts_the_no_tools_baseline_and_caches_per_tool_list(count_tokens_server):
    server, handler = count_tokens_server
    counter = AnthropicTokenCounter(_client(server), "claude-sonnet-4-5")
    first = counter.count_tools(TOOLS)
    assert first == len(json.dumps(TOOLS)) // 4
    calls = handler.calls
    assert counter.count_tools(TOOLS) == first and handler.calls == calls
    assert counter.source == "count_tokens API"
    # defer_loading is left out of what is counted (the schema is what costs tokens)
    assert counter.count_tools([{**TOOLS[0], "defer_loading": True}]) == first


def test_the_api_counter_falls_back_to_the_estimate_and_says_so(count_tokens_server):
    server, handler = count_tokens_server
    handler.fail = True
    counter = AnthropicTokenCounter(_client(server), "claude-sonnet-4-5")
    assert counter.count_tools(TOOLS) == CharEstimateCounter().count_tools(TOOLS)
    assert "count_tokens failed" in counter.source and counter.last_error


def test_text_counts_are_cached_too(count_tokens_server):
    server, handler = count_tokens_server
    counter = AnthropicTokenCounter(_client(server), "claude-sonnet-4-5")
    first = counter.count_text("<available-deferred-tools>\na\n</available-deferred-tools>")
    calls = handler.calls
    assert counter.count_text("<available-deferred-tools>\na\n</available-deferred-tools>") == first and handler.calls == calls


def test_counting_engine_tools_equals_counting_their_api_dicts():
    from playground.engine.tools import Tool

    tools = [Tool(name=f"t{i}", description="d" * i, input_schema={"type": "object", "properties": {"x": {"type": "string"}}}) for i in range(7)]
    counter = CharEstimateCounter()
    for deferred in (set(), {"t1", "t4"}):
        expected = counter.count_tools([t.to_api(defer_loading=t.name in deferred) for t in tools])
        assert counter.count_engine_tools(tools, deferred) == expected
        assert counter.count_engine_tools(tools, deferred) == expected  # from the per-tool cache
    assert counter.count_engine_tools([]) == 0


def test_the_api_counter_caches_engine_tool_counts_by_content(count_tokens_server):
    from playground.engine.tools import Tool

    server, handler = count_tokens_server
    counter = AnthropicTokenCounter(_client(server), "claude-sonnet-4-5")
    tools = [Tool(name="alpha", description="x" * 100)]
    first = counter.count_engine_tools(tools)
    calls = handler.calls
    assert counter.count_engine_tools([Tool(name="alpha", description="x" * 100)]) == first and handler.calls == calls
    assert first == counter.count_tools([t.to_api() for t in tools])


def test_an_image_counts_as_its_upper_bound_not_as_its_base64_text():
    counter = CharEstimateCounter()
    screenshot = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 1_000_000}}
    text = [{"role": "user", "content": [{"type": "text", "text": "look"}]}]
    with_image = [{"role": "user", "content": [{"type": "text", "text": "look"},
                                                {"type": "tool_result", "tool_use_id": "t", "content": [screenshot]}]}]
    stripped, images = without_image_data(with_image)
    assert images == 1 and stripped[0]["content"][1]["content"][0]["source"]["data"] == ""
    assert with_image[0]["content"][1]["content"][0]["source"]["data"] == "A" * 1_000_000  # the input is not changed
    assert count_messages(counter, text) == counter.count_text(json.dumps(text))
    assert IMAGE_TOKENS < count_messages(counter, with_image) < IMAGE_TOKENS + 100
