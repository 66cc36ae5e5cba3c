"""The "Search misses" page, its "add to labelled set" action, the labelled set's export and
`manage.py search_misses`: failed searches read from a profile's conversations, ranked today."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from playground.conversations.models import Conversation, Message
from playground.engine.search.quality import split_of
from playground.registry import labelled_sets
from playground.registry.models import LabelledQuery
from tests.conversations.conftest import make_profile

ISSUE = "mcp__github__create_issue"
FORECAST = "mcp__weather__get_forecast"
SLACK = "mcp__slack__post_message"


def history(*blocks_by_role: tuple[str, list[dict] | str]) -> list[tuple[str, list[dict] | str]]:
    return list(blocks_by_role)


def search(use_id: str, query: str) -> tuple[str, list[dict]]:
    return ("assistant", [{"type": "tool_use", "id": use_id, "name": "ToolSearch", "input": {"query": query}}])


def found(use_id: str, *names: str) -> tuple[str, list[dict]]:
    return ("user", [{"type": "tool_result", "tool_use_id": use_id, "content": [{"type": "tool_reference", "tool_name": n} for n in names]}])


def call(use_id: str, name: str) -> tuple[str, list[dict]]:
    return ("assistant", [{"type": "tool_use", "id": use_id, "name": name, "input": {}}])


def done(use_id: str) -> tuple[str, list[dict]]:
    return ("user", [{"type": "tool_result", "tool_use_id": use_id, "content": "ok"}])


def conversation_with(owner, profile, messages) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, profile=profile, title="t")
    for position, (role, content) in enumerate(messages):
        Message.objects.create(conversation=conversation, position=position, role=role,
                               content=content if isinstance(content, list) else [{"type": "text", "text": content}])
    return conversation


@pytest.fixture
def profile(tool_world):
    return make_profile("bm25 profile", search_backend="bm25")


@pytest.fixture
def misses(admin_user, profile):
    """Two conversations: a search that missed the issue tool (then loaded by select:), twice; an empty search."""
    missed = [("user", "Open an issue about the login bug"), search("s1", "bug report"), found("s1", SLACK),
              search("s2", f"select:{ISSUE}"), found("s2", ISSUE), call("c1", ISSUE), done("c1")]
    first = conversation_with(admin_user, profile, missed)
    second = conversation_with(admin_user, profile, missed + [("user", "and the weather?"), search("s3", "zebra stripes"), found("s3")])
    return first, second


def test_the_page_lists_failed_searches_with_todays_rank_and_counts(viewer_client, misses, profile):
    page = viewer_client.get(reverse("conversations:search_misses"), {"profile": profile.pk}).content.decode()
    assert 'data-searches="3"' in page and 'data-failed="3"' in page and 'data-empty="1"' in page and 'data-missed="2"' in page
    rank = labelled_sets.ranks_now(profile, [("bug report", ISSUE)])[("bug report", ISSUE)]
    assert f'data-kind="missed" data-tool="{ISSUE}" data-rank="{rank or ""}" data-count="2"' in page
    assert 'data-kind="empty" data-tool="" data-rank="" data-count="1"' in page
    assert "editors label" in page and "add-to-labelled-set" not in page  # a viewer reads, an editor labels
    assert f"<code>{ISSUE}</code> · 2" in page and "github · 2" in page  # by tool, by server


def test_the_page_reads_the_profiles_searchable_catalog_once(viewer_client, misses, profile):
    # The rows, their ranks today and the labelled set's counts share one permission-filtered catalog.
    with CaptureQueriesContext(connection) as queries:
        page = viewer_client.get(reverse("conversations:search_misses"), {"profile": profile.pk})
    assert page.status_code == 200 and 'data-failed="3"' in page.content.decode()
    rule_reads = [q["sql"] for q in queries.captured_queries if 'FROM "registry_permissionrule"' in q["sql"]]
    assert len(rule_reads) == 1, rule_reads


def test_the_page_ranks_only_its_most_frequent_rows_and_the_command_ranks_more(viewer_client, admin_user, profile, monkeypatch):
    from playground.conversations import search_misses

    monkeypatch.setattr(search_misses, "PAGE_ROWS_RANKED", 2)
    monkeypatch.setattr("playground.conversations.views.PAGE_ROWS_RANKED", 2)
    for n in range(4):  # four distinct failed searches, each followed by the issue tool
        conversation_with(admin_user, profile, [("user", f"request {n}"), search(f"s{n}", f"bug words {n}"), found(f"s{n}", SLACK),
                                                call(f"c{n}", ISSUE), done(f"c{n}")])
    searched = []
    original = labelled_sets.ranks_now
    monkeypatch.setattr(labelled_sets, "ranks_now", lambda profile, pairs, **kw: searched.extend(pairs) or original(profile, pairs, **kw))
    page = viewer_client.get(reverse("conversations:search_misses"), {"profile": profile.pk}).content.decode()
    assert len(searched) == 2 and page.count('title="only the first rows are ranked"') == 2
    searched.clear()
    call_command("search_misses", "--profile", str(profile.pk), "--json", stdout=StringIO())
    assert len(searched) == 4


def test_an_editor_adds_a_row_to_the_labelled_set_once_and_it_exports_in_the_toolsets_format(admin_client, misses, profile):
    page = admin_client.get(reverse("conversations:search_misses"), {"profile": profile.pk}).content.decode()
    assert page.count('data-testid="add-to-labelled-set"') == 1  # the empty search has no tool to label
    form = {"profile": profile.pk, "query": "bug report", "tool": ISSUE, "conversation": misses[1].pk}
    response = admin_client.post(reverse("conversations:search_misses_label"), form, follow=True)
    row = LabelledQuery.objects.get()
    assert (row.query, row.tool_name, row.conversation_id, row.created_by.username) == ("bug report", ISSUE, misses[1].pk, "alice")
    split = labelled_sets.split_of_query("bug report")
    assert f"Added to the {split} split" in response.content.decode()
    assert f'data-testid="labelled">in {split}</span>' in response.content.decode()
    again = admin_client.post(reverse("conversations:search_misses_label"), form, follow=True).content.decode()
    assert "Already in the labelled set" in again and LabelledQuery.objects.count() == 1

    exported = admin_client.get(reverse("conversations:labelled_set_export", args=[profile.pk]))
    lines = [json.loads(line) for line in exported.content.decode().splitlines()]
    assert exported["Content-Type"].startswith("application/x-ndjson") and len(lines) == 1
    assert lines[0]["query"] == "bug report" and lines[0]["expected_tool_names"] == [ISSUE]
    assert split_of(lines[0]["id"]) == split == lines[0]["category"]  # the id carries the split, as in the shared toolsets


def test_a_tool_the_profile_cannot_search_is_refused_with_a_reason(admin_client, misses, profile):
    for tool in ("echo", "mcp__nowhere__nothing"):  # always loaded; not in the catalog
        response = admin_client.post(reverse("conversations:search_misses_label"),
                                     {"profile": profile.pk, "query": "say it", "tool": tool}, follow=True)
        assert "is not a deferred tool of the profile" in response.content.decode()
    assert not LabelledQuery.objects.exists()


def test_a_tampered_label_form_gets_a_plain_message_not_a_500(admin_client, profile):
    for bad in ("x", str(profile.pk + 99), ""):
        response = admin_client.post(reverse("conversations:search_misses_label"), {"profile": bad}, follow=True)
        assert response.status_code == 200 and "the form named none that exists" in response.content.decode()
    # a conversation id that is no number is left out; the row is still added
    admin_client.post(reverse("conversations:search_misses_label"),
                      {"profile": profile.pk, "tool": ISSUE, "query": "open a ticket", "conversation": "1e9"})
    assert LabelledQuery.objects.get().conversation_id is None


def test_a_viewer_cannot_label_and_an_unknown_profile_is_said_plainly(viewer_client, profile):
    assert viewer_client.post(reverse("conversations:search_misses_label"), {"profile": profile.pk}).status_code == 403
    page = viewer_client.get(reverse("conversations:search_misses"), {"profile": "nope"})
    assert page.status_code == 200 and "No profile with id" in page.content.decode()
    empty = viewer_client.get(reverse("conversations:search_misses"), {"profile": profile.pk}).content.decode()
    assert 'data-testid="misses-empty"' in empty


def test_the_command_prints_the_rows_and_labels_them(misses, profile):
    out = StringIO()
    call_command("search_misses", "--profile", profile.name, "--json", "--label", stdout=out)
    report = json.loads(out.getvalue())
    assert (report["keyword_searches"], report["failed"], report["empty"], report["missed"]) == (3, 3, 1, 2)
    assert report["labelled_now"] == 1 and sum(report["labelled_set"].values()) == 1
    assert [r["tool"] for r in report["rows"]] == [ISSUE, ""] and report["rows"][0]["conversations"] == [misses[1].pk, misses[0].pk]
    assert LabelledQuery.objects.get().tool_name == ISSUE
    text = StringIO()
    call_command("search_misses", "--profile", str(profile.pk), stdout=text)
    assert "3 failed of 3 keyword searches in 2 conversations" in text.getvalue() and "labelled set:" in text.getvalue()


def test_the_command_reads_the_searchable_tools_once_however_many_rows_it_labels(admin_user, misses, profile):
    conversation_with(admin_user, profile, [("user", "Tell the team"), search("s1", "team chat"), found("s1", ISSUE),
                                            call("c1", SLACK), done("c1")])
    with CaptureQueriesContext(connection) as queries:
        call_command("search_misses", "--profile", str(profile.pk), "--label", stdout=StringIO())
    assert sorted(LabelledQuery.objects.values_list("tool_name", flat=True)) == [ISSUE, SLACK]
    # the report (its rows and ranks), the labelling and the set's counts after it: one read each
    rule_reads = [q["sql"] for q in queries.captured_queries if 'FROM "registry_permissionrule"' in q["sql"]]
    assert len(rule_reads) == 3, rule_reads
