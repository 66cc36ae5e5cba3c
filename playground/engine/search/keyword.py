"""Claude Code's keyword scorer, indexed: the same scores and order as `naive.py`, much faster.

The rules (per query term, accumulated per tool; see `naive.py` for the literal transcription):
exact name part +12 (MCP) / +10; else substring of a name part +6 / +5; +3 when the full name
contains the term while the tool's score is still 0; +4 whole word in the search hint; +2 whole
word in the description. Required (`+term`) terms filter first; keep score > 0; sort by score
descending, ties in catalog order.

What the index precomputes per catalog (deferred tools only), and why it is exact:
- Name parts: a map from each *distinct* part to the tools that have it (far fewer distinct parts
  than tools), and every 1–3 character substring of each part → the parts containing it. A term of
  up to 3 characters finds the parts containing it with one lookup; a longer one intersects the
  postings of its rarest trigrams and checks the few candidates with `in`. Its exact hit is one
  dict lookup.
- The +3 full-name rule never fires for a term without a space: the full name is the parts joined
  by spaces, so a space-free term inside it lies inside one part, and then the part rule has already
  scored. `read_query` never yields a term with a space; a hand-built reading that has one is
  scored by the plain transcription.
- Whole words (JavaScript's `\\b`, ASCII word characters): `\\bT\\b` matches text D exactly when T is
  a concatenation of consecutive maximal runs of D (runs alternate word / non-word characters),
  and a non-word run at T's edge is flanked by word characters in D. So each description (and
  search hint) is cut into runs once: word runs anywhere, non-word runs only when interior and free
  of whitespace (a term never contains whitespace). A one-run term is answered by a posting list
  alone; a term of several runs (`c++`, `e-mail`, `file.txt`) intersects its runs' postings and
  then checks the real regex on those few candidates.
Per query, each distinct term becomes one dense per-tool array of points (numpy); the arrays add
up to the scores, required terms mask, and the top results are picked with a partial sort. The
explanation of each returned tool is read off the very arrays that produced its score.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from playground.engine.search.base import QueryReading, ScoredTool, SearchBackend, TermContribution
from playground.engine.search.query import JS_WHITESPACE
from playground.engine.search.names import parse_tool_name, whole_word_pattern
from playground.engine.search.naive import (
    POINTS_DESCRIPTION_WORD,
    POINTS_EXACT_PART,
    POINTS_HINT_WORD,
    POINTS_PART_SUBSTRING,
    RULE_DESCRIPTION_WORD,
    RULE_EXACT_PART,
    RULE_HINT_WORD,
    RULE_PART_SUBSTRING,
    NaiveKeywordBackend,
)
from playground.engine.tools import ToolCatalog

_RUNS = re.compile(r"[A-Za-z0-9_]+|[^A-Za-z0-9_]+")
_WORD_RUNS = re.compile(r"[A-Za-z0-9_]+")
_INTERIOR_RUNS = re.compile(r"(?<=[A-Za-z0-9_])[^A-Za-z0-9_" + JS_WHITESPACE + r"]+(?=[A-Za-z0-9_])")
_EMPTY = np.zeros(0, dtype=np.int32)
_GRAM = 3  # name-part substrings up to this length are indexed
_GRAMS_INTERSECTED = 3  # a longer term intersects its rarest trigrams' postings, then checks candidates
_FEW_PARTS = 32  # up to this many parts, concatenating per-part tool lists beats masking every (tool, part) pair


def whole_word_keys(text_lower: str) -> set[str]:
    """The runs of a text that a one-run term can match as a whole word (see the module docstring):
    every word run, and every non-word run free of whitespace with word characters on both sides."""
    return {*_WORD_RUNS.findall(text_lower), *_INTERIOR_RUNS.findall(text_lower)}


class WholeWordIndex:
    """Which tools contain a term as a JavaScript `\\b…\\b` whole word, for one text field."""

    def __init__(self, texts_lower: list[str]):
        self.texts = texts_lower
        keys_by_text: dict[str, set[str]] = {}
        postings: dict[str, list[int]] = {}
        for tool_id, text in enumerate(texts_lower):
            if not text:
                continue
            keys = keys_by_text.get(text)
            if keys is None:
                keys = keys_by_text[text] = whole_word_keys(text)
            for key in keys:
                bucket = postings.get(key)
                if bucket is None:
                    postings[key] = [tool_id]
                else:
                    bucket.append(tool_id)
        self.postings: dict[str, np.ndarray] = {k: np.asarray(v, dtype=np.int32) for k, v in postings.items()}

    def tools_matching(self, term: str) -> np.ndarray:
        """Sorted ids of the tools whose text matches `\\b{term}\\b` (term lowercased, no whitespace)."""
        runs = _RUNS.findall(term)
        if len(runs) == 1:
            return self.postings.get(term, _EMPTY)
        lists = []
        for run in set(runs):
            posting = self.postings.get(run)
            if posting is None:
                return _EMPTY
            lists.append(posting)
        lists.sort(key=len)
        candidates = lists[0]
        for posting in lists[1:]:
            if not len(candidates):
                return _EMPTY
            candidates = np.intersect1d(candidates, posting, assume_unique=True)
        pattern = whole_word_pattern(term)
        texts = self.texts
        return np.asarray([i for i in candidates.tolist() if pattern.search(texts[i])], dtype=np.int32)


@dataclass
class KeywordIndex:
    """Everything `rank` needs for one catalog's deferred tools (ids are positions in `catalog.deferred`)."""

    names: list[str]
    exact_points: np.ndarray  # per tool: 12 (MCP name) or 10
    substring_points: np.ndarray  # per tool: 6 or 5
    part_ids: dict[str, int]  # distinct name part → id
    parts: list[str]  # part id → the part
    part_tools: list[np.ndarray]  # part id → ids of the tools having that part
    tool_parts: list[tuple[int, ...]]  # tool id → its part ids, in name order
    gram_parts: dict[str, np.ndarray]  # every substring of 1–3 characters of a part → sorted part ids
    pair_part: np.ndarray  # every (tool, distinct part) pair: the part …
    pair_tool: np.ndarray  # … and the tool
    descriptions: WholeWordIndex
    hints: WholeWordIndex

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def part_count(self) -> int:
        return len(self.parts)

    def parts_containing(self, term: str) -> np.ndarray:
        """Sorted ids of the distinct parts that contain `term` as a substring."""
        if len(term) <= _GRAM:
            return self.gram_parts.get(term, _EMPTY)
        postings = []
        for start in range(len(term) - _GRAM + 1):
            posting = self.gram_parts.get(term[start: start + _GRAM])
            if posting is None:
                return _EMPTY
            postings.append(posting)
        postings.sort(key=len)
        candidates = postings[0]
        for posting in postings[1:_GRAMS_INTERSECTED]:
            candidates = np.intersect1d(candidates, posting, assume_unique=True)
        parts = self.parts
        return np.asarray([p for p in candidates.tolist() if term in parts[p]], dtype=np.int32)

    def tools_with_parts(self, part_ids: np.ndarray, part_mask: np.ndarray) -> np.ndarray:
        """Ids of the tools having any of these parts (a tool may repeat); `part_mask` marks the same parts."""
        if len(part_ids) <= _FEW_PARTS:
            return np.concatenate([self.part_tools[p] for p in part_ids.tolist()])
        return self.pair_tool[part_mask[self.pair_part]]


