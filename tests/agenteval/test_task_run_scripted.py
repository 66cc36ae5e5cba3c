"""A task run end to end through the real loop, the real anthropic SDK and the Messages API double playing
a scripted model: every measure of the command's JSON is checked against the answer the script implies."""
from __future__ import annotations

import pytest

from playground.agenteval import selectors, services, sources
from playground.agenteval.models import TaskRun, TaskRunItem, TaskSet
from playground.conversations.models import Conversation, Event
from playground.registry.models import PermissionRule
from tests.agenteval.conftest import ISSUE, PLANS, SLACK, TIME, WEATHER

pytestmark = pytest.mark.django_db(transaction=True)

GOLD = {
    "What time is it in Tokyo?": [TIME],
    "Post 'hi' to the #general Slack channel": [SLACK],
    "Open a GitHub issue titled 'Login broken'": [ISSUE],
    "Weather forecast for Paris": [WEATHER],
}


def make_task_set(name="scripted") -> TaskSet:
    task_set = TaskSet.objects.create(name=name, source=TaskSet.Source.UPLOAD)
    for i, (query, gold) in enumerate(GOLD.items()):
        task_set.tasks.create(external_id=f"t{i}", query=query, expected_tools=gold, position=i)
    return task_set


def test_every_measure_matches_the_script(tool_world, claude_profiles, scripted_api, eager_celery, admin_user):
    PermissionRule.objects.create(effect="ask", pattern=ISSUE, note="test: creating issues asks first")
    on, off = claude_profiles
    run = services.start_run(make_task_set(), [on, off], policy="allow", concurrency=2, user=admin_user)
    run.refresh_from_db()

    assert run.status == TaskRun.Status.DONE
    items = list(run.items.all())
    assert len(items) == 8 and all(i.status == TaskRunItem.Status.DONE for i in items)
    assert len({i.conversation_id for i in items}) == 8  # one conversation per task and profile, none twice
    report = selectors.report(run)
    assert report["tasks"] == 4
    rows = {row["profile"]: row for row in report["profiles"]}
    # on: Tokyo ✓ (search, call), Slack ✗ (called before it was loaded), issue ✓ (after the ask, allowed), weather ✓.
    assert {k: rows["on"][k] for k in ("tasks", "completed", "success", "first_call_success", "searches_per_task",
                                       "turns_per_task", "input_tokens_per_task", "output_tokens_per_task")} == {
        "tasks": 4, "completed": 4, "success": 0.75, "first_call_success": 0.75, "searches_per_task": 0.75,
        "turns_per_task": 2.75, "input_tokens_per_task": 2750, "output_tokens_per_task": 138}  # whole tokens, half up
    # off: Tokyo ✓, Slack ✗ (the issue tool), issue ✗ (Slack), weather ✓ after a wrong first call (echo).
    assert {k: rows["off"][k] for k in ("success", "first_call_success", "searches_per_task", "turns_per_task",
                                        "input_tokens_per_task", "output_tokens_per_task")} == {
        "success": 0.5, "first_call_success": 0.25, "searches_per_task": 0.0, "turns_per_task": 2.25,
        "input_tokens_per_task": 2250, "output_tokens_per_task": 113}
    # Sonnet 4.5 at $3 / $15 per million: each reply 1,000 in and 50 out = $0.00375.
    assert rows["on"]["cost_usd_per_task"] == pytest.approx(2.75 * 0.00375)
    assert rows["off"]["cost_usd_per_task"] == pytest.approx(2.25 * 0.00375)
    assert rows["on"]["success_ci"] == pytest.approx([0.3006, 0.9544], abs=1e-4)
    assert rows["off"]["success_ci"] == pytest.approx([0.1500, 0.8500], abs=1e-4)
    assert rows["on"]["errors"] == {"tool_not_loaded": 1} and rows["off"]["errors"] == {}
    assert rows["on"]["provider"] == "anthropic" and not rows["on"]["tokens_estimated"]
    assert 0 <= rows["on"]["task_p50_s"] < 60
    assert report["pairs"] == [{"a": "on", "b": "off", "tasks": 4, "only_a": 1, "only_b": 0, "success_diff": 0.25,
                                "p_value": 1.0}]
    # The ask prompts were answered by the run's policy, so nothing waited on a person.
    answers = Event.objects.filter(type="permission_answer", conversation__task_run_item__run=run)
    assert answers.count() == 2 and {a.payload["choice"] for a in answers} == {"once"}
    assert all(a.payload["note"].startswith(f"answered by task run {run.pk}") for a in answers)
    requests = [r for r in scripted_api.message_requests if r.status == 200]
    assert len(requests) == sum(len(p["on"]) + len(p["off"]) for p in PLANS.values())


def test_the_deny_policy_denies_the_prompt(tool_world, claude_profiles, scripted_api, eager_celery, admin_user):
    PermissionRule.objects.create(effect="ask", pattern=ISSUE)
    on, _ = claude_profiles
    task_set = TaskSet.objects.create(name="one", source=TaskSet.Source.UPLOAD)
    task_set.tasks.create(external_id="issue", query="Open a GitHub issue titled 'Login broken'", expected_tools=[ISSUE])
    run = services.start_run(task_set, [on], policy="deny", user=admin_user)
    item = run.items.get()
    assert item.status == TaskRunItem.Status.DONE
    assert item.measures["success"] is False and item.measures["errors"] == {"permission_denied": 1}
    answer = Event.objects.get(type="permission_answer", conversation=item.conversation)
    assert answer.payload["choice"] == "deny"


