"""Learning from usage: which (query, tool) pairs a history teaches, the log, and how the BM25 and
hybrid backends score it."""
from __future__ import annotations

import json

import numpy as np

import pytest

from playground.engine.search import quality
from playground.engine.search.base import read_query
from playground.engine.search.bm25 import USAGE_NOTE, BM25Backend
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.search.usage import UsageLog, is_usage_evidence, usage_pairs
from tests.toolset_fixtures import write_toy_toolsets

ISSUE = "mcp__github__create_issue"
FORECAST = "mcp__weather__get_forecast"


def search_use(use_id: str, query: str) -> dict:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": use_id, "name": "ToolSearch", "input": {"query": query}}]}


def references(use_id: str, *names: str, is_error: bool = False) -> dict:
    block = {"type": "tool_result", "tool_use_id": use_id, "content": [{"type": "tool_reference", "tool_name": n} for n in names]}
    if is_error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def call(use_id: str, name: str) -> dict:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": use_id, "name": name, "input": {}}]}


def result(use_id: str, *, is_error: bool = False) -> dict:
    block = {"type": "tool_result", "tool_use_id": use_id, "content": "ok"}
    if is_error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def test_a_search_then_a_successful_call_of_a_returned_tool_is_one_pair():
    messages = [
        {"role": "user", "content": "Open an issue about the login bug"},
        search_use("s1", "open bug report"),
        references("s1", ISSUE, "mcp__gitlab__create_merge_request"),
        call("c1", ISSUE), result("c1"),
        call("c2", ISSUE), result("c2"),  # a second call of the same tool teaches nothing new
    ]
    assert usage_pairs(messages) == [("open bug report", ISSUE)]


def test_client_style_results_count_too():
    messages = [
        search_use("s1", "weather paris"),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "s1", "content": [{"type": "text", "text": json.dumps({"matches": [FORECAST]})}]}]},
        call("c1", FORECAST), result("c1"),
    ]
    assert usage_pairs(messages) == [("weather paris", FORECAST)]


@pytest.mark.parametrize("messages", [
    # the model picked by name: no search words to learn
    [search_use("s1", f"select:{ISSUE}"), references("s1", ISSUE), call("c1", ISSUE), result("c1")],
    [search_use("s1", "mcp__github"), references("s1", ISSUE), call("c1", ISSUE), result("c1")],
    # the call failed
    [search_use("s1", "open bug report"), references("s1", ISSUE), call("c1", ISSUE), result("c1", is_error=True)],
    # the search failed
    [search_use("s1", "open bug report"), references("s1", ISSUE, is_error=True), call("c1", ISSUE), result("c1")],
    # the tool called was not among the results
    [search_use("s1", "open bug report"), references("s1", FORECAST), call("c1", ISSUE), result("c1")],
    # no result yet (the run stopped between the call and its result)
    [search_use("s1", "open bug report"), references("s1", ISSUE), call("c1", ISSUE)],
])
def test_what_is_not_evidence(messages):
    assert usage_pairs(messages) == []


def test_anthropics_server_side_bm25_search_teaches_too_and_its_regex_search_does_not():
    def server_search(name: str, field: str, text: str, *found: str) -> dict:
        return {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": name, "input": {field: text}},
            {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
             "content": {"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference", "tool_name": n} for n in found]}},
            {"type": "tool_use", "id": "c1", "name": ISSUE, "input": {}},
        ]}

    assert usage_pairs([server_search("tool_search_tool_bm25", "query", "open bug report", ISSUE), result("c1")]) == [
        ("open bug report", ISSUE)]
    assert usage_pairs([server_search("tool_search_tool_regex", "pattern", "(?i)issue", ISSUE), result("c1")]) == []
    assert usage_pairs([server_search("tool_search_tool_bm25", "query", "open bug report"), result("c1")]) == []  # not returned


