from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from playground.mcp_servers.models import McpServer
from playground.registry import adapter, backends

from .conftest import bulk_tools

pytestmark = pytest.mark.django_db
URL = reverse("registry:inspector")
HTMX = {"HX-Request": "true", "HX-Target": "inspector-results"}


def test_it_requires_login(client):
    response = client.get(URL)
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_viewer_can_inspect(viewer_client, tools):
    response = viewer_client.get(URL, {"q": "github issue"})
    assert response.status_code == 200
    assert 'data-testid="inspector-query"' in response.content.decode()


def test_it_ranks_with_the_engines_breakdown(viewer_client, tools):
    response = viewer_client.get(URL, {"q": "github issue"})
    result = response.context["answer"].result
    assert result.reading.kind == "keyword"
    assert result.matches[:2] == [s.name for s in result.scored][:2]
    assert set(result.matches) >= {"mcp__github__create_issue", "mcp__github__list_issues"}
    body = response.content.decode()
    top = result.scored[0]
    assert f'data-tool="{top.name}" data-score="{top.score}"' in body
    assert top.breakdown, "the engine fills the breakdown while scoring"
    first = top.breakdown[0]
    assert f'data-term="{first.term}" data-rule="{first.rule}" data-points="{first.points}"' in body
    assert f'data-result-count="{len(result.matches)}"' in body


def test_htmx_requests_get_only_the_results(viewer_client, tools):
    response = viewer_client.get(URL, {"q": "slack"}, headers=HTMX)
    body = response.content.decode()
    assert "<html" not in body
    assert 'data-testid="inspector-results"' in body and 'data-state="ready"' in body


def test_select_queries_are_read_as_select(viewer_client, tools):
    response = viewer_client.get(URL, {"q": "select:mcp__slack__post_message,Nope"}, headers=HTMX)
    result = response.context["answer"].result
    assert result.reading.kind == "select"
    assert result.matches == ["mcp__slack__post_message"]
    assert result.not_found == ["Nope"]


def test_it_shows_what_permissions_took_away(viewer_client, tools, deny_delete_rule):
    response = viewer_client.get(URL, {"q": "delete github repo"}, headers=HTMX)
    answer = response.context["answer"]
    assert "mcp__github__delete_repo" not in answer.result.matches
    assert [name for name, _ in answer.excluded_matches] == ["mcp__github__delete_repo"]
    body = response.content.decode()
    assert 'data-testid="excluded-match" data-tool="mcp__github__delete_repo"' in body
    assert "deny mcp__github__delete_repo" in body


def test_profile_rules_apply(viewer_client, tools, profile):
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(effect="deny", pattern="mcp__slack", profile=profile)
    with_profile = viewer_client.get(URL, {"q": "slack message", "profile": profile.pk}, headers=HTMX).context["answer"]
    without = viewer_client.get(URL, {"q": "slack message"}, headers=HTMX).context["answer"]
    assert "mcp__slack__post_message" in without.result.matches
    assert "mcp__slack__post_message" not in with_profile.result.matches


def test_one_inspection_reads_the_permission_rules_once(viewer_client, tools, profile, monkeypatch):
    """The filter and the mode decision share one policy: one read of the rules per request."""
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(effect="deny", pattern="mcp__slack", profile=profile)
    reads = []
    real = adapter.permission_rules
    monkeypatch.setattr(adapter, "permission_rules", lambda p=None: reads.append(p) or real(p))
    answer = viewer_client.get(URL, {"q": "slack message", "profile": profile.pk}, headers=HTMX).context["answer"]
    assert reads == [profile]
    assert "mcp__slack__post_message" not in answer.result.matches
    assert answer.decision is not None and answer.excluded_total >= 1


