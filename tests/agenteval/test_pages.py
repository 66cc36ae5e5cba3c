"""The task run pages: task sets from a toolset, an upload and a conversation; the wrong-catalog refusal
and its import offer; a run's table, chart, grid, filters and exports; the conversations list by run."""
from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from playground.agenteval import services
from playground.agenteval.models import TaskRun, TaskRunItem, TaskSet
from playground.agenteval.sources import importable_catalog
from playground.conversations import runs as conversation_runs
from playground.conversations import services as conversation_services
from playground.conversations.events import ChatMessage, ModelResponse, ToolCall, ToolResult, TurnFinished, record_event
from playground.conversations.models import Conversation
from playground.registry.models import Tool
from tests.agenteval.conftest import TIME, WEATHER
from tests.toolset_fixtures import write_toy_toolsets

pytestmark = pytest.mark.django_db


@pytest.fixture
def toy_toolsets(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLSETS_DIR", str(write_toy_toolsets(tmp_path)))


@pytest.fixture
def no_queue(monkeypatch):
    """Nothing leaves the process: the run's task and conversations' runs are not sent."""
    monkeypatch.setattr(services, "queue_advance", lambda run_id: None)
    monkeypatch.setattr(conversation_runs, "queue_run", lambda *args, **kwargs: None)


def finished_run(admin_user, claude_profiles) -> TaskRun:
    """A run of two tasks × two profiles whose conversations ended with known events."""
    on, off = claude_profiles
    task_set = TaskSet.objects.create(name="known", source=TaskSet.Source.UPLOAD)
    tokyo = task_set.tasks.create(external_id="tokyo", query="What time is it in Tokyo?", expected_tools=[TIME], position=1)
    paris = task_set.tasks.create(external_id="paris", query="Weather in Paris", expected_tools=[WEATHER], position=2)
    run = TaskRun.objects.create(task_set=task_set, status="done", created_by=admin_user,
                                 profiles=[{"id": on.pk, "name": "on", "provider": "anthropic"},
                                           {"id": off.pk, "name": "off", "provider": "anthropic"}])
    outcomes = {("tokyo", "on"): True, ("tokyo", "off"): True, ("paris", "on"): True, ("paris", "off"): False}
    for position, ((task_key, profile_name), success) in enumerate(outcomes.items()):
        task = tokyo if task_key == "tokyo" else paris
        conversation = conversation_services.start_conversation(admin_user, profile=on if profile_name == "on" else off)
        called = task.expected_tools[0] if success else "echo"
        record_event(conversation, ChatMessage(role="user", text=task.query))
        # Usage that differs per conversation, so the page's and the JSON's figures are not all zero.
        record_event(conversation, ModelResponse(stop_reason="tool_use", model="claude-sonnet-4-5", usage={
            "input": 1000 + 111 * position, "output": 40, "cache_read": 500 * position, "cache_write": 300 + position}))
        record_event(conversation, ToolCall(tool_use_id="t1", name=called))
        record_event(conversation, ToolResult(tool_use_id="t1", name=called))
        record_event(conversation, TurnFinished(turn=1, stop_reason="end_turn", status="idle", final=True, reason="end_turn"),
                     status=Conversation.Status.IDLE)
        item = TaskRunItem.objects.create(run=run, task=task, profile_name=profile_name, position=position,
                                          conversation=conversation, status="running")
        item.measures = services.measure_item(item)
        item.status = "done"
        item.save()
    return run


def test_index_lists_and_a_toolset_becomes_a_task_set(admin_client, toy_toolsets):
    assert admin_client.get(reverse("agenteval:index")).status_code == 200
    response = admin_client.post(reverse("agenteval:taskset_add"), {"source": "toolset", "toolset": "toy"})
    task_set = TaskSet.objects.get(name="toy")
    assert response.status_code == 302 and task_set.catalog == "toy" and task_set.tasks.count() == 12
    assert {t.split for t in task_set.tasks.all()} <= {"dev", "test"}
    page = admin_client.get(reverse("agenteval:taskset_detail", args=[task_set.pk])).content.decode()
    assert 'data-testid="missing-tools"' in page and 'data-testid="import-catalog"' in page  # the registry is empty
    export = admin_client.get(reverse("agenteval:taskset_detail", args=[task_set.pk]) + "?format=jsonl").content.decode()
    assert len(export.splitlines()) == 12 and json.loads(export.splitlines()[0])["expected_tool_names"]


def test_the_demo_set_that_ships_with_the_project_becomes_a_task_set_whatever_toolsets_dir_holds(admin_client, toy_toolsets):
    # TOOLSETS_DIR holds only "toy": the shipped "demo" set is found in the project, as the evaluation page finds it.
    response = admin_client.post(reverse("agenteval:taskset_add"), {"source": "toolset", "toolset": "demo"})
    task_set = TaskSet.objects.get(name="demo")
    assert response.status_code == 302 and task_set.tasks.count() > 50
    assert importable_catalog(task_set) is not None and importable_catalog(task_set).parent.name == "demo_data"


def test_a_run_on_the_wrong_catalog_is_refused_then_the_catalog_is_imported(admin_client, toy_toolsets, claude_profiles, no_queue):
    admin_client.post(reverse("agenteval:taskset_add"), {"source": "toolset", "toolset": "toy"})
    task_set = TaskSet.objects.get(name="toy")
    form = {"task_set": task_set.pk, "profiles": [claude_profiles[0].pk], "split": "all", "limit": 3,
            "permission_policy": "allow", "concurrency": 1}
    response = admin_client.post(reverse("agenteval:index"), form)
    body = response.content.decode()
    assert response.status_code == 400 and "wrong catalog" in body and 'data-testid="catalog-offer"' in body
    assert not TaskRun.objects.exists()

    admin_client.post(reverse("agenteval:taskset_import_catalog", args=[task_set.pk]))
    assert Tool.objects.filter(name="mcp__mail__send_email", server=None).exists()  # catalog-only: calls simulated
    response = admin_client.post(reverse("agenteval:index"), form)
    run = TaskRun.objects.get()
    assert response.status_code == 302 and run.items.count() == 3 and run.permission_policy == "allow"


def test_an_uploaded_jsonl_and_bad_uploads(admin_client):
    good = b'{"id": "a", "query": "Weather in Rome", "expected_tool_names": ["mcp__weather__get_forecast"]}\n'
    admin_client.post(reverse("agenteval:taskset_add"),
                      {"source": "upload", "name": "mine", "file": SimpleUploadedFile("q.jsonl", good)})
    assert TaskSet.objects.get(name="mine").tasks.get().query == "Weather in Rome"
    for payload in (b"not json\n", b"\xff\xfe", b'{"id": "a", "query": "x"}\n'):
        response = admin_client.post(reverse("agenteval:taskset_add"), {"source": "upload", "name": f"bad{len(payload)}",
                                                                        "file": SimpleUploadedFile("q.jsonl", payload)}, follow=True)
        assert response.status_code == 200 and "Not a labelled query file" in response.content.decode()
    assert TaskSet.objects.count() == 1


def test_a_finished_conversation_saved_as_a_task(admin_client, admin_user, tool_world):
    conversation = conversation_services.start_conversation(admin_user)
    record_event(conversation, ChatMessage(role="user", text="What time is it in Tokyo?"))
    record_event(conversation, ToolCall(tool_use_id="a", name="echo"))
    record_event(conversation, ToolResult(tool_use_id="a", name="echo", is_error=True, error="boom"))
    record_event(conversation, ToolCall(tool_use_id="b", name=TIME))
    record_event(conversation, ToolResult(tool_use_id="b", name=TIME), status=Conversation.Status.IDLE)
    assert 'data-testid="save-as-task"' in admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    admin_client.post(reverse("agenteval:save_conversation", args=[conversation.pk]))
    task = TaskSet.objects.get(name="Saved conversations").tasks.get()
    assert (task.query, task.expected_tools, task.source_conversation_id) == ("What time is it in Tokyo?", [TIME], conversation.pk)


def test_a_conversation_with_a_follow_up_saves_only_the_first_messages_tools_as_gold(admin_client, admin_user, tool_world):
    """A Paris-weather request followed by a Tokyo-time one: the task is the weather request, and its
    gold the weather tool only (the follow-up's tool answered another request)."""
    conversation = conversation_services.start_conversation(admin_user)
    record_event(conversation, ChatMessage(role="user", text="What is the weather forecast for Paris?"))
    record_event(conversation, ToolCall(tool_use_id="w", name=WEATHER))
    record_event(conversation, ToolResult(tool_use_id="w", name=WEATHER))
    record_event(conversation, ChatMessage(role="user", text="And what time is it in Tokyo?"))
    record_event(conversation, ToolCall(tool_use_id="t", name=TIME))
    record_event(conversation, ToolResult(tool_use_id="t", name=TIME), status=Conversation.Status.IDLE)
    admin_client.post(reverse("agenteval:save_conversation", args=[conversation.pk]))
    task = TaskSet.objects.get(name="Saved conversations").tasks.get()
    assert (task.query, task.expected_tools) == ("What is the weather forecast for Paris?", [WEATHER])


def test_a_first_message_no_tool_answered_is_not_saved_with_a_follow_ups_tools(admin_client, admin_user, tool_world):
    conversation = conversation_services.start_conversation(admin_user)
    record_event(conversation, ChatMessage(role="user", text="Hello"))
    record_event(conversation, ChatMessage(role="user", text="What time is it in Tokyo?"))
    record_event(conversation, ToolCall(tool_use_id="t", name=TIME))
    record_event(conversation, ToolResult(tool_use_id="t", name=TIME), status=Conversation.Status.IDLE)
    response = admin_client.post(reverse("agenteval:save_conversation", args=[conversation.pk]), follow=True)
    assert "No tool answered the first message" in response.content.decode()
    assert not TaskSet.objects.filter(name="Saved conversations", tasks__isnull=False).exists()


def test_the_run_page_table_chart_grid_filters_and_exports(admin_client, admin_user, claude_profiles):
    run = finished_run(admin_user, claude_profiles)
    page = admin_client.get(reverse("agenteval:run_detail", args=[run.pk])).content.decode()
    assert 'data-testid="profile-table"' in page and page.count('data-testid="chart-point"') == 4  # 2 profiles × 2 charts
    assert f'ws-connect="/ws/agenteval/runs/{run.pk}/"' in page
    assert page.count('data-outcome="success"') == 3 and page.count('data-outcome="failure"') == 1
    assert "demo-note" not in page  # Claude ran these: no heuristic-agent label
    failed = admin_client.get(reverse("agenteval:run_detail", args=[run.pk]) + "?only=failed").content.decode()
    assert 'data-task="paris"' in failed and 'data-task="tokyo"' not in failed
    disagree = admin_client.get(reverse("agenteval:run_detail", args=[run.pk]) + "?only=disagree").content.decode()
    assert 'data-task="paris"' in disagree and 'data-task="tokyo"' not in disagree

    rows = list(csv.DictReader(io.StringIO(admin_client.get(reverse("agenteval:run_export", args=[run.pk]) + "?format=csv").content.decode())))
    assert len(rows) == 4 and {(r["task_id"], r["profile"], r["success"]) for r in rows} >= {("paris", "off", "False")}
    data = json.loads(admin_client.get(reverse("agenteval:run_export", args=[run.pk]) + "?format=json").content)
    rows_by = {p["profile"]: p for p in data["profiles"]}
    assert rows_by["on"]["success"] == 1.0 and rows_by["off"]["success"] == 0.5 and len(data["items"]) == 4
    for key in ("model_calls_per_task", "cache_read_tokens_per_task", "cache_write_tokens_per_task", "first_call_success"):
        assert key in rows_by["on"], key
    # The page's table shows what the JSON says, column by column.
    for row in data["profiles"]:
        shown = page.split(f'<tr data-profile="{row["profile"]}">')[1].split("</tr>")[0]
        assert row["model_calls_per_task"] == 1.0 and row["input_tokens_per_task"] > 0 and row["cache_read_tokens_per_task"] > 0
        assert f'data-testid="model-calls">{row["model_calls_per_task"]:.2f}<' in shown
        assert f'data-testid="input-tokens">{row["input_tokens_per_task"]:.0f}<' in shown
        assert f'data-testid="cache-reads">{row["cache_read_tokens_per_task"]:.0f}<' in shown
        assert f'data-testid="cache-writes">{row["cache_write_tokens_per_task"]:.0f}<' in shown
    assert data["pairs"][0]["only_a"] == 1 and data["pairs"][0]["p_value"] == 1.0

    conversation_services.start_conversation(admin_user, title="not in the run")
    assert "not in the run" in admin_client.get(reverse("conversations:list")).content.decode()
    listed = admin_client.get(reverse("conversations:list") + f"?task_run={run.pk}").content.decode()
    assert f"/conversations/{run.items.first().conversation_id}/" in listed and "not in the run" not in listed


@pytest.mark.parametrize("provider", ["demo", "demo-openai"])  # demo-openai: the page asked for "demo" only
def test_the_demo_agent_is_labelled_for_what_it_measures(admin_client, admin_user, claude_profiles, provider):
    run = finished_run(admin_user, claude_profiles)
    for item in run.items.all():
        item.measures = {**item.measures, "provider": provider, "tokens_estimated": True}
        item.save()
    page = admin_client.get(reverse("agenteval:run_detail", args=[run.pk])).content.decode()
    assert 'data-testid="demo-note"' in page and "heuristic" in page and "est.</abbr>" in page
    assert "not a model" in page


def test_cancel_needs_an_active_run(admin_client, admin_user, claude_profiles):
    run = finished_run(admin_user, claude_profiles)
    response = admin_client.post(reverse("agenteval:run_cancel", args=[run.pk]), follow=True)
    assert "already ended" in response.content.decode()


def test_every_loading_mode_is_one_tick_one_profile_per_mode(admin_client, toy_toolsets, no_queue):
    from django.core.management import call_command

    from playground.agenteval.selectors import loading_mode_of, loading_mode_profiles

    call_command("load_demo_data", skip_servers=True)
    modes = [loading_mode_of(p) for p in loading_mode_profiles()]
    assert modes == ["off", "native", "client", "tool-changes", "tool-changes+search", "openai-hosted", "openai-client",
                     "openai-functions"]  # the wire registry's order
    assert [p.name for p in loading_mode_profiles()][:2] == ["Tool search off", "Tool search on (native)"]  # the plain ones
    admin_client.post(reverse("agenteval:taskset_add"), {"source": "toolset", "toolset": "demo"})
    task_set = TaskSet.objects.get(name="demo")  # the shipped set, whose tools the demo data loads
    response = admin_client.post(reverse("agenteval:index"), {"task_set": task_set.pk, "split": "all", "limit": 2,
                                                              "permission_policy": "allow", "concurrency": 2, "every_mode": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    run = TaskRun.objects.get()
    assert [p["name"] for p in run.profiles] == [p.name for p in loading_mode_profiles()]
    assert run.items.count() == 2 * 8
    nothing = admin_client.post(reverse("agenteval:index"), {"task_set": task_set.pk, "split": "all", "limit": 2,
                                                             "permission_policy": "allow", "concurrency": 2})
    assert nothing.status_code == 400 and "every loading mode" in nothing.content.decode()


def test_a_run_is_cancelled_by_the_editor_who_started_it_or_an_admin(client, admin_user, claude_profiles, django_user_model):
    from django.contrib.auth.models import Group

    editors = [django_user_model.objects.create_user(username=name, password="x") for name in ("ed-starter", "ed-other")]
    for editor in editors:
        editor.groups.add(Group.objects.get(name="editor"))
    run = finished_run(admin_user, claude_profiles)
    TaskRun.objects.filter(pk=run.pk).update(created_by=editors[0], status=TaskRun.Status.RUNNING)
    client.force_login(editors[1])
    assert 'data-testid="cancel-run"' not in client.get(reverse("agenteval:run_detail", args=[run.pk])).content.decode()
    assert client.post(reverse("agenteval:run_cancel", args=[run.pk])).status_code == 404
    assert TaskRun.objects.get(pk=run.pk).status == TaskRun.Status.RUNNING
    for who in (editors[0], admin_user):
        client.force_login(who)
        assert 'data-testid="cancel-run"' in client.get(reverse("agenteval:run_detail", args=[run.pk])).content.decode()
    assert client.post(reverse("agenteval:run_cancel", args=[run.pk])).status_code == 302
    assert TaskRun.objects.get(pk=run.pk).status == TaskRun.Status.CANCELLING


def test_progress_alone_reads_the_items_statuses_in_one_query(admin_user, claude_profiles, django_assert_num_queries):
    """What the command polls twice a second: the same counts the page shows, from one light query."""
    from playground.agenteval import selectors

    run = finished_run(admin_user, claude_profiles)
    TaskRunItem.objects.filter(pk=run.items.order_by("position").first().pk).update(status="running")
    shown = selectors.progress(run, selectors.items_of(run))
    with django_assert_num_queries(1) as captured:
        polled = selectors.progress(run)
    sql = captured.captured_queries[0]["sql"]
    assert "JOIN" not in sql and "measures" not in sql, sql  # not every item's measures, task and conversation
    assert polled == shown and (polled["done"], polled["running"], polled["finished"], polled["percent"]) == (3, 1, 3, 75)


def test_the_charts_labels_cover_no_other_label_nor_point():
    """Eight modes at the same success, seven within a few per cent of the tokens (an every-mode run of
    the demo agent): their labels were drawn on top of each other. Each label now has a box of its
    own, inside the chart, joined to its point by a leader line when it had to move."""
    from playground.agenteval.selectors import LABEL_CHAR_PX, LABEL_LINE_PX, success_chart

    names = ["Tool search off", "Tool search on (native)", "Client-side (gateway)", "Tool changes (predicted)",
             "Tool changes + search", "OpenAI hosted tool_search", "OpenAI client tool_search", "OpenAI functions"]
    tokens = [342671, 31913, 32528, 4398, 20148, 18858, 32165, 32909]
    rows = [{"profile": n, "completed": 4, "input_tokens_per_task": t, "success": 0.25, "success_ci": [0.05, 0.7]}
            for n, t in zip(names, tokens)]
    chart = success_chart(rows)
    labels = [(p.label_x, p.label_y - LABEL_LINE_PX + 3, p.label_x + len(p.label) * LABEL_CHAR_PX, p.label_y + 3)
              for p in chart.points]
    dots = [(p.x - 6, p.y - 6, p.x + 6, p.y + 6) for p in chart.points]

    def overlap(a, b):
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]

    assert not [(i, j) for i in range(8) for j in range(i + 1, 8) if overlap(labels[i], labels[j])]
    assert not [(i, j) for i in range(8) for j in range(8) if overlap(labels[i], dots[j])]
    assert all(0 <= x0 and x1 <= chart.width and 0 <= y0 and y1 <= chart.height for x0, y0, x1, y1 in labels)
    assert sum(p.leader for p in chart.points) >= 5  # the clustered ones moved, each with its leader line
