"""The agent loop: one run per person's message, one model round trip per turn.

Each turn: (maybe compact) → the engine builds the request (permissions → deferral → discovered tools
→ tools, the announcement, the mode decision) → the provider answers → tool calls are executed
(ToolSearch in-process through the engine, `Agent` as a nested run, everything else through the
executor) with call-time permission checks → results are appended → repeat until the model ends its
turn, the person cancels, or `AGENT_MAX_TURNS`. Every step is a typed event (`events.py`); the loop
never talks to the channel layer. No rule about tools lives here: the engine decides, the loop
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
from playground.conversations.events import RunReleased, lock_conversation, record_event
from playground.conversations.models import Conversation, Message
from playground.conversations.providers import (
    ModelProvider,
    ProviderError,
    ProviderResponse,
    conversation_provider_key,
    get_provider,
)
from playground.conversations.services import answer_permission, pending_answer
from playground.conversations.server_search import (
    SERVER_STYLE,
    engine_wire_style,
    sent_tool_names,
    server_search_request,
)
from playground.conversations.subagents import AGENT_TOOL_NAME, with_agent_tool
from playground.conversations.usage import record_conversation_usage, record_usage_safely, usage_log
from playground.engine.execution import ToolExecutor, error_tool_result
from playground.engine import toolsearch_tool as ts
from playground.engine.history import CompactionBoundary, discovered_tool_names
from playground.engine.permissions import PermissionPolicy
from playground.engine.requests import AgentSettings, ConversationState, RequestPlan, build_request
from playground.engine.tokens import TokenCounter, count_messages
from playground.engine.toolsearch_tool import WIRE_STYLES
from playground.engine.tools import TOOL_SEARCH_NAME, ToolCatalog

logger = logging.getLogger(__name__)

SERVER_SEARCH_BLOCKS = ("server_tool_use", "tool_search_tool_result")
PERMISSION_POLL_SECONDS = 0.2


class Cancelled(Exception):
    """The person asked to stop; the run ends at this step."""


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
    run still owns the conversation (checked under the row lock, as `services._release` takes it)."""

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
    server_search: str = ""  # "bm25" / "regex": Anthropic's server-side search replaces our ToolSearch
    _server_sent: set[str] = field(default_factory=set)

    # -- events ----------------------------------------------------------------------------------
    def emit(self, event: ev.LoopEvent, *, turn_sequence: int | None = None, status: str | None = None) -> int:
        row = record_event(self.conversation, event, parent_sequence=self.parent_sequence,
                           turn_sequence=turn_sequence, status=status, run_token=self.conversation.run_token)
        return row.sequence

    def check_cancel(self) -> None:
        """Stop here if the person cancelled, or if this run no longer owns the conversation (lease.py)."""
        status, run_token = Conversation.objects.filter(pk=self.conversation.pk).values_list("status", "run_token").get()
        if run_token != self.conversation.run_token:
            raise RunReleased(f"conversation {self.conversation.pk} is no longer owned by this run")
        if status == Conversation.Status.CANCELLING:
            raise Cancelled()

    # -- the loop ----------------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        from playground.registry import adapter

        backend = adapter.search_backend(self.agent_settings.backend)
        counter = adapter.token_counter()
        pending = adapter.pending_mcp_servers()
        final_text = ""
        for turn in range(1, self.max_turns + 1):
            self.check_cancel()
            messages = self.store.load()
            boundary = self.current_boundary()
            if self.compaction_enabled:
                messages, boundary = self.maybe_compact(messages, boundary, counter)
            plan = self.build_plan(messages, boundary, counter, pending)
            if plan.announcement_block is not None:
                # Delta announcements live in the history: keep the block, or the next request repeats it.
                self.store.extend_last_user(plan.announcement_block)
            turn_seq = self.emit_turn_started(turn, plan)
            request = self.request_kwargs(plan)
            self.emit(ev.ModelRequest(provider=self.provider.key, model=request.get("model", ""),
                                      message_count=len(request.get("messages", [])), tool_count=len(request.get("tools", []) or []),
                                      request=_request_summary(request), body=ev.request_body(request)), turn_sequence=turn_seq)
            started = time.perf_counter()
            try:
                response = self.provider.create(request)
            except ProviderError as exc:
                self.emit(ev.ErrorEvent(message=exc.message, kind=exc.kind, status_code=exc.status_code, retryable=exc.retryable),
                          turn_sequence=turn_seq)
                self.emit(ev.TurnFinished(turn=turn, stop_reason="error", status=Conversation.Status.FAILED, final=True,
                                          reason="error"), turn_sequence=turn_seq)
                return RunOutcome("error", exc.message, turn)
            self.emit(ev.ModelResponse(stop_reason=response.stop_reason, usage=response.usage, content=response.content,
                                       duration_ms=round((time.perf_counter() - started) * 1000, 1)), turn_sequence=turn_seq)
            if response.content:  # the API rejects an empty message in the history
                self.store.append("assistant", response.content)
            self.emit_server_searches(response, turn_seq)
            text = response.text()
            if text:
                final_text = text
                if not self.subagent:
                    self.emit(ev.ChatMessage(role="assistant", text=text), turn_sequence=turn_seq)
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
            results: list[dict[str, Any]] = []
            siblings: list[dict[str, Any]] = []
            try:
                for block in tool_uses:
                    self.check_cancel()
                    result, sibling = self.handle_tool_use(block, plan, backend, pending, turn_seq)
                    results.append(result)
                    siblings.extend(sibling)
            except Cancelled:
                # Keep the history valid for the next message: every tool_use gets its tool_result.
                answered = {r["tool_use_id"] for r in results}
                results.extend(
                    error_tool_result(b["id"], "Cancelled by the person before this call ran.")
                    for b in tool_uses if b["id"] not in answered
                )
                self.store.append("user", results + siblings)
                raise
            # tool_result blocks first, then text (the API requires that order; "Tool loaded." is text).
            self.store.append("user", results + siblings)
            self.emit(ev.TurnFinished(turn=turn, stop_reason=response.stop_reason, status=Conversation.Status.RUNNING),
                      turn_sequence=turn_seq)
        self.emit(ev.ErrorEvent(message=f"Stopped after {self.max_turns} model turns (AGENT_MAX_TURNS).", kind="max_turns"))
        self.emit(ev.TurnFinished(turn=self.max_turns, stop_reason="max_turns", status=Conversation.Status.IDLE, final=True,
                                  reason="max_turns"))
        return RunOutcome("max_turns", final_text, self.max_turns)

    # -- request building (the engine decides) -------------------------------------------------------
    def current_boundary(self) -> CompactionBoundary | None:
        if self.subagent or not self.conversation.compaction:
            return None
        stored = self.conversation.compaction
        return CompactionBoundary(summary=stored.get("summary", ""), discovered_tools=tuple(stored.get("discovered_tools", ())),
                                  announced_tools=tuple(stored.get("announced_tools", ())), metadata=stored.get("metadata") or {})

    def build_plan(self, messages: list[dict[str, Any]], boundary: CompactionBoundary | None, counter: TokenCounter,
                   pending: list[str]) -> RequestPlan:
        state = ConversationState(messages=messages, compaction=boundary)
        return build_request(self.catalog, self.policy, self.agent_settings, state, token_counter=counter,
                             pending_mcp_servers=pending)

    def request_kwargs(self, plan: RequestPlan) -> dict[str, Any]:
        request = dict(plan.to_api_kwargs())
        request.setdefault("model", self.agent_settings.model or settings.DEFAULT_MODEL)
        request.setdefault("max_tokens", settings.AGENT_MAX_TOKENS)
        if self.server_search:
            request = server_search_request(request, plan, self.server_search)
            self._server_sent = sent_tool_names(request)
        return request

    def emit_turn_started(self, turn: int, plan: RequestPlan) -> int:
        seq = self.emit(ev.TurnStarted(
            turn=turn,
            provider=self.provider.key,
            model=plan.model,
            wire_style=plan.wire_style,
            # Every tool the request carried: native discovered tools go with defer_loading, and are
            # no less sent for that.
            loaded_tools=list(plan.tool_names),
            deferred_tools=list(plan.deferred_tools),
            discovered_tools=list(plan.discovered_tools),
            tokens=plan.tokens.to_dict(),
            decision=plan.decision.to_dict(),
            subagent=self.subagent,
            server_search=self.server_search if plan.decision.enabled else "",
        ), status=None if self.subagent else Conversation.Status.RUNNING)
        announcement = plan.announcement
        if announcement is not None:
            self.emit(ev.AnnouncementSent(style=announcement.kind, text=announcement.text,
                                          added=list(announcement.added), removed=list(announcement.removed),
                                          layout=announcement.layout, reason=announcement.reason),
                      turn_sequence=seq)
        return seq

    def emit_server_searches(self, response: ProviderResponse, turn_seq: int) -> None:
        """Anthropic's server-side search ran inside the response: show it like our own ToolSearch."""
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
    def handle_tool_use(self, block: dict[str, Any], plan: RequestPlan, backend: Any, pending: list[str],
                        turn_seq: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Execute one tool_use; returns its tool_result block and any sibling text blocks."""
        tool_use_id, name, arguments = block["id"], block.get("name", ""), block.get("input") or {}
        if name == TOOL_SEARCH_NAME:
            refusal = plan.call_error(name) or (
                "ToolSearch is not available: this conversation uses Anthropic's server-side search." if self.server_search else None)
            if refusal is not None:
                return self.tool_error(tool_use_id, name, refusal, turn_seq), []
            return self.run_tool_search(tool_use_id, arguments, plan, backend, pending, turn_seq)

        decision = self.policy.decide(name)
        call_seq = self.emit(ev.ToolCall(tool_use_id=tool_use_id, name=name, arguments=arguments, permission=decision.effect),
                             turn_sequence=turn_seq)
        # The engine says whether this tool may be called now (sent in full; deferred → select: it first;
        # denied; unknown). Its message is the tool_result error the model reads.
        refusal = plan.call_error(name)
        if refusal is not None and self.server_search and name in self._server_sent and name != TOOL_SEARCH_NAME:
            refusal = None  # sent with defer_loading: the server's search loaded it for the model
        if refusal is not None:
            if name in plan.deferred_tools:
                result = ts.deferred_tool_not_loaded_result(tool_use_id, name)
                self.emit(ev.ToolResult(tool_use_id=tool_use_id, name=name, content=result["content"], is_error=True,
                                        error="deferred tool called before it was loaded"), turn_sequence=turn_seq)
                return result, []
            return self.tool_error(tool_use_id, name, refusal, turn_seq), []
        tool = plan.searchable.get(name) or self.catalog.get(name)
        if decision.effect == "deny" or tool is None:
            message = (f"Permission to use {name} was denied ({decision.reason})." if decision.effect == "deny"
                       else f"Tool {name!r} does not exist or is not available in this conversation.")
            return self.tool_error(tool_use_id, name, message, turn_seq), []
        if decision.effect == "ask" and name not in self.always_allowed():
            allowed, why = self.ask_permission(tool_use_id, name, arguments, decision.reason, turn_seq)
            if not allowed:
                return self.tool_error(tool_use_id, name, why, turn_seq), []
        if name == AGENT_TOOL_NAME:
            return self.run_subagent(tool_use_id, arguments, call_seq, turn_seq), []
        outcome = self.executor.execute(tool, arguments, timeout=settings.TOOL_CALL_TIMEOUT_SECONDS)
        self.emit(ev.ToolResult(tool_use_id=tool_use_id, name=name, content=outcome.content, is_error=outcome.is_error,
                                duration_ms=round(outcome.duration_ms, 1), simulated=outcome.simulated), turn_sequence=turn_seq)
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": outcome.content}
        if outcome.is_error:
            result["is_error"] = True
        return result, []

    def tool_error(self, tool_use_id: str, name: str, message: str, turn_seq: int) -> dict[str, Any]:
        result = error_tool_result(tool_use_id, message)
        self.emit(ev.ToolResult(tool_use_id=tool_use_id, name=name, content=result["content"], is_error=True, error=message),
                  turn_sequence=turn_seq)
        return result

    def run_tool_search(self, tool_use_id: str, arguments: dict[str, Any], plan: RequestPlan, backend: Any, pending: list[str],
                        turn_seq: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        wire_style = self.agent_settings.wire_style
        try:
            result = ts.run_tool_search(arguments, plan.searchable, backend, pending_mcp_servers=pending,
                                        default_max_results=self.agent_settings.max_results, usage=usage_log())
        except ts.ToolSearchInputError as exc:
            self.emit(ev.ToolSearchQuery(tool_use_id=tool_use_id, query=str(arguments.get("query", "")) if isinstance(arguments, dict) else "",
                                         backend=getattr(backend, "name", ""), error=str(exc)), turn_sequence=turn_seq)
            return ts.tool_search_error_result(tool_use_id, exc), []
        data = result.to_dict()
        self.emit(ev.ToolSearchQuery(
            tool_use_id=tool_use_id, query=result.query, backend=result.backend, reading=data["reading"],
            scored=data["scored"], loaded=list(result.matches), already_loaded=data["already_loaded"],
            not_found=data["not_found"], total_deferred_tools=result.total_deferred_tools,
        ), turn_sequence=turn_seq)
        blocks = ts.tool_search_user_blocks(tool_use_id, result, wire_style)
        return blocks[0], blocks[1:]

    def always_allowed(self) -> list[str]:
        return list(Conversation.objects.filter(pk=self.conversation.pk).values_list("always_allowed", flat=True).first() or [])

    def ask_permission(self, tool_use_id: str, name: str, arguments: dict[str, Any], reason: str,
                       turn_seq: int) -> tuple[bool, str]:
        """Pause for the person: approve once / always / deny, or deny on timeout. Polls the database."""
        timeout = float(settings.PERMISSION_PROMPT_TIMEOUT_SECONDS)
        prompt_seq = self.emit(ev.PermissionPrompt(tool_use_id=tool_use_id, name=name, arguments=arguments, reason=reason,
                                                   timeout_seconds=timeout),
                               turn_sequence=turn_seq, status=Conversation.Status.WAITING)
        deadline = time.monotonic() + timeout
        while True:
            answer = pending_answer(self.conversation.pk, prompt_seq)
            if answer is not None:
                break
            try:
                self.check_cancel()
            except Cancelled:
                # Close the prompt so its buttons go away; the first answer wins if the person was quicker.
                try:
                    answer_permission(self.conversation, prompt_seq, "cancelled", note="the run was cancelled")
                except Exception:  # noqa: BLE001 - already answered
                    pass
                raise
            if time.monotonic() >= deadline:
                try:
                    answer = answer_permission(self.conversation, prompt_seq, "timeout",
                                               note=f"no answer within {timeout:g} s: denied")
                except Exception:  # noqa: BLE001 - the person answered at the same moment: theirs wins
                    answer = pending_answer(self.conversation.pk, prompt_seq)
                break
            time.sleep(PERMISSION_POLL_SECONDS)
        choice = answer.payload.get("choice") if answer is not None else "timeout"
        if choice in ("once", "always"):
            return True, ""
        if choice == "timeout":
            return False, f"Permission to use {name} was not granted: nobody answered within {timeout:g} seconds."
        return False, f"The person denied permission to use {name}."

    def run_subagent(self, tool_use_id: str, arguments: dict[str, Any], call_seq: int, turn_seq: int) -> dict[str, Any]:
        prompt = arguments.get("prompt") if isinstance(arguments, dict) else None
        if not isinstance(prompt, str) or not prompt.strip():
            return self.tool_error(tool_use_id, AGENT_TOOL_NAME, "Agent needs a non-empty 'prompt'.", turn_seq)
        started = time.perf_counter()
        sub_catalog, sub_policy, sub_settings, label = subagent_setup(
            self.catalog, self.policy, self.agent_settings, arguments.get("subagent_type") or "")
        child = AgentRun(
            conversation=self.conversation, provider=self.provider, executor=self.executor, catalog=sub_catalog,
            policy=sub_policy, agent_settings=sub_settings,
            store=MemoryMessages([{"role": "user", "content": [{"type": "text", "text": prompt}]}]),
            parent_sequence=call_seq, subagent=label, compaction_enabled=False, server_search=self.server_search,
        )
        released = False
        try:
            outcome = child.run()
        except RunReleased:
            released = True  # this run no longer owns the conversation: it writes nothing more
            raise
        finally:  # a subagent's history lives in memory only: learn from it now (cancelled too)
            if not released:
                record_usage_safely(self.conversation.pk, child.store.load())
        is_error = outcome.reason != "end_turn"
        text = outcome.final_text or f"The subagent ended without an answer ({outcome.reason})."
        content = [{"type": "text", "text": text}]
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
        carried = discovered_tool_names(messages, boundary=boundary)
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


def _last_person_message(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if message.get("role") == "user" and not any(b.get("type") == "tool_result" for b in blocks):
            return index
    return -1


def _request_summary(request: dict[str, Any]) -> dict[str, Any]:
    tools = request.get("tools", []) or []
    return {
        "model": request.get("model"),
        "max_tokens": request.get("max_tokens"),
        "tools": [{"name": t.get("name") or t.get("type"), "defer_loading": bool(t.get("defer_loading"))} for t in tools],
        "system_chars": len(json.dumps(request.get("system", ""))),
        "messages": len(request.get("messages", [])),
    }


def subagent_setup(catalog: ToolCatalog, policy: PermissionPolicy, agent_settings: AgentSettings,
                   subagent_type: str) -> tuple[ToolCatalog, PermissionPolicy, AgentSettings, str]:
    """Tools, rules and settings for a subagent: a named subagent profile's, else the parent's narrowed by the denylist.

    The engine decides both: `resolve_subagent_tools` for the tools, `subagent_policy` for ToolSearch.
    """
    from playground.engine.subagents import resolve_subagent_tools, subagent_policy
    from playground.registry import adapter
    from playground.registry.models import AgentProfile

    denylist = list(settings.AGENT_TOOL_DENYLIST)
    profile = AgentProfile.objects.filter(name=subagent_type, is_subagent=True).first() if subagent_type else None
    if profile is not None:
        sub_policy = subagent_policy(adapter.permission_policy(profile), global_denylist=denylist,
                                     disallowed=list(profile.disallowed_tools or []))
        return adapter.profile_catalog(profile, catalog), sub_policy, adapter.agent_settings(profile), profile.name
    sub_catalog = resolve_subagent_tools(catalog, global_denylist=denylist)
    return sub_catalog, subagent_policy(policy, global_denylist=denylist), agent_settings, subagent_type or "general-purpose"


# -- the entry point the Celery task calls ----------------------------------------------------------
def snapshot_profile(conversation: Conversation) -> Any:
    """The profile as it was when the conversation started (unsaved), with the live primary key for rules."""
    from playground.registry.models import AgentProfile

    snapshot = dict(conversation.profile_snapshot or {})
    if not snapshot:
        return conversation.profile
    fields = {f.name for f in AgentProfile._meta.get_fields() if getattr(f, "concrete", False)}
    profile = AgentProfile(**{k: v for k, v in snapshot.items() if k in fields and k != "id"})
    profile.pk = conversation.profile_id
    return profile


def build_run(conversation: Conversation, *, provider: ModelProvider | None = None,
              executor: ToolExecutor | None = None) -> AgentRun:
    from playground.registry import adapter

    profile = snapshot_profile(conversation)
    if provider is None:
        provider = get_provider(conversation_provider_key(conversation))
    if executor is None:
        from playground.mcp_servers.executor import PlaygroundExecutor

        executor = PlaygroundExecutor()
    wire_style = getattr(profile, "wire_style", "native") if profile is not None else "native"
    if wire_style == SERVER_STYLE:
        if SERVER_STYLE not in provider.wire_styles:
            raise ProviderError(f"The {provider.label} cannot run Anthropic's server-side search tools; "
                                "choose a native or client profile, or set ANTHROPIC_API_KEY.", kind="configuration")
    elif wire_style not in WIRE_STYLES:
        raise ProviderError(f"Unknown wire style {wire_style!r} (native, client or server).", kind="configuration")
    wire_style, server_search = engine_wire_style(wire_style)
    catalog = with_agent_tool(adapter.profile_catalog(profile))
    return AgentRun(
        conversation=conversation, provider=provider, executor=executor, catalog=catalog,
        policy=adapter.permission_policy(conversation.profile),
        agent_settings=adapter.agent_settings(profile, wire_style=wire_style),
        store=ConversationMessages(conversation.pk, conversation.run_token), server_search=server_search,
    )


def run_conversation(conversation_id: int, *, provider: ModelProvider | None = None,
                     executor: ToolExecutor | None = None) -> RunOutcome:
    """Run the loop for the person's latest message. Always leaves the conversation idle or failed,
    unless the run no longer owns it (released as lost, or superseded): then it writes nothing more."""
    conversation = Conversation.objects.get(pk=conversation_id)
    try:
        outcome = _run_owned(conversation, provider=provider, executor=executor)
    except RunReleased:
        logger.warning("conversation %s: this run was released while it ran; it stops without writing", conversation_id)
        return RunOutcome("released")
    record_conversation_usage(conversation_id)  # whatever the outcome: the searches and calls happened
    return outcome


def _run_owned(conversation: Conversation, *, provider: ModelProvider | None,
               executor: ToolExecutor | None) -> RunOutcome:
    def finish(event: ev.LoopEvent, status: str) -> None:
        record_event(conversation, event, status=status, run_token=conversation.run_token)

    if conversation.status == Conversation.Status.CANCELLING:
        finish(ev.TurnFinished(turn=0, stop_reason="cancelled", status="idle", final=True, reason="cancelled"),
               Conversation.Status.IDLE)
        return RunOutcome("cancelled")
    try:
        run = build_run(conversation, provider=provider, executor=executor)
        outcome = run.run()
    except RunReleased:
        raise  # not a failure of this conversation: a newer run or the release owns it now
    except Cancelled:
        finish(ev.TurnFinished(turn=0, stop_reason="cancelled", status="idle", final=True, reason="cancelled"),
               Conversation.Status.IDLE)
        return RunOutcome("cancelled")
    except ProviderError as exc:
        finish(ev.ErrorEvent(message=exc.message, kind=exc.kind, status_code=exc.status_code), Conversation.Status.FAILED)
        return RunOutcome("error", exc.message)
    except Exception as exc:  # noqa: BLE001 - never leave a conversation hanging in "running"
        logger.exception("conversation %s: the loop failed", conversation.pk)
        finish(ev.ErrorEvent(message=f"{exc.__class__.__name__}: {exc}", kind="internal"), Conversation.Status.FAILED)
        return RunOutcome("error", str(exc))
    final_status = Conversation.Status.FAILED if outcome.reason == "error" else Conversation.Status.IDLE
    finish(ev.StatusChanged(status=final_status, note=outcome.reason), final_status)
    return outcome
