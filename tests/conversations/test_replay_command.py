"""`manage.py replay_conversation`: start a replay with another profile / backend / wire, wait for the
workers with a deadline, print the side-by-side figures (`--json` too); bad input is a CommandError."""
from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from playground.conversations.models import Conversation
from playground.engine.pricing import Usage
from tests.conversations.conftest import converse, events_of, work

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_keys(settings):
    settings.ANTHROPIC_API_KEY = settings.OPENAI_API_KEY = ""


@pytest.fixture
def origin(admin_user, tool_world, native_profile):
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=native_profile)
    assert outcome.reason == "end_turn"
    return conversation


def run(*args) -> str:
    out = io.StringIO()
    call_command("replay_conversation", *[str(a) for a in args], stdout=out)
    return out.getvalue()


def test_replay_then_print_the_figures_as_json(origin, off_profile):
    started = run(origin.pk, "--profile", off_profile.name, "--backend", "bm25", "--wait", "0.2")
    replay = Conversation.objects.get(replay_of=origin)
    assert f"replay #{replay.pk} of #{origin.pk} started" in started
    assert "no worker has taken it: is a Celery worker running (make run)?" in started  # no worker in this test
    assert replay.profile_snapshot["name"] == "off" and replay.profile_snapshot["search_backend"] == "bm25"

    work(replay.pk)  # what a worker does
    document = json.loads(run("--figures", replay.pk, "--json"))
    assert document["origin"] == origin.pk and document["replay"] == replay.pk and document["progress"]["done"]
    for conversation, side in ((origin, "origin"), (replay, "replay")):
        total = Usage()
        for response in events_of(conversation, "model_response"):
            total += Usage.of(response.payload["usage"])
        assert document["totals"][side]["input"] == total.uncached and document["totals"][side]["output"] == total.output
        assert sum(row[side]["output"] for row in document["rows"] if row[side]) == total.output
    assert document["totals"]["difference"]["input"] == document["totals"]["replay"]["input"] - document["totals"]["origin"]["input"]
    assert set(document["cost_split"]) == {"difference", "tokens", "price", "caching"}

    table = run("--figures", replay.pk)
    assert "tool tok" in table and f"{document['totals']['replay']['input']:>8,}" in table.splitlines()[-2]


@pytest.mark.parametrize("args, message", [
    (["--profile", "no such profile"], "no profile 'no such profile'"),
    (["--through", "5"], "Turn 5 is out of range."),
    (["--backend", "nope"], "nope is not a search backend."),
    (["--user", "nobody"], "no user 'nobody'"),
])
def test_bad_input_is_a_clear_error(origin, args, message):
    with pytest.raises(CommandError, match=message):
        run(origin.pk, *args, "--wait", "0")
    assert not Conversation.objects.filter(replay_of=origin).exists()


def test_a_running_origin_a_viewer_and_an_unknown_conversation_are_refused(origin, django_user_model):
    with pytest.raises(CommandError, match="no conversation 999999"):
        run(999999)
    viewer = django_user_model.objects.create_user("vera")
    viewer.groups.add(Group.objects.get(name="viewer"))
    with pytest.raises(CommandError, match="vera may not start conversations"):
        run(origin.pk, "--user", "vera")
    Conversation.objects.filter(pk=origin.pk).update(status=Conversation.Status.RUNNING)
    with pytest.raises(CommandError, match="is still running"):
        run(origin.pk, "--wait", "0")
    with pytest.raises(CommandError, match="is not a replay"):
        run("--figures", origin.pk)
