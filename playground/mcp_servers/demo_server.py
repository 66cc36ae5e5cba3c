"""The playground's own MCP server: a few harmless tools for demos and tests.

Run it over stdio (what the registry does by default):

    python -m playground.mcp_servers.demo_server

or over streamable HTTP (endpoint ``http://127.0.0.1:<port>/mcp``):

    python -m playground.mcp_servers.demo_server --http --port 8765

Every answer is canned and deterministic; the weather is labelled as demo data. Environment:

- ``DEMO_SERVER_VARIANT=2`` changes the tool list (``weather_forecast`` removed, ``echo``'s description
  changed, ``reverse_text`` and an invalid-named ``convert.units`` added) so tests can check that a
  second sync adds, changes and removes rows.
- ``DEMO_SERVER_PAGE_SIZE=N`` makes ``tools/list`` answer in pages of N tools with a cursor, so the
  client's pagination is exercised against a real server.
- ``DEMO_SERVER_SLOW_LOG=<file>``: each ``slow`` call appends a JSON line to that file when it starts
  and when the client cancels it (``notifications/cancelled``; also written to stderr), so tests can
  wait for a call to be running and see its cancel arrive.

- ``DEMO_SERVER_CONTENT_SAMPLES=1`` adds ``content_samples``, a tool whose result holds one block of
  every MCP content type (text, image, audio, resource link, embedded resource), for tests of clients
  and of the gateway passing results on; off by default, so the demo's tool count stays as it is.

- ``DEMO_SERVER_TOOLS_ONLY=1`` serves tools only (no ``resources`` or ``prompts`` capability), like
  many real servers, so the workbench's "this server offers no resources" state can be tested.

- ``DEMO_SERVER_MODERN_ONLY=1`` speaks only the stateless 2026-07-28 protocol: ``initialize`` is
  refused with error -32022 naming the versions it serves, as a server of that era alone answers
  (``server/discover`` and every request carrying its version in ``_meta`` work). With ``--http
  --stateless`` the HTTP side keeps no session either (the SDK's stateless session manager).

- ``DEMO_SERVER_SHOW_META=1`` adds ``show_trace_context``, which answers the ``traceparent`` the
  request carried in ``_meta`` (how a tracing server would join the caller's trace).
- ``DEMO_SERVER_FLOOD=N`` adds N generated tools, two of them with a 1 MB description and one with
  a 100 KB input schema: a hostile server, for the limits on what a sync stores.
- ``DEMO_SERVER_LEGACY_ONLY=1`` does not answer ``server/discover`` (method not found), as servers
  written before 2026-07-28 do: the handshake era only.
- ``DEMO_SERVER_TOOLS_TTL_MS=N`` marks its ``tools/list`` answers fresh for N ms (``ttlMs``, read by
  2026-07-28 clients), so a sync's respect for it can be tested.

Both protocol eras are served otherwise: the SDK's server answers ``initialize`` (the handshake,
up to 2025-11-25) and ``server/discover`` plus per-request ``_meta`` (2026-07-28), over stdio and
HTTP alike.

``slow`` and ``crash`` exist for tests of timeouts, cancellation and of a server dying mid-call. The server also
offers a few resources (text, a PNG blob, an oversized text) and a prompt with arguments for the
workbench, and writes a line to stderr (plus a ``notifications/message`` log) when ``echo`` runs,
so the live server log has something to show.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
import time
import warnings
import zlib
from typing import Any, Literal
from urllib.parse import unquote

import anyio
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPError
from mcp.server.caching import CacheHint
from mcp.server.elicitation import render_elicitation_schema
from mcp.types import (
    UNSUPPORTED_PROTOCOL_VERSION,
    Completion,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    EmptyResult,
    ListToolsResult,
    NotificationParams,
    PaginatedRequestParams,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    UnsubscribeRequestParams,
)

DEMO_LABEL = "DEMO DATA (canned by the playground's demo MCP server; not real)"

CITY_TIMEZONES: dict[str, str] = {
    "amsterdam": "Europe/Amsterdam",
    "berlin": "Europe/Berlin",
    "london": "Europe/London",
    "new york": "America/New_York",
    "san francisco": "America/Los_Angeles",
    "sao paulo": "America/Sao_Paulo",
    "sydney": "Australia/Sydney",
    "tokyo": "Asia/Tokyo",
}

_FORECAST_PATTERN = ["sunny", "partly cloudy", "light rain", "overcast", "windy", "sunny", "showers"]


class DemoServer(MCPServer):
    """MCPServer whose tools/list can answer in pages (MCPServer itself always sends one page)."""

    def __init__(self, *args: Any, page_size: int = 0, tools_only: bool = False, **kwargs: Any) -> None:
        self.page_size = page_size
        self.tools_only = tools_only
        super().__init__(*args, **kwargs)

    async def _handle_list_tools(self, ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        tools = await self.list_tools()
        if self.page_size <= 0:
            return ListToolsResult(tools=tools)
        start = int(params.cursor) if params and params.cursor else 0
        end = start + self.page_size
        return ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A tiny solid-colour PNG, built by hand so the server needs no imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b"")


class RefuseHandshake:
    """Server middleware of a modern-only server: `initialize` is answered -32022 with the versions
    served, so a client learns it must speak 2026-07-28 (the SDK's `auto` mode then re-probes)."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "initialize":
            raise MCPError(code=UNSUPPORTED_PROTOCOL_VERSION,
                           message="This server speaks MCP 2026-07-28 only (no initialize handshake)",
                           data={"supported": list(MODERN_PROTOCOL_VERSIONS),
                                 "requested": str((ctx.params or {}).get("protocolVersion", ""))})
        return await call_next(ctx)


def build_server(variant: int = 1, page_size: int = 0, tools_only: bool = False,
                 content_samples: bool = False, modern_only: bool = False, tools_ttl_ms: int = 0,
                 legacy_only: bool = False) -> DemoServer:
    server = DemoServer(
        cache_hints={"tools/list": CacheHint(ttl_ms=tools_ttl_ms)} if tools_ttl_ms > 0 else None,
        name="playground-demo",
        instructions="Harmless demo tools of ToolSearch Playground. All data is canned.",
        version=f"1.{variant}",
        page_size=page_size,
        tools_only=tools_only,
    )

    @server.tool(description="Add two numbers and return the sum.")
    def add(a: float, b: float) -> float:
        return a + b

    echo_description = (
        "Echo the given text back unchanged (always loaded: marked with anthropic/alwaysLoad)."
        if variant == 1
        else "Repeat the text back, optionally several times (variant 2 description)."
    )

    @server.tool(description=echo_description, meta={"anthropic/alwaysLoad": True})
    async def echo(text: str, ctx: Context) -> str:
        print(f"demo server: echo called with {len(text)} characters", file=sys.stderr, flush=True)
        with warnings.catch_warnings():
            # The SDK marks request-scoped logging as deprecated for a future protocol; clients still show it.
            warnings.simplefilter("ignore")
            await ctx.info(f"echo: {text[:80]}")
        return text

    @server.tool(description="Look up the IANA time zone of a well-known city; returns structured content.")
    def lookup_city_timezone(city: str) -> dict[str, str]:
        zone = CITY_TIMEZONES.get(city.strip().lower())
        if zone is None:
            raise ToolError(f"unknown city {city!r}; known: {', '.join(sorted(CITY_TIMEZONES))}")
        return {"city": city, "timezone": zone}

    if variant == 1:

        @server.tool(description="Weather forecast for a city for the next days. Returns canned demo data, not a real forecast.")
        def weather_forecast(city: str, days: int = 3) -> str:
            if not 1 <= days <= 7:
                raise ToolError("days must be between 1 and 7")
            seed = sum(ord(c) for c in city.lower())
            lines = [f"{DEMO_LABEL}: forecast for {city}"]
            for day in range(days):
                sky = _FORECAST_PATTERN[(seed + day) % len(_FORECAST_PATTERN)]
                high = 12 + (seed + 3 * day) % 15
                lines.append(f"day {day + 1}: {sky}, high {high} °C")
            return "\n".join(lines)

    @server.tool(description="Render a small solid-colour badge image (PNG) in the given colour: red, green or blue.")
    def render_badge(color: str = "green") -> Image:
        colours = {"red": (200, 40, 40), "green": (40, 160, 60), "blue": (40, 80, 200)}
        if color not in colours:
            raise ToolError(f"unknown colour {color!r}: use red, green or blue")
        return Image(data=_png(16, 8, colours[color]), format="png")

    @server.tool(description="Always fails with the given reason (for testing error results).")
    def fail(reason: str = "this tool always fails") -> str:
        raise ToolError(reason)

    @server.tool(description="Sleep for the given number of seconds, then answer (for testing timeouts and cancel).")
    async def slow(seconds: float = 5.0) -> str:
        started = time.monotonic()
        _slow_log({"tool": "slow", "event": "started", "seconds": seconds})
        try:
            await anyio.sleep(seconds)  # async, so a notifications/cancelled interrupts it
        except anyio.get_cancelled_exc_class():
            after = round(time.monotonic() - started, 3)
            print(f"slow: cancelled by the client after {after} s", file=sys.stderr, flush=True)
            _slow_log({"tool": "slow", "event": "cancelled", "seconds": seconds, "cancelled_after": after})
            raise
        return f"slept {seconds} s"

    @server.tool(description="Terminate the server process immediately (for testing a server that dies mid-call).")
    def crash() -> str:
        os._exit(3)

    if variant >= 2:

        @server.tool(description="Reverse the given text.")
        def reverse_text(text: str) -> str:
            return text[::-1]

        # A name that breaks the Messages API tool-name rule: the sync must report and sanitise it.
        @server.tool(name="convert.units", description="Convert a length between metres and feet.")
        def convert_units(value: float, to: str = "feet") -> str:
            factor = 3.28084 if to == "feet" else 1 / 3.28084
            return f"{value * factor:.3f} {to}"

    if content_samples:
        _add_content_samples(server)
    flood = int(os.environ.get("DEMO_SERVER_FLOOD", "0") or 0)
    if flood > 0:
        _add_flood(server, flood)
    if os.environ.get("DEMO_SERVER_SHOW_META", "") == "1":

        @server.tool(description="Answer the W3C traceparent this request carried in _meta, or 'none'.")
        def show_trace_context(ctx: Context) -> str:
            meta = ctx.request_context.meta
            value = meta.get("traceparent") if isinstance(meta, dict) else getattr(meta, "traceparent", None)
            if value is None and meta is not None:
                value = (meta.model_extra or {}).get("traceparent") if hasattr(meta, "model_extra") else None
            return str(value or "none")

    if tools_only:
        # MCPServer answers every method; dropping these makes its capabilities say "tools only".
        for method in ("resources/list", "resources/read", "resources/templates/list", "prompts/list", "prompts/get"):
            server._lowlevel_server._request_handlers.pop(method, None)
    else:
        _add_resources_and_prompts(server)
        _add_resource_template_features(server)
        _add_resource_template(server)
        _add_completion_features(server)
        _add_logging_features(server)
    _add_client_feature_tools(server)
    _add_roots_features(server)
    _add_elicitation_features(server)
    _add_notification_features(server)
    if modern_only:
        server._lowlevel_server.middleware.append(RefuseHandshake())
    if legacy_only:
        server._lowlevel_server._request_handlers.pop("server/discover", None)
    return server


def _add_flood(server: DemoServer, count: int) -> None:
    """`count` generated tools (DEMO_SERVER_FLOOD): two with 1 MB descriptions, one with a huge schema."""

    def flooded(value: str = "") -> str:
        return value

    for index in range(count):
        description = f"Generated tool number {index}."
        if index < 2:
            description += " " + "x" * 1_000_000
        server.add_tool(flooded, name=f"flood_{index:05d}", description=description)
    huge = {"type": "object", "properties": {f"field_{i}": {"type": "string", "description": "y" * 100} for i in range(1000)}}
    tool = server._tool_manager._tools.get("flood_00002") if count > 2 else None
    if tool is not None:
        tool.parameters = huge


def _slow_log(entry: dict[str, Any]) -> None:
    path = os.environ.get("DEMO_SERVER_SLOW_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")


LARGE_RESOURCE_CHARS = 300_000
COUNTER_URI = "demo://counter"


def _add_resources_and_prompts(server: DemoServer) -> None:
    @server.resource("demo://readme", name="readme", description="What this demo server is.", mime_type="text/markdown")
    def readme() -> str:
        return "# playground-demo\n\nHarmless demo tools, resources and prompts. All data is canned.\n"

    @server.resource("demo://cities", name="cities", description="The cities lookup_city_timezone knows, as JSON.",
                     mime_type="application/json")
    def cities() -> dict[str, str]:
        return dict(CITY_TIMEZONES)

    @server.resource("demo://badge.png", name="badge", description="A small green PNG (a binary resource).", mime_type="image/png")
    def badge() -> bytes:
        return _png(16, 8, (40, 160, 60))

    @server.resource("demo://large", name="large", description="A text too long to show whole (tests the size cap).",
                     mime_type="text/plain")
    def large() -> str:
        return ("0123456789" * (LARGE_RESOURCE_CHARS // 10))

    @server.prompt(name="plan_trip", description="Ask for a short trip plan to a city.")
    def plan_trip(city: str, days: str = "2") -> str:
        return f"Plan a {days}-day trip to {city}. Use lookup_city_timezone and weather_forecast; say the data is demo data."


def _stateless(ctx: Context) -> bool:
    """Whether this request speaks 2026-07-28: no server-to-client requests there; a tool that needs
    the client's input answers `InputRequiredResult` and is called again with the answers (MRTR)."""
    return (ctx.protocol_version or "") in MODERN_PROTOCOL_VERSIONS


def _input_answer(ctx: Context, key: str, request: Any) -> tuple[Any, InputRequiredResult | None]:
    """(the client's answer to input request `key`, None) on a retried round; (None, the
    InputRequiredResult asking for it) on the first."""
    answer = (ctx.input_responses or {}).get(key)
    if answer is not None:
        return answer, None
    return None, InputRequiredResult(input_requests={key: request}, request_state=key)


def _add_client_feature_tools(server: DemoServer) -> None:
    """Tools that ask the client for something mid-call (the workbench answers them): sampling. In
    the handshake era by a request of the server's (sampling/createMessage); in 2026-07-28 by an
    `InputRequiredResult` the client answers on its next round."""

    @server.tool(description="Ask the client's model a question (MCP sampling: sampling/createMessage) and return its answer.",
                 structured_output=False)
    async def ask_model(question: str, ctx: Context, max_tokens: int = 200) -> str | InputRequiredResult:
        params = CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
            max_tokens=max_tokens,
            system_prompt="You answer questions from the playground's demo MCP server. Be brief.",
        )
        if _stateless(ctx):
            result, ask = _input_answer(ctx, "sampling", CreateMessageRequest(params=params))
            if ask is not None:
                return ask
            if not isinstance(result, CreateMessageResult):
                raise ToolError("the client did not answer the sampling request")
        else:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # sampling is marked deprecated for a future protocol; clients still offer it
                    result = await ctx.session.create_message(
                        params.messages, max_tokens=max_tokens, system_prompt=params.system_prompt,
                        related_request_id=ctx.request_id,
                    )
            except MCPError as exc:  # the client offers no sampling, or its person declined
                raise ToolError(f"the client did not answer the sampling request: {exc}") from None
        content = result.content
        text = content.text if isinstance(content, TextContent) else f"[{content.type} content]"
        return f"The client's model ({result.model}) answered: {text}"


def _add_roots_features(server: DemoServer) -> None:
    """Roots: a tool that asks the client for its roots (roots/list), and a note on stderr when the
    client says they changed (notifications/roots/list_changed)."""

    @server.tool(description="List the client's roots (MCP roots/list): the folders the client lets this server work in.",
                 structured_output=False)
    async def list_roots(ctx: Context) -> str | InputRequiredResult:
        if _stateless(ctx):
            result, ask = _input_answer(ctx, "roots", ListRootsRequest())
            if ask is not None:
                return ask
            if not isinstance(result, ListRootsResult):
                raise ToolError("the client did not list its roots")
        else:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # roots are marked deprecated for a future protocol; clients still offer them
                    result = await ctx.session.list_roots()
            except MCPError as exc:
                raise ToolError(f"the client did not list its roots: {exc}") from None
        if not result.roots:
            return "The client offers no roots."
        return "\n".join(f"{root.uri}" + (f" ({root.name})" if root.name else "") for root in result.roots)

    async def roots_changed(ctx: Any, params: Any) -> None:
        print("demo server: the client's roots changed (notifications/roots/list_changed)", file=sys.stderr, flush=True)

    server._lowlevel_server.add_notification_handler("notifications/roots/list_changed", NotificationParams, roots_changed)


def _add_elicitation_features(server: DemoServer) -> None:
    """Elicitation: a tool that asks the person for a form's worth of details mid-call (elicitation/create)."""

    class BookingDetails(BaseModel):
        name: str = Field(description="Whose name the table is booked under")
        guests: int = Field(ge=1, le=12, description="How many people (1-12)")
        seating: Literal["indoor", "outdoor"] = Field(default="indoor", description="Where to sit")
        vegetarian: bool = Field(default=False, description="Only vegetarian dishes")

    @server.tool(description="Book a table at the demo restaurant: asks the person for the details (MCP elicitation). Canned, nothing is booked.",
                 structured_output=False)
    async def book_table(restaurant: str, ctx: Context) -> str | InputRequiredResult:
        message = f"Book a table at {restaurant}: whose name, how many guests, where to sit?"
        if _stateless(ctx):
            answer, ask = _input_answer(ctx, "booking", ElicitRequest(params=ElicitRequestFormParams(
                message=message, requested_schema=render_elicitation_schema(BookingDetails))))
            if ask is not None:
                return ask
            if not isinstance(answer, ElicitResult):
                raise ToolError("the client did not answer the elicitation")
            if answer.action != "accept":
                return f"No booking: the person chose {answer.action}."
            try:
                details = BookingDetails.model_validate(answer.content or {})
            except ValueError:
                raise ToolError("the booking details do not fit the form") from None
        else:
            try:
                result = await ctx.elicit(message, BookingDetails)
            except MCPError as exc:
                raise ToolError(f"the client did not answer the elicitation: {exc}") from None
            if result.action != "accept":
                return f"No booking: the person chose {result.action}."
            details = result.data
        if details is not None:
            return (f"{DEMO_LABEL}: a table at {restaurant} for {details.guests} under {details.name}, {details.seating}"
                    + (", vegetarian" if details.vegetarian else ""))
        return "No booking: the form came back empty."


def _add_resource_template_features(server: DemoServer) -> None:
    """Resource templates and subscriptions: `demo://cities/{city}` (a template), and `demo://counter`,
    a resource a client may subscribe to; `bump_counter` changes it and tells every subscribed session
    (`notifications/resources/updated`)."""
    counter = {"value": 0}
    # uri → {connection: a session to notify on it}. The SDK hands each request its own session object
    # over the one connection, so the connection is what identifies a subscriber.
    subscribers: dict[str, dict[int, Any]] = {}

    @server.resource("demo://cities/{city}", name="city", description="One city's IANA time zone, as JSON (a resource template).",
                     mime_type="application/json")
    def city(city: str) -> dict[str, str]:
        city = unquote(city)  # the client percent-encodes a filled template ("new%20york")
        zone = CITY_TIMEZONES.get(city.strip().lower())
        if zone is None:
            raise ValueError(f"unknown city {city!r}; known: {', '.join(sorted(CITY_TIMEZONES))}")
        return {"city": city, "timezone": zone}

    @server.resource(COUNTER_URI, name="counter", description="A number that bump_counter raises (subscribe to see it change).",
                     mime_type="text/plain")
    def counter_resource() -> str:
        return f"counter = {counter['value']}"

    def subscriber_key(ctx: Any) -> int:
        return id(getattr(ctx.session, "_connection", ctx.session))

    async def subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        subscribers.setdefault(str(params.uri), {})[subscriber_key(ctx)] = ctx.session
        return EmptyResult()

    async def unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        subscribers.get(str(params.uri), {}).pop(subscriber_key(ctx), None)
        return EmptyResult()

    server._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    server._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)

    @server.tool(description="Raise the demo counter resource by one; sessions subscribed to demo://counter are told it changed.")
    async def bump_counter(ctx: Context) -> str:
        counter["value"] += 1
        told = list(subscribers.get(COUNTER_URI, {}).values())
        for session in told:
            await session.send_resource_updated(COUNTER_URI)
        if _stateless(ctx):
            await ctx.notify_resource_updated(COUNTER_URI)  # 2026-07-28 clients: on their listen streams
        return f"counter = {counter['value']} ({len(told)} subscribed session(s) told)"


def _add_completion_features(server: DemoServer) -> None:
    """Argument completion (completion/complete) for plan_trip's arguments and the city template."""

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
        typed = (argument.value or "").lower()
        if argument.name == "city":
            return Completion(values=[city for city in sorted(CITY_TIMEZONES) if city.startswith(typed)])
        if argument.name == "days":
            return Completion(values=[str(day) for day in range(1, 8) if str(day).startswith(typed)])
        return None


LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def _add_logging_features(server: DemoServer) -> None:
    """Log levels: `logging/setLevel` sets the least level this server sends (it filters, as the
    protocol asks of servers); `emit_logs` sends one message at each of five levels."""
    state = {"level": "info"}

    async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        state["level"] = params.level
        print(f"demo server: log level set to {params.level}", file=sys.stderr, flush=True)
        return EmptyResult()

    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)

    @server.tool(description="Send a log message (notifications/message) at debug, info, notice, warning and error; those below the level set with logging/setLevel are not sent.")
    async def emit_logs(ctx: Context, message: str = "hello") -> str:
        least = LOG_LEVELS.index(state["level"])
        sent = [level for level in LOG_LEVELS[:5] if LOG_LEVELS.index(level) >= least]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # marked deprecated for a future protocol revision; clients still show it
            for level in sent:
                await ctx.log(level, f"{level}: {message}", logger_name="demo")
        return f"sent {len(sent)} of 5 log messages (level {state['level']}: {', '.join(sent) or 'none'})"