def test_native_and_client_wire_styles_show_what_the_model_receives(viewer_client, tools):
    native = viewer_client.get(URL, {"q": "slack message", "wire_style": "native"}, headers=HTMX).context["answer"]
    tool_result, sibling = native.content
    assert tool_result["type"] == "tool_result"
    assert tool_result["content"][0] == {"type": "tool_reference", "tool_name": "mcp__slack__post_message"}
    assert sibling == {"type": "text", "text": "Tool loaded."}
    client = viewer_client.get(URL, {"q": "slack message", "wire_style": "client"}, headers=HTMX).context["answer"]
    [tool_result] = client.content
    assert tool_result["content"][0]["type"] == "text"
    assert json.loads(tool_result["content"][0]["text"])["matches"][0] == "mcp__slack__post_message"


def test_no_match_names_pending_servers(viewer_client, tools):
    McpServer.objects.create(name="connecting", status=McpServer.Status.PENDING)
    response = viewer_client.get(URL, {"q": "zzzz qqqq"}, headers=HTMX)
    answer = response.context["answer"]
    assert answer.result.matches == []
    assert answer.result.pending_mcp_servers == ["connecting"]
    assert "connecting" in answer.content[0]["content"][0]["text"]


def test_bad_max_results_is_an_error_not_a_silent_default(viewer_client, tools):
    response = viewer_client.get(URL, {"q": "github", "max_results": "abc"}, headers=HTMX)
    assert response.status_code == 200
    assert response.context["answer"].error == "max_results must be a whole number from 1 to 50, not 'abc'"
    assert viewer_client.get(URL, {"q": "github", "max_results": ""}, headers=HTMX).context["answer"].max_results == 5


@pytest.mark.parametrize("warm", [False, True], ids=["cold-cache", "warm-cache"])
def test_the_query_count_does_not_grow_with_the_number_of_tools(viewer_client, django_assert_max_num_queries, warm, settings):
    # Catalog and index queries only: storing newly encoded vectors (database store) writes in batches
    # once per tool text, and is tested in test_search_index.py.
    settings.TOOLSEARCH_VECTOR_STORE = "memory"
    counts = []
    for count, server in ((20, "small"), (500, "large")):
        bulk_tools(count, server=server)
        adapter.reset_caches()
        backends.reset_caches()
        if warm:
            viewer_client.get(URL, {"q": "weather"})
        # 11: the catalog and index reads, the session and the user, and the navigation's prompt count (an operator).
        with django_assert_max_num_queries(11) as captured:
            response = viewer_client.get(URL, {"q": "weather forecast"})
        assert response.context["answer"].result.matches
        counts.append(len(captured.captured_queries))
    assert counts[0] == counts[1]


def test_it_shows_the_mode_decision(viewer_client, tools, profile):
    on = viewer_client.get(URL, {"q": "github", "profile": profile.pk}, headers=HTMX)
    assert on.context["answer"].decision.enabled is True
    assert 'data-testid="inspector-mode-decision" data-tool-search="on"' in on.content.decode()
    off = viewer_client.get(URL, {"q": "github", "profile": profile.pk, "mode": "false"}, headers=HTMX)
    assert off.context["answer"].decision.enabled is False
    assert off.context["answer"].decision.gate == "disabled"
    assert 'data-tool-search="off"' in off.content.decode()
    assert off.context["answer"].result.matches  # still shows what a search would return


def test_a_server_search_profile_still_shows_our_ranking(viewer_client, tools, profile):
    profile.wire_style = "server"  # Anthropic's server-side tool answers; the inspector shows ours instead
    profile.search_backend = "claude-code"
    profile.save()
    response = viewer_client.get(URL, {"q": "github issue", "profile": profile.pk}, headers=HTMX)
    body = response.content.decode()
    answer = response.context["answer"]
    assert response.status_code == 200
    assert 'data-state="ready"' in body and not answer.error
    assert answer.result.matches[0] == "mcp__github__create_issue"
    assert answer.backend == "claude-code" and answer.wire_style == "native"
    assert "server-side search tool" in answer.note and 'data-testid="inspector-note"' in body


