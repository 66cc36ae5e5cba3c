"""A profile's own labelled set: the requests its team labelled with the tool they should find.

Rows are added from the conversations' "Search misses" page (a failed search → the tool finally
called). Read back, the rows become the engine's `LabelledQuery` list in the shared toolsets' format
— one entry per query text (its tools together), the query's sha1 as its id, so its dev/test split
is the shared toolsets' rule — beside the profile's searchable catalog: the evaluation runs it like
any toolset (`profile:<id>`), and the JSONL export feeds the command line's `eval`.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Collection

from django.db import IntegrityError, transaction
from django.db.models import Count

from playground.engine.catalog_io import LabelledQuery as EngineLabelledQuery
from playground.engine.search.quality import split_of
from playground.engine.tools import ToolCatalog
from playground.registry import adapter, backends
from playground.registry.models import AgentProfile, LabelledQuery

PROFILE_TOOLSET_PREFIX = "profile:"
MAX_QUERY_CHARS = 1000  # as the usage log keeps them: a pasted document is not a request to label
ID_CHARS = 16  # of the query's sha1: the labelled query's id (and so its split)


def normalised(query: str) -> str:
    return " ".join(str(query).split())[:MAX_QUERY_CHARS]


def query_hash(query: str) -> str:
    return hashlib.sha1(normalised(query).encode("utf-8")).hexdigest()


def split_of_query(query: str) -> str:
    """dev or test, as the shared toolsets split their queries (by the id's sha1)."""
    return split_of(query_hash(query)[:ID_CHARS])


class LabelRefused(ValueError):
    """A row that cannot join the set; the message says why, for the page."""


def add_labelled_query(profile: AgentProfile, query: str, tool_name: str, *, conversation_id: int | None = None,
                       user=None, searchable: Collection[str] | None = None) -> tuple[LabelledQuery, bool]:
    """Add (query → tool) to the profile's set; (row, created). The tool must be one the profile's
    model can search for now (a labelled query the catalog cannot answer measures nothing);
    `searchable`: those tools' names when the caller adds many rows (default: read them)."""
    text = normalised(query)
    if not text:
        raise LabelRefused("The query is empty.")
    if tool_name not in (searchable if searchable is not None else searchable_names(profile)):
        raise LabelRefused(f"{tool_name} is not a deferred tool of the profile {profile.name!r} any more.")
    digest = query_hash(text)
    existing = LabelledQuery.objects.filter(profile=profile, query_hash=digest, tool_name=tool_name).first()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            return LabelledQuery.objects.create(profile=profile, query=text, query_hash=digest, tool_name=tool_name,
                                                conversation_id=conversation_id, created_by=user), True
    except IntegrityError:  # the same row added by a second click meanwhile
        return LabelledQuery.objects.get(profile=profile, query_hash=digest, tool_name=tool_name), False


def searchable_catalog(profile: AgentProfile) -> ToolCatalog:
    """What the profile's model may search: its catalog after the permission rules."""
    _catalog, filtered = adapter.filtered_catalog(profile)
    return filtered.permitted


def searchable_names(profile: AgentProfile) -> set[str]:
    """The deferred tools the profile's model finds only by searching."""
    return {tool.name for tool in searchable_catalog(profile).deferred}


def engine_queries(profile: AgentProfile, catalog: ToolCatalog | None = None) -> list[EngineLabelledQuery]:
    """The set as labelled queries over `catalog` (default: the profile's searchable one): one per
    query text, its tools in the order they were labelled; tools no longer in the catalog are left out."""
    catalog = catalog if catalog is not None else searchable_catalog(profile)
    grouped: dict[str, tuple[str, list[str]]] = {}
    for row in profile.labelled_queries.order_by("id"):
        if row.tool_name in catalog:
            grouped.setdefault(row.query_hash, (row.query, []))[1].append(row.tool_name)
    return [EngineLabelledQuery(id=digest[:ID_CHARS], query=text, expected_tool_names=tuple(tools))
            for digest, (text, tools) in grouped.items()]


def split_counts(profile: AgentProfile, catalog: ToolCatalog | None = None) -> dict[str, int]:
    """How many of the set's queries are in each split, over `catalog` (default: the profile's searchable one)."""
    counts = {"dev": 0, "test": 0}
    for query in engine_queries(profile, catalog):
        counts[split_of(query.id)] += 1
    return counts


def queries_jsonl(profile: AgentProfile) -> str:
    """The set in the shared toolsets' `queries.jsonl` format (with each query's split as its category)."""
    lines = [json.dumps({"id": q.id, "query": q.query, "expected_tool_names": list(q.expected_tool_names),
                         "category": split_of(q.id)}, ensure_ascii=False) for q in engine_queries(profile)]
    return "\n".join(lines) + ("\n" if lines else "")


def toolset_name(profile: AgentProfile) -> str:
    return f"{PROFILE_TOOLSET_PREFIX}{profile.pk}"


def profile_for_toolset(name: str) -> AgentProfile | None:
    """The profile a `profile:<id>` toolset name stands for (None: not such a name, or no such profile)."""
    if not name.startswith(PROFILE_TOOLSET_PREFIX):
        return None
    number = name[len(PROFILE_TOOLSET_PREFIX):]
    if not number.isdigit():
        return None
    return AgentProfile.objects.filter(pk=int(number)).first()


def profile_toolset(name: str) -> tuple[ToolCatalog, list[EngineLabelledQuery]]:
    """(catalog, labelled queries) of a `profile:<id>` toolset, for the evaluation suite."""
    profile = profile_for_toolset(name)
    if profile is None:
        raise ValueError(f"toolset {name!r}: no such profile")
    catalog = searchable_catalog(profile)
    return catalog, engine_queries(profile, catalog)


def profiles_with_sets() -> list[tuple[AgentProfile, int]]:
    """Profiles that have a labelled set, with its row count (the evaluation page lists them)."""
    return [(p, p.count) for p in AgentProfile.objects.annotate(count=Count("labelled_queries")).filter(count__gt=0).order_by("name")]


RANK_DEPTH = 50  # how deep a miss's tool is looked for in today's ranking


def ranks_now(profile: AgentProfile, pairs: list[tuple[str, str]], *, depth: int = RANK_DEPTH,
              catalog: ToolCatalog | None = None) -> dict[tuple[str, str], int | None]:
    """Where the profile's backend ranks each (query, tool) today, over `catalog` (default: the
    profile's searchable one; 1-based; None: not in the first `depth`). Each query is searched once."""
    catalog = catalog if catalog is not None else searchable_catalog(profile)
    backend = backends.search_backend(profile.search_backend or None)
    ranked: dict[str, list[str]] = {}
    answer: dict[tuple[str, str], int | None] = {}
    for query, tool in pairs:
        if query not in ranked:
            ranked[query] = list(backend.search(query, catalog, max_results=depth).matches)
        names = ranked[query]
        answer[(query, tool)] = names.index(tool) + 1 if tool in names else None
    return answer
