"""The cache strip on every turn (cache_strips.py, events/cache_strip.html) and the figures built on it:
the conversation header's cache total, the export replayed by `toolsearch cost --export`, a
profile's own caching choice."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from playground.conversations import selectors
from playground.conversations.fragments import render_event_frame
from playground.conversations.providers import demo
from playground.conversations.providers.anthropic_api import AnthropicProvider
from playground.conversations.providers.demo import DemoAgentProvider
from playground.conversations.testing.fake_api import FakeMessagesAPI, text_reply, tool_use_reply
from playground.engine.cache_cost import recorded_cost
from playground.engine.pricing import PriceTable
from playground.engine.prompt_cache import CACHE_TTLS, AnthropicCacheModel, account, breakpoints_of
from playground.registry import adapter
from tests.cli_runner import run_cli
from tests.conversations.conftest import converse, events_of, make_profile

TIME = "mcp__time__get_current_time"
LONG_PROMPT = "You are a careful assistant who checks every answer twice. " * 60  # above 1,024 tokens


@pytest.fixture
def fresh_demo_cache(monkeypatch):
    """The demo agent's process-wide prompt cache, empty: another test's conversation with the same
    prefix would otherwise be read from it (as the API's cache is shared across conversations)."""
    monkeypatch.setattr(demo, "_PROMPT_CACHES", {ttl: AnthropicCacheModel(ttl=ttl, counter=demo._ESTIMATE) for ttl in CACHE_TTLS})


def strips(conversation):
    return [e.payload for e in events_of(conversation, "cache_strip")]


# -- the profile's own caching ----------------------------------------------------------------------
def test_a_profile_turns_caching_on_or_off_whatever_the_deployment_default(db, settings):
    settings.PROMPT_CACHE, settings.PROMPT_CACHE_TTL = False, "5m"
    on = make_profile("cache-on", prompt_cache="on", prompt_cache_ttl="1h")
    off = make_profile("cache-off", prompt_cache="off")
    default = make_profile("cache-default")
    assert (adapter.agent_settings(on).prompt_cache, adapter.agent_settings(on).prompt_cache_ttl) == (True, "1h")
    assert adapter.agent_settings(default).prompt_cache is False
    settings.PROMPT_CACHE = True
    assert adapter.agent_settings(off).prompt_cache is False
    assert (adapter.agent_settings(default).prompt_cache, adapter.agent_settings(default).prompt_cache_ttl) == (True, "5m")


def test_the_loop_sends_breakpoints_for_a_caching_profile_only(admin_user, tool_world, fake_api, claude, settings):
    settings.PROMPT_CACHE = False
    fake_api.script(text_reply("Hello."), text_reply("Hello."))
    converse(admin_user, "hi", profile=make_profile("on", prompt_cache="on", prompt_cache_ttl="1h"), provider=claude)
    converse(admin_user, "hi", profile=make_profile("plain"), provider=claude)
    cached, plain = (r.body for r in fake_api.message_requests)
    assert breakpoints_of(cached)[:2] == ["tools: ToolSearch", "system"]
    assert next(t["cache_control"] for t in cached["tools"] if t.get("cache_control")) == {"type": "ephemeral", "ttl": "1h"}
    assert breakpoints_of(plain) == []


# -- the strip -------------------------------------------------------------------------------------
def test_every_turn_has_a_strip_equal_to_the_doubles_reported_split(admin_user, tool_world):
    """Through the real SDK: the model's split per turn is what the double reports (same rules), and
    the native style keeps the prefix across the discovery."""
    profile = make_profile("cached-native", prompt_cache="on", system_prompt=LONG_PROMPT)
    with FakeMessagesAPI(prompt_cache=True) as server:
        server.script(tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}), tool_use_reply(TIME, {"timezone": "UTC"}),
                      text_reply("Noon."))
        provider = AnthropicProvider(api_key="sk-test", base_url=server.url, max_retries=0, timeout=5)
        conversation, outcome = converse(admin_user, "What time is it?", profile=profile, provider=provider)
        bodies = [r.body for r in server.message_requests]
    assert outcome.reason == "end_turn"
    found = strips(conversation)
    assert len(found) == len(bodies) == 3
    expected = account([(0.0, body) for body in bodies])
    for strip, turn in zip(found, expected, strict=True):
        assert (strip["input_tokens"], strip["cache_write_tokens"], strip["cache_read_tokens"], strip["uncached_tokens"]) == (
            turn.input_tokens, turn.cache_write_tokens, turn.cache_read_tokens, turn.uncached_tokens)
        assert strip["reported"] == {k: strip[k] for k in ("input_tokens", "cache_write_tokens", "cache_read_tokens", "uncached_tokens")}
        assert strip["reported_by"] == "api"
    assert found[0]["first_request"] and found[0]["cache_write_tokens"] > 1024
    assert found[1]["prefix_break"] == {} and found[1]["cache_read_tokens"] > 1024  # the discovery kept the prefix
    assert found[1]["cost_usd"] < found[1]["uncached_cost_usd"]


