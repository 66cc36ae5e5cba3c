"""The MCP server behind every profile's endpoint: the `mcp` SDK's low-level `Server`.

One server and one session manager serve all profiles; the endpoint (endpoint.py) has already
checked the token and put the profile and token ids in the ASGI scope, which each handler reads
from the request that carried the message. Handlers are thin: they run the synchronous Django code
of service.py in worker threads (database access, and tool calls that may take as long as
TOOL_CALL_TIMEOUT_SECONDS, must not block the event loop) and record an event for each step.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import anyio
import mcp_types as types
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ToolsListChanged, event_to_notification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from playground import telemetry
from playground.gateway import listen, service, traces, upstream
from playground.gateway.events import record_event
from playground.gateway.models import GatewayEvent, GatewayPrompt, GatewaySession, GatewayToken
from playground.incidents import report_unexpected
from playground.mcp_servers import trace_context

logger = logging.getLogger(__name__)
denials = logging.getLogger("playground.gateway")  # the endpoint's refusals log here too

SERVER_NAME = "toolsearch-playground-gateway"
PROMPT_POLL_SECONDS = 0.5
SCOPE_KEY = "toolsearch_gateway"  # what endpoint.py puts in the ASGI scope: {"profile_id", "token_id"}


def in_thread(func):
    """Run Django code off the event loop, in the thread pool, closing stale connections around it
    (thread_sensitive=False: a slow tool call must not queue every other session behind it)."""
    return database_sync_to_async(func, thread_sensitive=False)


class GatewayServer(Server):
    def create_initialization_options(self, notification_options=None, *args: Any, **kwargs: Any):
        # A search adds tools to the session's list: clients must know we announce that.
        return super().create_initialization_options(notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)


def _scope_info(ctx) -> dict[str, Any]:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None) or {}
    info = scope.get(SCOPE_KEY)
    if not info:
        raise RuntimeError("gateway request without an authenticated profile (not routed through the endpoint)")
    return info


STATELESS = ""  # the "session id" of a 2026-07-28 request: its row is found by token and client name


def _is_modern(ctx) -> bool:
    return getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def _session_key(ctx) -> str:
    """The request's Mcp-Session-Id, or STATELESS for a 2026-07-28 request (which has none)."""
    if _is_modern(ctx):
        return STATELESS
    session_id = _session_id(ctx)
    if not session_id:
        raise RuntimeError("the gateway needs an MCP session (initialize first)")
    return session_id


def _session_id(ctx) -> str | None:
    connection = getattr(ctx.session, "_connection", None)
    session_id = getattr(connection, "session_id", None)
    if session_id:
        return session_id
    request = getattr(ctx, "request", None)
    return request.headers.get("mcp-session-id") if request is not None else None


def _client_info(ctx) -> tuple[str, str, str]:
    params = ctx.session.client_params
    if params is None:
        return "", "", ""
    info = params.client_info
    return (info.name if info else ""), (info.version if info else ""), params.protocol_version or ""


class SessionClosed(Exception):
    """The client ended this session (on this or another web process): it serves nothing more."""


SESSION_CLOSED_MESSAGE = "This MCP session was closed by its client; initialize a new session."


# -- synchronous parts (run in threads) -------------------------------------------------------------
def _open_session(session_id: str, info: dict[str, Any], client: tuple[str, str, str],
                  handshake: dict[str, Any] | None = None) -> GatewaySession:
    """The session's row, created on its first message (normally initialize) with the client's name.
    `handshake` ({"params", "version"}, from initialize) is kept so another process can resume it.
    A stateless request (session_id STATELESS) gets its client's current row (`_stateless_session`)."""
    if session_id == STATELESS:
        return _stateless_session(info, client)
    name, version, protocol = client
    # With its profile in the same query: every list and call reads the profile next (profile_view).
    # A new session starts with what this client found in its earlier sessions (service.remember).
    session, created = GatewaySession.objects.select_related("profile").get_or_create(
        session_id=session_id,
        defaults={"profile_id": info["profile_id"], "token_id": info.get("token_id"),
                  "client_name": name[:200], "client_version": version[:100], "protocol_version": protocol[:40],
                  "discovered_tools": lambda: service.remembered_tools(info.get("token_id"), name[:200])},
    )
    if session.profile_id != info["profile_id"]:
        raise PermissionError("this MCP session belongs to another profile")
    if session.closed_at is not None:
        raise SessionClosed(SESSION_CLOSED_MESSAGE)
    if handshake is not None:
        GatewaySession.objects.filter(pk=session.pk).update(
            initialize_params=handshake["params"], negotiated_version=str(handshake["version"])[:40])
    if created:
        record_event(session.pk, GatewayEvent.Type.SESSION_STARTED, {
            "client_name": name, "client_version": version, "protocol_version": protocol,
            "profile": session.profile.name, "remembered": list(session.discovered_tools or []),
        })
    elif name and not session.client_name:
        GatewaySession.objects.filter(pk=session.pk).update(client_name=name[:200], client_version=version[:100],
                                                            protocol_version=protocol[:40])
    return session