def test_a_later_search_that_returned_the_tool_is_the_one_credited():
    messages = [
        search_use("s1", "bug tracker"), references("s1", ISSUE),
        search_use("s2", "open bug report"), references("s2", ISSUE),
        call("c1", ISSUE), result("c1"),
    ]
    assert usage_pairs(messages) == [("open bug report", ISSUE)]
    assert is_usage_evidence("weather") and not is_usage_evidence("select:a,b") and not is_usage_evidence("  ")


def test_the_log_keeps_each_tools_most_recent_distinct_queries():
    log = UsageLog.from_pairs([("a  b", "t"), ("c", "t"), ("a b", "t"), ("d", "t"), ("x", "u"), ("", "u")], limit=2)
    assert log.for_tool("t") == ("a b", "d")  # "a b" moved to its last use; "c" fell out
    assert log.for_tool("u") == ("x",) and log.for_tool("nope") == ()
    assert log.entries == 3 and log.tools == 2 and bool(log) and not UsageLog()
    assert log.fingerprint == UsageLog.from_pairs([("x", "u"), ("a b", "t"), ("d", "t")]).fingerprint
    assert log.fingerprint != UsageLog.from_pairs([("x", "u"), ("a b", "t")]).fingerprint
    with pytest.raises(ValueError, match="at least one"):
        UsageLog.from_pairs([], limit=0)


def test_bm25_scores_past_queries_as_the_usage_field_and_explains_them(small_catalog):
    backend = BM25Backend()
    query = "bug ticket"
    assert backend.search(query, small_catalog).matches == []  # the tools' own words know neither
    log = UsageLog.from_pairs([("report a bug ticket", ISSUE)])
    learned = backend.search(query, small_catalog, usage=log)
    assert learned.matches[0] == ISSUE
    top = learned.scored[0]
    usage = [c for c in top.breakdown if c.field == "usage"]
    assert {c.term for c in usage} == {"bug", "ticket"} and all(USAGE_NOTE in c.detail for c in usage)
    assert sum(c.points for c in top.breakdown) == pytest.approx(top.score, abs=1e-3)
    # off: exactly the zero-shot ranking
    off = BM25Backend(usage_weight=0).search(query, small_catalog, usage=log)
    assert off.matches == backend.search(query, small_catalog).matches
    with pytest.raises(ValueError, match="usage_weight"):
        BM25Backend(usage_weight=-1)


def test_each_log_gets_its_own_index_and_backends_that_do_not_learn_ignore_it(small_catalog):
    backend = BM25Backend()
    log = UsageLog.from_pairs([("report a bug ticket", ISSUE)])
    plain, learned = backend.index_for(small_catalog), backend.index_for(small_catalog, log)
    assert plain is not learned and backend.index_for(small_catalog, log) is learned
    # the learned index is the catalog's own plus the log's postings: a new log re-indexes no tool
    assert learned.bm25f is plain.bm25f and plain.usage is None and set(learned.usage.indices.tolist()) == {2}  # one posting per learned stem, all of create_issue
    assert backend.index_for(small_catalog, UsageLog()) is plain  # an empty log is no log
    cc = ClaudeCodeKeywordBackend()
    assert cc.index_for(small_catalog, log) is cc.index_for(small_catalog)
    assert cc.search("bug ticket", small_catalog, usage=log).matches == cc.search("bug ticket", small_catalog).matches


def test_a_log_of_tools_outside_the_catalog_changes_nothing(small_catalog):
    log = UsageLog.from_pairs([("report a bug ticket", "mcp__jira__create_ticket")])
    backend = BM25Backend()
    assert backend.search("bug ticket", small_catalog, usage=log).to_dict() == backend.search("bug ticket", small_catalog).to_dict()