def _add_notification_features(server: DemoServer) -> None:
    """Notifications a client shows: progress (`long_task`, when the call asks for it with a progress
    token) and a tool list that changes (`toggle_extra_tool`, then `notifications/tools/list_changed`)."""

    @server.tool(description="Work through a few steps, reporting progress (notifications/progress) after each.")
    async def long_task(ctx: Context, steps: int = 3) -> str:
        if not 1 <= steps <= 20:
            raise ToolError("steps must be between 1 and 20")
        for step in range(1, steps + 1):
            await anyio.sleep(0.05)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
        return f"done after {steps} steps"

    def extra_tool() -> str:
        return "the extra tool answered"

    @server.tool(description="Add or remove the tool extra_tool, and tell the client its tool list changed (notifications/tools/list_changed).")
    async def toggle_extra_tool(ctx: Context) -> str:
        names = {tool.name for tool in await server.list_tools()}
        if "extra_tool" in names:
            server.remove_tool("extra_tool")
            done = "removed extra_tool"
        else:
            server.add_tool(extra_tool, name="extra_tool", description="A tool that comes and goes (toggle_extra_tool).")
            done = "added extra_tool"
        if _stateless(ctx):
            await ctx.notify_tools_changed()  # 2026-07-28 clients hear it on their listen streams
        else:
            await ctx.session.send_tool_list_changed()
        return done