def test_the_server_style_strip_keeps_the_prefix_across_anthropics_own_search(admin_user, tool_world):
    """Anthropic's server-side search: every deferred tool goes with defer_loading, the found one arrives
    as a tool_reference in the history: the prefix holds and the double's split is the model's."""
    from playground.conversations.testing.fake_api import server_search_reply

    profile = make_profile("cached-server", wire_style="server", prompt_cache="on", system_prompt=LONG_PROMPT)
    with FakeMessagesAPI(prompt_cache=True) as server:
        server.script(server_search_reply("time", [TIME], then=[{"type": "tool_use", "id": "toolu_s1", "name": TIME,
                                                                  "input": {"timezone": "UTC"}}]),
                      text_reply("Noon."))
        provider = AnthropicProvider(api_key="sk-test", base_url=server.url, max_retries=0, timeout=5)
        conversation, outcome = converse(admin_user, "What time is it?", profile=profile, provider=provider)
    assert outcome.reason == "end_turn"
    first, second = strips(conversation)
    assert first["vendor"] == "anthropic" and second["prefix_break"] == {}
    assert second["cache_read_tokens"] >= first["cache_write_tokens"] > 1024
    assert all(not selectors.cache_strip_view(s)["differences"] for s in (first, second))


def test_the_client_style_strip_names_the_block_and_the_discovered_tool(admin_user, tool_world):
    """The client-side list style rewrites its tools array on a discovery: the strip says where and why,
    and what it cost (the tools after the new one, the system prompt and the messages written again)."""
    profile = make_profile("cached-client", wire_style="client", prompt_cache="on", system_prompt=LONG_PROMPT)
    with FakeMessagesAPI(prompt_cache=True) as server:
        server.script(tool_use_reply("ToolSearch", {"query": f"select:{TIME}"}), tool_use_reply(TIME, {"timezone": "UTC"}),
                      text_reply("Noon."))
        provider = AnthropicProvider(api_key="sk-test", base_url=server.url, max_retries=0, timeout=5)
        conversation, outcome = converse(admin_user, "What time is it?", profile=profile, provider=provider)
    assert outcome.reason == "end_turn"
    first, second, third = strips(conversation)
    assert second["prefix_break"]["section"] == "tools"
    assert second["prefix_break"]["reason"] == f"tools array changed: {TIME} discovered"
    assert second["cache_write_tokens"] > 1024 and second["cache_read_tokens"] < first["cache_write_tokens"]
    assert third["prefix_break"] == {} and third["cache_read_tokens"] > 1024  # no discovery: the prefix holds
    assert second["reported"]["cache_write_tokens"] == second["cache_write_tokens"]


def test_a_reported_split_that_differs_is_flagged_and_the_frame_is_the_pages_html(admin_user, tool_world, fresh_demo_cache):
    conversation, _ = converse(admin_user, "What time is it in Tokyo?", profile=make_profile("p", prompt_cache="on",
                               system_prompt=LONG_PROMPT), provider=DemoAgentProvider())
    event = events_of(conversation, "cache_strip")[0]
    page = selectors.event_view(event)
    assert page["differences"] == {}
    event.payload["reported"] = {**event.payload["reported"], "cache_read_tokens": 7,
                                 "uncached_tokens": event.payload["reported"]["uncached_tokens"] - 7}
    event.save()
    frame = render_event_frame(conversation, event)
    assert 'data-testid="cache-differs"' in frame and "read +7" in frame and "uncached -7" in frame
    assert 'data-testid="cache-total"' in frame and "hx-swap-oob" in frame  # the header's figures follow the frame


