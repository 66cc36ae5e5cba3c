"""The overview page: tokens, dollars, latency percentiles and errors per profile and bucket, from known events."""
from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from playground.conversations import events as ev
from playground.conversations.events import record_event
from playground.conversations.models import Conversation, Event
from playground.conversations.overview import UsageFilters, overview, percentile
from playground.registry.models import AgentProfile

SONNET = "claude-sonnet-4-5"  # $3 in, $15 out, $0.30 cache read per million (the dated defaults)
HAIKU = "claude-haiku-4-5"  # $1 in, $5 out


def call(conversation, *, at, usage, duration, model=SONNET, turn_model=None):
    """A turn and its model response, saved `at` (a turn_model other than the response's: an older event)."""
    turn = record_event(conversation, ev.TurnStarted(turn=1, provider="anthropic", model=turn_model or model, wire="native"))
    response = record_event(conversation, ev.ModelResponse(stop_reason="end_turn", usage=usage, duration_ms=duration,
                                                           model=model if turn_model is None else ""),
                            turn_sequence=turn.sequence)
    Event.objects.filter(pk__in=[turn.pk, response.pk]).update(created_at=at)
    return response


def at(moment, *events):
    Event.objects.filter(pk__in=[e.pk for e in events]).update(created_at=moment)


@pytest.fixture
def world(db, admin_user):
    now = timezone.now()
    alpha = AgentProfile.objects.create(name="Alpha", tool_search_mode="true")
    beta = AgentProfile.objects.create(name="Beta", tool_search_mode="false")
    a = Conversation.objects.create(owner=admin_user, profile=alpha)
    b = Conversation.objects.create(owner=admin_user, profile=beta)
    recent, yesterday = now - timedelta(minutes=30), now - timedelta(days=1, minutes=30)
    call(a, at=recent, usage={"input": 1000, "output": 100}, duration=100)
    call(a, at=recent, usage={"input": 2000, "output": 200, "cache_read": 500}, duration=300)
    call(a, at=yesterday, usage={"input": 1000, "output": 1000}, duration=50, turn_model=HAIKU)  # names no model: its turn's
    at(recent, record_event(a, ev.TurnFinished(turn=1, stop_reason="end_turn", status="idle", final=True, reason="end_turn")))
    call(a, at=now - timedelta(days=8), usage={"input": 10**6, "output": 10**6}, duration=9999)  # before the period
    call(b, at=recent, usage={"input": 500, "output": 50}, duration=700, model="mystery-model")
    at(recent, record_event(b, ev.ErrorEvent(message="overloaded", kind="overloaded")),
       record_event(b, ev.ToolCall(tool_use_id="t1", name="mcp__x__y", arguments={"token": "s3cret-argument"})),
       record_event(b, ev.ToolResult(tool_use_id="t1", name="mcp__x__y", is_error=True, error="boom")),
       record_event(b, ev.ToolResult(tool_use_id="t2", name="mcp__x__y")))
    return {"now": now, "alpha": alpha, "beta": beta}


def test_the_figures_per_profile_and_bucket(world):
    figures = overview("7d", now=world["now"])
    assert [label for _, label in figures.groups] == ["Alpha", "Beta"]
    alpha, beta = figures.totals[world["alpha"].pk], figures.totals[world["beta"].pk]
    assert (alpha.calls, alpha.runs, alpha.input_tokens, alpha.output_tokens) == (3, 1, 1000 + 2500 + 1000, 100 + 200 + 1000)
    # 1000·3 + 100·15, 2000·3 + 200·15 + 500·0.3, and haiku's 1000·1 + 1000·5 (the turn's model), per million
    assert alpha.cost == pytest.approx((4500 + 9150 + 6000) / 1e6)
    assert alpha.p50_ms == pytest.approx(100) and alpha.p95_ms == pytest.approx(100 + 0.9 * 200)  # of 50, 100, 300
    assert (beta.calls, beta.cost, beta.unpriced, beta.run_errors, beta.tool_errors) == (1, 0.0, {"mystery-model"}, 1, 1)

    today = [cell for (bucket, profile), cell in figures.cells.items() if profile == world["alpha"].pk and cell.calls == 2]
    assert len(today) == 1 and today[0].cost == pytest.approx(0.01365) and today[0].p50_ms == pytest.approx(200)
    assert today[0].p95_ms == pytest.approx(290)
    assert len(figures.buckets) in (7, 8) and sum(1 for r in figures.rows() if r["group"] == "Alpha") == 2


