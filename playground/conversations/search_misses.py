"""Where a profile's searches fail, read from its conversations (the "Search misses" page and
`manage.py search_misses`).

The engine reads each conversation's history (`engine.search.misses`: empty keyword searches, and
searches whose results lacked the tool the model went on to call); this module gathers them over a
profile's most recent conversations, looks up where the profile's backend ranks each missed tool
today, groups them by tool and by server, and marks the rows already in the profile's labelled set.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from playground.conversations.models import Conversation, Message
from playground.engine.search.misses import EMPTY, MISSED, keyword_searches, search_misses
from playground.engine.tools import server_of
from playground.registry import labelled_sets
from playground.registry.models import AgentProfile

CONVERSATIONS_READ = 200  # the most recent conversations of the profile that are read
# Distinct (query, tool) rows whose rank today is looked up, most frequent first: one search each.
# The page ranks its first rows only (a cold hybrid search is 30-90 ms: 200 rows held a web request
# 6-18 s); the command, which waits on nobody, ranks them all.
PAGE_ROWS_RANKED = 25
ROWS_RANKED = 200


@dataclass
class MissRow:
    query: str
    kind: str  # EMPTY | MISSED
    tool: str  # "" for an empty search nothing was called after
    returned: tuple[str, ...]
    loaded_by: str
    count: int = 0  # how often this (query, tool) failed
    conversation_ids: list[int] = field(default_factory=list)  # newest first
    rank_now: int | None = None
    ranked: bool = False  # rank_now was looked up (rows past ROWS_RANKED are not)
    labelled: bool = False  # already in the profile's labelled set
    split: str = ""  # the split it has (or would have) in the labelled set

    @property
    def server(self) -> str:
        return (server_of(self.tool) or "") if self.tool else ""

    @property
    def labellable(self) -> bool:
        return bool(self.tool) and not self.labelled


@dataclass
class MissReport:
    profile: AgentProfile
    conversations: int  # read
    searches: int  # keyword searches in them
    rows: list[MissRow]
    by_tool: list[tuple[str, int]]
    by_server: list[tuple[str, int]]
    backend: str
    labelled_set: dict[str, int]  # the profile's labelled set: queries per split
    rank_depth: int = labelled_sets.RANK_DEPTH

    @property
    def failed(self) -> int:
        return sum(row.count for row in self.rows)

    @property
    def empty(self) -> int:
        return sum(row.count for row in self.rows if row.kind == EMPTY)

    @property
    def missed(self) -> int:
        return sum(row.count for row in self.rows if row.kind == MISSED)


def profile_misses(profile: AgentProfile, *, conversations: int = CONVERSATIONS_READ, rank: bool = True,
                   rows_ranked: int = ROWS_RANKED) -> MissReport:
    """The failed searches of the profile's most recent conversations, most frequent first."""
    catalog = labelled_sets.searchable_catalog(profile)  # read once: the rows, their ranks and the set's counts
    searchable = {tool.name for tool in catalog.deferred}
    conversation_ids = list(Conversation.objects.filter(profile=profile).order_by("-id").values_list("id", flat=True)[:conversations])
    histories: dict[int, list[dict]] = {pk: [] for pk in conversation_ids}
    for conversation_id, role, content in (Message.objects.filter(conversation_id__in=conversation_ids)
                                           .order_by("conversation_id", "position").values_list("conversation_id", "role", "content")):
        histories[conversation_id].append({"role": role, "content": content})
    rows: dict[tuple[str, str, str], MissRow] = {}
    searches = 0
    for conversation_id in conversation_ids:  # newest first, so each row's first conversation is its latest
        history = histories[conversation_id]
        searches += keyword_searches(history)
        for miss in search_misses(history, searchable):
            row = rows.setdefault((miss.query, miss.tool, miss.kind),
                                  MissRow(miss.query, miss.kind, miss.tool, miss.returned, miss.loaded_by))
            row.count += 1
            if conversation_id not in row.conversation_ids:
                row.conversation_ids.append(conversation_id)
    ordered = sorted(rows.values(), key=lambda r: (-r.count, -r.conversation_ids[0]))
    labelled = set(profile.labelled_queries.values_list("query_hash", "tool_name"))
    for row in ordered:
        row.split = labelled_sets.split_of_query(row.query)
        row.labelled = (labelled_sets.query_hash(row.query), row.tool) in labelled
    if rank:
        to_rank = [row for row in ordered if row.tool][:rows_ranked]
        ranks = labelled_sets.ranks_now(profile, [(row.query, row.tool) for row in to_rank], catalog=catalog)
        for row in to_rank:
            row.rank_now, row.ranked = ranks[(row.query, row.tool)], True
    tools = Counter()
    servers = Counter()
    for row in ordered:
        if row.tool:
            tools[row.tool] += row.count
            servers[row.server or "(built-in)"] += row.count
    return MissReport(profile=profile, conversations=len(conversation_ids), searches=searches, rows=ordered,
                      by_tool=tools.most_common(), by_server=servers.most_common(),
                      backend=profile.search_backend or "default", labelled_set=labelled_sets.split_counts(profile, catalog))
