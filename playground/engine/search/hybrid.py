"""Hybrid ToolSearch backend: BM25 and dense similarity, fused.

Weighted fusion: bm25_weight × BM25/max(BM25 of this query) + dense_weight × cosine. Normalising
BM25 per query makes the two scales comparable whatever the query length. (Reciprocal-rank fusion,
evidence-only server routing and server diversity lost on the development split and were removed;
docs/search-quality.md keeps their record.)
General refinements, all tuned on the development split only (docs/search-quality.md):
  - sentences (`intent_weight`): a query of several sentences asks for several things; each
    sentence is also scored alone and the best per-sentence score (normalised) is mixed in, so a
    tool that answers one sub-request well is not drowned by the others' words.
  - server routing (`server_weight`): a tool also gets a share of the best fused score among its
    server's tools — a multi-step request usually needs several tools of one server. Catalogs of
    one-tool servers, or of a single server, keep their order.
  - query length: from 15 distinct stems on, the BM25 side weighs 0.4 instead of 0.2.
  - aspect coverage (`aspect_weight`): a request that lists several things ("the balance sheet,
    cash flow statements and recommendation trends") is split into clauses, and the top k is
    picked greedily by xQuAD (Santos et al., 2010): each next tool scores (1 − λ) × its fused
    score / the best + λ × how much it covers clauses the tools already picked do not. A request
    of one clause ranks as without it.
  - capabilities beside topics (`capabilities`, `capability_rank`; capabilities.py): a request's
    implied generic step (write the file, compute) gets the catalog's best tool for it at rank 5;
    a document deliverable is read as a chain of steps (`capability_chain`), each later step
    answered among the first step's server and put in the place of a top-k tool about the same
    kind of document that is no step of it.
  - piece vectors (`piece_vectors`): sentences and clauses are encoded as texts of their own
    ("alone", the default), or pooled from the token states of the one pass over the request
    ("pooled", late chunking): about half the time of a multi-piece request, for a point or so of
    recall on long multi-step requests (docs/benchmarks.md, "Speed").
Both sides see the same candidates (required terms filter by the Claude Code rule), ties keep
catalog order. The explanation shows each side's rank and score, what it added, and the BM25
terms behind it; after aspect coverage, the parts are scaled to their share and the clause the
tool covers best is named, so the points still add up to the score.

Without the `semantic` extra the backend still answers — BM25 only — and logs why once; the
explanation says so too. That is what keeps the default backend working on a light install.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import Any

import numpy as np

from playground.engine.search import capabilities, concurrency, text
from playground.engine.search.base import QueryReading, ScoredTool, SearchBackend, TermContribution, number_option, read_query
from playground.engine.search.bm25 import REQUIRED_TERM_POINTS, BM25Backend, BM25Index, top_indices
from playground.engine.search.encoder import EncoderUnavailable
from playground.engine.search.language_gate import has_words
from playground.engine.search.required import numbers_as_words
from playground.engine.search.semantic import SemanticBackend, dense_may_answer, query_text, query_text_spans
from playground.engine.search.usage import UsageLog
from playground.engine.search.vector_scan import VectorScan, scan_for
from playground.engine.tools import ToolCatalog

logger = logging.getLogger(__name__)

# Tuned on the development split of every toolset (docs/search-quality.md).
DEFAULTS: dict[str, Any] = {
    "bm25_weight": 0.2,
    "dense_weight": 1.0,
    "intent_weight": 0.3,  # share of the best per-sentence score (multi-request queries); 0 = off
    "server_weight": 0.6,  # share of the best score among the tool's server siblings; 0 = off
    # Long requests carry more specific words for the BM25 side to match (the dense side blurs
    # them into one vector): from `long_query_terms` distinct query stems on, BM25 weighs
    # `bm25_weight_long` instead of `bm25_weight` (None = no change).
    "bm25_weight_long": 0.4,
    "long_query_terms": 15,
    # xQuAD over the clauses of the request: λ, the exponent that turns a clause's (max-normalised)
    # score into "this tool covers it", and how many of the fused ranking's best are re-picked.
    "aspect_weight": 0.3,
    "aspect_sharpness": 2.0,
    "aspect_pool": 50,
    # How sentences and clauses get their vectors: "alone" (each encoded as a text of its own) or
    # "pooled" (late chunking: the mean of their tokens' states in the one pass over the whole
    # request: one pass instead of one per piece, about half the search time of a request of
    # several pieces; docs/benchmarks.md, "Speed", has the cost in recall).
    "piece_vectors": "alone",
    # Catalogs of `scan_int8_tools` tools or more (none of the evaluation's toolsets: the largest
    # has 2,479) scan an int8 copy of the tool vectors on ONNX Runtime, every query row in one pass,
    # and score each row's `scan_rescore` best tools again exactly (vector_scan.py): the float32
    # scan read 150 MB per row at 100,000 tools (docs/benchmarks.md, "Speed").
    "scan_int8_tools": 20_000,
    "scan_rescore": 2_000,
    # Capabilities beside topics (capabilities.py): the rank at which the catalog's best tool for a
    # capability the request implies enters the top k (0 = off), how many such slots a request may
    # get, how many of the capability's best tools the request chooses among, and the cosine a
    # catalog's best tool must reach to the capability's description to count as a tool for it.
    # Calibrated on the development split (docs/search-quality.md): "produce-file" won on every
    # toolset, "compute" won or tied on every one (placed only where the catalog has a calculator);
    # the other capabilities' slots lost on at least one, so they are read but not placed.
    "capability_rank": 5,
    "capability_slots": 2,
    "capabilities": ["produce-file", "compute"],
    # the share of the displaced tool's score (for the request) the capability's tool must reach
    "capability_min_share": 0.0,
    "capability_multi_need_only": False,  # slots only for requests of several clauses or sentences
    "capability_pool": 3,
    # Chains (capabilities.py, variants): producing a document takes more than one tool (create a
    # presentation, add to it, save it). "off"; "kin": each later step's tool (found among the
    # server of the first step's tool) takes the place of a top-k tool that is about the same kind
    # of document but no step of the chain, lowest first, or the capability's slot if the first
    # step did not need it; "rank": the later steps take the ranks above the slot. Measured on the
    # development split (docs/search-quality.md, "Chains"): "kin" and "rank" +1 / −0 on
    # livemcpbench, no change elsewhere; "kin" displaces fewer topic tools. `chain_min_cosine`: a
    # step's tool must reach it to the step's description (0.45–0.65 gave the same figures).
    "capability_chain": "kin",
    "chain_min_cosine": 0.55,
    "capability_min_cosine": 0.45,
    # What the encoder reads for a one-sentence natural-language request (capabilities.natural_request)
    # and its clauses: the text put into this frame at "{}" ("" = the text as typed). Tool texts
    # say what a tool does; the frame reads the request as one ("a tool to find flights from …"),
    # which moves its vector towards the tools that do it rather than the ones that share its
    # topic or places. Requests of several sentences (context, then the ask) and keyword-style
    # queries are read as typed. Chosen on the development split (docs/search-quality.md,
    # "Dense-side round"): framing every request lost on stabletoolbench's multi-sentence ones.
    "query_frame": "a tool to {}",
}
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；])\s+|\n+")
MIN_INTENT_WORDS = 3
# A capability's answers: its best tool and those within this cosine of it (to the description):
# "write a file" may be answered by two servers' write_file, never by read_file next to them.
CAPABILITY_MARGIN = 0.1
# Each sentence or clause is encoded and scored: a pasted document must not cost hundreds of
# encodings. Beyond this many pieces a query is read whole (3 of the 9,781 evaluation queries).
MAX_PIECES = 24


Span = tuple[int, int]


def _split_pieces(query: str, breaks: re.Pattern[str], min_words: int) -> list[tuple[str, Span]]:
    """The pieces of `query` between `breaks`, each with its character span in `query.strip()`; a
    piece under `min_words` content words joins the previous one (its text joined by a space, its
    span reaching over the break). One piece, or more than MAX_PIECES → [] (the query is read whole)."""
    stripped = query.strip()
    fragments: list[Span] = []
    start = 0
    for found in breaks.finditer(stripped):
        fragments.append((start, found.start()))
        start = found.end()
    fragments.append((start, len(stripped)))
    pieces: list[tuple[str, Span]] = []
    for start, end in fragments:
        raw = stripped[start:end]
        piece = raw.strip()
        if not piece:
            continue
        start += len(raw) - len(raw.lstrip())
        end = start + len(piece)
        if pieces and len([w for w in text.words(piece) if w not in text.STOPWORDS]) < min_words:
            previous, (previous_start, _) = pieces[-1]
            pieces[-1] = (f"{previous} {piece}", (previous_start, end))
        else:
            pieces.append((piece, (start, end)))
    return pieces if 1 < len(pieces) <= MAX_PIECES else []


def _split_request(query: str, breaks: re.Pattern[str], min_words: int) -> list[str]:
    return [piece for piece, _ in _split_pieces(query, breaks, min_words)]


def split_intents(query: str) -> list[str]:
    """The sentences of a query that asks for several things (fragments under 3 content words
    join the previous one); [] when it is one sentence."""
    return _split_request(query, _SENTENCE_END, MIN_INTENT_WORDS)


# Clause boundaries of a request: sentence ends, commas, and the words that join sub-requests.
_CLAUSE_BREAK = re.compile(
    r"(?<=[.!?;。！？；])\s+|\n+|,?\s+(?:and then|then|and also|also|additionally|as well as|and)\s+|,\s+",
    re.IGNORECASE,
)
MIN_ASPECT_WORDS = 2


def split_aspects(query: str) -> list[str]:
    """The clauses of a request that asks for several things (a fragment under 2 content words
    joins the previous clause); [] when it is one clause (nothing to cover)."""
    return _split_request(query, _CLAUSE_BREAK, MIN_ASPECT_WORDS)


@dataclass
class AspectPick:
    """Why xQuAD put a tool where it is: its share of relevance and of clause coverage."""

    relevance_scale: float  # (1 − λ) / best fused score: what the fused parts are multiplied by
    coverage: float  # λ × the clause coverage it added when it was picked
    clause: str  # the clause it covers best


def cover_aspects(
    fused: np.ndarray, clause_scores: np.ndarray, clauses: list[str], candidates: list[int],
    k: int, weight: float, sharpness: float,
) -> list[tuple[int, float, AspectPick]]:
    """xQuAD greedy selection of k of `candidates` (tool indices, best fused first).

    `clause_scores[c, j]` is clause c's score of candidate j. Normalised by its best candidate and
    raised to `sharpness` it is P(candidate covers clause). Each pick multiplies every clause's
    remaining need by (1 − P). Gains never grow from one pick to the next, so the returned scores
    are in descending order."""
    cand = np.asarray(candidates)
    top = float(fused[cand].max())
    relevance = fused[cand] / top
    covers = np.clip(np.asarray(clause_scores, dtype=np.float64), 0.0, None)
    covers = covers / np.maximum(covers.max(axis=1, keepdims=True), 1e-12)
    covers **= sharpness
    need = np.ones(len(clauses))
    free = np.ones(cand.size, dtype=bool)
    picks: list[tuple[int, float, AspectPick]] = []
    for _ in range(min(k, cand.size)):
        coverage = weight * (need[:, None] * covers).mean(axis=0)
        gain = np.where(free, (1 - weight) * relevance + coverage, -np.inf)
        j = int(np.argmax(gain))  # first best: ties keep the fused order
        free[j] = False
        best_clause = int(np.argmax(need * covers[:, j]))
        picks.append((int(cand[j]), float(gain[j]), AspectPick((1 - weight) / top, float(coverage[j]), clauses[best_clause])))
        need *= 1 - covers[:, j]
    return picks


_warned: set[str] = set()


@dataclass
class HybridIndex:
    bm25: BM25Index
    semantic: Any  # SemanticIndex, or None when the extra is missing
    # capability description → (its best tools, best first, and the best one's cosine to it)
    capability_answers: dict[str, tuple[list[int], float]] = field(default_factory=dict)
    # capability description → its vector: the catalog's, not the request's (the query cache may be
    # cleared or evicted between requests; a slot's cosine must not cost an encoder run)
    capability_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    # (a chain step's description, server id) → that server's tool for it and its cosine, or None
    chain_steps: dict[tuple[str, int], tuple[int, float] | None] = field(default_factory=dict)


@dataclass
class CapabilitySlot:
    """Why a tool stands where it does: a capability the request implies put it there."""

    cue: capabilities.CapabilityCue
    slot: int  # 1-based rank it was given
    cosine: float  # its cosine to the capability's description
    moved_from: int | None  # its rank before (None: below the top k)
    # A later step of a deliverable's chain (capability_chain): the chain's first tool, the step
    # (1-based) and the steps in all, and the tool it took the place of (None: the free slot).
    chain_first: str = ""
    chain_server: str = ""
    step: int = 0
    steps: int = 0
    replaced: int | None = None
    first_slot: int = 0  # the capability's slot (1-based)


class HybridBackend(SearchBackend):
    """BM25 + dense embeddings, fused by normalised weighted sum (or RRF)."""

    name = "hybrid"
    label = "Hybrid (BM25 + MiniLM)"
    description = "fielded BM25 and all-MiniLM-L6-v2 cosine, fused; BM25 only when the semantic extra is missing"
    option_names = frozenset({*DEFAULTS, "bm25", "semantic"})
    reads_usage = True  # through its BM25 side (the "usage" field)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        settings = {**DEFAULTS, **{k: v for k, v in options.items() if k in DEFAULTS}}
        self.bm25_weight = number_option("hybrid bm25_weight", settings["bm25_weight"], 0, 100)
        self.dense_weight = number_option("hybrid dense_weight", settings["dense_weight"], 0, 100)
        self.intent_weight = number_option("hybrid intent_weight", settings["intent_weight"], 0, 100)
        self.server_weight = number_option("hybrid server_weight", settings["server_weight"], 0, 100)
        long_weight = settings["bm25_weight_long"]
        self.bm25_weight_long = self.bm25_weight if long_weight is None else number_option("hybrid bm25_weight_long", long_weight, 0, 100)
        self.long_query_terms = number_option("hybrid long_query_terms", settings["long_query_terms"], 1, 100_000, integer=True)
        self.aspect_weight = number_option("hybrid aspect_weight", settings["aspect_weight"], 0, 1)
        self.aspect_sharpness = number_option("hybrid aspect_sharpness", settings["aspect_sharpness"], 0, 100)
        self.aspect_pool = number_option("hybrid aspect_pool", settings["aspect_pool"], 1, 100_000, integer=True)
        if settings["piece_vectors"] not in ("alone", "pooled"):
            raise ValueError(f"hybrid piece_vectors must be 'alone' or 'pooled', not {settings['piece_vectors']!r}")
        self.piece_vectors: str = settings["piece_vectors"]
        self.scan_int8_tools = number_option("hybrid scan_int8_tools", settings["scan_int8_tools"], 1, 10**12, integer=True)
        self.scan_rescore = number_option("hybrid scan_rescore", settings["scan_rescore"], 1, 10**9, integer=True)
        self.capability_rank = number_option("hybrid capability_rank", settings["capability_rank"], 0, 100, integer=True)
        self.capability_slots = number_option("hybrid capability_slots", settings["capability_slots"], 0, 100, integer=True)
        self.capability_pool = number_option("hybrid capability_pool", settings["capability_pool"], 1, 100, integer=True)
        keys = settings["capabilities"]
        if not isinstance(keys, (list, tuple)) or any(key not in capabilities.BY_KEY for key in keys):
            raise ValueError(f"hybrid capabilities must be a list of {', '.join(capabilities.BY_KEY)}, not {keys!r}")
        self.capability_keys = frozenset(keys)
        self.capability_multi_need_only = bool(settings["capability_multi_need_only"])
        if settings["capability_chain"] not in ("off", "kin", "rank"):
            raise ValueError(f"hybrid capability_chain must be 'off', 'kin' or 'rank', not {settings['capability_chain']!r}")
        self.capability_chain: str = settings["capability_chain"]
        self.chain_min_cosine = number_option("hybrid chain_min_cosine", settings["chain_min_cosine"], -1, 1)
        self.capability_min_share = number_option("hybrid capability_min_share", settings["capability_min_share"], 0, 10)
        self.capability_min_cosine = number_option("hybrid capability_min_cosine", settings["capability_min_cosine"], -1, 1)
        frame = settings["query_frame"]
        if not isinstance(frame, str) or (frame and frame.count("{}") != 1):
            raise ValueError(f"hybrid query_frame must be a text with one {{}} where the request goes, or \"\", not {frame!r}")
        self.query_frame: str = frame
        if not 0.0 <= self.aspect_weight < 1.0:
            raise ValueError(f"hybrid aspect_weight must be in [0, 1), not {self.aspect_weight!r}")
        # The BM25 side ranks without its own server routing: the fused score gets it once.
        self.bm25 = BM25Backend(**{"server_weight": 0.0, **(options.get("bm25") or {})})
        self.semantic = None
        self.degraded_reason = ""
        try:
            self.semantic = SemanticBackend(**(options.get("semantic") or {}))
        except EncoderUnavailable as exc:
            self.degraded_reason = f"dense side off, BM25 only: {exc}"
            if self.degraded_reason not in _warned:
                _warned.add(self.degraded_reason)
                logger.warning("hybrid ToolSearch backend: %s", self.degraded_reason)

    def refine_reading(self, reading: QueryReading) -> QueryReading:
        # In a natural-language request, `+4915123577723` is a phone number, not a required term
        # (required.numbers_as_words); keyword-style queries keep the Claude Code reading.
        return numbers_as_words(reading) if reading.required and capabilities.natural_request(reading.raw) else reading

    def describe_query(self, query: str) -> list[str]:
        reading = read_query(query)
        if reading.kind != "keyword":
            return []
        lines = []
        if self.intent_weight > 0 and (intents := split_intents(reading.raw)):
            lines.append(f"{len(intents)} sentences, each also scored alone (share {self.intent_weight:g}): " + " · ".join(f"\u201c{s}\u201d" for s in intents))
        if self.aspect_weight > 0 and (aspects := split_aspects(reading.raw)):
            lines.append(f"{len(aspects)} clauses for aspect coverage (xQuAD, \u03bb {self.aspect_weight:g}): " + " · ".join(f"\u201c{a}\u201d" for a in aspects))
        if self.capability_rank > 0 and self.semantic is not None and (cues := capabilities.detect(reading.raw, self.capability_keys)):
            lines.append(
                "capabilities implied: " + " · ".join(f"{cue.capability.label} (\u201c{cue.evidence}\u201d)" for cue in cues)
                + f"; each answered by the catalog's best tool for it, from rank {self.capability_rank} on"
            )
            if self.capability_chain != "off":
                lines.extend(
                    f"{cue.capability.label} (“{cue.evidence}”) in steps, each answered among the first step's server: "
                    + " → ".join(f"“{step}”" for step in (cue.description, *cue.chain))
                    for cue in cues if cue.chain
                )
        if self.semantic is not None and self.framed(reading):
            lines.append(f"the encoder reads the request as \u201c{self.dense_text(reading, True)}\u201d (a one-sentence request, read as what a tool does)")
        if lines and self.piece_vectors == "pooled" and self.semantic is not None:
            lines.append("sentence and clause vectors pooled from one pass over the request (late chunking)")
        return lines

    def build_index(self, catalog: ToolCatalog, usage: UsageLog | None = None) -> HybridIndex:
        # Each side through its own backend's cache: a new usage log adds the log's postings to
        # the BM25 side's catalog index and reuses the dense side's.
        index = HybridIndex(
            bm25=self.bm25.index_for(catalog, usage),
            semantic=self.semantic.index_for(catalog) if self.semantic is not None else None,
        )
        if index.semantic is not None and index.semantic.size >= self.scan_int8_tools:
            self.vector_scan(index)  # start the int8 scanner's build now, not at the first search
        return index

    def side_scores(
        self, reading: QueryReading, index: HybridIndex, mask: np.ndarray | None, dense: np.ndarray | None,
    ) -> tuple[list[tuple[str, str]], np.ndarray, np.ndarray | None]:
        """Each side's score of every tool; `dense`: the query's row of `dense_rows` (None without
        a dense side)."""
        pairs = self.bm25.query_tokens(reading)
        lexical = self.bm25.score_all([token for token, _ in pairs], index.bm25)
        if mask is not None:
            lexical = np.where(mask, lexical, 0.0).astype(np.float32)
            if dense is not None:
                dense = np.where(mask, dense, -1.0).astype(np.float32)
        return pairs, lexical, dense

    def rank(self, reading: QueryReading, index: HybridIndex, catalog: ToolCatalog, max_results: int) -> list[ScoredTool]:
        if index.bm25.size == 0:
            return []
        mask = index.bm25.required.mask(reading.required)
        if mask is None and not has_words(query_text(reading)):
            # No word, no operation asked for: "12345 67890" is no request, though bfcl's catalog
            # holds "…_12345" in an identifier (a BM25 hit that opened the dense side) and MiniLM
            # puts digits near contact tools. `+12345` (required) keeps the Claude Code reading.
            return []
        sentence_pieces = _split_pieces(reading.raw, _SENTENCE_END, MIN_INTENT_WORDS) if self.intent_weight > 0 else []
        clause_pieces = _split_pieces(reading.raw, _CLAUSE_BREAK, MIN_ASPECT_WORDS) if self.aspect_weight > 0 else []
        intents, aspects = [piece for piece, _ in sentence_pieces], [piece for piece, _ in clause_pieces]
        framed = self.framed(reading)
        piece_vectors = self.pooled_vectors(reading, [span for _, span in sentence_pieces + clause_pieces], framed)
        intent_vectors, aspect_vectors = piece_vectors[: len(intents)], piece_vectors[len(intents) :]
        pooled = any(vector is not None for vector in piece_vectors)
        if not pooled:
            self.prefetch_queries([reading.raw, *intents, *aspects], framed)
        sims = self.dense_rows(reading, intents, intent_vectors, index, framed)
        pairs, lexical, dense = self.side_scores(reading, index, mask, sims[0] if sims is not None else None)
        weight = self.lexical_weight(len(pairs))
        gated = dense is not None and not dense_may_answer(
            dense, bool(lexical.size) and float(lexical.max()) > 0, self.semantic.reads_as_language(reading), has_words(query_text(reading)))
        if gated:  # no shared word and nothing clearly similar: answer "no match" like BM25
            dense = np.zeros_like(dense)
            intents, aspects = [], []
        lexical_part, dense_part = self.fuse(lexical, dense, weight)
        fused = lexical_part + dense_part
        extras: dict[str, np.ndarray] = {}
        if intents:
            best = np.zeros_like(fused)
            for row, sentence in enumerate(intents, start=1):
                _, sub_lexical, sub_dense = self.side_scores(read_query(sentence), index, mask, sims[row] if sims is not None else None)
                sub = np.add(*self.fuse(sub_lexical, sub_dense, weight))
                top = float(sub.max())
                if top > 0:
                    np.maximum(best, sub / top, out=best)
            top = float(fused.max())
            scale = top if top > 0 else 1.0
            extras["intent"] = self.intent_weight * scale * best
            fused = (1 - self.intent_weight) * fused + extras["intent"]
            lexical_part, dense_part = (1 - self.intent_weight) * lexical_part, (1 - self.intent_weight) * dense_part
        single_need = not (len(sentence_pieces) > 1 or split_aspects(reading.raw))
        if self.server_weight > 0:
            extras["server"] = index.bm25.servers.boost(fused, self.server_weight)
            fused = fused + extras["server"]
        if mask is not None:
            fused = np.where(mask, fused + REQUIRED_TERM_POINTS * len(reading.required), 0.0)
        request_scores = fused
        picks: dict[int, AspectPick] = {}
        if aspects:
            candidates = top_indices(fused, max(self.aspect_pool, max_results))
            if candidates:
                clause_scores = np.stack([self.clause_scores(clause, index, candidates, vector, framed) for clause, vector in zip(aspects, aspect_vectors)])
                chosen = cover_aspects(fused, clause_scores, aspects, candidates, max_results, self.aspect_weight, self.aspect_sharpness)
                order = [i for i, _, _ in chosen]
                fused = fused.copy()
                for i, gain, pick in chosen:
                    fused[i], picks[i] = gain, pick
        if not picks:
            order = top_indices(fused, max_results)
        slots: dict[int, CapabilitySlot] = {}
        demoted: dict[int, CapabilitySlot] = {}  # a tool a chain step took the place of → that step
        if not gated and mask is None and not (single_need and self.capability_multi_need_only):
            order, slots = self.fill_capability_slots(reading, index, request_scores, order, max_results)
            demoted = {slot.replaced: slot for slot in slots.values() if slot.replaced is not None}
            if slots:
                fused = slot_scores(fused, order, {**slots, **demoted})
        lexical_rank = _ranks(lexical, order)
        dense_rank = _ranks(dense, order) if dense is not None else {}
        pooled_note = " vectors pooled from the request's tokens" if pooled else ""
        results: list[ScoredTool] = []
        for i, terms in zip(order, self.bm25.term_contributions(order, pairs, index.bm25)):
            term_summary = ", ".join(f"{c.term}→{c.field} {c.points:g}" for c in terms[:6]) or "no term matched"
            breakdown = [
                TermContribution(
                    term="(bm25)",
                    rule="hybrid weighted: bm25 side",
                    points=round(float(lexical_part[i]), 4),
                    field="bm25",
                    detail=f"bm25 rank {lexical_rank.get(i, '-')}, score {float(lexical[i]):.3f} ({term_summary})",
                )
            ]
            if dense is not None:
                breakdown.append(
                    TermContribution(
                        term="(dense)",
                        rule="hybrid weighted: dense side",
                        points=round(float(dense_part[i]), 4),
                        field="embedding",
                        detail=f"dense rank {dense_rank.get(i, '-')}, cosine {float(dense[i]):.3f}" + (f" to \u201c{self.dense_text(reading, True)}\u201d" if framed else ""),
                    )
                )
            else:
                breakdown.append(
                    TermContribution(term="(dense)", rule="dense side unavailable", points=0.0, field="embedding", detail=self.degraded_reason)
                )
            if "intent" in extras:
                breakdown.append(
                    TermContribution(term="(sentences)", rule="best single-sentence match", points=round(float(extras["intent"][i]), 4), field="query", detail=f"weight {self.intent_weight:g}" + (f"; sentence{pooled_note}" if pooled_note else ""))
                )
            if "server" in extras:
                breakdown.append(
                    TermContribution(term="(server)", rule="server's best tool", points=round(float(extras["server"][i]), 4), field="server", detail=f"{index.bm25.tools[i].server}: weight {self.server_weight:g}")
                )
            for term in reading.required:
                breakdown.append(
                    TermContribution(term=term, rule="required term matched", points=REQUIRED_TERM_POINTS, field="name/description/search_hint")
                )
            pick = picks.get(i)
            if pick is not None:  # xQuAD: the parts above count (1 − λ)/best; coverage is added
                breakdown = [replace(c, points=round(c.points * pick.relevance_scale, 4)) for c in breakdown]
                breakdown.append(
                    TermContribution(
                        term="(aspects)", rule="covers a clause not yet covered", points=round(pick.coverage, 4), field="query",
                        detail=(
                            f"best for \u201c{pick.clause}\u201d" if pick.coverage >= 0.0005
                            else f"nothing left to cover (its best clause, \u201c{pick.clause}\u201d, is covered above)"
                        ) + f"; relevance × {pick.relevance_scale:.3g}, coverage weight {self.aspect_weight:g}" + (f"; clause{pooled_note}" if pooled_note else ""),
                    )
                )
            slot = slots.get(i)
            if slot is not None:
                breakdown.append(capability_contribution(slot, float(fused[i]) - sum(c.points for c in breakdown), index))
            if i in demoted:
                breakdown.append(TermContribution(
                    term="(chain)", rule=f"moved below a step of a chain: {demoted[i].cue.capability.label}", points=round(float(fused[i]) - sum(c.points for c in breakdown), 4),
                    field="capability", detail=f"about the same kind of document as “{demoted[i].cue.evidence}” but no step of producing it; "
                    f"its place in the top k went to step {demoted[i].step} (“{demoted[i].cue.description}”)",
                ))
            results.append(ScoredTool(name=index.bm25.tools[i].name, score=round(float(fused[i]), 4), breakdown=breakdown))
        return results

    # -- capabilities beside topics (capabilities.py) ---------------------------------------------
    def capability_answers(self, description: str, index: HybridIndex) -> tuple[list[int], float]:
        """The catalog's best tools for a capability's description (ranked like a request, by the
        fused score), best first, and the best one's cosine to the description; once per index
        and description."""
        cached = index.capability_answers.get(description)
        if cached is not None:
            return cached
        reading = read_query(description)
        dense = None
        if index.semantic is not None:
            dense = index.semantic.vectors @ self.capability_vector(description, index)
        _, lexical, dense = self.side_scores(reading, index, None, dense)
        scores = np.add(*self.fuse(lexical, dense))
        best = top_indices(scores, self.capability_pool)
        cosine = float(dense[best[0]]) if best and dense is not None else 0.0
        # the tools clearly for it (the first one decides whether the catalog has any)
        floor = max(self.capability_min_cosine, cosine - CAPABILITY_MARGIN)
        best = best[:1] + [i for i in best[1:] if dense is not None and float(dense[i]) >= floor]
        index.capability_answers[description] = answer = (best, cosine)
        return answer

    def fill_capability_slots(
        self, reading: QueryReading, index: HybridIndex, request_scores: np.ndarray, order: list[int], max_results: int,
    ) -> tuple[list[int], dict[int, CapabilitySlot]]:
        """Put, for each capability the request implies, the catalog's best tool for it that the
        request scores best at rank `capability_rank` (then the next rank for the next capability),
        unless one of the capability's best tools already stands there or above. The tools ranked
        above keep their places; those below move down one."""
        if self.capability_rank <= 0 or self.capability_slots <= 0 or index.semantic is None:
            return order, {}
        cues = capabilities.detect(reading.raw, self.capability_keys)
        if not cues:
            return order, {}
        order = list(order)
        slots: dict[int, CapabilitySlot] = {}
        for cue in cues:
            # a chain's later steps take no capability slot of their own (they replace tools about
            # the document, or a slot the first step did not need)
            placed = sum(1 for slot in slots.values() if not slot.step)
            if placed >= self.capability_slots:
                break
            position = self.capability_rank - 1 + placed  # 0-based
            if position >= max_results:
                break
            answers, cosine = self.capability_answers(cue.description, index)
            if not answers or cosine < self.capability_min_cosine:
                continue  # the catalog has no tool clearly for it
            present = [i for i in order[: position + 1] if i in answers]
            if present:  # the ranking already answers it
                if cue.chain and self.capability_chain != "off":
                    order = self.place_chain(cue, present[0], index, request_scores, order, position, slots, slot_free=True)
                continue
            chosen = max(answers, key=lambda i: (float(request_scores[i]), -answers.index(i)))
            if position < len(order) and float(request_scores[chosen]) < self.capability_min_share * float(request_scores[order[position]]):
                continue  # the request does not want it enough to displace that tool
            moved_from = order.index(chosen) + 1 if chosen in order else None
            if chosen in order:
                order.remove(chosen)
            order.insert(position, chosen)
            slots[chosen] = CapabilitySlot(cue, position + 1, float(index.semantic.vectors[chosen] @ self.capability_vector(cue.description, index)), moved_from)
            if cue.chain and self.capability_chain != "off":
                order = self.place_chain(cue, chosen, index, request_scores, order, position, slots, slot_free=False)
        return order[:max_results], slots

    def capability_vector(self, description: str, index: HybridIndex) -> np.ndarray:
        """A capability description's vector, encoded once per index (a vector is a function of
        its text: the same as `embed_query(description)`)."""
        vector = index.capability_vectors.get(description)
        if vector is None:
            vector = index.capability_vectors[description] = self.semantic.embed_query(description)
        return vector

    def chain_step(self, description: str, server_id: int, index: HybridIndex) -> tuple[int, float] | None:
        """The best tool of one server for a chain step's description (fused score), and its cosine
        to it; None when that server has no tool for it (cosine under `chain_min_cosine`). Once per
        index, step and server."""
        key = (description, server_id)
        if key not in index.chain_steps:
            index.chain_steps[key] = self._chain_step(description, server_id, index)
        return index.chain_steps[key]

    def _chain_step(self, description: str, server_id: int, index: HybridIndex) -> tuple[int, float] | None:
        siblings = np.flatnonzero(index.bm25.servers.ids == server_id)
        if siblings.size == 0:
            return None
        vector = self.semantic.embed_query(description)
        dense = index.semantic.vectors[siblings] @ vector
        lexical = self.bm25.score_all([token for token, _ in self.bm25.query_tokens(read_query(description))], index.bm25)[siblings]
        best = int(np.argmax(np.add(*self.fuse(lexical, dense))))
        return (int(siblings[best]), float(dense[best])) if float(dense[best]) >= self.chain_min_cosine else None

    def place_chain(
        self, cue: capabilities.CapabilityCue, first: int, index: HybridIndex, request_scores: np.ndarray, order: list[int],
        position: int, slots: dict[int, CapabilitySlot], *, slot_free: bool,
    ) -> list[int]:
        """Place the later steps of producing a document (the cue's chain: add content, save it).

        Each step is answered among the tools of the server of the chain's first tool (`first`:
        the one the slot placed, or the capability's answer already in the top k) — a document is
        made, filled and saved by the server that holds it —, by the fused score to the step's
        description, if that tool reaches `chain_min_cosine` to it. A step not yet in the top k
        then takes, with "kin", the place of a top-k tool that is about the same kind of document
        but no step of the chain (a sibling of the chain's server, or a tool that reaches
        `capability_min_cosine` to the first step's description: "get information about a .pptx
        file" for "create a presentation"), the lowest first; that tool moves just below the top k.
        With none left, the step takes the capability's slot if the first step did not need it.
        With "rank", the steps take the ranks just above the slot (ending at it when it is free);
        the tools there move down, the slot's own tool keeps its rank."""
        server_id = int(index.bm25.servers.ids[first])
        if server_id < 0:
            return order
        steps = [(i, cosine, description) for description in cue.chain if (found := self.chain_step(description, server_id, index)) for i, cosine in [found]]
        steps = [step for n, step in enumerate(steps) if step[0] != first and step[0] not in [s[0] for s in steps[:n]]]
        chain_ids = {first, *(i for i, _, _ in steps)}
        numbered = {i: n for n, (i, _, _) in enumerate(steps, start=2)}
        top = order[: position + 1]
        # the steps not in the top k, the one the request scores best first (it gets the lowest place)
        missing = sorted((step for step in steps if step[0] not in top), key=lambda step: -float(request_scores[step[0]]))
        if not missing:
            return order
        first_vector = self.capability_vector(cue.description, index)
        first_name, first_server = index.bm25.tools[first].name, index.bm25.tools[first].server or ""

        def record(i: int, cosine: float, description: str, rank: int, moved_from: int | None, replaced: int | None) -> None:
            slots[i] = CapabilitySlot(
                replace(cue, description=description, chain=()), rank, cosine, moved_from, chain_first=first_name,
                chain_server=first_server, step=numbered[i], steps=len(steps) + 1, replaced=replaced, first_slot=position + 1,
            )

        if self.capability_chain == "rank":
            # the steps as a block just above the slot (ending at it when it is free); the tools
            # there move down, the slot's own tool keeps its rank
            block = missing[: position + 1 if slot_free else position]
            begin = position + 1 - len(block) if slot_free else position - len(block)
            moved = {i: order.index(i) + 1 if i in order else None for i, _, _ in block}
            rest = [t for t in order if t not in moved and (slot_free or t != first)]
            order = rest[:begin] + [i for i, _, _ in block] + ([] if slot_free else [first]) + rest[begin:]
            for at, (i, cosine, description) in enumerate(block):
                record(i, cosine, description, begin + at + 1, moved[i], None)
            return order
        kin = [
            at for at in range(min(position + 1, len(order)))
            if order[at] not in chain_ids and order[at] not in slots
            and (int(index.bm25.servers.ids[order[at]]) == server_id or float(index.semantic.vectors[order[at]] @ first_vector) >= self.capability_min_cosine)
        ]
        targets = sorted(kin, reverse=True)  # the lowest first; the free slot last
        if slot_free and position < len(order) and position not in targets and order[position] not in slots:
            targets.append(position)
        for (i, cosine, description), target in zip(missing, targets):
            moved_from = order.index(i) + 1 if i in order else None
            if i in order:
                order.remove(i)  # it stood below the top k: the targets above keep their indices
            replaced = None
            if target != position:
                replaced = order[target]  # about the document, no step of it: just below the top k
                order[target] = i
                order.insert(position + 1, replaced)
            else:
                order.insert(target, i)
            record(i, cosine, description, target + 1, moved_from, replaced)
        return order

    def clause_scores(
        self, clause: str, index: HybridIndex, candidates: list[int], vector: np.ndarray | None = None, framed: bool = False,
    ) -> np.ndarray:
        """A clause's weighted fused score of each candidate (BM25 normalised over the whole
        catalog, as in `fuse`). The dense side is computed for the candidates only: at 100k tools a
        full product per clause would cost ~10 ms. `vector`: the clause's pooled vector, if any."""
        reading = read_query(clause)
        lexical = self.bm25.score_all([token for token, _ in self.bm25.query_tokens(reading)], index.bm25)
        cand = np.asarray(candidates)
        dense = None
        if index.semantic is not None:
            dense = index.semantic.vectors[cand] @ (self.request_vector(reading, framed) if vector is None else vector)
        return np.add(*self._weighted(lexical[cand], dense, self.bm25_weight, _top(lexical)))

    def framed(self, reading: QueryReading) -> bool:
        """Whether the encoder reads this request in `query_frame`: a natural-language request
        (capabilities.natural_request) of one sentence; never a keyword-style query."""
        return bool(self.query_frame) and capabilities.natural_request(reading.raw) and not split_intents(reading.raw)

    def dense_text(self, reading: QueryReading, framed: bool) -> str:
        """What the encoder reads for a request, sentence or clause: `query_text`, in the frame."""
        typed = query_text(reading)
        return self.query_frame.replace("{}", typed) if framed else typed

    def request_vector(self, reading: QueryReading, framed: bool) -> np.ndarray:
        """The encoder's vector of a request or clause: the text as typed, or in `query_frame`."""
        return self.semantic.embed_query(self.dense_text(reading, framed))

    def dense_rows(
        self, reading: QueryReading, intents: list[str], intent_vectors: list[np.ndarray | None], index: HybridIndex,
        framed: bool = False,
    ) -> np.ndarray | None:
        """The cosine of every tool to the request (row 0) and to each sentence, in one product:
        the tool vectors (15 MB at 10k tools, 150 MB at 100k) are read once, not once per sentence."""
        if index.semantic is None:
            return None
        vectors = [self.request_vector(reading, framed)] + [
            self.request_vector(read_query(sentence), framed) if vector is None else vector
            for sentence, vector in zip(intents, intent_vectors)
        ]
        return self.scan_rows(index, np.stack(vectors), intents)

    def scan_rows(self, index: HybridIndex, queries: np.ndarray, intents: list[str]) -> np.ndarray:
        """The cosine of every tool to each query row (row 0: the request, then its sentences): one
        float32 product below `scan_int8_tools` tools; from there on the int8 scan with each row's
        best tools rescored exactly, once it is built (vector_scan.py; float32 until then)."""
        matrix = index.semantic.vectors
        if matrix.shape[0] < self.scan_int8_tools:
            return queries @ matrix.T
        # the same threads as the request's encoding: two when the host has an idle core
        return self.vector_scan(index).rows(queries, concurrency.request_threads(getattr(self.semantic.encoder, "query_threads", 1)))

    def vector_scan(self, index: HybridIndex) -> VectorScan:
        """The dense index's scan (kept on it), its int8 scanner being built in the background."""
        scan = scan_for(index.semantic, min_tools=self.scan_int8_tools, rescore=self.scan_rescore)
        scan.prepare()
        return scan

    def pooled_vectors(self, reading: QueryReading, spans: list[Span], framed: bool = False) -> list[np.ndarray | None]:
        """One entry per span: with piece_vectors "pooled", the piece's vector from one pass over
        the request (which also caches the request's own vector); else None (encoded alone)."""
        if self.piece_vectors != "pooled" or self.semantic is None or not spans:
            return [None] * len(spans)
        encoder_text, encoder_spans = query_text_spans(reading, spans)
        if framed:  # the pieces move right by the frame's text before the request
            shift = self.query_frame.index("{}")
            encoder_text = self.query_frame.replace("{}", encoder_text)
            encoder_spans = tuple((start + shift, end + shift) for start, end in encoder_spans)
        return list(self.semantic.embed_query.pooled(encoder_text, encoder_spans)[1:])

    def prefetch_queries(self, texts: list[str], framed: bool = False) -> None:
        """Encode a request, its sentences and its clauses in one batch: per call, the encoder
        streams all its weights (~40 MB), so a batch of short texts costs about one; later lookups
        hit the query cache."""
        if self.semantic is not None and texts:
            self.semantic.embed_query.prefetch([self.dense_text(read_query(t), framed) for t in texts])

    def lexical_weight(self, stems: int) -> float:
        """The BM25 side's weight for a query of this many distinct stems."""
        return self.bm25_weight_long if stems >= self.long_query_terms else self.bm25_weight

    def fuse(self, lexical: np.ndarray, dense: np.ndarray | None, bm25_weight: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each side's share of the fused score, per tool (`bm25_weight` overrides the default)."""
        if dense is None:
            return lexical.astype(np.float32), np.zeros_like(lexical, dtype=np.float32)
        return self._weighted(lexical, dense, self.bm25_weight if bm25_weight is None else bm25_weight, _top(lexical))

    def _weighted(self, lexical: np.ndarray, dense: np.ndarray | None, bm25_weight: float, lexical_top: float) -> tuple[np.ndarray, np.ndarray]:
        """bm25_weight × BM25 / lexical_top and dense_weight × max(cosine, 0), per tool."""
        lexical_part = bm25_weight * (lexical / lexical_top if lexical_top > 0 else lexical)
        dense_part = self.dense_weight * np.clip(dense, 0.0, None) if dense is not None else np.zeros_like(lexical)
        return lexical_part.astype(np.float32), dense_part.astype(np.float32)


def slot_scores(fused: np.ndarray, order: list[int], placed: Mapping[int, Any]) -> np.ndarray:
    """`fused` with each placed tool given the score of the first tool below it that was not
    placed (the slot it took), or at most the score above it: the list stays best first."""
    fused = fused.copy()
    above = np.inf
    for at, i in enumerate(order):
        if i in placed:
            below = next((float(fused[j]) for j in order[at + 1 :] if j not in placed), None)
            fused[i] = min(above, below if below is not None else float(fused[i]))
        above = float(fused[i])
    return fused


def capability_contribution(slot: CapabilitySlot, points: float, index: HybridIndex | None = None) -> TermContribution:
    """The explanation line of a tool a capability slot placed: what the request implies, the
    words that imply it, and the capability's description it answers (for a later step of a
    chain: the step, the server it was found among, and the tool whose place it took)."""
    where = f"from rank {slot.moved_from}" if slot.moved_from else "from below the top k"
    rule = f"capability slot {slot.slot}: {slot.cue.capability.label}"
    if slot.step:
        took = (
            f"in place of {index.bm25.tools[slot.replaced].name if index is not None else slot.replaced} (about the same kind of document, no step of it)"
            if slot.replaced is not None
            else "in the capability's slot (its first step already stood in the top k)" if slot.slot == slot.first_slot
            else f"above the capability's slot ({slot.first_slot}), the tools there moved down"
        )
        rule += f", step {slot.step} of {slot.steps}"
        detail = (f"the request implies “{slot.cue.capability.label}” (“{slot.cue.evidence}”), a document made in steps; "
                  f"step {slot.step}, “{slot.cue.description}”, is answered by this tool of {slot.chain_server}, "
                  f"the server of step 1 ({slot.chain_first}) (cosine {slot.cosine:.2f}); {took}; moved {where}")
    else:
        detail = (f"the request implies “{slot.cue.capability.label}” (“{slot.cue.evidence}”); "
                  f"among the catalog's best tools for “{slot.cue.description}” the request scores this one best "
                  f"(cosine {slot.cosine:.2f} to that description); moved {where}")
    return TermContribution(term="(capability)", rule=rule, points=round(points, 4), field="capability", detail=detail)


def _top(scores: np.ndarray) -> float:
    return float(scores.max()) if scores.size else 0.0


def _ranks(scores: np.ndarray | None, wanted: list[int]) -> dict[int, int]:
    """1-based rank (by score, ties in catalog order) of the wanted tools on one side."""
    if scores is None or not wanted:
        return {}
    values = scores[wanted]
    floor = values.min()
    # Only tools scoring at least the lowest wanted one can be above or tied with any of them: one
    # pass over the catalog picks them, then each wanted tool is ranked among those few (at 100,000
    # tools, two passes per shown tool and side cost ~1 ms a request).
    contenders = np.flatnonzero(scores >= floor) if np.isfinite(floor) else np.arange(scores.size)
    contender_scores = scores[contenders]
    ranks: dict[int, int] = {}
    for i, value in zip(wanted, values):
        better = int(np.count_nonzero(contender_scores > value))
        ties_before = int(np.count_nonzero(contender_scores[contenders < i] == value))
        ranks[i] = better + ties_before + 1
    return ranks


class PooledHybridBackend(HybridBackend):
    """`hybrid` with piece_vectors "pooled": a named preset, so a profile, the inspector and the
    evaluation page can pick the faster reading of long requests like any other backend."""

    name = "hybrid-pooled"
    label = "Hybrid, pooled pieces (faster on long requests)"
    description = "hybrid with each sentence's and clause's vector pooled from one encoder pass over the request (late chunking)"

    def __init__(self, **options: Any) -> None:
        super().__init__(**{"piece_vectors": "pooled", **options})
