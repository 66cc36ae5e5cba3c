"""The labelled evaluation set that ships with the project (`demo`), found by name without TOOLSETS_DIR."""
from __future__ import annotations

import json

from playground.engine.catalog_io import DEMO_TOOLSET, load_catalog, load_queries, toolset_folder, toolset_names
from playground.engine.search import quality
from tests.toolset_fixtures import write_toy_toolsets


def test_the_demo_set_is_found_by_name_wherever_toolsets_dir_points(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLSETS_DIR", str(tmp_path / "nothing-here"))  # a fresh clone: no shared toolsets
    assert toolset_names() == [DEMO_TOOLSET]
    catalog, queries = quality.load_toolset(DEMO_TOOLSET)
    assert len(catalog.tools) > 700 and len(queries) >= 60
    # The catalog is the demo catalog the registry loads, not a copy that could drift from it.
    assert toolset_folder(DEMO_TOOLSET).name == "demo_data"


def test_the_folder_of_toolsets_dir_comes_after_the_demo_set(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLSETS_DIR", str(write_toy_toolsets(tmp_path)))
    assert toolset_names() == [DEMO_TOOLSET, "toy"]
    (tmp_path / DEMO_TOOLSET).mkdir()  # a shared folder of the same name does not replace the shipped set
    (tmp_path / DEMO_TOOLSET / "catalog.jsonl").write_text((tmp_path / "toy" / "catalog.jsonl").read_text())
    (tmp_path / DEMO_TOOLSET / "queries.jsonl").write_text((tmp_path / "toy" / "queries.jsonl").read_text())
    assert toolset_names() == [DEMO_TOOLSET, "toy"]
    assert len(quality.load_toolset(DEMO_TOOLSET)[0].tools) > 700


def test_the_demo_queries_follow_the_shared_format_and_both_splits_have_queries():
    folder = toolset_folder(DEMO_TOOLSET)
    names = {tool.name for tool in load_catalog(folder / "catalog.jsonl").tools}
    queries = load_queries(folder / "queries.jsonl")
    assert len({q.id for q in queries}) == len(queries)
    for q in queries:
        assert q.query.strip() and q.expected_tool_names
        for gold in q.expected_tool_names:
            assert q.accepted_names(gold) <= names, (q.id, gold)
        assert set(q.equivalent_names) <= set(q.expected_tool_names), q.id
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        assert set(json.loads(line)) <= {"id", "query", "expected_tool_names", "equivalent_names", "category"}
    splits = [quality.split_of(q.id) for q in queries]
    assert splits.count("dev") >= 15 and splits.count("test") >= 40
    # Requests, not tool names: no query spells out a gold tool's name.
    for q in queries:
        assert not any(gold.split("__")[-1].lower() in q.query.lower() for gold in q.expected_tool_names), q.id


def test_the_demo_set_runs_through_the_suite_on_a_fresh_clone(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLSETS_DIR", str(tmp_path / "nothing-here"))
    (result,) = quality.run_suite([DEMO_TOOLSET], ["bm25"], ["natural"], split="test", limit=12)
    assert result.toolset == DEMO_TOOLSET and result.queries == 12
    assert result.metrics["recall@10"] > 0.5  # a labelled set a working backend mostly finds