def test_a_profile_the_engine_cannot_run_shows_an_error(viewer_client, tools, profile):
    profile.wire_style = "pigeon"  # a row no form would save (fits the column on PostgreSQL too)
    profile.save()
    response = viewer_client.get(URL, {"q": "github", "profile": profile.pk}, headers=HTMX)
    assert response.status_code == 200
    assert 'data-state="error"' in response.content.decode()
    assert "wire style" in response.context["answer"].error
    assert 'data-testid="inspector-note"' not in response.content.decode()


def _client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_post_searches_like_a_get_for_viewers_and_staff(viewer_user, admin_user, tools):
    # A search changes nothing; POST carries a select: list too long for a URL.
    for user in (viewer_user, admin_user):
        response = _client_of(user).post(URL, {"q": "github issue"}, headers=HTMX)
        assert response.status_code == 200 and response.context["answer"].result.matches
    viewer_client = _client_of(viewer_user)
    names = ",".join(f"mcp__bulk__tool_{i}" for i in range(4000)) + ",Write"
    assert len(names) > 70_000
    answer = viewer_client.post(URL, {"q": f"select:{names}"}, headers=HTMX).context["answer"]
    assert answer.error == "" and "Write" in answer.result.matches


@pytest.mark.parametrize(("query", "message"), [
    ("x" * 2_001, "a query is limited to 2,000 characters"),
    (" ".join(["word"] * 65), "a query is limited to 64 terms"),
    ("select:" + "a," * 100_000, "a select: list is limited to 200,000 characters"),
])
@pytest.mark.parametrize("backend", ["", "bm25", "claude-code", "naive"])
def test_an_oversized_query_is_a_clear_error_for_every_backend(admin_client, tools, query, message, backend):
    response = admin_client.post(URL, {"q": query, "backend": backend})
    assert response.status_code == 400
    assert response.context["answer"].error.startswith(message)


def test_the_naive_backend_is_for_staff_on_the_page(viewer_user, admin_user, tools):
    viewer_client, admin_client = _client_of(viewer_user), _client_of(admin_user)
    refused = viewer_client.get(URL, {"q": "github issue", "backend": "naive"})
    assert refused.status_code == 400 and "for editors" in refused.context["answer"].error
    assert "naive" not in refused.context["backends"]
    allowed = admin_client.get(URL, {"q": "github issue", "backend": "naive"}, headers=HTMX)
    assert allowed.context["answer"].error == "" and allowed.context["answer"].result.matches


def test_matches_that_need_confirmation_are_marked(viewer_client, tools):
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(effect="ask", pattern="mcp__slack__post_message")
    response = viewer_client.get(URL, {"q": "slack message"}, headers=HTMX)
    assert "mcp__slack__post_message" in response.context["answer"].ask
    assert 'data-testid="ask-badge"' in response.content.decode()


def test_it_shows_how_the_hybrid_backend_split_a_request(viewer_client, tools):
    query = "create a github issue about the outage, then post a message to the team on slack"
    response = viewer_client.get(URL, {"q": query, "backend": "hybrid"}, headers=HTMX)
    answer = response.context["answer"]
    assert answer.query_notes == [
        "2 clauses for aspect coverage (xQuAD, \u03bb 0.3): \u201ccreate a github issue about the outage\u201d · "
        "\u201cpost a message to the team on slack\u201d",
        f"the encoder reads the request as \u201ca tool to {query}\u201d (a one-sentence request, read as what a tool does)",
    ]
    body = response.content.decode()
    assert body.count('data-testid="query-note"') == 2 and "aspect coverage" in body and "the encoder reads the request as" in body
    # each clause has a tool in the top 2 (which GitHub tool is a near tie on the dense side)
    assert {name.split("__")[1] for name in answer.result.matches[:2]} == {"github", "slack"}
    assert 'data-term="(aspects)"' in body
    plain = viewer_client.get(URL, {"q": query, "backend": "bm25"}, headers=HTMX)
    assert plain.context["answer"].query_notes == [] and 'data-testid="query-note"' not in plain.content.decode()
    pooled = viewer_client.get(URL, {"q": query, "backend": "hybrid-pooled"}, headers=HTMX)
    notes = pooled.context["answer"].query_notes
    assert notes[:2] == answer.query_notes and notes[2] == "sentence and clause vectors pooled from one pass over the request (late chunking)"
    assert "clause vectors pooled from the request" in pooled.content.decode()


