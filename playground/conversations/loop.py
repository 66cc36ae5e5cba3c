"""The agent loop: one run per person's message, one model round trip per turn.

Each turn: (maybe compact) → the engine builds the request (permissions → deferral → discovered tools
→ tools, the announcement, the mode decision) → the provider answers → tool calls are executed
(ToolSearch in-process through the engine, `Agent` as a nested run, everything else through the
executor) with call-time permission checks → results are appended → repeat until the model ends its
turn, the person cancels, or `AGENT_MAX_TURNS`. A cancel interrupts the model call or tool call in
flight: the process's lease keeper (lease.py) sets the run's `CancelSignal`, which aborts the HTTP
request or cancels the MCP request (`notifications/cancelled`), and the run ends "cancelled". A call that needs the person's permission pauses the
run: the prompt and what the turn needs to go on are saved, and the task ends (no worker waits); the
answer queues a task that resumes from there (`AgentRun.pause`, `run(resume=...)`). Every step is a
typed event (`events.py`); the loop never talks to the channel layer. No rule about tools lives here: the engine decides, the loop
orchestrates.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from playground.conversations import events as ev
from playground.conversations import replays
from playground.conversations.events import RunReleased, lock_conversation, record_event
from playground.conversations.cache_strips import ConversationCache, cache_strip
from playground.conversations.models import Conversation, Message
from playground.conversations.providers import (
    ModelProvider,
    ProviderError,
    ProviderResponse,
    conversation_provider_key,
    get_provider,
)
from playground.conversations.runs import (
    CANCELLED_CALL,
    answer_prompt,
    cancel_requester,
    close_cancelled_turn,
    pending_answer,
    record_cancelled,
    take_paused_run,
)
from playground.conversations.subagents import AGENT_TOOL_NAME, with_agent_tool
from playground.conversations.traces import export_run
from playground.conversations.usage import record_conversation_usage, record_usage_safely
from playground.engine.execution import CallCancelled, CancelSignal, ToolExecutor, error_tool_result
from playground.engine import refusals
from playground.engine import toolsearch_tool as ts
from playground.engine.history import RESPONSES_ITEM, CompactionBoundary, blocks_of, carried_tool_names, text_block
from playground.engine.openai_wire import hosted_searches
from playground.engine.permissions import PermissionPolicy
from playground.engine.prompt_cache import breakpoints_of
from playground.engine.requests import AgentSettings, ConversationState
from playground.engine.tokens import TokenCounter, count_messages
from playground.engine.tools import TOOL_SEARCH_NAME, ToolCatalog
from playground.engine.turn import TurnPlan
from playground.mcp_servers.executor import PlaygroundExecutor
from playground.registry import adapter, backends, learned_rankings
from playground.registry.models import AgentProfile
from playground.registry.prices import current_price_table

logger = logging.getLogger(__name__)

SERVER_SEARCH_BLOCKS = ("server_tool_use", "tool_search_tool_result")


class Cancelled(Exception):
    """The person asked to stop; the run ends at this step.

    `stage` says where (between_steps, model_call, tool_call); `interrupted` names the model or tool
    whose call was stopped midway, `result` is that call's tool_result for the history.
    """

    def __init__(self, stage: str = "between_steps", *, interrupted: str = "", after_ms: float | None = None,
                 result: dict[str, Any] | None = None) -> None:
        super().__init__(stage)
        self.stage, self.interrupted, self.after_ms, self.result = stage, interrupted, after_ms, result


class AwaitingAnswer(Exception):
    """A call needs the person's permission: the run pauses (raised before the prompt is recorded).

    It climbs from the run that made the call through any subagent runs to the main run; each adds
    the frame it needs to go on (`frames`, outermost first), and the main run saves them (`pause`).
    """

    def __init__(self, tool_use_id: str, name: str, arguments: dict[str, Any], reason: str, call_sequence: int,
                 parent_sequence: int | None) -> None:
        super().__init__(name)
        self.tool_use_id, self.name, self.arguments, self.reason = tool_use_id, name, arguments, reason
        self.call_sequence, self.parent_sequence = call_sequence, parent_sequence
        self.frames: list[dict[str, Any]] = []


class Paused(Exception):
    """The run is saved, waiting for a permission answer; its task ends here."""


# -- message stores: the main conversation keeps its messages in the database, a subagent in memory --
class MessageStore:
    def load(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def append(self, role: str, content: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def extend_last_user(self, block: dict[str, Any]) -> None:
        raise NotImplementedError


class ConversationMessages(MessageStore):
    """The conversation's messages in the database. With a run token, writes happen only while that
    run still owns the conversation (checked under the row lock, as `runs.release` takes it)."""

    def __init__(self, conversation_id: int, run_token: str = "") -> None:
        self.conversation_id = conversation_id
        self.run_token = run_token

    def _lock(self) -> None:
        locked = lock_conversation(self.conversation_id)
        if self.run_token and locked.run_token != self.run_token:
            raise RunReleased(f"conversation {self.conversation_id} is no longer owned by run {self.run_token}")

    def load(self) -> list[dict[str, Any]]:
        rows = Message.objects.filter(conversation_id=self.conversation_id, compacted=False).order_by("position")
        return [{"role": row.role, "content": row.content} for row in rows]

    def append(self, role: str, content: list[dict[str, Any]]) -> None:
        with transaction.atomic():
            self._lock()
            position = (Message.objects.filter(conversation_id=self.conversation_id).aggregate(m=Max("position"))["m"] or 0) + 1
            Message.objects.create(conversation_id=self.conversation_id, position=position, role=role, content=content)

    def extend_last_user(self, block: dict[str, Any]) -> None:
        with transaction.atomic():
            self._lock()
            row = Message.objects.filter(conversation_id=self.conversation_id, role="user", compacted=False).order_by("-position").first()
            if row is not None:
                row.content = [*row.content, block]
                row.save(update_fields=["content"])


class MemoryMessages(MessageStore):
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = list(messages)

    def load(self) -> list[dict[str, Any]]:
        return list(self.messages)

    def append(self, role: str, content: list[dict[str, Any]]) -> None:
        self.messages.append({"role": role, "content": content})

    def extend_last_user(self, block: dict[str, Any]) -> None:
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index]["role"] == "user":
                self.messages[index] = {**self.messages[index], "content": [*self.messages[index]["content"], block]}
                return


@dataclass
class RunOutcome:
    reason: str  # end_turn | max_turns | cancelled | error
    final_text: str = ""
    turns: int = 0


class TextStreamer:
    """Saves a reply's streamed text as `text_delta` events, coalesced: the first piece at once, then at
    most one event per `flush_seconds` (a model streams a few characters per token; an event, a row
    and a frame per token would be far too many). `flush()` saves what is left when the reply ends."""

    def __init__(self, run: AgentRun, turn_sequence: int, *, flush_seconds: float) -> None:
        self.run, self.turn_sequence, self.flush_seconds = run, turn_sequence, flush_seconds
        self.pending: list[str] = []
        self.sent = 0  # characters saved so far
        self.last_flush: float | None = None

    def add(self, text: str) -> None:
        self.pending.append(text)
        if self.last_flush is None or time.monotonic() - self.last_flush >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        text = "".join(self.pending)
        if not text:
            return
        self.pending.clear()
        self.run.emit(ev.TextDelta(text=text, offset=self.sent), turn_sequence=self.turn_sequence)
        self.sent += len(text)
        self.last_flush = time.monotonic()


@dataclass
class AgentRun:
    """One run of the loop over a message store. Subagents are AgentRuns with a parent call."""

    conversation: Conversation
    provider: ModelProvider
    executor: ToolExecutor
    catalog: ToolCatalog
    policy: PermissionPolicy
    agent_settings: AgentSettings
    store: MessageStore
    parent_sequence: int | None = None
    subagent: str = ""
    compaction_enabled: bool = True
    max_turns: int = field(default_factory=lambda: settings.AGENT_MAX_TURNS)
    # Set when the person cancels (by the run's watcher, lease.py): stops the call in flight.
    cancel: CancelSignal = field(default_factory=CancelSignal)
    # The main agent's text streams to the chat (text_delta events); a task run's conversations do not:
    # nobody reads them as they are written, and the demo agent's pace would only lengthen the run.
    stream_text: bool = True
    _cache: ConversationCache | None = field(default=None, repr=False)

    # -- events ----------------------------------------------------------------------------------
    def emit(self, event: ev.LoopEvent, *, turn_sequence: int | None = None, status: str | None = None) -> int:
        row = record_event(self.conversation, event, parent_sequence=self.parent_sequence,
                           turn_sequence=turn_sequence, status=status, run_token=self.conversation.run_token)
        return row.sequence

    def prompt_cache(self, turn_plan: TurnPlan) -> ConversationCache:
        """This run's prompt cache model, started from the chain's earlier requests (cache_strips.py)."""
        if self._cache is None:
            self._cache = ConversationCache(self.conversation.pk, self.parent_sequence, turn_plan, current_price_table())
        return self._cache

    def check_cancel(self) -> None:
        """Stop here if the person cancelled, or if this run no longer owns the conversation (lease.py)."""
        status, run_token = Conversation.objects.filter(pk=self.conversation.pk).values_list("status", "run_token").get()
        if run_token != self.conversation.run_token:
            raise RunReleased(f"conversation {self.conversation.pk} is no longer owned by this run")
        if status == Conversation.Status.CANCELLING or self.cancel.is_set():
            raise Cancelled()

    # -- the loop ----------------------------------------------------------------------------------
    def run(self, resume: dict[str, Any] | None = None) -> RunOutcome:
        """Run the loop; with `resume` (the state `pause` saved, its prompt answered), go on from there."""
        if self.agent_settings.server_search and self.agent_settings.wire not in self.provider.wire_styles:
            raise ProviderError(f"The {self.provider.label} cannot run Anthropic's server-side search tools; "
                                "choose a native or client profile, or set ANTHROPIC_API_KEY.", kind="configuration")
        # The profile's learned ranking, when an editor switched one on (registry/learned_rankings.py).
        backend = learned_rankings.with_learned_ranking(self.conversation.profile_id, backends.search_backend(self.agent_settings.backend))
        counter = adapter.token_counter()
        final_text = ""
        first_turn = 1
        if resume is not None:
            final_text = resume.get("final_text", "")
            messages = self.store.load()
            if messages and messages[-1]["role"] == "assistant":
                messages = messages[:-1]  # the paused turn's plan was built before the model answered
            turn_plan = self.build_plan(messages, self.current_boundary(), backend)
            self.run_tools(resume["turn"], resume["turn_sequence"], resume["tool_uses"], resume.get("stop_reason", "tool_use"),
                           turn_plan, final_text, resume=resume)
            first_turn = resume["turn"] + 1
        for turn in range(first_turn, self.max_turns + 1):
            self.check_cancel()
            messages = self.store.load()
            boundary = self.current_boundary()
            if self.compaction_enabled:
                messages, boundary = self.maybe_compact(messages, boundary, counter)
            turn_plan = self.build_plan(messages, boundary, backend)
            plan = turn_plan.request
            if plan.announcement_block is not None:
                # Delta announcements live in the history: keep the block, or the next request repeats it.
                self.store.extend_last_user(plan.announcement_block)
            changes = turn_plan.tool_changes  # the tool-changes style's system message: kept in the history
            if changes is not None and changes.message["content"]:
                self.store.append("system", changes.message["content"])
            turn_seq = self.emit_turn_started(turn, turn_plan)
            if changes is not None:
                self.emit_tool_changes(changes, turn_seq)
            request = turn_plan.wire_request()
            body = ev.request_body(request)  # once a turn: the event keeps it, the cache strip keys on it
            cached = self.prompt_cache(turn_plan).account(turn_plan, request, body)
            self.emit(ev.ModelRequest(provider=self.provider.key, model=request.get("model", ""),
                                      message_count=len(_request_messages(request)), tool_count=len(request.get("tools", []) or []),
                                      request=_request_summary(request), body=body), turn_sequence=turn_seq)
            started = time.perf_counter()
            # The main agent's text streams to the chat; a subagent's shows in its Agent call's result.
            streamer = TextStreamer(self, turn_seq, flush_seconds=settings.STREAM_FLUSH_SECONDS) \
                if self.stream_text and not self.subagent else None
            try:
                if streamer is None:
                    response = self.provider.create_or_cancel(request, self.cancel, api=turn_plan.style.api)
                else:
                    response = self.provider.stream_or_cancel(request, self.cancel, streamer.add, api=turn_plan.style.api)
                    streamer.flush()
            except CallCancelled:
                raise Cancelled("model_call", interrupted=f"the model call ({request.get('model', '')})",
                                after_ms=round((time.perf_counter() - started) * 1000, 1)) from None
            except ProviderError as exc:
                self.emit(ev.ErrorEvent(message=exc.message, kind=exc.kind, status_code=exc.status_code, retryable=exc.retryable),
                          turn_sequence=turn_seq)
                self.emit(ev.TurnFinished(turn=turn, stop_reason="error", status=Conversation.Status.FAILED, final=True,
                                          reason="error"), turn_sequence=turn_seq)
                return RunOutcome("error", exc.message, turn)
            self.emit(ev.ModelResponse(stop_reason=response.stop_reason, usage=response.usage, content=response.content,
                                       duration_ms=round((time.perf_counter() - started) * 1000, 1),
                                       model=str(request.get("model", "")), cache_ttl=self.agent_settings.prompt_cache_ttl,
                                       usage_source=response.usage_source),
                      turn_sequence=turn_seq)
            self.emit(cache_strip(cached, response.usage, response.usage_source), turn_sequence=turn_seq)
            if response.content:  # the API rejects an empty message in the history
                self.store.append("assistant", response.content)
            self.emit_server_searches(response, turn_seq)
            text = response.text()
            if text:
                final_text = text
                if not self.subagent:
                    self.emit(ev.ChatMessage(role="assistant", text=text, streamed=bool(streamer and streamer.sent)),
                              turn_sequence=turn_seq)
            tool_uses = response.tool_uses()
            if tool_uses and response.stop_reason != "tool_use":
                # Cut off (max_tokens…) mid-call: answer the calls without running them, or the next
                # request would carry tool_use blocks without results (a 400).
                self.store.append("user", [
                    error_tool_result(b["id"], f"Not run: the response ended with {response.stop_reason}.") for b in tool_uses
                ])
            if response.stop_reason != "tool_use" or not tool_uses:
                self.emit(ev.TurnFinished(turn=turn, stop_reason=response.stop_reason, status=Conversation.Status.IDLE,
                                          final=True, reason="end_turn"), turn_sequence=turn_seq)
                return RunOutcome("end_turn", final_text, turn)
            self.run_tools(turn, turn_seq, tool_uses, response.stop_reason, turn_plan, final_text)
        self.emit(ev.ErrorEvent(message=f"Stopped after {self.max_turns} model turns (AGENT_MAX_TURNS).", kind="max_turns"))
        self.emit(ev.TurnFinished(turn=self.max_turns, stop_reason="max_turns", status=Conversation.Status.IDLE, final=True,
                                  reason="max_turns"))
        return RunOutcome("max_turns", final_text, self.max_turns)

    def run_tools(self, turn: int, turn_seq: int, tool_uses: list[dict[str, Any]], stop_reason: str, turn_plan: TurnPlan,
                  final_text: str, *, resume: dict[str, Any] | None = None) -> None:
        """Run one response's tool calls, store their results and finish the turn (raises Paused / Cancelled).

        With `resume`, the calls before the paused one already ran (their results are in it) and the
        paused call is settled by its answer — or, when it is an `Agent` call whose subagent paused,
        the subagent goes on from its own saved frame (`child`).
        """
        results: list[dict[str, Any]] = list(resume["results"]) if resume else []
        siblings: list[dict[str, Any]] = list(resume["siblings"]) if resume else []
        index = resume["index"] if resume else 0
        try:
            try:
                if resume is not None:
                    self.check_cancel()
                    if "child" in resume:  # the paused call is inside the subagent this Agent call runs
                        block, child = tool_uses[index], resume["child"]
                        result = self.run_subagent(block["id"], block.get("input") or {}, child["parent_sequence"], turn_seq,
                                                   resume=child)
                        sibling = []
                    else:
                        result, sibling = self.answered_call(resume, turn_plan, turn_seq)
                    results.append(result)
                    siblings.extend(sibling)
                    index += 1
                while index < len(tool_uses):
                    self.check_cancel()
                    result, sibling = self.handle_tool_use(tool_uses[index], turn_plan, turn_seq)
                    results.append(result)
                    siblings.extend(sibling)
                    index += 1
            except AwaitingAnswer as waiting:
                frame = {
                    "turn": turn, "turn_sequence": turn_seq, "stop_reason": stop_reason, "tool_uses": tool_uses,
                    "index": index, "results": results, "siblings": siblings, "final_text": final_text,
                }
                if self.parent_sequence is not None:
                    # A subagent: its history lives in memory, so it goes into the frame; the parent pauses.
                    waiting.frames.insert(0, {**frame, "messages": self.store.load(), "parent_sequence": self.parent_sequence})
                    raise
                waiting.frames.insert(0, frame)
                self.pause(waiting)
                raise Paused() from None
        except Cancelled as cancelled:
            # Keep the history valid for the next message: every tool_use gets its tool_result.
            if cancelled.result is not None and cancelled.result["tool_use_id"] in {b["id"] for b in tool_uses}:
                results.append(cancelled.result)  # the call stopped midway says so (this run's own call)
                cancelled.result = None
            answered = {r["tool_use_id"] for r in results}
            results.extend(error_tool_result(b["id"], CANCELLED_CALL) for b in tool_uses if b["id"] not in answered)
            self.store.append("user", results + siblings)
            raise
        # tool_result blocks first, then text (the API requires that order; "Tool loaded." is text).
        self.store.append("user", results + siblings)
        self.emit(ev.TurnFinished(turn=turn, stop_reason=stop_reason, status=Conversation.Status.RUNNING),
                  turn_sequence=turn_seq)

    # -- request building (the engine decides) -------------------------------------------------------
    def current_boundary(self) -> CompactionBoundary | None:
        return None if self.subagent else adapter.compaction_boundary(self.conversation.compaction)

    def build_plan(self, messages: list[dict[str, Any]], boundary: CompactionBoundary | None, backend: Any) -> TurnPlan:
        state = ConversationState(messages=messages, compaction=boundary)
        return adapter.plan_turn(self.catalog, self.policy, self.agent_settings, state, backend=backend,
                                 filtered=adapter.request_filter(self.catalog, self.policy))

    def emit_turn_started(self, turn: int, turn_plan: TurnPlan) -> int:
        plan = turn_plan.request
        seq = self.emit(ev.TurnStarted(
            turn=turn,
            provider=self.provider.key,
            model=plan.model,
            wire=turn_plan.wire,
            # Every tool the request carried: native discovered tools go with defer_loading, and are
            # no less sent for that.
            loaded_tools=turn_plan.tool_names,  # this turn's tool_addition's included (tool changes)
            deferred_tools=turn_plan.deferred_tools,
            discovered_tools=turn_plan.discovered_tools,
            tokens=turn_plan.wire_tokens.to_dict(),  # one accounting for both vendors' wires
            decision=plan.decision.to_dict(),
            subagent=self.subagent,
            server_search=self.agent_settings.server_search if plan.decision.enabled else "",
        ), status=None if self.subagent else Conversation.Status.RUNNING)
        announcement = turn_plan.wire_announcement  # none where the wire sends none (OpenAI's hosted namespaces)
        if announcement is not None:
            self.emit(ev.AnnouncementSent(style=announcement.kind, text=announcement.text,
                                          added=list(announcement.added), removed=list(announcement.removed),
                                          layout=announcement.layout, reason=announcement.reason),
                      turn_sequence=seq)
        return seq

    def emit_tool_changes(self, changes: Any, turn_seq: int) -> None:
        """The harness's prediction (engine/wires/anthropic_tool_changes.py), shown like a search."""
        found = changes.prediction
        data = found.to_dict() if found is not None else {}
        self.emit(ev.ToolSearchQuery(
            tool_use_id="", query=found.query if found is not None else "", backend=data.get("backend", ""),
            reading=data.get("reading", {}), scored=data.get("scored", []), loaded=list(changes.added),
            total_deferred_tools=data.get("total_deferred_tools", 0), notes=[*changes.notes, *data.get("notes", [])],
            predicted=True, removed=list(changes.removed),
        ), turn_sequence=turn_seq)

    def emit_server_searches(self, response: ProviderResponse, turn_seq: int) -> None:
        """The vendor's own search ran inside the response (Anthropic's server-side search tool,
        OpenAI's hosted tool_search): show it like our own ToolSearch."""
        simulated = bool(self.provider.simulated_search_note)
        kept = [b.get("item") for b in response.content if b.get("type") == RESPONSES_ITEM]
        for search in hosted_searches(i for i in kept if isinstance(i, dict)):
            self.emit(ev.ToolSearchQuery(
                tool_use_id=search.call_id, query=json.dumps(search.arguments), backend="OpenAI hosted tool_search",
                loaded=search.loaded, error="" if search.status in ("", "completed") else search.status,
                server_side=True, simulated=simulated,
                notes=[self.provider.simulated_search_note] if simulated else [],
            ), turn_sequence=turn_seq)
        uses = {b.get("id"): b for b in response.content if b.get("type") == "server_tool_use"}
        for block in response.content:
            if block.get("type") != "tool_search_tool_result":
                continue
            use = uses.get(block.get("tool_use_id"), {})
            content = block.get("content") or {}
            found = [r.get("tool_name", "") for r in content.get("tool_references", [])] if isinstance(content, dict) else []
            self.emit(ev.ToolSearchQuery(
                tool_use_id=block.get("tool_use_id", ""),
                query=json.dumps(use.get("input", {})),
                backend=use.get("name", "server"),
                loaded=found,
                error=content.get("error_code", "") if isinstance(content, dict) else "",
                server_side=True,
            ), turn_sequence=turn_seq)

    # -- tool calls ----------------------------------------------------------------------------------
    def handle_tool_use(self, block: dict[str, Any], turn: TurnPlan,
                        turn_seq: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Execute one tool_use; returns its tool_result block and any sibling text blocks."""
        tool_use_id, name, arguments = block["id"], block.get("name", ""), block.get("input") or {}
        # The engine says whether this tool may be called now (sent, or deferred → select: it first;
        # denied; unknown; asks a person first). Its message is the tool_result error the model reads.
        check = turn.check_call(name)
        if name == TOOL_SEARCH_NAME:
            if check.refused:
                return self.tool_error(tool_use_id, name, check.message, turn_seq, refusal=check.refusal), []
            return self.run_tool_search(tool_use_id, arguments, turn, turn_seq)
        call_seq = self.emit(ev.ToolCall(tool_use_id=tool_use_id, name=name, arguments=arguments,
                                         permission=check.permission.effect), turn_sequence=turn_seq)
        if check.refused and check.refusal == refusals.DEFERRED and self.agent_settings.loads_on_call:
            return self.load_on_call(tool_use_id, name, turn, turn_seq)
        if check.refused:
            error = "deferred tool called before it was loaded" if check.refusal == refusals.DEFERRED else check.message
            return self.tool_error(tool_use_id, name, check.message, turn_seq, error=error, refusal=check.refusal), []
        if check.needs_person and name not in self.always_allowed():
            reused = replays.reused_answer(self.conversation, name, arguments)
            if reused is not None:  # a replay: the origin's person answered this same call
                return self.reuse_answer(reused, tool_use_id, name, arguments, check.message, call_seq, turn, turn_seq)
            # The run pauses (run_tools → pause) and no worker waits; the answer resumes it (answered_call).
            raise AwaitingAnswer(tool_use_id, name, arguments, check.message, call_seq, self.parent_sequence)
        return self.run_allowed_call(tool_use_id, name, arguments, check.tool, call_seq, turn_seq)

    def load_on_call(self, tool_use_id: str, name: str, turn: TurnPlan,
                     turn_seq: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The profile's "load on call": a deferred tool called before a search loaded it is loaded
        as `select:<tool>` would load it — the call's tool_result holds its tool_reference, which
        every wire style reads as a discovery (the client styles as a text marker) — and a sibling
        text asks the model to call it again. The call itself did not run: its result event is an
        error of kind `tool_not_loaded`, and the loading is a ToolSearch event with a note."""
        result = turn.run_tool_search({"query": f"select:{name}"})
        note = f"{name} was called before a search loaded it; loaded on call (the profile's option), as select:{name} would"
        self.emit(ev.ToolSearchQuery.of(tool_use_id, result, notes=[note]), turn_sequence=turn_seq)
        again = f"{name} was deferred and had not been loaded; it is loaded now. Call {name} again with the same input."
        self.emit(ev.ToolResult(tool_use_id=tool_use_id, name=name, content=[text_block(again)], is_error=True,
                                error="deferred tool called before it was loaded: loaded on call", refusal=refusals.DEFERRED),
                  turn_sequence=turn_seq)
        references = [{"type": "tool_reference", "tool_name": loaded} for loaded in result.matches]
        return {"type": "tool_result", "tool_use_id": tool_use_id, "content": references}, [text_block(again)]

    def run_allowed_call(self, tool_use_id: str, name: str, arguments: dict[str, Any], tool: Any, call_seq: int,
                         turn_seq: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        if name == AGENT_TOOL_NAME:
            return self.run_subagent(tool_use_id, arguments, call_seq, turn_seq), []
        started = time.perf_counter()
        try:
            outcome = self.executor.execute(tool, arguments, timeout=settings.TOOL_CALL_TIMEOUT_SECONDS, cancel=self.cancel)
        except CallCancelled:
            after_ms = round((time.perf_counter() - started) * 1000, 1)
            text = f"Cancelled by the person while it ran (after {after_ms / 1000:.1f} s)."
            self.emit(ev.ToolResult(tool_use_id=tool_use_id, name=name, content=[{"type": "text", "text": text}], is_error=True,
                                    duration_ms=after_ms, error="cancelled while it ran", refusal=refusals.CANCELLED),
                      turn_sequence=turn_seq)
            raise Cancelled("tool_call", interrupted=name, after_ms=after_ms,
                            result=error_tool_result(tool_use_id, text)) from None
        self.emit(ev.ToolResult(tool_use_id=tool_use_id, name=name, content=outcome.content, is_error=outcome.is_error,
                                duration_ms=round(outcome.duration_ms, 1), simulated=outcome.simulated), turn_sequence=turn_seq)
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": outcome.content}
        if outcome.is_error:
            result["is_error"] = True
        return result, []

    def tool_error(self, tool_use_id: str, name: str, message: str, turn_seq: int, *, refusal: str,
                   error: str = "") -> dict[str, Any]:
        """The error tool_result the model reads (`message`); `error`: the event's note, if not the message;
        `refusal`: why, as a code (engine/refusals.py), which the task measures count by."""
        result = error_tool_result(tool_use_id, message)
        self.emit(ev.ToolResult(tool_use_id=tool_use_id, name=name, content=result["content"], is_error=True,
                                error=error or message, refusal=refusal), turn_sequence=turn_seq)
        return result

    def run_tool_search(self, tool_use_id: str, arguments: dict[str, Any], turn: TurnPlan,
                        turn_seq: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        backend = turn.backend
        try:
            result = turn.run_tool_search(arguments)
        except ts.ToolSearchInputError as exc:
            self.emit(ev.ToolSearchQuery(tool_use_id=tool_use_id, query=str(arguments.get("query", "")) if isinstance(arguments, dict) else "",
                                         backend=getattr(backend, "name", ""), error=str(exc)), turn_sequence=turn_seq)
            return ts.tool_search_error_result(tool_use_id, exc), []
        self.emit(ev.ToolSearchQuery.of(tool_use_id, result), turn_sequence=turn_seq)
        blocks = turn.style.search_answer(tool_use_id, result)
        return blocks[0], blocks[1:]

    def always_allowed(self) -> list[str]:
        return list(Conversation.objects.filter(pk=self.conversation.pk).values_list("always_allowed", flat=True).first() or [])

    def pause(self, waiting: AwaitingAnswer) -> None:
        """Record the prompt and save what the run needs to go on, in one transaction: whoever answers
        finds the saved state (and queues the resumption); nobody answering in time, the workers' watch
        denies the prompt past its deadline (requeue.expire_overdue_prompts).

        The state is the main run's frame; a subagent's frame, when the call is its own, nests as `child`.
        The innermost frame holds the call waiting for the answer.
        """
        timeout = float(settings.PERMISSION_PROMPT_TIMEOUT_SECONDS)
        frames = waiting.frames
        with transaction.atomic():
            prompt = record_event(
                self.conversation,
                ev.PermissionPrompt(tool_use_id=waiting.tool_use_id, name=waiting.name, arguments=waiting.arguments,
                                    reason=waiting.reason, timeout_seconds=timeout),
                parent_sequence=waiting.parent_sequence, turn_sequence=frames[-1]["turn_sequence"],
                status=Conversation.Status.WAITING, run_token=self.conversation.run_token,
            )
            common = {"prompt_sequence": prompt.sequence, "timeout": timeout}
            state: dict[str, Any] = {**frames[-1], **common, "call_sequence": waiting.call_sequence,
                                     "call": {"id": waiting.tool_use_id, "name": waiting.name, "input": waiting.arguments}}
            for frame in reversed(frames[:-1]):
                state = {**frame, **common, "child": state}
            Conversation.objects.filter(pk=self.conversation.pk, run_token=self.conversation.run_token).update(paused_run=state)

    def reuse_answer(self, reused: dict[str, Any], tool_use_id: str, name: str, arguments: dict[str, Any], reason: str,
                     call_seq: int, turn: TurnPlan, turn_seq: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A replay's call that its origin's person answered (replays.reused_answer): the prompt is recorded
        with that answer at once, and the call settled by it as a paused call is by a fresh answer."""
        with transaction.atomic():
            prompt = self.emit(ev.PermissionPrompt(tool_use_id=tool_use_id, name=name, arguments=arguments, reason=reason),
                               turn_sequence=turn_seq)
            answer_prompt(self.conversation.pk, prompt, reused["choice"], answered_by=reused.get("answered_by", ""),
                          note=replays.REUSED_NOTE,
                          resume=False)
        state = {"call": {"id": tool_use_id, "name": name, "input": arguments}, "prompt_sequence": prompt, "timeout": 0,
                 "call_sequence": call_seq}
        return self.answered_call(state, turn, turn_seq)

    def answered_call(self, state: dict[str, Any], turn: TurnPlan,
                      turn_seq: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Settle the call a paused run waited on, by the answer its prompt got. The turn checks the
        call again: a rule changed while the person read the prompt (a deny added, the tool gone) wins."""
        call = state["call"]
        tool_use_id, name, arguments = call["id"], call["name"], call.get("input") or {}
        answer = pending_answer(self.conversation.pk, state["prompt_sequence"])
        choice = answer.payload.get("choice") if answer is not None else "timeout"
        allowed, why = permission_outcome(choice, name, float(state.get("timeout") or 0))
        if not allowed:
            refusal = refusals.PROMPT_TIMEOUT if choice == "timeout" else refusals.PERSON_DENIED
            return self.tool_error(tool_use_id, name, why, turn_seq, refusal=refusal), []
        check = turn.check_call(name)
        if check.refused:
            return self.tool_error(tool_use_id, name, check.message, turn_seq, refusal=check.refusal), []
        return self.run_allowed_call(tool_use_id, name, arguments, check.tool, int(state.get("call_sequence") or 0), turn_seq)

    def run_subagent(self, tool_use_id: str, arguments: dict[str, Any], call_seq: int, turn_seq: int, *,
                     resume: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run an `Agent` call as a nested run; with `resume`, go on with the subagent that paused on a prompt."""
        prompt = arguments.get("prompt") if isinstance(arguments, dict) else None
        if not isinstance(prompt, str) or not prompt.strip():
            return self.tool_error(tool_use_id, AGENT_TOOL_NAME, "Agent needs a non-empty 'prompt'.", turn_seq,
                                   refusal=refusals.BAD_INPUT)
        started = time.perf_counter()
        sub_catalog, sub_policy, sub_settings, label = adapter.subagent_setup(
            self.catalog, self.policy, self.agent_settings, arguments.get("subagent_type") or "")
        sub_settings = self.provider.adapt_settings(sub_settings)
        messages = resume["messages"] if resume is not None else [{"role": "user", "content": [text_block(prompt)]}]
        child = AgentRun(
            conversation=self.conversation, provider=self.provider, executor=self.executor, catalog=sub_catalog,
            policy=sub_policy, agent_settings=sub_settings, store=MemoryMessages(messages),
            parent_sequence=call_seq, subagent=label, compaction_enabled=False,
            cancel=self.cancel,
        )
        learn = True
        try:
            outcome = child.run(resume=resume)
        except Cancelled as cancelled:
            # The Agent call was running when the cancel came: its result says so (not "before it ran").
            after_ms = round((time.perf_counter() - started) * 1000, 1)
            text = subagent_cancelled_text(after_ms, cancelled.interrupted)
            self.emit(ev.ToolResult(tool_use_id=tool_use_id, name=AGENT_TOOL_NAME, content=[text_block(text)], is_error=True,
                                    duration_ms=after_ms, error="cancelled while it ran", refusal=refusals.CANCELLED),
                      turn_sequence=turn_seq)
            cancelled.result = error_tool_result(tool_use_id, text)
            if not cancelled.interrupted:  # stopped between the subagent's steps: the Agent call is what it cut short
                cancelled.stage, cancelled.interrupted, cancelled.after_ms = "tool_call", AGENT_TOOL_NAME, after_ms
            raise
        except (RunReleased, AwaitingAnswer):
            # Released: this run no longer owns the conversation and writes nothing more. Waiting: the
            # subagent's history is saved with the paused run, and learned from once it has finished.
            learn = False
            raise
        finally:  # a subagent's history lives in memory only: learn from it now (cancelled too)
            if learn:
                record_usage_safely(self.conversation.pk, child.store.load())
        is_error = outcome.reason != "end_turn"
        text = outcome.final_text or f"The subagent ended without an answer ({outcome.reason})."
        content = [text_block(text)]
        self.emit(ev.ToolResult(tool_use_id=tool_use_id, name=AGENT_TOOL_NAME, content=content, is_error=is_error,
                                duration_ms=round((time.perf_counter() - started) * 1000, 1)), turn_sequence=turn_seq)
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
        if is_error:
            result["is_error"] = True
        return result

    # -- compaction ------------------------------------------------------------------------------------
    def maybe_compact(self, messages: list[dict[str, Any]], boundary: CompactionBoundary | None,
                      counter: TokenCounter) -> tuple[list[dict[str, Any]], CompactionBoundary | None]:
        window = self.agent_settings.context_window
        threshold = int(window * float(settings.COMPACTION_THRESHOLD))
        tokens = count_messages(counter, messages)
        if tokens < threshold:
            return messages, boundary
        keep_from = _last_person_message(messages)
        if keep_from <= 0:
            return messages, boundary  # nothing older than the current request to fold away
        older = messages[:keep_from]
        carried = carried_tool_names(messages, boundary=boundary)
        previous = f"Earlier summary:\n{boundary.summary}\n\n" if boundary is not None and boundary.summary else ""
        summary = previous + self.provider.summarise(older, model=self.agent_settings.model)
        announced = list(boundary.announced_tools) if boundary is not None else []
        new_boundary = CompactionBoundary(summary=summary, discovered_tools=tuple(carried), announced_tools=tuple(announced))
        rows = list(Message.objects.filter(conversation_id=self.conversation.pk, compacted=False).order_by("position")
                    .values_list("pk", flat=True))
        with transaction.atomic():
            Message.objects.filter(pk__in=rows[:keep_from]).update(compacted=True)
            stored = new_boundary.to_dict()
            Conversation.objects.filter(pk=self.conversation.pk).update(compaction=stored)
            self.conversation.compaction = stored
            self.emit(ev.Compaction(summary=summary, compacted_messages=keep_from, carried_tools=list(carried),
                                    tokens_before=tokens, threshold_tokens=threshold))
        return messages[keep_from:], new_boundary


def subagent_cancelled_text(after_ms: float, interrupted: str = "") -> str:
    inside = f"; it stopped its subagent's call to {interrupted}" if interrupted else ""
    return f"Cancelled by the person while it ran (after {after_ms / 1000:.1f} s){inside}."


def permission_outcome(choice: str, name: str, timeout: float) -> tuple[bool, str]:
    """Whether an answer allows the call, and the error the model reads when it does not."""
    if choice in ("once", "always"):
        return True, ""
    if choice == "timeout":
        return False, f"Permission to use {name} was not granted: nobody answered within {timeout:g} seconds."
    return False, f"The person denied permission to use {name}."


def _last_person_message(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not any(b.get("type") == "tool_result" for b in blocks_of(message)):
            return index
    return -1


def _request_summary(request: dict[str, Any]) -> dict[str, Any]:
    """The request in brief, for any wire style (OpenAI's: `input`/`instructions`, functions under
    `function`, a namespace's deferred functions counted as deferred)."""
    tools = request.get("tools", []) or []
    return {
        "model": request.get("model"),
        "max_tokens": request.get("max_tokens", request.get("max_output_tokens", request.get("max_completion_tokens"))),
        "tools": [{"name": t.get("name") or (t.get("function") or {}).get("name") or t.get("type"),
                   "defer_loading": bool(t.get("defer_loading")) or (t.get("type") == "namespace" and all(
                       f.get("defer_loading") for f in t.get("tools", [])))} for t in tools],
        "system_chars": len(json.dumps(request.get("system", request.get("instructions", "")))),
        "messages": len(_request_messages(request)),
        "cache_breakpoints": breakpoints_of(request),  # where cache_control sits (PROMPT_CACHE on), docs/prompt-cache.md
    }


def _request_messages(request: dict[str, Any]) -> list[Any]:
    return request.get("messages", request.get("input", [])) or []


# -- the entry point the Celery task calls ----------------------------------------------------------
def snapshot_profile(conversation: Conversation) -> Any:
    """The profile as it was when the conversation started (unsaved), with the live primary key for rules."""
    snapshot = dict(conversation.profile_snapshot or {})
    if not snapshot:
        return conversation.profile
    fields = {f.name for f in AgentProfile._meta.get_fields() if getattr(f, "concrete", False)}
    profile = AgentProfile(**{k: v for k, v in snapshot.items() if k in fields and k != "id"})
    profile.pk = conversation.profile_id
    return profile


def build_run(conversation: Conversation, *, provider: ModelProvider | None = None,
              executor: ToolExecutor | None = None, cancel: CancelSignal | None = None) -> AgentRun:
    profile = snapshot_profile(conversation)
    if provider is None:
        provider = get_provider(conversation_provider_key(conversation))
    if executor is None:
        executor = PlaygroundExecutor()
    try:  # the profile's wire style, resolved once ("server": planned as native, Anthropic's search on the wire)
        agent_settings = provider.adapt_settings(adapter.agent_settings(profile))
    except ValueError as exc:
        raise ProviderError(str(exc), kind="configuration") from None
    catalog = with_agent_tool(adapter.profile_catalog(profile))
    return AgentRun(
        conversation=conversation, provider=provider, executor=executor, catalog=catalog,
        policy=adapter.permission_policy(conversation.profile),
        agent_settings=agent_settings, store=ConversationMessages(conversation.pk, conversation.run_token),
        cancel=cancel or CancelSignal(),
        # The reverse side of a task run item's link (the agenteval app owns it; nothing is imported).
        stream_text=not Conversation.objects.filter(pk=conversation.pk, task_run_item__isnull=False).exists(),
    )


def run_conversation(conversation_id: int, *, provider: ModelProvider | None = None,
                     executor: ToolExecutor | None = None, resume_prompt: int | None = None,
                     cancel: CancelSignal | None = None) -> RunOutcome:
    """Run the loop for the person's latest message, or resume the run paused on `resume_prompt`.

    Leaves the conversation idle or failed, or waiting (outcome "waiting") when a call needs the
    person's permission: the run is saved and a later `resume_prompt` call goes on. Unless the run no
    longer owns it (released as lost, or superseded): then it writes nothing more. `cancel` (the run
    lease's signal) stops the call in flight when the person cancels; the run then ends cancelled.
    """
    conversation = Conversation.objects.get(pk=conversation_id)
    try:
        outcome = _run_owned(conversation, provider=provider, executor=executor, resume_prompt=resume_prompt, cancel=cancel)
    except RunReleased:
        logger.warning("conversation %s: this run was released while it ran; it stops without writing", conversation_id)
        return RunOutcome("released")
    if outcome.reason not in ("waiting", "superseded"):
        record_conversation_usage(conversation_id)  # whatever the outcome: the searches and calls happened
        export_run(conversation_id)  # the run's trace, from its saved events (OTEL_TRACES_ENABLED; never raises)
    return outcome


def _run_owned(conversation: Conversation, *, provider: ModelProvider | None,
               executor: ToolExecutor | None, resume_prompt: int | None = None,
               cancel: CancelSignal | None = None) -> RunOutcome:
    def finish(event: ev.LoopEvent, status: str) -> None:
        record_event(conversation, event, status=status, run_token=conversation.run_token)

    def cancelled(stage: str, *, interrupted: str = "", after_ms: float | None = None, note: str = "") -> RunOutcome:
        record_cancelled(conversation, stage, requested_by=cancel_requester(conversation.pk), interrupted=interrupted,
                         note=note, after_ms=after_ms, run_token=conversation.run_token)
        return RunOutcome("cancelled")

    paused: dict[str, Any] | None = None
    if resume_prompt is not None:
        paused = take_paused_run(conversation.pk, conversation.run_token, resume_prompt)
        if paused is None:
            return RunOutcome("superseded")  # already resumed, or ended (cancel, release) meanwhile
    if conversation.status == Conversation.Status.CANCELLING:
        if paused is not None:
            close_cancelled_turn(conversation.pk, paused)
        return cancelled("queued")
    try:
        run = build_run(conversation, provider=provider, executor=executor, cancel=cancel)
        outcome = run.run(resume=paused)
    except RunReleased:
        raise  # not a failure of this conversation: a newer run or the release owns it now
    except Paused:
        return RunOutcome("waiting")
    except Cancelled as stop:
        return cancelled(stop.stage, interrupted=stop.interrupted, after_ms=stop.after_ms)
    except ProviderError as exc:
        finish(ev.ErrorEvent(message=exc.message, kind=exc.kind, status_code=exc.status_code), Conversation.Status.FAILED)
        return RunOutcome("error", exc.message)
    except Exception as exc:
        logger.exception("conversation %s: the loop failed", conversation.pk)
        error = ev.ErrorEvent(message=f"{exc.__class__.__name__}: {exc}", kind="internal")
        finish(error, Conversation.Status.FAILED)
        return RunOutcome("error", error.message)
    final_status = Conversation.Status.FAILED if outcome.reason == "error" else Conversation.Status.IDLE
    finish(ev.StatusChanged(status=final_status, note=outcome.reason), final_status)
    return outcome