def test_a_set_whose_gold_tools_are_missing_refuses_to_run(tool_world, claude_profiles):
    task_set = TaskSet.objects.create(name="elsewhere", source=TaskSet.Source.TOOLSET, catalog="nowhere")
    task_set.tasks.create(external_id="x", query="Do it", expected_tools=["mcp__absent__tool"])
    with pytest.raises(services.TaskRunError, match="lacks 1 gold tool.*mcp__absent__tool.*wrong catalog"):
        services.start_run(task_set, [claude_profiles[0]])
    assert not TaskRun.objects.exists()
    assert sources.missing_tools(task_set) == ["mcp__absent__tool"]


def test_cancel_stops_pending_tasks(tool_world, claude_profiles, scripted_api, admin_user):
    """Without a worker nothing runs: a cancel ends the queued conversations at once and the pending items."""
    on, off = claude_profiles
    run = services.start_run(make_task_set(), [on, off], concurrency=1, user=admin_user)
    services.advance(run.pk)  # started one conversation; its task went to a broker nobody reads
    assert run.items.filter(status=TaskRunItem.Status.RUNNING).count() == 1
    assert services.cancel_run(run)
    services.advance(run.pk)
    run.refresh_from_db()
    assert run.status == TaskRun.Status.CANCELLED
    assert run.items.filter(status=TaskRunItem.Status.CANCELLED).count() == 8
    started = run.items.exclude(conversation=None).get()
    assert started.conversation.status == Conversation.Status.CANCELLED
    assert not services.cancel_run(run)  # already over: nothing to cancel


def test_an_every_mode_run_shows_on_its_page_what_its_json_says_to_the_token(tool_world, eager_celery, admin_user,
                                                                            admin_client, settings):
    """Issue 45's target: a task run over all eight loading modes (the offline demo agent on both
    vendors' wires), its page's columns against its JSON export's, token for token and figure for
    figure. Tokens per task are whole tokens (a mean of 146.5 read 147 on the page, 146 in the CLI)."""
    import json
    from decimal import ROUND_HALF_UP, Decimal

    from django.urls import reverse

    from playground.agenteval.cli import fixed, format_table
    from tests.conversations.conftest import make_profile

    settings.ANTHROPIC_API_KEY = settings.OPENAI_API_KEY = ""  # the demo agent answers on each wire
    modes = [make_profile("off", tool_search_mode="false"), make_profile("native"),
             make_profile("client", wire_style="client"),
             make_profile("changes", wire_style="tool-changes", tool_changes_search=False),
             make_profile("changes+search", wire_style="tool-changes", tool_changes_search=True),
             make_profile("openai hosted", wire_style="server", provider="openai"),
             make_profile("openai client", provider="openai"),
             make_profile("openai functions", wire_style="client", provider="openai")]
    assert [selectors.loading_mode_of(p) for p in modes] == list(selectors.loading_modes())
    task_set = TaskSet.objects.create(name="two", source=TaskSet.Source.UPLOAD)
    task_set.tasks.create(external_id="tokyo", query="What time is it in Tokyo?", expected_tools=[TIME], position=0)
    task_set.tasks.create(external_id="paris", query="Weather forecast for Paris", expected_tools=[WEATHER], position=1)
    run = services.start_run(task_set, modes, user=admin_user)
    run.refresh_from_db()
    assert run.status == TaskRun.Status.DONE

    data = json.loads(admin_client.get(reverse("agenteval:run_export", args=[run.pk]) + "?format=json").content)
    page = admin_client.get(reverse("agenteval:run_detail", args=[run.pk])).content.decode()
    table = format_table(selectors.report(run))
    assert [row["profile"] for row in data["profiles"]] == [p.name for p in modes]
    for row in data["profiles"]:
        assert row["completed"] == 2 and row["input_tokens_per_task"] > 0, row
        for key in ("input_tokens_per_task", "output_tokens_per_task", "cache_read_tokens_per_task",
                    "cache_write_tokens_per_task"):
            assert isinstance(row[key], int), (key, row[key])  # whole tokens: nothing left to round
        shown = page.split(f'<tr data-profile="{row["profile"]}">')[1].split("</tr>")[0]
        assert f'data-testid="model-calls">{fixed(row["model_calls_per_task"], 2)}<' in shown
        assert f'data-testid="input-tokens">{row["input_tokens_per_task"]}' in shown
        assert f'data-testid="cache-reads">{row["cache_read_tokens_per_task"]}<' in shown
        assert f'data-testid="cache-writes">{row["cache_write_tokens_per_task"]}<' in shown
        assert f'<td>{row["output_tokens_per_task"]}</td>' in shown
        cost = Decimal(repr(row["cost_usd_per_task"])).quantize(Decimal("0.00001"), ROUND_HALF_UP)
        assert f'data-testid="cost-cache-priced">${cost}<' in shown
        line = next(line for line in table.splitlines() if line.startswith(row["profile"]))
        for figure in (row["input_tokens_per_task"], row["output_tokens_per_task"], fixed(row["model_calls_per_task"], 2)):
            assert f" {figure} " in line, (figure, line)
