"""No commit lowers the default backend's top-1 or recall@5 on any shared toolset.

A fixed, even sample of each shared toolset's test split (natural requests) is ranked by the default
backend and compared with `fixtures/quality_baseline.json`, query set by query set: any drop fails,
naming the set, the metric and the queries that lost. A change that wins somewhere and loses here is
a loss (DEVELOPERS.md); a deliberate trade is made by refreshing the baseline in the same commit,
with the reason in docs/search-quality.md:

    UPDATE_QUALITY_BASELINE=1 .venv/bin/python -m pytest tests/search/test_quality_regression.py
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from playground.engine.search import quality
from playground.engine.search.backends import DEFAULT_BACKEND

BASELINE = Path(__file__).parent / "fixtures" / "quality_baseline.json"
SAMPLE = 60  # queries of each test split, evenly spread (quality.select_queries)
METRICS = ("top@1", "recall@5")

pytestmark = pytest.mark.slow


def measure(root: Path) -> dict[str, dict]:
    results = quality.run_suite(quality.TOOLSETS, [DEFAULT_BACKEND], ["natural"], split="test", limit=SAMPLE, root=root)
    measured = {}
    for result in results:
        per_query = {q["id"]: {"recall@5": q["recall@5"], "top@1": float(q["gold_rank"] == 1)} for q in result.per_query}
        measured[result.toolset] = {"backend": result.backend, "queries": result.queries,
                                    **{m: result.metrics[m] for m in METRICS}, "per_query": per_query}
    return measured


def test_no_shared_toolset_loses_top_1_or_recall_at_5(shared_toolsets):
    measured = measure(shared_toolsets)
    if os.environ.get("UPDATE_QUALITY_BASELINE") == "1":
        BASELINE.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        pytest.skip(f"baseline written to {BASELINE}")
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    assert set(measured) == set(baseline), "the toolsets changed: refresh the baseline"
    losses = []
    for toolset, figures in measured.items():
        before = baseline[toolset]
        assert (figures["backend"], figures["queries"]) == (before["backend"], before["queries"]), \
            f"{toolset}: the sample changed ({before['backend']}, {before['queries']} → {figures['backend']}, {figures['queries']}): refresh the baseline"
        for metric in METRICS:
            # The baseline holds four places (written when the suite rounded its metrics); a measure is
            # compared at that precision, so 0.36666… is not a loss against a stored 0.3667.
            if round(figures[metric], 4) < before[metric] - 1e-9:
                lost = [qid for qid, now in figures["per_query"].items() if now[metric] < before["per_query"][qid][metric]]
                losses.append(f"{toolset} {metric} {before[metric]:.4f} → {figures[metric]:.4f} (lost on {', '.join(lost[:5])})")
    assert not losses, "the default backend got worse:\n" + "\n".join(losses)