@pytest.mark.parametrize("style, wire, breaks_at", [("native", "openai-client", None), ("client", "openai-functions", "tools"),
                                                     ("server", "openai-hosted", None)])
def test_every_openai_style_gets_a_strip_of_its_own_vendor(admin_user, tool_world, style, wire, breaks_at):
    """OpenAI caches on its own (no breakpoints): each request is accounted by the OpenAI model; the
    functions style rewrites its tools array on a discovery and the strip says so."""
    from playground.conversations.providers.openai_api import OpenAIProvider
    from playground.conversations.testing.fake_openai import (
        FakeOpenAIAPI,
        chat_reply,
        function_call_item,
        hosted_search_reply,
        message_item,
        response_reply,
        tool_search_call_item,
    )

    profile = make_profile(f"openai-{style}", wire_style=style, system_prompt=LONG_PROMPT)
    with FakeOpenAIAPI() as server:
        if style == "server":
            server.script(hosted_search_reply("time", [TIME], then=[function_call_item("get_current_time", {"timezone": "UTC"},
                                                                                     namespace="mcp__time")]),
                          response_reply([message_item("Noon.")]))
        elif style == "client":
            server.script(chat_reply(tool_calls=[("ToolSearch", {"query": f"select:{TIME}"})]),
                          chat_reply(tool_calls=[(TIME, {"timezone": "UTC"})]), chat_reply("Noon."))
        else:
            server.script(response_reply([tool_search_call_item({"query": f"select:{TIME}"})]),
                          response_reply([function_call_item(TIME, {"timezone": "UTC"})]),
                          response_reply([message_item("Noon.")]))
        provider = OpenAIProvider(api_key="sk-test", base_url=server.url, model="gpt-test", max_retries=0, timeout=10)
        conversation, outcome = converse(admin_user, "What time is it?", profile=profile, provider=provider)
    assert outcome.reason == "end_turn"
    found = strips(conversation)
    assert found and all(s["vendor"] == "openai" and s["enabled"] for s in found)
    assert found[0]["cache_read_tokens"] == 0 and found[0]["cache_write_tokens"] == 0  # OpenAI charges no write
    assert (found[1]["prefix_break"] or {}).get("section") == breaks_at
    if breaks_at is None:
        assert found[1]["cache_read_tokens"] >= 1024  # the long instructions stayed a cached prefix
    else:
        assert TIME in found[1]["prefix_break"]["reason"]