def _stateless_session(info: dict[str, Any], client: tuple[str, str, str]) -> GatewaySession:
    """The row that gathers a stateless client's requests: per profile, token and client name, the
    one seen within GATEWAY_SESSION_IDLE_SECONDS, else a new one (the older ones are closed as idle).
    Its discovered tools are its own searches' plus what this client (token and name) found anywhere
    within GATEWAY_DISCOVERY_TTL_SECONDS, read on every request: there is no session to carry them."""
    name, version, protocol = client
    name = name[:200]
    cutoff = timezone.now() - timezone.timedelta(seconds=settings.GATEWAY_SESSION_IDLE_SECONDS)
    mine = GatewaySession.objects.filter(stateless=True, profile_id=info["profile_id"], token_id=info.get("token_id"),
                                         client_name=name, closed_at__isnull=True)
    current = mine.select_related("profile").filter(last_seen_at__gte=cutoff).order_by("-last_seen_at")
    # A later request finds its row with a plain read: no transaction, no lock on the token's row (every
    # request of every client of a token would queue on it, while only a client's first needs it).
    session = current.first()
    created = False
    if session is None:
        session, created, idle = _first_stateless_row(info, client, mine, current)
    if created:
        for pk in idle:
            record_event(pk, GatewayEvent.Type.SESSION_CLOSED, {"by": "idle timeout (stateless client)"})
        record_event(session.pk, GatewayEvent.Type.SESSION_STARTED, {
            "client_name": name, "client_version": version, "protocol_version": protocol, "stateless": True,
            "profile": session.profile.name, "remembered": list(session.discovered_tools or []),
        })
        return session
    if (version[:100], protocol[:40]) != (session.client_version, session.protocol_version):
        GatewaySession.objects.filter(pk=session.pk).update(client_version=version[:100], protocol_version=protocol[:40])
    known = list(session.discovered_tools or [])
    session.discovered_tools = known + [n for n in service.remembered_tools(session.token_id, name) if n not in known]
    return session


def _first_stateless_row(info: dict[str, Any], client: tuple[str, str, str], mine: Any, current: Any,
                         ) -> tuple[GatewaySession, bool, list[int]]:
    """A stateless client's first request (or its first after an idle gap): under the token's row lock,
    which orders two first requests of one client (one row, not two), the row another request made
    meanwhile, else a new one, the client's idle rows closed. Returns (row, created, closed pks)."""
    name, version, protocol = client
    name = name[:200]
    with transaction.atomic():
        list(GatewayToken.objects.select_for_update().filter(pk=info.get("token_id")).values_list("pk", flat=True))
        session = current.first()
        if session is not None:
            return session, False, []
        idle = list(mine.values_list("pk", flat=True))
        mine.update(closed_at=timezone.now())
        session = GatewaySession.objects.create(
            session_id=f"stateless-{uuid.uuid4().hex}", stateless=True, profile_id=info["profile_id"],
            token_id=info.get("token_id"), client_name=name, client_version=version[:100],
            protocol_version=protocol[:40], negotiated_version=protocol[:40],
            discovered_tools=service.remembered_tools(info.get("token_id"), name),
        )
        return GatewaySession.objects.select_related("profile").get(pk=session.pk), True, idle


