"""The conversations list: search, filters (GET parameters), paging, bad values and compare groups."""
from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from playground.conversations import services
from playground.conversations.models import Conversation
from tests.conversations.conftest import make_profile

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    from playground.conversations import tasks

    monkeypatch.setattr(tasks.run_conversation_task, "delay", lambda pk, run_token="": None)


def listed(client, **params) -> tuple[list[int], str]:
    response = client.get(reverse("conversations:list"), params)
    assert response.status_code == 200
    body = response.content.decode()
    return [int(pk) for pk in re.findall(r'data-testid="(?:conversation|compare)-row"[^>]*data-conversation="(\d+)"', body)], body


def test_search_finds_titles_and_message_text(viewer_client, viewer_user):
    by_title = services.start_conversation(viewer_user, title="Quarterly Report")
    by_message = services.start_conversation(viewer_user, title="untitled")
    services.send_message(by_message, "What is the weather in Zürich tomorrow?", user=viewer_user)
    services.start_conversation(viewer_user, title="something else")
    assert listed(viewer_client, q="quarterly")[0] == [by_title.pk]
    assert listed(viewer_client, q="WEATHER IN")[0] == [by_message.pk]
    assert listed(viewer_client, q="Zürich")[0] == [by_message.pk]  # non-ASCII text, not its JSON escape
    assert listed(viewer_client, q="role")[0] == []  # a payload key is not message text
    ids, body = listed(viewer_client, q="nothing like this")
    assert ids == [] and "No conversations match these filters." in body


def test_filters_by_profile_status_and_provider(viewer_client, viewer_user, settings):
    settings.ANTHROPIC_API_KEY = ""
    on, off = make_profile("on"), make_profile("off", tool_search_mode="false")
    claude_profile = make_profile("claude profile", provider="anthropic")
    a = services.start_conversation(viewer_user, profile=on, provider="demo")
    b = services.start_conversation(viewer_user, profile=off)  # automatic: the demo agent without a key
    c = services.start_conversation(viewer_user, profile=claude_profile)
    d = services.start_conversation(viewer_user, provider="anthropic")
    Conversation.objects.filter(pk=b.pk).update(status=Conversation.Status.FAILED)
    assert listed(viewer_client, profile=on.pk)[0] == [a.pk]
    assert listed(viewer_client, status="failed")[0] == [b.pk]
    assert sorted(listed(viewer_client, provider="demo")[0]) == [a.pk, b.pk]
    assert sorted(listed(viewer_client, provider="anthropic")[0]) == [c.pk, d.pk]
    assert listed(viewer_client, profile=off.pk, status="idle")[0] == []
    # The filters are GET parameters: the page keeps them in the form and in the paging links.
    body = listed(viewer_client, status="failed")[1]
    assert '<option value="failed" selected>' in body


def test_everyone_filters_by_owner(admin_client, admin_user, viewer_user):
    viewer_client = Client()  # the fixtures' clients are one client: this one is bob's
    viewer_client.force_login(viewer_user)
    mine = services.start_conversation(admin_user, title="alice's")
    theirs = services.start_conversation(viewer_user, title="bob's")
    assert sorted(listed(admin_client)[0]) == [mine.pk, theirs.pk]
    assert listed(admin_client, owner="bob")[0] == [theirs.pk]
    assert listed(viewer_client, owner="alice")[0] == [mine.pk]  # every role watches every conversation
    ids, body = listed(admin_client, owner="nobody")
    assert sorted(ids) == [mine.pk, theirs.pk] and "No one named nobody has conversations." in body
    assert listed(admin_client, owner="bob", status="idle")[0] == [theirs.pk]


@pytest.mark.parametrize("params, message", [
    ({"profile": "99999"}, "There is no profile with id 99999."),
    ({"profile": "abc"}, "There is no profile with id abc."),
    ({"status": "sleeping"}, "sleeping is not a conversation status."),
    ({"provider": "carrier-pigeon"}, "carrier-pigeon is not a known provider."),
    ({"q": "x" * 500}, "Search: Ensure this value has at most 200 characters"),
    ({"profile": "9" * 30}, "There is no profile with id 999"),
    ({"page": "lots"}, None),
    ({"page": "-3"}, None),
])
def test_bad_parameters_say_so_inline_and_never_fail(viewer_client, viewer_user, params, message):
    mine = services.start_conversation(viewer_user, title="kept")
    ids, body = listed(viewer_client, **params)
    assert ids == [mine.pk]  # the bad filter is not applied; the others still are
    if message:
        assert 'data-testid="filter-error"' in body and message in body.replace("&#x27;", "'")
    else:
        assert 'data-testid="filter-error"' not in body


@pytest.mark.parametrize("owner", ["nobody", "9" * 30])
def test_a_bad_owner_from_staff_is_reported_too(admin_client, admin_user, owner):
    services.start_conversation(admin_user)
    ids, body = listed(admin_client, owner=owner)
    assert len(ids) == 1 and 'data-testid="filter-error"' in body


def test_a_page_costs_the_same_queries_however_many_conversations_there_are(admin_client, admin_user, viewer_user,
                                                                             django_assert_max_num_queries):
    for n in range(40):
        services.start_conversation(viewer_user if n % 2 else admin_user, profile=make_profile(f"p{n}"), title=f"c{n}")
    group = services.new_compare_group()
    services.start_conversation(admin_user, compare_group=group)
    services.start_conversation(admin_user, compare_group=group)
    with django_assert_max_num_queries(12):
        ids, _ = listed(admin_client, q="c", provider="demo")
    assert len(ids) == 25


def test_the_list_is_paged(viewer_client, viewer_user):
    made = [services.start_conversation(viewer_user, title=f"conversation {n}").pk for n in range(30)]
    first, body = listed(viewer_client)
    assert len(first) == 25 and 'data-testid="pager"' in body and "Page 1 of 2" in body
    second, body = listed(viewer_client, page=2)
    assert len(second) == 5 and sorted(first + second) == sorted(made)
    # Filters ride along in the paging links.
    _, body = listed(viewer_client, q="conversation", page=1)
    assert 'href="?q=conversation&amp;page=2"' in body
    assert listed(viewer_client, page=99)[0] == second  # past the end: the last page


def test_a_compare_run_is_one_row_linking_to_the_compare_view(viewer_client, viewer_user):
    left, right = make_profile("all loaded", tool_search_mode="false"), make_profile("searching")
    group = services.new_compare_group()
    a = services.start_conversation(viewer_user, profile=left, compare_group=group, title="Compare: weather")
    b = services.start_conversation(viewer_user, profile=right, compare_group=group, title="Compare: weather")
    single = services.start_conversation(viewer_user, title="alone")
    ids, body = listed(viewer_client)
    assert sorted(ids) == sorted([a.pk, single.pk])
    assert body.count('data-testid="compare-row"') == 1
    assert reverse("conversations:compare_view", args=[group]) in body and "all loaded vs searching" in body
    # A filter that matches one side still shows the group, once.
    ids, body = listed(viewer_client, profile=right.pk)
    assert ids == [b.pk] and reverse("conversations:compare_view", args=[group]) in body
    # Groups count as one row for paging.
    for n in range(26):
        g = services.new_compare_group()
        services.start_conversation(viewer_user, compare_group=g, title=f"Compare {n}")
        services.start_conversation(viewer_user, compare_group=g, title=f"Compare {n}")
    first, _ = listed(viewer_client)
    second, _ = listed(viewer_client, page=2)
    assert len(first) == 25 and len(second) == 3
