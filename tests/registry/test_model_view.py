from __future__ import annotations

import pytest
from django.urls import reverse

from playground.engine.toolsearch_tool import TOOL_SEARCH_TOOL
from playground.registry.models import AgentProfile

from .conftest import bulk_tools

pytestmark = pytest.mark.django_db
URL = reverse("registry:model_view")
HTMX = {"HX-Request": "true"}


def sent_names(response) -> list[str]:
    return [t["name"] for t in response.context["preview"].plan.tools]


def test_it_requires_login(client):
    response = client.get(URL)
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_viewer_sees_the_request_for_a_profile(viewer_client, tools, profile):
    response = viewer_client.get(URL, {"profile": profile.pk})
    assert response.status_code == 200
    plan = response.context["preview"].plan
    assert plan.decision.enabled is True
    names = sent_names(response)
    assert TOOL_SEARCH_TOOL.name in names and "Read" in names
    assert "mcp__github__create_issue" in plan.deferred_tools
    body = response.content.decode()
    assert 'data-testid="model-view" data-state="ready" data-tool-search="on"' in body
    assert 'data-testid="mode-decision"' in body


def test_discovered_tools_are_sent_in_full(viewer_client, tools, profile):
    response = viewer_client.get(URL, {"profile": profile.pk, "discovered": "mcp__github__create_issue"}, headers=HTMX)
    plan = response.context["preview"].plan
    assert "mcp__github__create_issue" in plan.discovered_tools
    assert "mcp__github__create_issue" not in plan.deferred_tools
    assert "mcp__github__create_issue" in sent_names(response)
    assert "<html" not in response.content.decode()


def test_unknown_discovered_names_are_reported(viewer_client, tools, profile):
    response = viewer_client.get(URL, {"profile": profile.pk, "discovered": "mcp__nope__x"}, headers=HTMX)
    assert response.context["preview"].unknown_discovered == ["mcp__nope__x"]
    assert "mcp__nope__x" in response.content.decode()


def test_tool_search_off_sends_every_permitted_tool(viewer_client, tools, deny_delete_rule):
    off = AgentProfile.objects.create(name="Off", tool_search_mode="false")
    response = viewer_client.get(URL, {"profile": off.pk}, headers=HTMX)
    plan = response.context["preview"].plan
    assert plan.decision.enabled is False
    assert TOOL_SEARCH_TOOL.name not in sent_names(response)
    assert "mcp__github__create_issue" in sent_names(response)
    assert "mcp__github__delete_repo" not in sent_names(response)  # denied
    assert "mcp__slack__list_channels" not in sent_names(response)  # disabled
    assert 'data-tool-search="off"' in response.content.decode()
    assert "≈None" not in response.content.decode()  # nothing was counted: no "deferred tools ≈None tokens"


def test_the_mode_override_wins_over_the_profile(viewer_client, tools, profile):
    response = viewer_client.get(URL, {"profile": profile.pk, "mode": "false"}, headers=HTMX)
    assert response.context["preview"].plan.decision.enabled is False


def test_token_totals_compare_with_the_all_tools_baseline(viewer_client, tools, profile):
    bulk_tools(50)  # enough deferred tools for deferral to pay off
    response = viewer_client.get(URL, {"profile": profile.pk}, headers=HTMX)
    tokens = response.context["preview"].plan.tokens
    assert tokens.sent_tokens < tokens.baseline_tokens
    assert f'data-tokens-sent="{tokens.sent_tokens}"' in response.content.decode()
    # The saving shown is net of the announced names, and the page says what they cost.
    assert tokens.announcement_tokens > 0
    assert f"+ {tokens.announcement_tokens} announcing deferred names" in response.content.decode()
    assert f"({tokens.saved_percent}% saved" in response.content.decode()


def test_a_large_catalog_lists_the_first_deferred_names_and_warns_about_a_heavy_announcement(viewer_client, profile, settings):
    settings.CONTEXT_WINDOW_TOKENS = 30_000
    bulk_tools(600)
    response = viewer_client.get(URL, {"profile": profile.pk}, headers=HTMX)
    body = response.content.decode()
    assert 'data-deferred-count="600"' in body and "… 400 more" in body
    assert body.count('<li class="mono">mcp__bulk__tool_') == 200
    assert 'data-testid="announcement-warning"' in body and "30,000-token context window" in body