def record_session_closed(session_id: str) -> None:
    """The client ended the session (HTTP DELETE): its page says so."""
    session = GatewaySession.objects.filter(session_id=session_id, closed_at__isnull=True).first()
    if session is not None:
        # Marked closed first: a process still holding the session (or asked to resume it) stops serving it.
        GatewaySession.objects.filter(pk=session.pk).update(closed_at=timezone.now())
        record_event(session.pk, GatewayEvent.Type.SESSION_CLOSED, {"by": "client"})


def resumable_session(session_id: str, profile_id: int, token_id: int) -> tuple[dict[str, Any], str] | None:
    """(initialize params, negotiated version) of a session this process does not hold but may take
    over: opened by the same token on the same profile, not closed, active within the idle timeout,
    and its handshake recorded. None otherwise (the client then gets 404 and initializes anew)."""
    cutoff = timezone.now() - timezone.timedelta(seconds=settings.GATEWAY_SESSION_IDLE_SECONDS)
    row = (GatewaySession.objects.filter(session_id=session_id, profile_id=profile_id, token_id=token_id,
                                          closed_at__isnull=True, last_seen_at__gte=cutoff)
           .exclude(negotiated_version="").values_list("initialize_params", "negotiated_version").first())
    if row is None or not isinstance(row[0], dict) or not row[0]:
        return None
    return row[0], row[1]


def _record_call(session: GatewaySession | int, info: dict[str, Any], event: dict[str, Any]) -> None:
    """Save a call's event; a refused call (a deny rule, a person's "deny", nobody answering, a tool
    the session may not call) is also logged, with the token's row and prefix, never its secret."""
    session_pk = session if isinstance(session, int) else session.pk
    record_event(session_pk, GatewayEvent.Type.TOOL_CALL, event)
    if event.get("refused"):
        denials.warning("MCP gateway refused a call of %s in session #%s on profile %s (%s): permission %s%s — %s",
                        event.get("name"), session_pk, info.get("profile_id"), info.get("token", "no token"),
                        event.get("permission"), f", answer {event['answer']}" if event.get("answer") else "",
                        str(event.get("summary", ""))[:200])


def _list_tools(session_id: str, info: dict[str, Any], client: tuple[str, str, str]) -> list[dict[str, Any]]:
    session = _open_session(session_id, info, client)
    view = service.profile_view(session.profile)
    tools = view.tools_for(list(session.discovered_tools or []))
    record_event(session.pk, GatewayEvent.Type.TOOLS_LISTED, service.list_event(view, tools))
    return tools


def _call(session_id: str, info: dict[str, Any], client: tuple[str, str, str], name: str,
          arguments: dict[str, Any], *, ask_client: bool = False) -> tuple[Any, list[str], Any]:
    """(the answer: a CallAnswer or SearchAnswer, or None while a person is asked; tools added to
    the list; a call waiting for a person or None). `ask_client`: the client can confirm a call
    itself (elicitation)."""
    session = _open_session(session_id, info, client)
    view = service.profile_view(session.profile)
    if name == service.TOOL_SEARCH_NAME:
        answer = service.tool_search(session, view, arguments)
        record_event(session.pk, GatewayEvent.Type.TOOL_SEARCH, answer.event)
        return answer, answer.added, None
    via = ""
    if name == service.CALL_DISCOVERED_NAME and view.tool_search_on:
        via, name, arguments = service.CALL_DISCOVERED_NAME, str(arguments.get("name", "")), arguments.get("arguments", {})
        if arguments is None:
            arguments = {}
    planned = service.plan_call(session, view, name, arguments, via=via)
    if planned.needs_person:
        prompt = service.open_prompt(session, planned, ask_client=ask_client)
        return None, [], (session.pk, planned, prompt.pk)
    with _traced(session):
        call = service.refuse(planned) if planned.refusal else service.execute(planned)
    _record_call(session, info, call.event)
    return call, [], None


def _traced(session: GatewaySession):
    """Upstream calls carry the session's trace context (its trace, under its span): an MCP server
    that traces joins the session's trace (mcp_servers/trace_context.py)."""
    return trace_context.spans_under(*telemetry.ids_for(traces.session_key(session)))