def _learned(user, query: str, tool: str):
    from playground.conversations.models import Conversation, ToolSearchUsage

    conversation = Conversation.objects.create(owner=user, title=f"{user.username}'s")
    return ToolSearchUsage.objects.create(conversation=conversation, query=query, tool_name=tool, query_hash=query)


def test_the_inspector_scores_learned_usage_and_says_so(viewer_client, viewer_user, tools):
    _learned(viewer_user, "file a bug ticket", "mcp__github__create_issue")
    response = viewer_client.get(URL, {"q": "bug ticket", "backend": "bm25"}, headers=HTMX)
    answer = response.context["answer"]
    assert answer.result.matches[0] == "mcp__github__create_issue"  # only the learned words match (its server's tools follow)
    assert {c.field for c in answer.result.scored[0].breakdown} >= {"usage"}
    body = response.content.decode()
    assert 'data-testid="usage-line" data-entries="1" data-learns="yes"' in body
    assert 'data-testid="usage-forget"' not in body  # staff only
    plain = viewer_client.get(URL, {"q": "bug ticket", "backend": "claude-code"}, headers=HTMX)
    assert plain.context["answer"].result.matches == [] and 'data-learns="no"' in plain.content.decode()
    assert "claude-code does not learn from usage" in plain.content.decode()


def test_only_staff_can_forget_what_was_learned(viewer_client, viewer_user, admin_user, client, tools):
    from playground.conversations.models import ToolSearchUsage

    _learned(viewer_user, "file a bug ticket", "mcp__github__create_issue")
    forget = reverse("registry:usage_forget")
    assert viewer_client.post(forget).status_code == 403 and ToolSearchUsage.objects.count() == 1
    client.force_login(admin_user)
    page = client.get(URL, {"q": "bug ticket", "backend": "bm25"}, headers=HTMX)
    assert 'data-testid="usage-forget"' in page.content.decode()
    response = client.post(forget, follow=True)
    assert response.redirect_chain[-1][0] == URL and not ToolSearchUsage.objects.exists()
    assert "Forgot 1 learned search;" in response.content.decode()
    assert client.get(forget).status_code == 405


QUERY_TWO_CLAUSES = "create a github issue about the outage, then post a message to the team on slack"


def test_settings_tune_the_backend_for_this_search(viewer_client, tools):
    plain = viewer_client.get(URL, {"q": QUERY_TWO_CLAUSES, "backend": "hybrid"}, headers=HTMX).context["answer"]
    response = viewer_client.get(URL, {"q": QUERY_TWO_CLAUSES, "backend": "hybrid", "settings": "aspect_weight=0:intent_weight=0"}, headers=HTMX)
    tuned = response.context["answer"]
    assert tuned.error == "" and tuned.backend == "hybrid:aspect_weight=0:intent_weight=0"
    assert any("aspect coverage" in line for line in plain.query_notes)
    assert not any("aspect coverage" in line for line in tuned.query_notes)  # no clauses without aspects
    assert all(c.term != "(aspects)" for s in tuned.result.scored for c in s.breakdown)
    body = response.content.decode()
    assert 'data-backend="hybrid:aspect_weight=0:intent_weight=0"' in body
    assert "<code>aspect_weight</code>" in body and "<code>semantic</code>" not in body  # the settings it takes, not the refused
    # An object of numbers is a setting too (BM25 field weights).
    weighted = viewer_client.get(URL, {"q": "github issue", "backend": "bm25", "settings": 'field_weights={"name": 5}'}, headers=HTMX)
    assert weighted.context["answer"].error == "" and weighted.context["answer"].result.matches


