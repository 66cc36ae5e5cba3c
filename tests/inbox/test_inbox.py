"""The prompt inbox: who sees which prompts (the answer views' rules), the count in the navigation
bar, answering from the inbox settles the prompt at its source (and the source's page shows it)."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from playground.conversations.models import Conversation, Event
from playground.gateway.models import GatewayPrompt
from playground.inbox.selectors import inbox_cards, inbox_count
from playground.inbox.services import NO_SUCH_PROMPT, answer
from tests.inbox.conftest import waiting_conversation, waiting_gateway_call

pytestmark = pytest.mark.django_db


def keys(user) -> list[str]:
    return [card.key for card in inbox_cards(user)]


def test_each_role_sees_the_prompts_it_may_answer(operator, other_operator, viewer, admin_user):
    mine, mine_prompt = waiting_conversation(operator)
    theirs, theirs_prompt = waiting_conversation(other_operator, title="Theirs")
    _, gateway_prompt = waiting_gateway_call()
    assert keys(operator) == [f"conversation-{mine.pk}-{mine_prompt.sequence}"]
    assert keys(other_operator) == [f"conversation-{theirs.pk}-{theirs_prompt.sequence}"]
    assert keys(viewer) == [] and inbox_count(viewer) == 0
    # An admin answers any conversation's prompt and the gateway's, as on their own pages.
    assert sorted(keys(admin_user)) == sorted([f"conversation-{mine.pk}-{mine_prompt.sequence}",
                                               f"conversation-{theirs.pk}-{theirs_prompt.sequence}",
                                               f"gateway-{gateway_prompt.pk}"])
    assert inbox_count(admin_user) == 3


def test_answered_expired_and_cancelled_prompts_leave_the_inbox(operator, admin_user):
    answered, answered_prompt = waiting_conversation(operator, title="Answered")
    cancelled, _ = waiting_conversation(operator, title="Cancelled")
    _, stale = waiting_gateway_call()
    assert inbox_count(admin_user) == 3
    assert answer(operator, {"source": "conversation", "conversation": answered.pk, "prompt": answered_prompt.sequence,
                             "choice": "once"}) == ""
    Conversation.objects.filter(pk=cancelled.pk).update(status=Conversation.Status.CANCELLED, paused_run=None)
    # A gateway prompt past its deadline belongs to an MCP request that is gone.
    GatewayPrompt.objects.filter(pk=stale.pk).update(created_at=timezone.now() - timedelta(seconds=121))
    assert inbox_count(admin_user) == 0


def test_answering_from_the_inbox_settles_the_conversation_prompt_at_its_source(operator, client):
    conversation, prompt = waiting_conversation(operator)
    assert answer(operator, {"source": "conversation", "conversation": conversation.pk, "prompt": prompt.sequence,
                             "choice": "maybe"}).startswith("Unknown answer")
    assert answer(operator, {"source": "conversation", "conversation": conversation.pk, "prompt": prompt.sequence,
                             "choice": "once"}) == ""
    saved = Event.objects.get(conversation=conversation, type="permission_answer")
    assert saved.payload["choice"] == "once" and saved.payload["answered_by"] == "olga"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.RUNNING  # the run goes on
    # The first answer stands, wherever the second comes from.
    assert "already been answered" in answer(operator, {"source": "conversation", "conversation": conversation.pk,
                                                         "prompt": prompt.sequence, "choice": "deny"})
    client.force_login(operator)
    page = client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert 'data-answered="once"' in page and "Answered: <strong>approved once</strong> by olga" in page


def test_nobody_answers_a_prompt_they_may_not_answer(operator, other_operator, viewer):
    conversation, prompt = waiting_conversation(other_operator)
    _, gateway_prompt = waiting_gateway_call()
    for user in (operator, viewer):
        assert answer(user, {"source": "conversation", "conversation": conversation.pk, "prompt": prompt.sequence,
                             "choice": "once"}) == NO_SUCH_PROMPT
    assert answer(operator, {"source": "gateway", "prompt": gateway_prompt.pk, "choice": "once"}) == NO_SUCH_PROMPT
    assert answer(operator, {"source": "elsewhere", "prompt": 1, "choice": "once"}) == NO_SUCH_PROMPT
    assert not Event.objects.filter(type="permission_answer").exists()
    assert GatewayPrompt.objects.get(pk=gateway_prompt.pk).status == GatewayPrompt.Status.PENDING


def test_answering_from_the_inbox_settles_the_gateway_call_and_its_session_page_shows_it(admin_user, admin_client):
    session, prompt = waiting_gateway_call()
    assert answer(admin_user, {"source": "gateway", "prompt": prompt.pk, "choice": "deny"}) == ""
    prompt.refresh_from_db()
    assert prompt.status == GatewayPrompt.Status.DENIED and prompt.answered_by == admin_user
    assert "already answered" in answer(admin_user, {"source": "gateway", "prompt": prompt.pk, "choice": "once"})
    page = admin_client.get(reverse("gateway:session_detail", args=[session.pk])).content.decode()
    assert "Answered: <strong>denied</strong> by alice" in page and 'data-testid="answer-once"' not in page


def test_the_inbox_page_lists_both_kinds_with_one_card_and_the_nav_counts_them(operator, admin_user, client):
    conversation, _ = waiting_conversation(operator, title="Write my notes")
    session, _ = waiting_gateway_call()
    client.force_login(admin_user)
    page = client.get(reverse("inbox:index")).content.decode()
    cards = re.findall(r'data-testid="prompt-card" data-source="(\w+)"', page)
    assert sorted(cards) == ["conversation", "gateway"]
    assert f'href="/conversations/{conversation.pk}/"' in page and "Write my notes" in page
    assert f'href="/gateway/sessions/{session.pk}/"' in page
    assert re.search(r'data-testid="inbox-count" data-count="2"[^>]*>2<', page)
    assert page.count('data-testid="answer-once"') == 2 and page.count('data-testid="answer-deny"') == 2
    assert page.count('data-testid="answer-always"') == 1  # "always" is a conversation's choice only
    assert page.count('data-testid="prompt-expires"') == 2

    # The operator's navigation bar counts only their own; every page carries it, with its socket.
    client.force_login(operator)
    home = client.get(reverse("conversations:list")).content.decode()
    assert re.search(r'data-testid="inbox-count" data-count="1"', home) and 'ws-connect="/ws/inbox/"' in home
    inbox = client.get(reverse("inbox:index")).content.decode()
    assert inbox.count('ws-connect="/ws/inbox/"') == 1  # the page's list holds the one socket


def test_viewers_have_no_inbox(viewer, client):
    client.force_login(viewer)
    assert client.get(reverse("inbox:index")).status_code == 403
    assert 'data-testid="nav-inbox"' not in client.get(reverse("conversations:list")).content.decode()