def _finish_prompted(session_pk: int, info: dict[str, Any], planned: service.PlannedCall, prompt_pk: int, status: str):
    if status == GatewayPrompt.Status.PENDING:
        service.answer_prompt(prompt_pk, GatewayPrompt.Status.TIMEOUT)
        status = service.prompt_status(prompt_pk)  # an answer may have landed in between: it stands
    if status == GatewayPrompt.Status.ALLOWED:
        # The rules may have changed while the person read the prompt: a deny added meanwhile wins.
        session = GatewaySession.objects.select_related("profile").get(pk=session_pk)
        again = service.plan_call(session, service.profile_view(session.profile), planned.name, planned.arguments,
                                  via=planned.via)
        if again.refusal is not None:
            call = service.refuse(again, answer=status)
            _record_call(session_pk, info, call.event)
            return call
    with _traced(GatewaySession.objects.get(pk=session_pk)):
        call = service.finish_prompted_call(planned, status)
    _record_call(session_pk, info, call.event)
    return call


async def wait_for_answer(prompt_pk: int, answered: anyio.Event | None = None) -> str:
    """Poll the prompt's row until a person answers or the timeout passes. Only this coroutine
    waits (the MCP request stays open); no thread is held between polls. `answered` is set when
    the client answered here (elicitation): the row is read at once, not at the next poll."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.GATEWAY_PERMISSION_TIMEOUT_SECONDS
    status = GatewayPrompt.Status.PENDING
    while loop.time() < deadline:
        status = await in_thread(service.prompt_status)(prompt_pk)
        if status != GatewayPrompt.Status.PENDING:
            break
        with anyio.move_on_after(min(PROMPT_POLL_SECONDS, max(0.0, deadline - loop.time()))):
            await (answered.wait() if answered is not None else anyio.sleep_forever())
    return status


ELICITATION_BY = "the person at the MCP client (elicitation)"
ELICITATION_ANSWERS = {"accept": GatewayPrompt.Status.ALLOWED, "decline": GatewayPrompt.Status.DENIED}
MAX_ELICITED_ARGUMENTS_CHARS = 2000


def client_can_confirm(ctx) -> bool:
    """Whether the client said at initialize that it answers form elicitations. Never for a
    2026-07-28 client: that era has no server-to-client requests (the dashboard asks instead)."""
    if _is_modern(ctx):
        return False
    capabilities = ctx.session.client_capabilities
    elicitation = getattr(capabilities, "elicitation", None)
    if elicitation is None:
        return False
    # `{}` means form mode; a client that lists modes must list "form".
    return getattr(elicitation, "form", None) is not None or getattr(elicitation, "url", None) is None


def elicitation_message(planned: service.PlannedCall) -> str:
    arguments = service.arguments_text(planned.arguments)
    if len(arguments) > MAX_ELICITED_ARGUMENTS_CHARS:
        arguments = arguments[:MAX_ELICITED_ARGUMENTS_CHARS] + " …"
    return (f"The gateway's permission rules ask a person before {planned.name} runs "
            f"({planned.decision.reason}). Arguments: {arguments}. Allow this call?")


async def ask_the_client(ctx, planned: service.PlannedCall, prompt_pk: int, answered: anyio.Event) -> None:
    """Ask the client to confirm the call (elicitation/create, form mode, on this request's stream);
    accept allows it, decline denies it, as if answered on the dashboard. A cancel, an error or a
    client that cannot ask leaves the dashboard's prompt waiting (the first answer stands)."""
    try:
        result = await ctx.session.elicit_form(elicitation_message(planned), {"type": "object", "properties": {}},
                                               related_request_id=ctx.request_id)
    except Exception as exc:  # noqa: BLE001 - the dashboard's prompt still stands
        logger.info("MCP gateway: the client did not answer the elicitation for %s: %s", planned.name, exc)
        return
    status = ELICITATION_ANSWERS.get(result.action)
    if status is None:
        return
    try:
        await in_thread(service.answer_prompt)(prompt_pk, status, by=ELICITATION_BY)
    except Exception as exc:  # noqa: BLE001 - the dashboard's prompt still stands; logged with a reference
        report_unexpected("recording the client's answer to a permission question", exc, log=logger)
        return
    answered.set()


async def wait_for_a_person(ctx, planned: service.PlannedCall, prompt_pk: int, ask_client: bool) -> str:
    """The prompt's answer: from the dashboard, or first from the client when it can confirm."""
    if not ask_client:
        return await wait_for_answer(prompt_pk)
    answered = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(ask_the_client, ctx, planned, prompt_pk, answered)
        status = await wait_for_answer(prompt_pk, answered)
        group.cancel_scope.cancel()  # answered on the dashboard, or timed out: stop asking the client
    return status


# -- MCP handlers ------------------------------------------------------------------------------------
# How long a 2026-07-28 client may keep a list (`ttlMs`, SEP-2549). Resources and prompts: the
# upstream lists are kept 30 s per process here anyway (upstream.py). Tools: while tool search is
# on, any search may add to the list, so it is fresh only now (0): a client that caches it hears of
# a change on its listen stream. Always `private`: what a list holds depends on the token.
LIST_TTL_MS = 30_000


def _cacheable(result, *, ttl_ms: int):
    return result.model_copy(update={"ttl_ms": ttl_ms, "cache_scope": "private"})


def _unexpected(method: str, exc: Exception) -> MCPError:
    """An error the client may see: a reference to the log line, never the exception's text (a
    database error quotes the SQL it failed on)."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, PermissionError):  # ours, with a message meant for the client
        return MCPError(code=types.INVALID_REQUEST, message=str(exc))
    return MCPError(code=types.INTERNAL_ERROR, message=report_unexpected(f"the gateway's {method}", exc, log=logger))


def _mcp_tool(tool: dict[str, Any]) -> types.Tool:
    return types.Tool(name=tool["name"], description=tool.get("description") or None, input_schema=tool["input_schema"])


def _mcp_content(block: dict[str, Any]):
    if block.get("type") == "image" and isinstance(block.get("source"), dict):
        source = block["source"]
        return types.ImageContent(type="image", data=source.get("data", ""), mime_type=source.get("media_type", ""))
    return types.TextContent(type="text", text=block.get("text", "") if block.get("type") == "text" else str(block))


def _call_result(answer) -> types.CallToolResult:
    """An MCP server's own result as it sent it (every content type, structuredContent); else the
    answer's text and image blocks."""
    mcp_result = getattr(answer, "mcp_result", None)
    if mcp_result is not None:
        try:
            return types.CallToolResult.model_validate(mcp_result, by_name=False)
        except ValidationError as exc:
            logger.warning("MCP gateway: an upstream result did not validate, sent as converted blocks: %s", exc)
    return types.CallToolResult(content=[_mcp_content(b) for b in answer.content], is_error=answer.is_error)


async def list_tools(ctx, params) -> types.ListToolsResult:
    info = _scope_info(ctx)
    session_id = _session_key(ctx)
    try:
        tools = await in_thread(_list_tools)(session_id, info, _client_info(ctx))
    except SessionClosed as closed:
        raise MCPError(code=types.INVALID_REQUEST, message=str(closed)) from None
    except Exception as exc:  # noqa: BLE001 - logged with a reference, answered without its text
        raise _unexpected("tools/list", exc) from None
    tools_result = types.ListToolsResult(tools=[_mcp_tool(t) for t in tools])
    return _cacheable(tools_result, ttl_ms=0 if any(t["name"] == service.TOOL_SEARCH_NAME for t in tools) else LIST_TTL_MS)


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    info = _scope_info(ctx)
    session_id = _session_key(ctx)
    ask_client = client_can_confirm(ctx)
    try:
        answer, added, waiting = await in_thread(_call)(
            session_id, info, _client_info(ctx), params.name, dict(params.arguments or {}), ask_client=ask_client)
    except SessionClosed as closed:
        raise MCPError(code=types.INVALID_REQUEST, message=str(closed)) from None
    except Exception as exc:  # noqa: BLE001 - logged with a reference, answered without its text
        raise _unexpected("tools/call", exc) from None
    if waiting is not None:
        session_pk, planned, prompt_pk = waiting
        try:
            status = await wait_for_a_person(ctx, planned, prompt_pk, ask_client)
        except BaseException:
            # The client cancelled or went away: nobody waits for the answer any more.
            with anyio.CancelScope(shield=True):
                await in_thread(service.answer_prompt)(prompt_pk, GatewayPrompt.Status.TIMEOUT)
            raise
        try:
            answer = await in_thread(_finish_prompted)(session_pk, info, planned, prompt_pk, status)
        except Exception as exc:  # noqa: BLE001 - logged with a reference, answered without its text
            raise _unexpected("tools/call", exc) from None
    if added and not _is_modern(ctx):
        # On this request's own stream: it reaches the client before the result, whether or not
        # the client keeps a standalone GET stream open. (A 2026-07-28 client hears of it on its
        # subscriptions/listen stream: list changes ride nothing else in that era.)
        await ctx.session.send_notification(types.ToolListChangedNotification(), related_request_id=ctx.request_id)
    return _call_result(answer)


# -- resources and prompts of the servers behind (upstream.py) -------------------------------------
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for an unknown resource


def _offered(session_id: str, info: dict[str, Any], client: tuple[str, str, str]) -> tuple[GatewaySession, list]:
    """The session, and the servers whose resources and prompts its profile offers now."""
    session = _open_session(session_id, info, client)
    view = service.profile_view(session.profile)
    return session, upstream.offered_servers(view.turn.permitted_servers)


def _list_offered(session_id: str, info: dict[str, Any], client: tuple[str, str, str], kind: str) -> list[dict[str, Any]]:
    _session, servers = _offered(session_id, info, client)
    return getattr(upstream, kind)(servers)


def _read_resource(session_id: str, info: dict[str, Any], client: tuple[str, str, str], uri: str) -> list[dict[str, Any]]:
    session, servers = _offered(session_id, info, client)
    started = time.perf_counter()
    event: dict[str, Any] = {"uri": uri}
    try:
        server, upstream_uri = upstream.owner_of(servers, uri)
        event["server"] = server.name
        contents = upstream.read_resource(server, upstream_uri)
    except upstream.UpstreamError as exc:
        record_event(session.pk, GatewayEvent.Type.RESOURCE_READ, {
            **event, "error": str(exc), "duration_ms": round((time.perf_counter() - started) * 1000, 1)})
        raise
    record_event(session.pk, GatewayEvent.Type.RESOURCE_READ, {
        **event, "contents": [{"mime_type": c.get("mimeType", ""), "chars": len(c.get("text") or c.get("blob") or ""),
                               "blob": "blob" in c} for c in contents][:20],
        "duration_ms": round((time.perf_counter() - started) * 1000, 1)})
    return contents


def _get_prompt(session_id: str, info: dict[str, Any], client: tuple[str, str, str], name: str,
                arguments: dict[str, str]) -> dict[str, Any]:
    session, servers = _offered(session_id, info, client)
    started = time.perf_counter()
    event: dict[str, Any] = {"name": name, "arguments": arguments}
    try:
        server, original = upstream.prompt_owner(servers, name)
        event["server"] = server.name
        result = upstream.get_prompt(server, original, arguments)
    except upstream.UpstreamError as exc:
        record_event(session.pk, GatewayEvent.Type.PROMPT_GOT, {
            **event, "error": str(exc), "duration_ms": round((time.perf_counter() - started) * 1000, 1)})
        raise
    record_event(session.pk, GatewayEvent.Type.PROMPT_GOT, {
        **event, "messages": len(result.get("messages") or []),
        "duration_ms": round((time.perf_counter() - started) * 1000, 1)})
    return result


def _valid(model, items: list[dict[str, Any]], what: str) -> list:
    """Upstream items as SDK models; one that does not validate is left out (and logged)."""
    valid = []
    for item in items:
        try:
            valid.append(model.model_validate(item, by_name=False))
        except ValidationError as exc:
            logger.warning("MCP gateway: left out an upstream %s that does not validate: %s", what, exc)
    return valid


async def _answer(ctx, method: str, func, *args):
    info = _scope_info(ctx)
    session_id = _session_key(ctx)
    try:
        return await in_thread(func)(session_id, info, _client_info(ctx), *args)
    except SessionClosed as closed:
        raise MCPError(code=types.INVALID_REQUEST, message=str(closed)) from None
    except upstream.UpstreamError as exc:
        raise MCPError(code=RESOURCE_NOT_FOUND if exc.not_offered and method == "resources/read" else types.INVALID_PARAMS,
                       message=str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - logged with a reference, answered without its text
        raise _unexpected(method, exc) from None


async def list_resources(ctx, params) -> types.ListResourcesResult:
    items = await _answer(ctx, "resources/list", _list_offered, "resources")
    return _cacheable(types.ListResourcesResult(resources=_valid(types.Resource, items, "resource")), ttl_ms=LIST_TTL_MS)


async def list_resource_templates(ctx, params) -> types.ListResourceTemplatesResult:
    items = await _answer(ctx, "resources/templates/list", _list_offered, "resource_templates")
    return _cacheable(types.ListResourceTemplatesResult(
        resource_templates=_valid(types.ResourceTemplate, items, "resource template")), ttl_ms=LIST_TTL_MS)


async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    contents = await _answer(ctx, "resources/read", _read_resource, str(params.uri))
    return types.ReadResourceResult.model_validate({"contents": contents}, by_name=False)


async def list_prompts(ctx, params) -> types.ListPromptsResult:
    items = await _answer(ctx, "prompts/list", _list_offered, "prompts")
    return _cacheable(types.ListPromptsResult(prompts=_valid(types.Prompt, items, "prompt")), ttl_ms=LIST_TTL_MS)


async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    result = await _answer(ctx, "prompts/get", _get_prompt, params.name, dict(params.arguments or {}))
    return types.GetPromptResult.model_validate(result, by_name=False)


async def subscriptions_listen(ctx, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
    """One 2026-07-28 listen stream: acknowledged first (only tool-list changes are honoured: the
    gateway never announces resource or prompt changes), then a `notifications/tools/list_changed`
    each time a search of this token and client name adds tools, from whichever process ran it
    (listen.py). Ends when the client closes the stream; nothing is replayed (clients re-list)."""
    info = _scope_info(ctx)
    if ctx.request_id is None:
        raise MCPError(code=types.INVALID_REQUEST, message="subscriptions/listen requires a request id")
    name = _client_info(ctx)[0][:200]
    honored = types.SubscriptionFilter(tools_list_changed=True if params.notifications.tools_list_changed else None)
    meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
    layer = get_channel_layer()
    group = listen.client_group(info.get("token_id"), name)
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    try:
        await ctx.session.send_notification(types.SubscriptionsAcknowledgedNotification(
            params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)),
            related_request_id=ctx.request_id)
        while True:
            message = await layer.receive(channel)
            if honored.tools_list_changed and message.get("kind") == "tools":
                await ctx.session.send_notification(event_to_notification(ToolsListChanged(), meta),
                                                    related_request_id=ctx.request_id)
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await layer.group_discard(group, channel)
            except Exception:  # noqa: BLE001 - the membership expires on its own
                logger.debug("MCP gateway: leaving listen group %s failed", group)


class RecordInitialize:
    """Server middleware: after a successful initialize, the session's row and its first event
    (client name and version) exist before the client sends anything else."""

    async def __call__(self, ctx, call_next):
        result = await call_next(ctx)
        if ctx.method == "initialize":
            try:
                params = ctx.params or {}
                client = params.get("clientInfo") or {}
                session_id = _session_id(ctx)
                if session_id:
                    negotiated = result.get("protocolVersion") if isinstance(result, dict) else None
                    await in_thread(_open_session)(
                        session_id, _scope_info(ctx),
                        (str(client.get("name", "")), str(client.get("version", "")), str(params.get("protocolVersion", ""))),
                        {"params": dict(params), "version": negotiated or params.get("protocolVersion", "")},
                    )
            except Exception:
                logger.exception("gateway: could not record a new session")
        return result


def _no_header_parameters(_name: str) -> None:
    return None


def build_server() -> GatewayServer:
    server = GatewayServer(
        SERVER_NAME,
        version="1",
        instructions=(
            "Tools beyond the ones listed are deferred: call ToolSearch to find them (its description lists "
            "their names). Found tools join this session's tool list; if your list does not refresh, call them "
            "through CallDiscoveredTool."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_subscriptions_listen=subscriptions_listen,
        # 2026-07-28 `Mcp-Param-*` header checks would otherwise list the caller's tools before every
        # call (a recorded tools/list each time); no tool the gateway lists declares header parameters.
        get_tool_input_schema=_no_header_parameters,
    )
    server.middleware.append(RecordInitialize())
    return server