def _add_content_samples(server: DemoServer) -> None:
    """One tool answering with every MCP content type (see DEMO_SERVER_CONTENT_SAMPLES)."""
    from mcp.types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent, TextResourceContents

    @server.tool(description="Answer with one content block of every MCP type (text, image, audio, resource "
                 "link, embedded resource).", structured_output=False)
    def content_samples() -> list:
        png = base64.b64encode(_png(4, 4, (40, 80, 200))).decode()
        wav = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()  # a header's first bytes: not meant to play
        return [
            TextContent(type="text", text="samples of every content type"),
            ImageContent(type="image", data=png, mime_type="image/png"),
            AudioContent(type="audio", data=wav, mime_type="audio/wav"),
            ResourceLink(type="resource_link", uri="demo://readme", name="readme", mime_type="text/markdown"),
            EmbeddedResource(type="resource", resource=TextResourceContents(
                uri="demo://cities", mime_type="application/json", text=json.dumps(CITY_TIMEZONES))),
        ]


def _add_resource_template(server: DemoServer) -> None:
    """A resource template (`resources/templates/list`): one city's time zone by name."""

    @server.resource("demo://city/{name}", name="city", description="One city's IANA time zone, by name.",
                     mime_type="text/plain")
    def city(name: str) -> str:
        return CITY_TIMEZONES.get(name.strip().lower(), "unknown city")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--stateless", action="store_true", help="HTTP: keep no session (each request stands alone)")
    parser.add_argument("--sse", action="store_true",
                        help="serve the deprecated HTTP+SSE transport (GET /sse, POST /messages/) instead of stdio")
    options = parser.parse_args(argv)
    server = build_server(
        variant=int(os.environ.get("DEMO_SERVER_VARIANT", "1") or 1),
        page_size=int(os.environ.get("DEMO_SERVER_PAGE_SIZE", "0") or 0),
        tools_only=os.environ.get("DEMO_SERVER_TOOLS_ONLY", "") == "1",
        content_samples=os.environ.get("DEMO_SERVER_CONTENT_SAMPLES", "") == "1",
        modern_only=os.environ.get("DEMO_SERVER_MODERN_ONLY", "") == "1",
        legacy_only=os.environ.get("DEMO_SERVER_LEGACY_ONLY", "") == "1",
        tools_ttl_ms=int(os.environ.get("DEMO_SERVER_TOOLS_TTL_MS", "0") or 0),
    )

    if options.sse:
        server.run("sse", host=options.host, port=options.port)
    elif options.http:
        server.run("streamable-http", host=options.host, port=options.port, stateless_http=options.stateless)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
