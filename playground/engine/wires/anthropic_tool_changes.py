"""Anthropic's mid-conversation tool changes: the harness adds tools, no search round trip.

Beta `mid-conversation-tool-changes-2026-07-01` (../shared/reference/mid-conversation-tool-changes.md,
the SDK's `BetaSystemMessageParam` / `BetaRequestToolAdditionBlockParam` / `…RemovalBlockParam`):

- `tools` declares every tool once and never changes across turns, so the cached prefix survives:
  the loaded tools, ToolSearch (unless the profile drops it, `tool_changes_search`), then every
  permitted deferred tool with `defer_loading: true` (hidden until added), then any other tool an
  earlier change in the history names (a removal must name a declared tool);
- before each person's turn the profile's search backend ranks the person's message; the top
  `tool_changes_k` scoring at least `tool_changes_min_score` are added by a `role: "system"` message
  of `tool_addition` blocks placed after it (`{"type": "tool_addition", "tool": {"type":
  "tool_reference", "name": N}}`);
- a tool the history offers (added, or loaded by a ToolSearch) that a permission rule now denies is
  withdrawn by a `tool_removal` block;
- the changes live in the history (the loop stores the pending message, `TurnPlan.tool_changes`), so
  `history.discovered_tool_names` recovers them; a compaction carries them (its boundary's
  discovered tools), and this style adds the carried ones again after the first message.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from playground.engine.history import (
    TOOL_ADDITION,
    TOOL_REMOVAL,
    blocks_of,
    changed_tool_name,
    fold_tool_changes,
    referenced_tool_names,
    tool_change_blocks,
)
from playground.engine.search.base import ToolSearchResult
from playground.engine.tokens import count_messages
from playground.engine.toolsearch_tool import NATIVE_STYLE
from playground.engine.tools import Tool
from playground.engine.wires.anthropic import AnthropicWire

TOOL_CHANGES_BETA = "mid-conversation-tool-changes-2026-07-01"
WITH_SEARCH = "+search"  # the loading mode of a profile that keeps ToolSearch (`tool_changes_search`)
DEFAULT_TOOL_CHANGES_K = 5
DEFAULT_TOOL_CHANGES_MIN_SCORE = 0.0  # any positive score: the backend ranks only tools that share a term
MAX_PREDICTION_QUERY_CHARS = 500  # the person's message as the query: its opening is what names the task


def change_block(kind: str, name: str) -> dict[str, Any]:
    """One `tool_addition` / `tool_removal` block naming a declared tool."""
    return {"type": kind, "tool": {"type": "tool_reference", "name": name}}


@dataclass(frozen=True)
class ToolChanges:
    """What the harness changes before this turn's request: the system message it adds (and the loop
    stores), and the prediction behind the additions (shown like a search: scores and why)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    prediction: ToolSearchResult | None = None
    k: int = DEFAULT_TOOL_CHANGES_K
    min_score: float = DEFAULT_TOOL_CHANGES_MIN_SCORE
    below_threshold: tuple[str, ...] = field(default=())  # ranked in the top k, but scored under min_score

    @property
    def message(self) -> dict[str, Any]:
        """The `role: "system"` message (BetaSystemMessageParam) of removals, then additions."""
        return {"role": "system", "content": [*(change_block(TOOL_REMOVAL, n) for n in self.removed),
                                              *(change_block(TOOL_ADDITION, n) for n in self.added)]}

    @property
    def notes(self) -> list[str]:
        notes = [f"Predicted before the turn: the top {self.k} scoring at least {self.min_score:g}, added by a "
                 "tool_addition system message (no search round trip)."]
        if self.below_threshold:
            notes.append(f"Under the score threshold, not added: {', '.join(self.below_threshold)}.")
        if self.removed:
            notes.append(f"Withdrawn by tool_removal (now denied): {', '.join(self.removed)}.")
        return notes


def offered_names(messages: list[dict[str, Any]], carried: Any = ()) -> list[str]:
    """The deferred tools the history leaves offered, folded in order: `carried` (a compaction's),
    each ToolSearch result's tool_reference blocks and each system message's additions add, a
    removal withdraws."""
    offered = dict.fromkeys(carried)
    for message in messages:
        if message.get("role") == "system":
            fold_tool_changes(offered, [message])
        else:
            offered.update(dict.fromkeys(n for n in referenced_tool_names([message]) if n not in offered))
    return list(offered)


