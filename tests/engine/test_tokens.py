from __future__ import annotations

import json

from playground.engine.tokens import IMAGE_TOKENS, CharEstimateCounter, count_messages, without_image_data

TOOLS = [{"name": "alpha", "description": "x" * 100, "input_schema": {"type": "object", "properties": {}}}]


def test_the_estimate_is_characters_divided_by_two_and_a_half_rounded_up():
    counter = CharEstimateCounter()
    assert counter.count_text("abcde") == 2
    assert counter.count_text("abcdef") == 3
    assert counter.count_tools([]) == 0
    assert counter.count_tools(TOOLS) == -(-len(json.dumps(TOOLS, sort_keys=True, separators=(",", ":"))) // 2.5)


def test_counting_engine_tools_equals_counting_their_api_dicts():
    from playground.engine.tools import Tool

    tools = [Tool(name=f"t{i}", description="d" * i, input_schema={"type": "object", "properties": {"x": {"type": "string"}}}) for i in range(7)]
    counter = CharEstimateCounter()
    for deferred in (set(), {"t1", "t4"}):
        expected = counter.count_tools([t.to_api(defer_loading=t.name in deferred) for t in tools])
        assert counter.count_engine_tools(tools, deferred) == expected
        assert counter.count_engine_tools(tools, deferred) == expected  # from the per-tool cache
    assert counter.count_engine_tools([]) == 0


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


def test_each_tool_is_escaped_once_however_many_turns_count_it(monkeypatch):
    """Every turn's mode decision counts the whole permitted catalog: a tool's JSON length is worked
    out once (escaping 100,000 names and descriptions on each request cost ~0.3 s)."""
    from playground.engine import tools as tools_module
    from playground.engine.tools import Tool

    escaped: list[str] = []
    real = tools_module._json_string
    monkeypatch.setattr(tools_module, "_json_string", lambda value: escaped.append(value) or real(value))
    catalog = [Tool(name=f"t{i}", description=f"tool number {i}", input_schema={"type": "object", "properties": {}}) for i in range(5)]
    counter = CharEstimateCounter()
    first = counter.count_engine_tools(catalog)
    after_first = len(escaped)
    assert after_first > 0
    assert counter.count_engine_tools(catalog) == first and counter.count_engine_tools(catalog, {"t2"}) > first
    assert len(escaped) == after_first  # nothing escaped again


def test_a_catalogs_counts_are_worked_out_once_per_catalog_and_equal_a_recount(monkeypatch):
    """The mode decision counts every deferred tool and the baseline every permitted tool on each turn:
    kept with the (immutable) catalog, a turn over the same permitted catalog counts nothing again,
    and a new catalog (a changed catalog or permission set) is counted afresh."""
    from playground.engine.permissions import PermissionPolicy, PermissionRule
    from playground.engine.requests import AgentSettings, ConversationState
    from playground.engine.tools import Tool, ToolCatalog
    from playground.engine.turn import plan_turn
    from tests.engine.conftest import core_and_deferred_tools

    catalog = core_and_deferred_tools()
    counted: list[int] = []
    real = CharEstimateCounter.count_engine_tools
    monkeypatch.setattr(CharEstimateCounter, "count_engine_tools",
                        lambda self, tools, deferred_names=(): counted.append(len(tools)) or real(self, tools, deferred_names))
    counter = CharEstimateCounter()
    assert counter.count_catalog(catalog) == real(counter, catalog.tools)
    assert counter.count_catalog(catalog, deferred=True) == real(counter, catalog.deferred)
    assert counted == [len(catalog), len(catalog.deferred)]
    assert CharEstimateCounter().count_catalog(catalog) == real(counter, catalog.tools)  # another counter: kept too
    assert len(counted) == 2

    policy, settings = PermissionPolicy(), AgentSettings(mode="auto")
    filtered = policy.filter(catalog)
    first = plan_turn(catalog, policy, settings, ConversationState(), token_counter=counter, filtered=filtered)
    second = plan_turn(catalog, policy, settings, ConversationState(), token_counter=counter, filtered=filtered)
    assert (first.decision, first.request.tokens) == (second.decision, second.request.tokens)
    assert len(counted) == 2  # two turns, no recount
    assert first.request.tokens.baseline_tokens == real(counter, catalog.tools)

    denied = PermissionPolicy([PermissionRule("deny", "mcp__github")])  # permissions changed: another catalog
    narrower = plan_turn(catalog, denied, settings, ConversationState(), token_counter=counter, filtered=denied.filter(catalog))
    permitted = denied.filter(catalog).permitted
    assert narrower.request.tokens.baseline_tokens == real(counter, permitted.tools) < first.request.tokens.baseline_tokens
    assert len(counted) == 4  # counted afresh: its tools and its deferred tools

    class CountsPerInstance(CharEstimateCounter):
        counts_depend_on_tools_only = False  # e.g. a counter that asks a model's API: never kept

    other = ToolCatalog([Tool(name="x", description="y", input_schema={"type": "object"})])
    CountsPerInstance().count_catalog(other)
    CountsPerInstance().count_catalog(other)
    assert len(counted) == 6