def test_a_profile_filter_and_a_short_period(world):
    only_beta = overview("7d", world["beta"].pk, now=world["now"])
    assert [label for _, label in only_beta.groups] == ["Beta"]
    day = overview("24h", now=world["now"])
    assert day.totals[world["alpha"].pk].calls == 2 and day.bucket == "hour" and len(day.buckets) in (24, 25)


def test_the_page_shows_the_numbers_to_a_viewer_and_nothing_said(world, client, django_user_model):
    from django.contrib.auth.models import Group

    viewer = django_user_model.objects.create_user("watcher", password="pw")
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    body = client.get(reverse("conversations:overview")).content.decode()
    assert 'data-group="Alpha" data-cost-usd="0.01965000" data-calls="3"' in body
    assert 'data-input="4500" data-output="1300"' in body
    assert "+ unpriced" in body and "mystery-model" in body
    assert "s3cret-argument" not in body and "overloaded" not in body
    assert 'data-testid="chart-line" data-group="Alpha"' in body
    assert reverse("conversations:overview") in client.get(reverse("conversations:list")).content.decode()  # linked from the nav


def test_bad_filters_fall_back_instead_of_failing(world, admin_client):
    response = admin_client.get(reverse("conversations:overview"), {"period": "1y", "profile": "nope", "metric": "x"})
    assert response.status_code == 200 and 'data-group="Alpha"' in response.content.decode()


def test_the_query_count_does_not_grow_with_the_events(world, admin_client):
    url = reverse("conversations:overview")
    with CaptureQueriesContext(connection) as before:
        admin_client.get(url)
    conversation = Conversation.objects.filter(profile=world["alpha"]).first()
    for _ in range(20):
        call(conversation, at=world["now"] - timedelta(hours=2), usage={"input": 1, "output": 1}, duration=1)
    with CaptureQueriesContext(connection) as after:
        admin_client.get(url)
    assert len(after.captured_queries) == len(before.captured_queries)


def test_percentile_interpolates_as_percentile_cont():
    assert percentile([], 0.5) is None
    assert percentile([50, 100, 300], 0.5) == 100 and percentile([100, 300], 0.95) == pytest.approx(290)


def test_split_by_model_provider_user_and_kind(world, admin_user, django_user_model):
    now = world["now"]
    other = django_user_model.objects.create_user("mallory", password="pw")
    task = Conversation.objects.create(owner=other, profile=world["beta"], kind=Conversation.Kind.TASK_RUN)
    call(task, at=now - timedelta(minutes=5), usage={"input": 100, "output": 10}, duration=10, model=HAIKU)

    by_model = overview("7d", split="model", now=now)
    # The older call that names no model is counted under its turn's model, like its price.
    assert {label: by_model.totals[key].calls for key, label in by_model.groups} == {
        SONNET: 2, HAIKU: 2, "mystery-model": 1, "(unknown)": 0}
    # Events outside any turn (this fixture's run end and run error) have no model to be counted under.
    assert (by_model.totals[""].runs, by_model.totals[""].run_errors, by_model.totals[""].tool_errors) == (1, 1, 1)
    assert by_model.totals[HAIKU].cost == pytest.approx((1000 * 1 + 1000 * 5 + 100 * 1 + 10 * 5) / 1e6)

    by_kind = overview("7d", split="kind", now=now)
    assert {label: by_kind.totals[key].calls for key, label in by_kind.groups} == {"Interactive": 4, "Task run": 1}
    assert by_kind.totals["interactive"].run_errors == 1 and by_kind.totals["interactive"].runs == 1

    by_user = overview("7d", split="user", now=now)
    assert {label: by_user.totals[key].calls for key, label in by_user.groups} == {admin_user.username: 4, "mallory": 1}

    by_provider = overview("7d", split="provider", now=now)
    assert [key for key, _ in by_provider.groups] == ["anthropic", ""] and by_provider.totals["anthropic"].calls == 5
    assert dict(by_provider.groups)["anthropic"] == "Claude (Anthropic API)" and by_provider.totals[""].calls == 0


