"""`python -m playground.toolsearch request`: the body each of the six wire styles sends, and its tool tokens."""
from __future__ import annotations

import json

import pytest

from playground.toolsearch.cli import REQUEST_WIRE_STYLES
from playground.registry.demo_data import CATALOGS
from tests.cli_runner import run_cli

DEMO_CATALOG = CATALOGS[0]
# Each OpenAI style and the Anthropic style it matches (who searches, what answers).
MATCHING = {"openai-hosted": "anthropic-server", "openai-client": "anthropic-native", "openai-functions": "anthropic-client"}


def request_json(wire: str, *extra: str) -> dict:
    done = run_cli("request", "--catalog", DEMO_CATALOG, "--wire", wire, "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("wire", list(REQUEST_WIRE_STYLES))
def test_each_style_prints_one_object_with_the_body_and_its_tool_tokens(wire):
    printed = request_json(wire)
    # The tool-changes style adds what it predicted from the person's message.
    assert set(printed) - {"tool_changes"} == {"wire", "request", "tool_tokens"} and printed["wire"] == wire
    assert ("tool_changes" in printed) == (wire == "anthropic-tool-changes")
    body = printed["request"]
    assert printed["tool_tokens"] > 0 and body["tools"]
    if wire.startswith("anthropic-"):
        assert {"model", "max_tokens", "messages"} <= set(body)
    elif wire == "openai-functions":
        assert {"model", "max_completion_tokens", "messages"} <= set(body)
    else:
        assert {"model", "max_output_tokens", "input"} <= set(body)


@pytest.mark.parametrize(("openai", "anthropic"), list(MATCHING.items()))
def test_on_the_demo_catalog_each_openai_style_costs_within_a_tenth_of_its_anthropic_match(openai, anthropic):
    ours, theirs = request_json(openai)["tool_tokens"], request_json(anthropic)["tool_tokens"]
    assert abs(ours - theirs) <= 0.1 * theirs, (openai, ours, anthropic, theirs)


def test_discovered_tools_make_a_later_request():
    name = "mcp__github__create_issue"
    client = request_json("openai-client", "--discovered", name)["request"]
    outputs = [item for item in client["input"] if item["type"] == "tool_search_output"]
    assert [t["name"] for t in outputs[0]["tools"]] == [name]
    functions = request_json("openai-functions", "--discovered", name)["request"]
    assert name in [t["function"]["name"] for t in functions["tools"]]
    native = request_json("anthropic-native", "--discovered", name)["request"]
    assert {"name": name, "defer_loading": True}.items() <= next(t for t in native["tools"] if t["name"] == name).items()
    later, first = request_json("openai-client", "--discovered", name)["tool_tokens"], request_json("openai-client")["tool_tokens"]
    assert later > first  # the loaded definition is seen


@pytest.mark.parametrize(("extra", "message"), [
    (("--discovered", "mcp__nope__x"), "is not in"),
    (("--wire", "openai-batch"), "invalid choice"),
])
def test_bad_input_exits_2_with_a_clear_message(extra, message):
    done = run_cli("request", "--catalog", DEMO_CATALOG, *(("--wire", "openai-client") if extra[0] != "--wire" else ()), *extra)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_tool_changes_adds_the_tools_it_predicts_from_the_message_and_counts_them_as_seen():
    printed = request_json("anthropic-tool-changes", "--message", "what time is it in Tokyo")
    added = printed["tool_changes"]["added"]
    assert added and printed["tool_changes"]["prediction"]["scored"]
    body = printed["request"]
    assert body["betas"] == ["mid-conversation-tool-changes-2026-07-01"]
    assert body["messages"][-1] == {"role": "system", "content": [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": n}} for n in added]}
    nothing = request_json("anthropic-tool-changes", "--message", "zzzqqq")  # no tool shares a term
    assert nothing["tool_changes"]["added"] == [] and nothing["request"]["messages"][-1]["role"] == "user"
    assert nothing["request"]["tools"] == body["tools"]  # the declared tools do not depend on the message
    assert printed["tool_tokens"] > nothing["tool_tokens"]  # an added tool's schema is seen, a hidden one's is not
