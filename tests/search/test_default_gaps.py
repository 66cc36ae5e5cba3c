"""Where the default backend is not the best: `quality.default_gaps` and its plain sentence."""
from __future__ import annotations

from playground.engine.search import quality


def _row(backend: str, recalls: list[float], *, style: str = "natural", ranks: list[int | None] | None = None) -> quality.RunResult:
    ranks = ranks or [1 if r else None for r in recalls]
    per_query = [{"id": f"q{i}", "query": f"request {i}", "gold": [f"tool_{i}"], "recall@5": r, "gold_rank": rank}
                 for i, (r, rank) in enumerate(zip(recalls, ranks))]
    return quality.RunResult(toolset="set", backend=backend, style=style, split="test", queries=len(recalls), tools=10,
                             metrics={"recall@5": sum(recalls) / len(recalls)}, p50_ms=1, p95_ms=1, build_s=0, index_mb=0,
                             per_query=per_query)


def test_a_backend_ahead_of_the_default_is_named_with_its_queries_each_way():
    default = _row("hybrid", [1, 1, 0, 0, 1, 0, 1, 1, 0, 1], ranks=[1, 2, None, None, 3, 12, 1, 4, None, 1])
    rival = _row("bm25", [1, 1, 1, 1, 1, 0, 1, 0, 1, 1], ranks=[1, 1, 2, 5, 1, None, 2, None, 1, 3])
    [gap] = quality.default_gaps([default, rival], "hybrid")
    assert (gap.leader, gap.default) == ("bm25", "hybrid")
    assert (gap.better, gap.worse, gap.queries) == (3, 1, 10)
    assert gap.difference == 0.2
    low, high = gap.interval
    assert low < 0.2 < high
    # the queries where the rival gains, with both ranks of the first gold tool (None = beyond the 10 looked at)
    assert [(e["query"], e["leader_rank"], e["default_rank"]) for e in gap.examples] == [
        ("request 2", 2, None), ("request 3", 5, None), ("request 8", 1, None)]
    sentence = quality.describe_gap(gap)
    assert "bm25 0.800 against the default hybrid 0.600 (+0.200 recall@5)" in sentence
    assert "more gold tools on 3 of 10 queries and fewer on 1" in sentence
    # stored as a dict (the evaluation page) it reads the same
    assert quality.describe_gap(gap.to_dict()) == sentence


def test_noise_and_a_real_difference_are_told_apart():
    ten = [0.0] * 10
    small = _row("bm25", [1.0] + [0.0] * 9)
    [noise] = quality.default_gaps([_row("hybrid", ten), small], "hybrid")
    assert noise.within_noise and "within the noise" in quality.describe_gap(noise)
    large = _row("bm25", [1.0] * 8 + [0.0] * 2)
    [real] = quality.default_gaps([_row("hybrid", ten), large], "hybrid")
    assert not real.within_noise and "a real difference" in quality.describe_gap(real)


def test_no_gap_where_the_default_leads_and_like_compared_with_like():
    default = _row("hybrid", [1, 1, 1, 0])
    assert quality.default_gaps([default, _row("bm25", [1, 0, 1, 0])], "hybrid") == []
    assert "has the best recall@5 on every toolset" in quality.format_gaps([default, _row("bm25", [1, 0, 1, 0])], "hybrid")
    # another style is another comparison; a +usage row is compared with the default's +usage row only
    other_style = _row("bm25", [1, 1, 1, 1], style="keyword")
    learned = _row("bm25 +usage", [1, 1, 1, 1])
    assert quality.default_gaps([default, other_style, learned], "hybrid") == []
    [gap] = quality.default_gaps([default, learned, _row("hybrid +usage", [0, 0, 1, 1])], "hybrid")
    assert (gap.default, gap.leader) == ("hybrid +usage", "bm25 +usage")


def test_the_cli_statement_names_every_gap_or_says_the_default_is_absent():
    text = quality.format_gaps([_row("hybrid", [0, 0, 0, 1]), _row("bm25", [1, 1, 0, 1]), _row("semantic", [1, 0, 0, 1])], "hybrid")
    assert text.splitlines()[0] == "Where the default backend (hybrid) is not the best (recall@5):"
    assert text.index("set, natural queries: bm25") < text.index("set, natural queries: semantic")  # the leader first
    assert "bm25 1 of 1 (first #1), hybrid 0 of 1 (first >10): request 0 → tool_0" in text
    assert "is not in this run" in quality.format_gaps([_row("bm25", [1, 0])], "hybrid")


def test_per_query_details_stay_out_of_the_stored_row():
    row = _row("hybrid", [1, 0])
    assert "per_query" not in row.to_dict() and len(row.per_query) == 2