@dataclass
class _TermPoints:
    """One distinct term's points for every tool, split so an explanation can be read back."""

    name_points: np.ndarray  # 12/10 exact part, 6/5 substring, 0
    total: np.ndarray  # name_points + 4 (hint word) + 2 (description word)
    substring_parts: np.ndarray  # bool per distinct part: contains the term


class ClaudeCodeKeywordBackend(SearchBackend):
    name = "claude-code"
    label = "Claude Code keyword"
    description = (
        "Claude Code's own ToolSearch scorer: name parts, then whole words in the search hint and "
        "description; +term required. Same results as the plain transcription, indexed."
    )

    def build_index(self, catalog: ToolCatalog) -> KeywordIndex:
        tools = catalog.deferred
        part_ids: dict[str, int] = {}
        part_members: list[list[int]] = []
        tool_parts: list[tuple[int, ...]] = []
        is_mcp = np.zeros(len(tools), dtype=bool)
        lowered: dict[str, str] = {}
        descriptions: list[str] = []
        hints: list[str] = []
        for tool_id, tool in enumerate(tools):
            parsed = parse_tool_name(tool.name)
            is_mcp[tool_id] = parsed.is_mcp
            ids = []
            for part in parsed.parts:
                part_id = part_ids.get(part)
                if part_id is None:
                    part_id = part_ids[part] = len(part_members)
                    part_members.append([])
                if part_id not in ids:
                    part_members[part_id].append(tool_id)
                ids.append(part_id)
            tool_parts.append(tuple(ids))
            descriptions.append(_lower_shared(tool.description, lowered))
            hints.append(_lower_shared(tool.search_hint, lowered))
        distinct_parts = list(part_ids)
        grams: dict[str, list[int]] = {}
        for part_id, part in enumerate(distinct_parts):
            fragments = {part[i: i + n] for n in range(1, _GRAM + 1) for i in range(len(part) - n + 1)}
            for fragment in fragments:
                grams.setdefault(fragment, []).append(part_id)
        pair_part = np.repeat(np.arange(len(part_members), dtype=np.int32), [len(m) for m in part_members])
        pair_tool = np.asarray([t for m in part_members for t in m], dtype=np.int32)
        return KeywordIndex(
            names=[t.name for t in tools],
            exact_points=np.where(is_mcp, POINTS_EXACT_PART[True], POINTS_EXACT_PART[False]).astype(np.int32),
            substring_points=np.where(is_mcp, POINTS_PART_SUBSTRING[True], POINTS_PART_SUBSTRING[False]).astype(np.int32),
            part_ids=part_ids,
            parts=distinct_parts,
            part_tools=[np.asarray(m, dtype=np.int32) for m in part_members],
            tool_parts=tool_parts,
            gram_parts={g: np.asarray(ids, dtype=np.int32) for g, ids in grams.items()},
            pair_part=pair_part,
            pair_tool=pair_tool,
            descriptions=WholeWordIndex(descriptions),
            hints=WholeWordIndex(hints),
        )

    def rank(self, reading: QueryReading, index: KeywordIndex, catalog: ToolCatalog, max_results: int) -> list[ScoredTool]:
        terms = reading.scoring_terms
        if any(" " in term or not term for term in terms):
            # Only a hand-built reading can carry a space or an empty term; the literal loop scores those.
            return NaiveKeywordBackend().rank(reading, None, catalog, max_results)
        n = index.size
        if n == 0 or not terms:
            return []
        points: dict[str, _TermPoints] = {}
        for term in terms:
            if term not in points:
                points[term] = self._term_points(index, term)
        scores = np.zeros(n, dtype=np.int32)
        for term in terms:  # duplicates count twice, as in Claude Code
            scores += points[term].total
        keep = scores > 0
        for term in set(reading.required):
            keep &= points[term].total > 0
        candidates = np.flatnonzero(keep)
        if not len(candidates):
            return []
        # Best score first, ties in catalog order: one integer key, smallest first.
        key = (int(scores.max()) - scores[candidates]).astype(np.int64) * n + candidates
        if len(candidates) > max_results:
            nearest = np.argpartition(key, max_results - 1)[:max_results]
            top = candidates[nearest[np.argsort(key[nearest], kind="stable")]]
        else:
            top = candidates[np.argsort(key, kind="stable")]
        return [
            ScoredTool(index.names[i], int(scores[i]), self._explain(index, i, terms, points))
            for i in top.tolist()
        ]

    @staticmethod
    def _term_points(index: KeywordIndex, term: str) -> _TermPoints:
        name_points = np.zeros(index.size, dtype=np.int32)
        part_mask = np.zeros(index.part_count, dtype=bool)
        substring_parts = index.parts_containing(term)
        if len(substring_parts):
            part_mask[substring_parts] = True
            hit = index.tools_with_parts(substring_parts, part_mask)
            name_points[hit] = index.substring_points[hit]
            exact_part = index.part_ids.get(term)
            if exact_part is not None:  # an exact part is also a substring hit, so only look it up here
                hit = index.part_tools[exact_part]
                name_points[hit] = index.exact_points[hit]
        total = name_points.copy()
        total[index.hints.tools_matching(term)] += POINTS_HINT_WORD
        total[index.descriptions.tools_matching(term)] += POINTS_DESCRIPTION_WORD
        return _TermPoints(name_points, total, part_mask)

    @staticmethod
    def _explain(index: KeywordIndex, tool_id: int, terms: tuple[str, ...], points: dict[str, _TermPoints]) -> list[TermContribution]:
        breakdown: list[TermContribution] = []
        exact_points = int(index.exact_points[tool_id])
        for term in terms:
            term_points = points[term]
            name_points = int(term_points.name_points[tool_id])
            if name_points == exact_points:
                breakdown.append(TermContribution(term, RULE_EXACT_PART, name_points, "name", term))
            elif name_points:
                part_id = next(p for p in index.tool_parts[tool_id] if term_points.substring_parts[p])
                breakdown.append(TermContribution(term, RULE_PART_SUBSTRING, name_points, "name", index.parts[part_id]))
            rest = int(term_points.total[tool_id]) - name_points
            if rest >= POINTS_HINT_WORD:
                breakdown.append(TermContribution(term, RULE_HINT_WORD, POINTS_HINT_WORD, "search_hint"))
                rest -= POINTS_HINT_WORD
            if rest:
                breakdown.append(TermContribution(term, RULE_DESCRIPTION_WORD, POINTS_DESCRIPTION_WORD, "description"))
        return breakdown


def _lower_shared(text: str, cache: dict[str, str]) -> str:
    """Lowercase once per distinct text (catalogs repeat descriptions; this also shares the memory)."""
    lowered = cache.get(text)
    if lowered is None:
        lowered = cache[text] = text.lower()
    return lowered