def test_filters_restrict_every_figure(world, admin_user, django_user_model):
    now = world["now"]
    other = django_user_model.objects.create_user("mallory", password="pw")
    task = Conversation.objects.create(owner=other, profile=world["alpha"], kind=Conversation.Kind.TASK_RUN)
    call(task, at=now - timedelta(minutes=5), usage={"input": 100, "output": 10}, duration=10)

    only_tasks = overview("7d", filters=UsageFilters(kind="task_run"), now=now)
    assert [label for _, label in only_tasks.groups] == ["Alpha"] and only_tasks.totals[world["alpha"].pk].calls == 1
    only_admin = overview("7d", filters=UsageFilters(user_id=admin_user.pk), now=now)
    assert only_admin.totals[world["alpha"].pk].calls == 3
    only_haiku = overview("7d", filters=UsageFilters(model=HAIKU), now=now)
    assert only_haiku.totals[world["alpha"].pk].calls == 1 and world["beta"].pk not in only_haiku.totals
    assert overview("7d", filters=UsageFilters(provider="openai"), now=now).groups == []


def test_only_an_admin_splits_or_filters_by_user(world, admin_client, django_user_model):
    from django.contrib.auth.models import Group
    from django.test import Client

    viewer = django_user_model.objects.create_user("watcher", password="pw")
    viewer.groups.add(Group.objects.get(name="viewer"))
    viewer_client = Client()
    viewer_client.force_login(viewer)
    body = viewer_client.get(reverse("conversations:overview"), {"split": "user"}).content.decode()
    assert 'name="user"' not in body and 'value="user"' not in body
    assert 'data-group="Alpha"' in body  # an unknown split for this role falls back to per profile
    admin_body = admin_client.get(reverse("conversations:overview"), {"split": "user"}).content.decode()
    assert 'name="user"' in admin_body and "<th>User</th>" in admin_body


def test_the_csv_holds_the_rows_with_the_page_filters(world, admin_client):
    response = admin_client.get(reverse("conversations:overview_csv"), {"split": "model", "period": "7d"})
    assert response.status_code == 200 and response["Content-Type"] == "text/csv; charset=utf-8"
    assert 'filename="usage-7d-per-model.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    figures = overview("7d", split="model")
    assert len(rows) == len(figures.rows()) == 4  # sonnet, haiku, mystery-model, and the run-level events' "(unknown)"
    by_group = {}
    for row in rows:
        by_group.setdefault(row["group"], []).append(row)
    assert sum(int(r["model_calls"]) for r in by_group[SONNET]) == 2
    assert sum(float(r["dollars"]) for r in by_group[SONNET]) == pytest.approx(0.01365)
    assert by_group["mystery-model"][0]["unpriced_models"] == "mystery-model" and by_group["(unknown)"][0]["run_errors"] == "1"
    assert "s3cret-argument" not in response.content.decode()


def test_a_query_that_names_only_the_metric_shows_the_default_period_selected(world, admin_client):
    body = admin_client.get(reverse("conversations:overview"), {"metric": "tokens"}).content.decode()
    assert '<option value="7d" selected>' in body and "Per profile, last 7 days (daily)" in body