@pytest.mark.parametrize(("settings", "message"), [
    ("aspect_wieght=0", "unknown option 'aspect_wieght' for backend 'hybrid' (settings: aspect_pool,"),
    ("aspect_weight", "is not key=value"),
    ('semantic={"cache": "/tmp/x"}', "option 'semantic' cannot be set in the inspector"),
    ('bm25={"cache": "/tmp/x"}', "option 'cache' cannot be set in the inspector"),
    ("capability_chain=" + "x" * 50, "give a number, true/false or a short word"),
    ("aspect_weight=0:" * 20, "settings are limited to 300 characters"),
])
def test_bad_settings_are_a_clear_error(viewer_client, tools, settings, message):
    response = viewer_client.get(URL, {"q": "github issue", "backend": "hybrid", "settings": settings}, headers=HTMX)
    answer = response.context["answer"]
    assert message in answer.error and answer.result is None
    body = response.content.decode()
    assert 'data-testid="inspector-error"' in body and "Searching 0 deferred" not in body  # no made-up figures


@pytest.mark.parametrize("backend", ["postgres", "claude-code"])
def test_a_backend_that_declares_no_settings_takes_none(viewer_client, tools, backend):
    # postgres would take any keyword, and its dsn and table reach a database: never from this page.
    response = viewer_client.get(URL, {"q": "github issue", "backend": backend, "settings": 'dsn="postgres://x@h/db"'}, headers=HTMX)
    assert response.context["answer"].error == f"backend {backend!r} takes no settings in the inspector"


def test_a_value_of_the_wrong_type_names_the_setting(viewer_client, tools):
    # Before: field_weights={"name": "x"} reached the index build and the page answered 500.
    for settings, message in (('field_weights={"name": "x"}', "field_weights must map fields to numbers"),
                              ('k1="abc"', "could not convert string to float")):
        answer = viewer_client.get(URL, {"q": "github issue", "backend": "bm25", "settings": settings}, headers=HTMX).context["answer"]
        assert answer.error.startswith(f"bm25:{settings}: ") and message in answer.error


def test_an_unknown_backend_is_an_error_not_the_default(viewer_client, tools):
    # Before: an unknown name was dropped and the default answered, as if it had been asked for.
    answer = viewer_client.get(URL, {"q": "github issue", "backend": "nonexistent"}, headers=HTMX).context["answer"]
    assert answer.error.startswith("unknown backend 'nonexistent' (backends: claude-code") and answer.result is None


def test_only_a_few_tuned_backends_are_kept(viewer_client, tools):
    for weight in range(backends.TUNED_CACHE_SIZE + 3):
        viewer_client.get(URL, {"q": "github issue", "backend": "bm25", "settings": f"k1={1 + weight / 10}"}, headers=HTMX)
    assert len(backends._tuned_backends) == backends.TUNED_CACHE_SIZE
    assert next(reversed(backends._tuned_backends)) == f"bm25:k1={1 + (backends.TUNED_CACHE_SIZE + 2) / 10}"


def test_profiles_tuned_backends_share_the_bounded_cache(db):
    # Every edit of a profile's settings makes a new spec; they must not pile up in a process.
    for k in range(backends.TUNED_CACHE_SIZE + 2):
        assert backends.search_backend(f"bm25:k1={1 + k / 10}").name == f"bm25:k1={1 + k / 10}"
    assert len(backends._tuned_backends) == backends.TUNED_CACHE_SIZE
    assert not any(":" in name for name in backends._backends)
    assert backends.search_backend("bm25") is backends.search_backend("bm25")  # plain names stay cached for good