def _person_text(message: dict[str, Any]) -> str:
    """A person's message as the prediction's query: its text, not the blocks the harness adds
    (announcements and summaries open with a tag)."""
    return " ".join(b["text"] for b in blocks_of(message) if b.get("type") == "text" and isinstance(b.get("text"), str)
                    and not b["text"].lstrip().startswith("<")).strip()


def _is_person_message(message: dict[str, Any]) -> bool:
    return message.get("role") == "user" and not any(b.get("type") == "tool_result" for b in blocks_of(message))


class AnthropicToolChanges(AnthropicWire):
    name = "tool-changes"
    planned_as = NATIVE_STYLE  # ToolSearch (when kept) answers with tool_reference blocks
    profile_choice = True
    label = "Anthropic tool changes (tool_addition, predicted by the harness)"
    short_label = "tool changes (tool_addition)"
    compare_label = "mid-conversation tool changes (tool_addition)"
    betas = (TOOL_CHANGES_BETA,)

    # -- loading modes: with ToolSearch kept beside the prediction, or not ---------------------------
    def loading_modes(self) -> tuple[str, ...]:
        return (self.name, self.name + WITH_SEARCH)

    def loading_mode(self, settings: Any) -> str:
        return self.name + WITH_SEARCH if settings.tool_changes_search else self.name

    # -- what the turn changes -------------------------------------------------------------------
    def tool_changes(self, turn: Any) -> ToolChanges | None:
        """The changes before this turn's request: additions predicted from the person's message when
        it is the history's last (the run's first turn), removals of offered tools now denied."""
        plan = turn.request
        if not plan.decision.enabled:
            return None
        messages = turn.state.messages
        offered = self._offered_by_history(turn)
        removed = tuple(n for n in offered if not turn.policy.decide(n).permitted and n in turn.catalog)
        settings = turn.settings
        prediction, added, below = None, (), ()
        if messages and _is_person_message(messages[-1]) and turn.backend is not None:
            query = _person_text(messages[-1])[:MAX_PREDICTION_QUERY_CHARS]
            if query:
                prediction = turn.run_tool_search({"query": query, "max_results": settings.tool_changes_k})
                scores = {s.name: s.score for s in prediction.scored}
                visible = set(offered) | set(plan.discovered_tools)
                hidden = set(plan.deferred_tools)  # deferred, permitted, not offered yet: what an addition can show
                fresh = [n for n in prediction.matches if n in hidden and n not in visible]
                added = tuple(n for n in fresh if scores.get(n, settings.tool_changes_min_score) >= settings.tool_changes_min_score)
                below = tuple(n for n in fresh if n not in added)
        if not added and not removed and prediction is None:
            return None
        return ToolChanges(added=added, removed=removed, prediction=prediction, k=settings.tool_changes_k,
                           min_score=settings.tool_changes_min_score, below_threshold=below)

    @staticmethod
    def _offered_by_history(turn: Any) -> list[str]:
        """Tools of the catalog the history (and the compaction boundary) offers now."""
        carried = turn.state.compaction.discovered_tools if turn.state.compaction is not None else ()
        return [n for n in offered_names(turn.state.messages, carried) if n in turn.catalog]

    # -- the request --------------------------------------------------------------------------------
    def keeps_tool_search(self, settings: Any) -> bool:
        return bool(settings.tool_changes_search)

    def declared_tools(self, turn: Any) -> list[dict[str, Any]]:
        """`tools`, the same every turn: loaded, ToolSearch (if kept), every permitted deferred tool
        with defer_loading, then the tools earlier changes name that are no longer permitted."""
        plan = turn.request
        if not plan.decision.enabled:
            return list(plan.tools)
        deferred = set(plan.discovered_tools) | set(plan.deferred_tools)
        loaded = [t for t in plan.tools if t["name"] not in deferred]  # ToolSearch as the plan decided
        tools = loaded + [tool.to_api(defer_loading=True) for tool in plan.searchable.deferred]
        declared = {t["name"] for t in tools}
        pending = turn.tool_changes
        named = [changed_tool_name(b) for b in tool_change_blocks(turn.state.messages)]
        for name in [*named, *(pending.removed if pending is not None else ())]:
            tool = turn.catalog.get(name) if name else None
            if tool is not None and name not in declared:
                tools.append(tool.to_api(defer_loading=True))
                declared.add(name)
        return tools

    def messages_body(self, turn: Any) -> dict[str, Any]:
        body = turn.request.to_api_kwargs()
        tools = self.declared_tools(turn)
        declared = {t["name"] for t in tools}
        messages = [self._declared_changes(m, declared) for m in body["messages"]]
        messages = [m for m in messages if m is not None]
        carried = self._carried_additions(turn, messages, declared)
        if carried and messages:
            messages.insert(1, {"role": "system", "content": [change_block(TOOL_ADDITION, n) for n in carried]})
        pending = turn.tool_changes
        if pending is not None and pending.message["content"]:
            messages.append(pending.message)
        body = {**body, "tools": tools, "messages": messages, "betas": list(self.betas)}
        if not self.announces(turn):
            body = self._without_announcement(turn, body)
        return body

    @staticmethod
    def _without_announcement(turn: Any, body: dict[str, Any]) -> dict[str, Any]:
        """The body without the announcement the plan placed (the system prompt's, or the delta block)."""
        plan = turn.request
        if plan.announcement is None:
            return body
        if plan.announcement_placement == "system":
            body = {k: v for k, v in body.items() if k != "system"}
            if turn.settings.system_prompt:
                body["system"] = turn.settings.system_prompt
            return body
        block = plan.announcement.to_block()
        return {**body, "messages": [{**m, "content": [b for b in blocks_of(m) if b != block]}
                                     if m.get("role") == "user" and block in blocks_of(m) else m
                                     for m in body["messages"]]}

    @staticmethod
    def _declared_changes(message: dict[str, Any], declared: set[str]) -> dict[str, Any] | None:
        """A system message keeps only changes naming declared tools (the API refuses an unresolved
        reference); emptied, it goes (the API refuses an empty message)."""
        if message.get("role") != "system":
            return message
        kept = [b for b in blocks_of(message) if b.get("type") not in (TOOL_ADDITION, TOOL_REMOVAL)
                or changed_tool_name(b) in declared]
        return {**message, "content": kept} if kept else None

    @staticmethod
    def _carried_additions(turn: Any, messages: list[dict[str, Any]], declared: set[str]) -> list[str]:
        """Tools a compaction carried that nothing left in the history offers: added again."""
        if turn.state.compaction is None or not turn.request.decision.enabled:
            return []
        offered = set(offered_names(messages))
        return [n for n in turn.request.discovered_tools if n in declared and n not in offered
                and turn.catalog.is_deferred(n)]

    # -- the history -------------------------------------------------------------------------------
    def discovery_messages(self, call_id: str, arguments: Mapping[str, Any], result: ToolSearchResult, *,
                           definitions: Callable[[str], Tool | None], server_search: str = "") -> list[dict[str, Any]]:
        """The history in which `result.matches` are offered, as this style offers tools: the harness's
        system message adding them (no search call; "what the model sees", `toolsearch request
        --discovered` and the cost command build their histories with it)."""
        return [{"role": "system", "content": [change_block(TOOL_ADDITION, n) for n in result.matches]}] \
            if result.matches else []

    # -- what the model sees ------------------------------------------------------------------------
    def offered_tool_names(self, turn: Any, body: dict[str, Any]) -> frozenset[str]:
        """What the model may call: the tools without defer_loading, plus those the history's changes
        (this turn's included) and ToolSearch's references leave offered."""
        carried = turn.state.compaction.discovered_tools if turn.state.compaction is not None else ()
        offered = set(offered_names(body.get("messages", []), carried))
        return frozenset(t["name"] for t in body.get("tools", []) if not t.get("defer_loading") or t["name"] in offered)

    def wire_tokens(self, turn: Any) -> Any:
        """The tools the model sees: the loaded ones and the tools offered so far (the hidden
        declarations cost nothing until added), and the announcement only when it is sent."""
        body = turn.wire_request()
        visible = [t for t in body.get("tools", []) if t["name"] in turn.sent_tool_names]
        tokens, counter = turn.request.tokens, turn.token_counter
        sent = counter.count_tools(visible)
        system = body.get("system") or ""
        system_text = system if isinstance(system, str) else "".join(str(b.get("text", "")) for b in system)
        # The whole request as sent: the tools offered (this turn's additions included), the system
        # prompt it carries and its messages (the pending system message of changes included).
        request_tokens = sent + (counter.count_text(system_text) if system_text else 0) \
            + count_messages(counter, body.get("messages", []))
        return replace(tokens, sent_tokens=sent, request_tokens=request_tokens,
                       announcement_tokens=tokens.announcement_tokens if self.announces(turn) else 0)
