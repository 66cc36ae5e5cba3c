"""Search index builds whose task the broker lost: sent again by the worker's watch, then failed
(playground/lost_tasks.py); a failed build is queued again by the next catalog change or search."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from playground import lost_tasks
from playground.registry import indexing, tasks
from playground.registry.models import SearchIndexBuild
from tests.lost_task_fakes import GRACE, capture_sent, fake_broker, queue_settings  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def one_attempt(queue_settings, settings):  # noqa: F811 - the shared fixture, then one attempt
    settings.AGENT_QUEUE_ATTEMPTS = 1


@pytest.fixture
def sent(monkeypatch):
    return capture_sent(monkeypatch, tasks.build_search_index_task)


@pytest.fixture
def broker(monkeypatch):
    return fake_broker(monkeypatch, "registry.build_search_index")


def queued_build(version: str, *, age: float, **fields) -> SearchIndexBuild:
    row = SearchIndexBuild.objects.create(version=version, model_id="m", **fields)
    SearchIndexBuild.objects.filter(pk=row.pk).update(updated_at=timezone.now() - timedelta(seconds=age))
    return row


def two_rounds() -> dict[str, int]:
    _, missing = lost_tasks.lost_round({}, [indexing.LOST_BUILDS])
    outcome, _ = lost_tasks.lost_round(missing, [indexing.LOST_BUILDS])
    return outcome


def test_a_build_the_broker_lost_is_sent_again_then_failed_with_a_reason(sent, broker, django_capture_on_commit_callbacks):
    row = queued_build("3:x|m", age=GRACE + 5)
    with django_capture_on_commit_callbacks(execute=True):
        assert two_rounds() == {"requeued": 1, "failed": 0}
    row.refresh_from_db()
    assert sent == ["3:x|m"] and row.status == "queued" and row.queue_attempts == 1
    assert timezone.now() - row.updated_at < timedelta(seconds=5)

    SearchIndexBuild.objects.filter(pk=row.pk).update(updated_at=timezone.now() - timedelta(seconds=GRACE + 5))
    assert two_rounds() == {"requeued": 0, "failed": 1} and len(sent) == 1
    row.refresh_from_db()
    assert row.status == "failed" and "the message broker lost its task" in row.error and "sent again 1 time(s)" in row.error


def test_a_build_held_young_or_running_is_left_alone(sent, broker):
    queued_build("1:a|m", age=GRACE + 60)
    broker.append("1:a|m")
    queued_build("1:b|m", age=GRACE - 5)
    queued_build("1:c|m", age=GRACE + 60, status="running")
    assert two_rounds() == {"requeued": 0, "failed": 0} and sent == []