def test_two_backends_side_by_side_with_normalised_scores_and_disagreements(viewer_client, tools):
    response = viewer_client.get(URL, {"q": "create message", "backend": "bm25", "compare": "claude-code", "max_results": 3}, headers=HTMX)
    answer = response.context["answer"]
    assert response.status_code == 200 and answer.error == "" and answer.result is None  # no single view
    assert [c.backend for c in answer.columns] == ["bm25", "claude-code"]
    for column in answer.columns:
        # The same ranking the single view shows for that backend (the same engine path).
        alone = viewer_client.get(URL, {"q": "create message", "backend": column.backend, "max_results": 3}, headers=HTMX)
        assert [r.name for r in column.rows] == alone.context["answer"].result.matches
        assert column.rows[0].normalised == 1.0 and all(0 < r.normalised <= 1 for r in column.rows)
        assert all(r.normalised == pytest.approx(r.score / column.max_score) for r in column.rows)
    bm25, keyword = answer.columns
    only_bm25 = [r for r in bm25.rows if r.name not in keyword.ranks]
    for row in bm25.rows:
        assert bool(row.disagreements) == (row.name not in keyword.ranks or abs(keyword.ranks[row.name] - row.rank) > 2)
    assert [r.name for r in only_bm25] == ["mcp__github__delete_repo"]  # the keyword scorer needs a term in the text
    assert only_bm25[0].disagreements == ["claude-code: not in its top 3"]
    assert answer.shared == [name for name in bm25.ranks if name in keyword.ranks]
    body = response.content.decode()
    assert 'data-testid="compare" data-columns="2"' in body and 'data-state="ready"' in body
    assert body.count('data-testid="compare-column"') == 2
    top = bm25.rows[0]
    assert f'data-tool="{top.name}" data-rank="1" data-score="{top.score}"' in body
    assert body.count('data-normalised="1.000"') == sum(r.normalised == 1 for c in answer.columns for r in c.rows)  # each top (and ties)
    assert body.count('data-testid="disagreement"') == sum(len(r.disagreements) for c in answer.columns for r in c.rows)
    assert 'data-testid="term-contribution"' not in body and 'data-testid="model-receives"' not in body


def test_ranks_further_apart_than_the_gap_are_marked(viewer_client, tools):
    query = {"q": "delete issue", "backend": "bm25", "compare": "claude-code", "max_results": 3}
    strict = viewer_client.get(URL, {**query, "rank_gap": 0}, headers=HTMX).context["answer"]
    bm25, keyword = strict.columns
    for row in bm25.rows:
        other = keyword.ranks.get(row.name)
        expected = [] if other == row.rank else [f"claude-code: #{other}" if other else "claude-code: not in its top 3"]
        assert row.disagreements == expected
    assert any(d.startswith("claude-code: #") for r in bm25.rows for d in r.disagreements), [r.disagreements for r in bm25.rows]
    loose = viewer_client.get(URL, {**query, "rank_gap": 49}, headers=HTMX).context["answer"]
    assert [r.disagreements for r in loose.columns[0].rows] == [[], [], []]  # the same three tools, each within 49
    bad = viewer_client.get(URL, {**query, "rank_gap": "x"}, headers=HTMX).context["answer"]
    assert bad.error == "rank_gap must be a whole number from 0 to 49, not 'x'"


def test_a_backend_that_cannot_run_is_an_error_in_its_column_only(viewer_client, tools, monkeypatch):
    from playground.registry import availability

    monkeypatch.setattr(availability, "backend_unavailable", lambda name: "needs PostgreSQL" if name == "postgres" else "")
    response = viewer_client.get(URL, {"q": "slack message", "backend": "bm25",
                                       "compare": ["naive", "postgres", "nonexistent", "bm25"]}, headers=HTMX)
    assert response.status_code == 200
    answer = response.context["answer"]
    assert answer.error == ""
    assert [(c.backend, c.error) for c in answer.columns] == [
        ("bm25", ""),
        ("naive", "the 'naive' backend is for editors on this page (it stays available in the engine CLI)"),
        ("postgres", "postgres is unavailable here: needs PostgreSQL"),
        ("nonexistent", "unknown backend 'nonexistent'"),
    ]  # bm25 twice is one column
    assert answer.columns[0].rows and answer.columns[0].rows[0].disagreements == []  # nothing answering to disagree with
    assert response.content.decode().count('data-testid="compare-error"') == 3