# -- the figures agree: strips, header, compare, cost command -----------------------------------------
def test_a_six_turn_demo_conversation_agrees_with_the_cost_command_to_the_token(admin_user, tool_world, client,
                                                                                  fresh_demo_cache, tmp_path):
    profile = make_profile("six-turns", prompt_cache="on", system_prompt=LONG_PROMPT)
    conversation, first = converse(admin_user, "What time is it in Tokyo?", profile=profile, provider=DemoAgentProvider())
    conversation, second = converse(admin_user, "What is the weather forecast for Paris?",
                                    conversation=conversation, provider=DemoAgentProvider())
    conversation, third = converse(admin_user, "?", conversation=conversation, provider=DemoAgentProvider())
    assert (first.reason, second.reason, third.reason) == ("end_turn", "end_turn", "end_turn")
    found = strips(conversation)
    assert len(found) == 6, [s["prefix_break"] for s in found]
    assert all(s["reported"] and not selectors.cache_strip_view(s)["differences"] for s in found)

    total = selectors.cache_total_for(conversation.pk)
    assert total["input_tokens"] == sum(s["input_tokens"] for s in found)
    assert total["cache_read_tokens"] == sum(s["cache_read_tokens"] for s in found) > 0

    client.force_login(admin_user)
    export = client.get(f"/conversations/{conversation.pk}/export.json")
    path = tmp_path / "export.json"
    path.write_bytes(export.content)
    replayed = recorded_cost(json.loads(export.content), PriceTable())
    assert [(r["input_tokens"], r["cache_write_tokens"], r["cache_read_tokens"]) for r in replayed.figures["turns"]] == [
        (s["input_tokens"], s["cache_write_tokens"], s["cache_read_tokens"]) for s in found]
    assert replayed.figures["total_cost_usd"] == pytest.approx(total["cost_usd"], abs=1e-6)

    result = run_cli("cost", "--export", str(path), "--json")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert sum(r["cache_read_tokens"] for r in figures["turns"]) == total["cache_read_tokens"]
    assert sum(r["input_tokens"] for r in figures["turns"]) == total["input_tokens"]

    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert f'data-input-tokens="{total["input_tokens"]}"' in page
    assert f'data-cache-read="{total["cache_read_tokens"]}"' in page
    assert page.count('data-testid="cache-strip"') == 6

    # The compare view reads the same totals (its script puts them side by side: the browser test).
    conversation.compare_group = "cache-six"
    conversation.save(update_fields=["compare_group"])
    compared = client.get(reverse("conversations:compare_view", args=["cache-six"])).content.decode()
    assert 'data-testid="compare-cache"' in compared and 'data-testid="compare-priced"' in compared
    assert f'data-input-tokens="{total["input_tokens"]}"' in compared and f'data-cost="{total["cost_usd"]}"' in compared


def test_caching_off_every_token_is_uncached_and_the_demo_reports_the_same_blocks(admin_user, tool_world, settings):
    settings.PROMPT_CACHE = True  # the profile's own "off" wins
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=make_profile("off", prompt_cache="off"),
                                     provider=DemoAgentProvider())
    assert outcome.reason == "end_turn"
    found = strips(conversation)
    assert found and all(not s["enabled"] and s["uncached_tokens"] == s["input_tokens"] > 0 for s in found)
    assert all(s["reported"]["input_tokens"] == s["input_tokens"] for s in found)  # the demo counts the model's blocks
    assert found[0]["cost_usd"] == found[0]["uncached_cost_usd"]
    # The demo's usage is the cache model's own estimate: the strip says so, and never "reported by the API".
    assert {s["reported_by"] for s in found} == {"estimate"}
    html = render_event_frame(conversation, events_of(conversation, "cache_strip")[0])
    assert "reported by the offline demo agent" in html and "reported by the API" not in html


def test_the_tool_changes_strip_keeps_the_prefix_across_additions(admin_user, tool_world):
    """Mid-conversation tool changes: the tools never change, each message's additions sit in the
    history after the prefix, so every later request reads the whole prefix from the cache."""
    profile = make_profile("cached-changes", wire_style="tool-changes", prompt_cache="on", system_prompt=LONG_PROMPT)
    with FakeMessagesAPI(prompt_cache=True) as server:
        server.script(tool_use_reply(TIME, {"timezone": "UTC"}), text_reply("Noon."), text_reply("Filed."))
        provider = AnthropicProvider(api_key="sk-test", base_url=server.url, max_retries=0, timeout=5)
        conversation, outcome = converse(admin_user, "What is the current time?", profile=profile, provider=provider)
        assert outcome.reason == "end_turn"
        conversation, outcome = converse(admin_user, "Create a github issue titled Noon", profile=profile,
                                         provider=provider, conversation=conversation)
        bodies = [r.body for r in server.message_requests]
    assert outcome.reason == "end_turn"
    added = [b["tool"]["name"] for body in bodies for m in body["messages"] if m["role"] == "system" for b in m["content"]]
    assert TIME in added and "mcp__github__create_issue" in added  # each message added its own tools
    found = strips(conversation)
    assert len(found) == 3 and found[0]["cache_write_tokens"] > 1024
    for strip in found[1:]:
        assert strip["prefix_break"] == {} and strip["cache_read_tokens"] >= found[0]["cache_write_tokens"]
    assert all(not selectors.cache_strip_view(s)["differences"] for s in found)
