"""The `+required` term filter is one per catalog: every backend and index over the catalog shares it,
so its keyword index is built once per catalog version (counted, not timed), and it answers exactly as
a filter built afresh."""
from __future__ import annotations

import pytest

from playground.engine.search.backends import get_backend
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.search.required import RequiredTermFilter
from playground.engine.tools import Tool, ToolCatalog

TERMS = [("git",), ("e",), ("re", "file"), ("slack",), ("nothing",), ("notebook",)]


@pytest.fixture
def builds(monkeypatch) -> list[int]:
    """Each keyword index built for a required-term filter (its tool count)."""
    made: list[int] = []
    real = ClaudeCodeKeywordBackend.build_index
    monkeypatch.setattr(ClaudeCodeKeywordBackend, "build_index",
                        lambda self, catalog, *a, **k: made.append(len(catalog)) or real(self, catalog, *a, **k))
    return made


def test_backends_and_tuned_variants_over_one_catalog_share_one_index(small_catalog, builds):
    plain, tuned = get_backend("bm25"), get_backend("bm25", k1=1.5)
    first, second = plain.index_for(small_catalog), tuned.index_for(small_catalog)
    assert first is not second and first.required is second.required is RequiredTermFilter.of(small_catalog)
    found = [backend.search("+git issue", small_catalog).matches for backend in (plain, tuned)]
    assert all(found) and all("git" in name for matches in found for name in matches)
    assert builds == [len(small_catalog.deferred)]  # one keyword index for both backends' queries
    for terms in TERMS:  # and it answers as a filter built afresh
        assert first.required.mask(terms).tolist() == RequiredTermFilter(list(small_catalog.deferred)).mask(terms).tolist()


def test_an_index_read_from_its_stored_blob_shares_the_catalogs_filter(small_catalog, builds):
    backend = get_backend("bm25")
    built = backend.build_index(small_catalog)
    loaded = backend.load_index(backend.dump_index(built), small_catalog)
    assert loaded.required is built.required
    built.required.mask(("git",))
    loaded.required.mask(("slack",))
    assert len(builds) == 1


def test_a_changed_catalog_gets_a_filter_of_its_own(small_catalog, builds):
    before = RequiredTermFilter.of(small_catalog)
    assert not before.mask(("kubernetes",)).any()
    grown = ToolCatalog([*small_catalog, Tool(name="mcp__k8s__list_pods", description="List kubernetes pods.", should_defer=True)])
    after = RequiredTermFilter.of(grown)
    assert after is not before and RequiredTermFilter.of(grown) is after
    mask = after.mask(("kubernetes",))
    assert [t.name for t, keep in zip(after.tools, mask, strict=True) if keep] == ["mcp__k8s__list_pods"]
    assert len(builds) == 2  # one per catalog
    # permissions that leave fewer tools make another (filtered) catalog: its own filter, its own tools
    fewer = ToolCatalog(t for t in grown if not t.name.startswith("mcp__github"))
    assert RequiredTermFilter.of(fewer).tools == fewer.deferred