def test_a_backend_failing_mid_search_is_an_error_in_its_column(viewer_client, tools, monkeypatch):
    from playground.engine.search.keyword import ClaudeCodeKeywordBackend

    def broken(self, *args, **kwargs):
        raise RuntimeError("index went away")

    monkeypatch.setattr(ClaudeCodeKeywordBackend, "rank", broken)
    response = viewer_client.get(URL, {"q": "slack message", "backend": "bm25", "compare": "claude-code"}, headers=HTMX)
    assert response.status_code == 200
    bm25, keyword = response.context["answer"].columns
    assert bm25.rows and keyword.error == "claude-code failed: RuntimeError: index went away"


def test_one_backend_chosen_keeps_the_single_view(viewer_client, tools):
    response = viewer_client.get(URL, {"q": "github issue", "backend": "bm25", "compare": "bm25"}, headers=HTMX)
    answer = response.context["answer"]
    assert answer.columns == [] and answer.result.matches
    body = response.content.decode()
    assert 'data-testid="term-contribution"' in body and 'data-testid="compare"' not in body


def test_the_page_offers_the_backends_to_compare(viewer_user, admin_user, tools):
    viewer_client = _client_of(viewer_user)
    body = viewer_client.get(URL, {"q": "github", "compare": ["bm25", "hybrid"]}).content.decode()
    assert 'name="compare" value="bm25" data-testid="compare-backend" checked' in body
    assert 'value="naive" data-testid="compare-backend"' not in body  # staff only
    assert 'value="naive" data-testid="compare-backend"' in _client_of(admin_user).get(URL).content.decode()
    too_many = viewer_client.get(URL, {"q": "github", "compare": ["bm25"] * 20}, headers=HTMX).context["answer"]
    assert too_many.error.startswith("compare at most")


def test_a_select_query_compares_ranks_without_scores(viewer_client, tools):
    response = viewer_client.get(URL, {"q": "select:Write,mcp__slack__post_message", "backend": "bm25", "compare": "claude-code"}, headers=HTMX)
    answer = response.context["answer"]
    assert response.status_code == 200 and [c.error for c in answer.columns] == ["", ""]
    for column in answer.columns:
        assert [(r.name, r.score, r.normalised, r.disagreements) for r in column.rows] == [
            ("Write", None, None, []), ("mcp__slack__post_message", None, None, [])]
    body = response.content.decode()
    assert body.count('data-testid="compare-cell"') == 4 and "None" not in body


def test_it_groups_the_same_operation_on_other_servers(viewer_client, tools):
    from .conftest import make_tool

    from playground.registry.models import Tool

    for server in ("gitlab", "gitea"):
        make_tool(f"mcp__{server}__create_issue", f"Open a new issue in a {server} project", source=Tool.Source.IMPORTED)
    response = viewer_client.get(URL, {"q": "create issue", "max_results": 3})
    answer = response.context["answer"]
    [group] = answer.same_operation
    assert group.servers == 3 and group.operation == "create issue"
    ranks = {name: rank for name, _, rank in group.members}
    assert set(ranks) == {"mcp__github__create_issue", "mcp__gitlab__create_issue", "mcp__gitea__create_issue"}
    assert {rank for rank in ranks.values() if rank} <= {1, 2, 3}
    body = response.content.decode()
    assert 'data-testid="same-operation-group" data-servers="3"' in body and "same operation on 3 servers" in body
    # a query whose results have no same-operation tool shows no group
    assert viewer_client.get(URL, {"q": "post a message to a slack channel", "max_results": 1}).context["answer"].same_operation == []
