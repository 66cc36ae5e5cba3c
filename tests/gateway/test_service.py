"""What a session sees and may do, decided in service.py from the engine's plan (no server)."""
from __future__ import annotations

import pytest

from playground.gateway import service
from playground.gateway.models import GatewaySession
from playground.registry import adapter
from playground.registry.models import AgentProfile, PermissionRule


@pytest.fixture
def session(gateway_world):
    return GatewaySession.objects.create(session_id="svc-1", profile=gateway_world["profile"])


def test_the_first_list_is_the_engines_first_turn_plus_the_two_gateway_tools(gateway_world):
    view = service.profile_view(gateway_world["profile"].pk)
    names = [t["name"] for t in view.tools_for([])]
    assert names == ["echo", "ToolSearch", "CallDiscoveredTool"]
    assert set(view.plan.deferred_tools) == {"word_count", "calculator", "mcp__weather__get_forecast"}
    assert view.tool_search_definition()["description"].endswith(view.plan.announcement.text)
    assert [t["name"] for t in view.tools_for(["word_count", "not-a-tool"])] == ["echo", "ToolSearch", "word_count", "CallDiscoveredTool"]


def test_with_tool_search_off_every_permitted_tool_is_listed_and_nothing_else(gateway_world):
    AgentProfile.objects.filter(pk=gateway_world["profile"].pk).update(tool_search_mode="false")
    PermissionRule.objects.create(effect="deny", pattern="calculator")
    adapter.reset_caches()
    view = service.profile_view(gateway_world["profile"].pk)
    assert sorted(t["name"] for t in view.tools_for([])) == ["echo", "mcp__weather__get_forecast", "word_count"]


def test_a_discovered_tool_denied_later_leaves_the_list_and_is_refused(gateway_world, session):
    session.discovered_tools = ["word_count"]
    session.save()
    PermissionRule.objects.create(effect="deny", pattern="word_count")
    adapter.reset_caches()
    view = service.profile_view(gateway_world["profile"].pk)
    assert "word_count" not in [t["name"] for t in view.tools_for(session.discovered_tools)]
    answer = service.call_tool(session, view, "word_count", {"text": "a"})
    assert answer.is_error and "denied" in answer.content[0]["text"]


def test_an_allowed_prompt_still_loses_to_a_deny_rule_added_while_it_waited(gateway_world, session):
    from playground.gateway.server import _finish_prompted

    info = {"profile_id": gateway_world["profile"].pk, "token_id": None}
    session.discovered_tools = ["calculator"]
    session.save()
    PermissionRule.objects.create(effect="ask", pattern="calculator")
    planned = service.plan_call(session, service.profile_view(info["profile_id"]), "calculator", {"expression": "1+1"})
    assert planned.needs_person
    prompt = service.open_prompt(session, planned)
    PermissionRule.objects.create(effect="deny", pattern="calculator")
    assert service.answer_prompt(prompt.pk, "allowed")
    answer = _finish_prompted(session.pk, info, planned, prompt.pk, "allowed")
    assert answer.is_error and "denied" in answer.content[0]["text"]


def test_ask_is_refused_at_once_when_the_gateway_may_not_wait(gateway_world, session, settings):
    settings.GATEWAY_PERMISSION_TIMEOUT_SECONDS = 0
    PermissionRule.objects.create(effect="ask", pattern="echo")
    view = service.profile_view(gateway_world["profile"].pk)
    planned = service.plan_call(session, view, "echo", {"text": "hi"})
    assert not planned.needs_person and "GATEWAY_PERMISSION_TIMEOUT_SECONDS=0" in planned.refusal