def test_the_cache_figures_show_the_first_turn_and_the_steady_state_beside_the_raw_tokens(viewer_client, tools, settings):
    """Cache-aware figures from the engine's model and the price table: a caching profile's request
    is written once then read; the all-tools baseline is priced cached whatever the profile does."""
    from playground.engine.prompt_cache import account, with_cache_breakpoints
    from playground.engine.pricing import PriceTable

    settings.PRICE_TABLE = ""
    cached = AgentProfile.objects.create(name="Cached", tool_search_mode="true", prompt_cache="on",
                                         system_prompt="Be careful and precise in every answer. " * 80)
    response = viewer_client.get(URL, {"profile": cached.pk}, headers=HTMX)
    preview = response.context["preview"]
    figures = preview.cache
    first, steady = figures["request"]["first"], figures["request"]["steady"]
    expected = account([(0.0, preview.request), (30.0, preview.request)])
    assert (first["cache_write_tokens"], steady["cache_read_tokens"]) == (expected[0].cache_write_tokens, expected[1].cache_read_tokens)
    assert first["cache_write_tokens"] > 1024 and steady["cache_read_tokens"] == first["cache_write_tokens"]
    assert steady["cost_usd"] == PriceTable().cost_usd(figures["model"], steady["uncached_tokens"], 0, 0, steady["cache_read_tokens"])
    assert steady["cost_usd"] < steady["uncached_cost_usd"]
    baseline = figures["all_tools"]
    assert baseline["first"]["cache_write_tokens"] > 0 and baseline["steady"]["cache_read_tokens"] == baseline["first"]["cache_write_tokens"]
    body = response.content.decode()
    assert 'data-testid="model-view-cache"' in body and f'data-input-tokens="{first["input_tokens"]}"' in body

    plain = AgentProfile.objects.create(name="Plain", tool_search_mode="true", prompt_cache="off",
                                        system_prompt=cached.system_prompt)
    uncached = viewer_client.get(URL, {"profile": plain.pk}, headers=HTMX).context["preview"]
    assert uncached.cache["request"]["steady"]["cache_read_tokens"] == 0  # no breakpoints: nothing read
    assert uncached.cache["all_tools"]["steady"]["cache_read_tokens"] > 0  # the fair baseline caches
    assert with_cache_breakpoints(uncached.request) != uncached.request


def test_the_tool_changes_style_shows_what_it_adds_for_the_persons_message(viewer_client, tools):
    profile = AgentProfile.objects.create(name="changes", tool_search_mode="true", wire_style="tool-changes",
                                          tool_changes_search=False)
    response = viewer_client.get(URL, {"profile": profile.pk, "message": "create a github issue"}, headers=HTMX)
    assert response.status_code == 200
    preview = response.context["preview"]
    assert "mcp__github__create_issue" in preview.tool_changes.added
    assert preview.request["messages"][-1]["role"] == "system"
    assert TOOL_SEARCH_TOOL.name not in [t["name"] for t in preview.request["tools"]]
    assert 'data-testid="added-tool">mcp__github__create_issue' in response.content.decode()
    # Its request announces nothing (the tools array defers them, the prediction adds them): the system
    # prompt shown is the one sent, not the plan's with the announcement.
    assert "available-deferred-tools" not in preview.request.get("system", "")
    assert '<pre data-testid="system-prompt">(none)</pre>' in response.content.decode()
    profile.tool_changes_search = True  # ToolSearch kept: the deferred names are announced for it
    profile.save()
    kept = viewer_client.get(URL, {"profile": profile.pk, "message": "create a github issue"}, headers=HTMX).content.decode()
    assert '<pre data-testid="system-prompt">&lt;available-deferred-tools&gt;' in kept
    too_long = viewer_client.get(URL, {"profile": profile.pk, "message": "x" * 3000}, headers=HTMX)
    assert too_long.status_code == 200 and "longer than" in too_long.content.decode()


def test_the_tool_changes_cards_count_the_tools_added_before_the_turn(viewer_client, tools):
    """The added tools are sent this turn though no history discovered them: the cards say so (they
    said 0 discovered and every deferred tool still deferred), and so do the cache figures."""
    profile = AgentProfile.objects.create(name="changes", tool_search_mode="true", wire_style="tool-changes")
    plain = viewer_client.get(URL, {"profile": profile.pk}, headers=HTMX).context["preview"]
    response = viewer_client.get(URL, {"profile": profile.pk, "message": "create a github issue"}, headers=HTMX)
    preview = response.context["preview"]
    added = list(preview.tool_changes.added)
    assert added and not preview.plan.discovered_tools
    assert preview.discovered_tools == added and preview.tool_names == [*preview.plan.tool_names, *added]
    assert len(preview.deferred_tools) == len(plain.deferred_tools) - len(added)
    body = response.content.decode()
    assert f'data-deferred-count="{len(preview.deferred_tools)}"' in body
    assert f'data-discovered-count="{len(added)}"' in body
    assert f"<strong>{len(preview.tool_names)}</strong> tools sent in full" in body
    # The cache model reads each added definition where its addition sits: the input grows by more than the message.
    grown = preview.cache["request"]["first"]["input_tokens"] - plain.cache["request"]["first"]["input_tokens"]
    assert grown >= preview.tokens.sent_tokens - plain.tokens.sent_tokens > 0