def test_hybrid_learns_through_its_bm25_side_and_keeps_its_dense_index(encoder, embeddings_dir, small_catalog):
    from playground.engine.search.hybrid import HybridBackend

    backend = HybridBackend()
    query = "open a bug ticket"
    log = UsageLog.from_pairs([("report a bug ticket", ISSUE), ("bug ticket", ISSUE)])
    before = backend.search(query, small_catalog)
    learned = backend.search(query, small_catalog, usage=log)
    score = {s.name: s.score for s in learned.scored}
    assert score[ISSUE] > {s.name: s.score for s in before.scored}.get(ISSUE, 0.0)
    bm25_side = next(c for c in next(s for s in learned.scored if s.name == ISSUE).breakdown if c.field == "bm25")
    assert "→usage" in bm25_side.detail
    # a new log rebuilds the BM25 side only: the dense side's index is the catalog's, shared
    learned, plain = backend.index_for(small_catalog, log), backend.index_for(small_catalog)
    assert learned.semantic is plain.semantic and learned.bm25.bm25f is plain.bm25.bm25f and plain.bm25.usage is None


def test_the_evaluation_can_use_the_dev_split_as_the_log(tmp_path):
    root = write_toy_toolsets(tmp_path)
    plain = quality.run_suite(["toy"], ["bm25", "claude-code"], ["natural"], split="test", root=root)
    learned = quality.run_suite(["toy"], ["bm25", "claude-code"], ["natural"], split="test", root=root, usage_from="dev")
    assert [r.backend for r in learned] == ["bm25 +usage", "claude-code"]  # only a backend that reads it is labelled
    assert "learned from usage" in learned[0].notes and learned[0].queries == plain[0].queries
    assert learned[1].metrics == plain[1].metrics
    with pytest.raises(ValueError, match="only measured on the test split"):
        quality.run_suite(["toy"], ["bm25"], split="all", root=root, usage_from="dev")
    with pytest.raises(ValueError, match="unknown usage source"):
        quality.run_suite(["toy"], ["bm25"], root=root, usage_from="prod")
    log = quality.usage_from_queries(quality.select_queries(quality.load_toolset("toy", root)[1], "dev"), "keyword")
    assert log and all(q == quality.styled_query(q, "keyword") for qs in log.queries.values() for q in qs)


def test_the_usage_index_scores_exactly_as_a_bm25f_field_would(small_catalog):
    """Kept apart so that an update costs the log's size, the usage field still joins each term's
    saturation like any BM25F field, and a term it adds to tools that lacked it lowers the term's
    idf on every tool: the scores equal a BM25F index built with "usage" as one more field."""
    from playground.engine.search.bm25 import analyzed_fields, analyzed_usage, build_bm25f_index

    backend = BM25Backend(server_weight=0)
    log = UsageLog.from_pairs([
        ("create github issue for a bug", ISSUE), ("bug report", ISSUE), ("city forecast rain", FORECAST),
        # terms the catalog has, on tools that lack them: their df rises, so their idf falls everywhere
        ("read the weather file", "mcp__mail__send_email"), ("github forecast", "mcp__files__read_file"),
    ])
    index = backend.index_for(small_catalog, log)
    tools = index.tools
    analysed = [{**analyzed_fields(t), "usage": analyzed_usage(log.for_tool(t.name))} for t in tools]
    weights = {**backend.field_weights, "usage": backend.usage_weight}
    reference = build_bm25f_index(analysed, weights, {**backend.field_b, "usage": backend.b}, k1=backend.k1)
    assert index.usage.rescale and all(0 < f < 1 for f in index.usage.rescale.values())
    for query in ("github bug", "rain forecast for a city", "create an issue", "bug", "read weather file", "github"):
        tokens = [token for token, _ in backend.query_tokens(read_query(query))]
        expected = np.zeros(len(tools))
        for token in tokens:
            hit = reference.postings(token)
            if hit is not None:
                expected[hit[0]] += hit[1]
        assert backend.score_all(tokens, index) == pytest.approx(expected, rel=1e-5, abs=1e-6), query
        ranked = backend.search(query, small_catalog, usage=log, max_results=3)
        for tool in ranked.scored:  # the explanation still adds up, rescaled shares included
            assert sum(c.points for c in tool.breakdown) == pytest.approx(tool.score, abs=1e-3)