def test_lists_and_calls_never_read_the_usage_log_and_searches_share_one_read(gateway_world, session, settings):
    """What conversations learned matters to searches only; a burst of searches reads its version once."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from playground.conversations.models import ToolSearchUsage
    from playground.gateway.server import _call, _list_tools

    settings.TOOLSEARCH_LEARN_FROM_USAGE = True
    service.reset_usage_cache()
    usage_table = ToolSearchUsage._meta.db_table
    info = {"profile_id": gateway_world["profile"].pk, "token_id": None}
    client = ("pytest", "1", "2025-11-25")

    def usage_reads(run) -> int:
        with CaptureQueriesContext(connection) as queries:
            run()
        return sum(usage_table in q["sql"] for q in queries.captured_queries)

    assert usage_reads(lambda: _list_tools(session.session_id, info, client)) == 0
    assert usage_reads(lambda: _call(session.session_id, info, client, "echo", {"text": "hi"})) == 0
    assert usage_reads(lambda: _call(session.session_id, info, client, "ToolSearch", {"query": "count words"})) >= 1
    assert usage_reads(lambda: _call(session.session_id, info, client, "ToolSearch", {"query": "weather"})) == 0
    service.reset_usage_cache()


def test_calls_share_one_plan_until_the_rules_or_the_profile_change(gateway_world):
    profile = gateway_world["profile"]
    first = service.profile_view(profile.pk)
    assert service.profile_view(profile.pk).turn is first.turn  # no second plan for the same inputs
    PermissionRule.objects.create(effect="deny", pattern="word_count")
    after_rule = service.profile_view(profile.pk)
    assert after_rule.turn is not first.turn and "word_count" not in after_rule.plan.deferred_tools
    AgentProfile.objects.filter(pk=profile.pk).update(tool_search_mode="false")
    after_mode = service.profile_view(profile.pk)
    assert after_mode.turn is not after_rule.turn and not after_mode.tool_search_on


def test_a_search_on_a_shared_plan_leaves_the_plan_without_a_usage_log(gateway_world):
    view = service.profile_view(gateway_world["profile"].pk)
    service.search(view, {"query": "select:word_count"})
    assert view.turn.usage is None  # each search reads its own; the shared plan keeps none


def test_a_call_reads_the_session_and_its_profile_in_one_statement(gateway_world, session):
    """Every call pays each statement before its tool runs: the session row comes with its profile,
    and a warm call then reads only the rules and the catalog's version before recording its event."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from playground.gateway.server import _call

    info = {"profile_id": gateway_world["profile"].pk, "token_id": None}
    client = ("pytest", "1", "2025-11-25")
    _call(session.session_id, info, client, "echo", {"text": "warm"})
    with CaptureQueriesContext(connection) as queries:
        answer, _, _ = _call(session.session_id, info, client, "echo", {"text": "hi"})
    assert not answer.is_error and "hi" in answer.content[0]["text"]
    profile_table = AgentProfile._meta.db_table
    reads = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    session_reads = [sql for sql in reads if GatewaySession._meta.db_table in sql.split("WHERE")[0]]
    assert len(session_reads) == 1 and profile_table in session_reads[0]  # joined, not read again
    assert not [sql for sql in reads if sql.split("WHERE")[0].rstrip().endswith(f'FROM "{profile_table}"')]


def test_a_list_is_counted_by_the_conversations_accounting_for_each_vendor(gateway_world):
    from playground.engine.openai_wire import chat_functions

    view = service.profile_view(gateway_world["profile"].pk)
    tools = view.tools_for([])
    event = service.list_event(view, tools)
    counter = adapter.token_counter()
    # Claude gets the Messages API tools; an OpenAI model the same tools as function tools.
    assert event["tokens"] == event["tokens_by_vendor"]["anthropic"] == counter.count_tools(tools)
    assert event["tokens_by_vendor"]["openai"] == counter.count_tools(chat_functions(tools)) != event["tokens"]
    # The all-tools baseline and the counter are the ones a conversation's turn shows.
    assert event["baseline_tokens"] == view.turn.tokens.baseline_tokens > 0
    assert event["source"] == view.turn.tokens.source


def test_found_tools_are_remembered_per_token_and_client_name_until_they_expire(gateway_world, settings):
    from django.utils import timezone

    from playground.gateway.models import GatewayDiscovery

    token = gateway_world["token_row"]
    service.remember(token.pk, "cli", ["word_count", "calculator", "word_count"])
    assert service.remembered_tools(token.pk, "cli") == ["word_count", "calculator"]
    assert service.remembered_tools(token.pk, "another client") == []
    assert service.remembered_tools(None, "cli") == []  # a session without a token remembers nothing

    long_ago = timezone.now() - timezone.timedelta(seconds=settings.GATEWAY_DISCOVERY_TTL_SECONDS + 1)
    GatewayDiscovery.objects.filter(tool_name="calculator").update(found_at=long_ago)
    assert service.remembered_tools(token.pk, "cli") == ["word_count"]
    service.remember(token.pk, "cli", ["word_count"])  # found again: kept longer; the expired row goes
    assert list(GatewayDiscovery.objects.values_list("tool_name", flat=True)) == ["word_count"]

    settings.GATEWAY_DISCOVERY_TTL_SECONDS = 0
    service.remember(token.pk, "cli", ["calculator"])
    assert service.remembered_tools(token.pk, "cli") == []
