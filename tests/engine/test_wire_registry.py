"""The wire-style family: one registry, each style's name mapped in one place, and a new style slots in
as one module and one registry entry."""
from __future__ import annotations

import tokenize
from pathlib import Path
from typing import Any

import pytest

from playground.engine.cache_cost import COST_WIRE_STYLES, first_and_steady
from playground.engine.permissions import PermissionPolicy
from playground.engine.pricing import PriceTable
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.tokens import CharEstimateCounter
from playground.engine.toolsearch_tool import PLANNING_STYLES, NATIVE_STYLE
from playground.engine.turn import plan_turn
from playground.engine.wires import registry, vendors
from playground.engine.wires.anthropic import AnthropicWire
from playground.engine.wires.base import WireStyle
from playground.toolsearch.cli import REQUEST_WIRE_STYLES

from .conftest import REPO_ROOT

COUNTER = CharEstimateCounter()
BUILT_IN = ("native", "client", "server", "tool-changes", "openai-hosted", "openai-client", "openai-functions")


def test_the_registry_holds_every_style_once_with_its_facts():
    styles = registry.wire_styles()
    assert registry.wire_names() == BUILT_IN
    assert len({s.command_name for s in styles}) == len(styles)
    for style in styles:
        assert isinstance(style, WireStyle) and style.vendor in vendors.VENDORS
        assert style.planned_as in PLANNING_STYLES and style.label
        assert style.command_name.startswith(f"{style.vendor}-") and registry.by_command_name(style.command_name) is style
    assert [s.name for s in registry.profile_styles()] == ["native", "client", "server", "tool-changes"]
    # The command line, the cost command and compare list every registered style by its command name.
    assert list(REQUEST_WIRE_STYLES) == list(registry.command_names())
    assert set(COST_WIRE_STYLES) == {*registry.command_names(), "all-tools"}


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
@pytest.mark.parametrize("profile_style", ["native", "client", "server"])
def test_each_profile_style_has_a_counterpart_on_each_vendor(vendor, profile_style):
    style = registry.counterpart(profile_style, vendor)
    assert style.vendor == vendor and (style.stands_for or style.name) == profile_style
    assert registry.counterpart(style.name, "anthropic").name == profile_style  # and back


def test_settings_move_to_another_vendor_as_its_counterpart():
    hosted = registry.settings_for_vendor(AgentSettings(wire="server", server_search="regex", model="claude-opus-4-5",
                                                        base_url="https://gateway"), "openai", "gpt-5.4")
    assert (hosted.wire, hosted.server_search, hosted.model, hosted.base_url) == ("openai-hosted", "", "gpt-5.4", "")
    back = registry.settings_for_vendor(hosted, "anthropic", "claude-sonnet-4-5")
    assert (back.wire, back.server_search, back.model) == ("server", "bm25", "claude-sonnet-4-5")  # the default variant
    same = registry.settings_for_vendor(AgentSettings(wire="client", base_url="https://gateway"), "anthropic")
    assert (same.wire, same.base_url) == ("client", "https://gateway")


def test_a_model_belongs_to_a_vendor_by_its_prefix():
    assert vendors.vendor_of_model("claude-sonnet-4-5") == "anthropic"
    assert vendors.vendor_of_model("GPT-5.4") == "openai"
    assert vendors.vendor_of_model("llama-3") == ""


def test_an_unknown_style_is_refused_with_the_names():
    with pytest.raises(ValueError, match="unknown wire style 'pigeon' \\(expected one of native, client, server"):
        registry.wire_style("pigeon")
    with pytest.raises(ValueError, match="unknown wire style 'anthropic-pigeon'"):
        registry.by_command_name("anthropic-pigeon")


# -- a fourth style: one module (here, this class) and one registry entry -----------------------------------------
class EchoTail(AnthropicWire):
    """A made-up style: the native request, with a system message naming the discovered tools."""

    name = "echo-tail"
    planned_as = NATIVE_STYLE
    profile_choice = True
    label = "Echo tail (test)"

    def messages_body(self, turn: Any) -> dict[str, Any]:
        body = super().messages_body(turn)
        note = {"role": "user", "content": f"discovered: {', '.join(turn.request.discovered_tools) or 'none'}"}
        return {**body, "messages": [*body["messages"], note]}


@pytest.fixture
def with_echo_tail(monkeypatch):
    monkeypatch.setattr(registry, "WIRE_STYLE_CLASSES", (*registry.WIRE_STYLE_CLASSES, f"{__name__}.EchoTail"))
    registry._styles.cache_clear()
    yield
    registry._styles.cache_clear()


def test_a_new_style_slots_in_with_one_registry_entry(with_echo_tail, small_catalog):
    assert "echo-tail" in registry.wire_names() and registry.by_command_name("anthropic-echo-tail").label == "Echo tail (test)"
    assert "echo-tail" in [s.name for s in registry.profile_styles()]
    settings = AgentSettings(wire="echo-tail", mode="true", prompt_cache=True, system_prompt="Be thorough. " * 300)
    turn = plan_turn(small_catalog, PermissionPolicy(), settings, ConversationState([{"role": "user", "content": "hi"}]),
                     token_counter=COUNTER, backend=ClaudeCodeKeywordBackend())
    body = turn.wire_request()
    assert body["messages"][-1]["content"][-1]["text"] == "discovered: none"  # its own hook, then the breakpoints
    assert "cache_control" in body["messages"][-1]["content"][-1]
    assert turn.cache_vendor == "anthropic" and turn.wire == "echo-tail"
    figures = first_and_steady(turn, PriceTable())
    assert figures["request"]["steady"]["cache_read_tokens"] > 0  # the vendor's cache model prices it


def test_a_registry_entry_that_is_not_a_wire_style_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "WIRE_STYLE_CLASSES", (*registry.WIRE_STYLE_CLASSES, "playground.engine.tools.Tool"))
    registry._styles.cache_clear()
    try:
        with pytest.raises(TypeError, match="is not a WireStyle subclass"):
            registry.wire_names()
    finally:
        monkeypatch.undo()
        registry._styles.cache_clear()


def test_each_style_name_is_mapped_in_one_place():
    """Outside its own module, no code names a style by a string literal. Left out of the scan: the
    planning shapes "native" and "client" (`toolsearch_tool`'s constants, which Anthropic's two styles
    take as their names), "server" (also an MCP server field and OpenAI's `execution` value), and
    migrations (they record the stored choices)."""
    names = {n for n in BUILT_IN if n not in (*PLANNING_STYLES, "server")} | set(registry.command_names())
    found = []
    for path in sorted((Path(REPO_ROOT) / "playground").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        with tokenize.open(path) as source:
            for token in tokenize.generate_tokens(source.readline):
                if token.type != tokenize.STRING or token.string[1:-1] not in names or token.string[0] not in "'\"":
                    continue
                name = token.string[1:-1]
                owner = registry.wire_style(name) if name in BUILT_IN else registry.by_command_name(name)
                if not path.as_posix().endswith(f"/wires/{type(owner).__module__.rsplit('.', 1)[-1]}.py"):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{token.start[0]}: {token.line.strip()}")
    assert not found, "a wire style named outside its module:\n" + "\n".join(found)
