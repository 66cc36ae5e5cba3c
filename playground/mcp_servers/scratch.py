"""Trying a server without registering it: a scratch connection that connects, lists the tools and
calls one, and is stored nowhere — no server row, no Tool rows, no log, history or transcript; no
profile and no gateway sees it. "Register" sends the same fields to the server form (views.server_create).

Each action is one connection, opened and closed within the request, on the process's MCP loop
(`connection.background_loop()`, where the workbench's calls run) with bounded timeouts; at most
`MAX_AT_ONCE` per process (another is told to retry), so a slow or hostile server cannot tie up a
web process. Its session offers no sampling, elicitation or roots: a server that asks is refused.
A URL may be tried by editors; a command runs a program on this host, so it is for admins only.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings

from playground.engine import safe_json
from playground.mcp_servers.connection import (
    McpCallResult,
    McpConnectionError,
    McpToolListing,
    background_loop,
    describe_error,
    open_connection,
)
from playground.mcp_servers.forms import parse_pairs
from playground.mcp_servers.models import SERVER_NAME_VALIDATOR, McpServer
from playground.mcp_servers.secrets import scrub_for
from playground.mcp_servers.transports import ServerConfig

CONNECT_SECONDS = 15.0
CALL_SECONDS = 30.0
MAX_AT_ONCE = 4
TOOLS_SHOWN = 200
SHOWN_SCHEMA_CHARS = 4000
SHOWN_RESULT_CHARS = 64 * 1024
MAX_ARGUMENT_BYTES = 64 * 1024

_slots = threading.BoundedSemaphore(MAX_AT_ONCE)


class ScratchBusy(Exception):
    """Every scratch slot of this process is in use."""


class ScratchConnectionForm(forms.Form):
    """Where the server is. Field names are the server form's, so "Register" posts them there as they are."""

    name = forms.CharField(required=False, max_length=40, validators=[SERVER_NAME_VALIDATOR],
                           help_text="Only needed to register it.")
    transport = forms.ChoiceField(choices=McpServer.Transport.choices, initial=McpServer.Transport.HTTP)
    url = forms.URLField(label="URL", required=False, max_length=500, assume_scheme="http",
                         help_text="Streamable HTTP: the endpoint, e.g. http://127.0.0.1:8765/mcp")
    headers_text = forms.CharField(label="HTTP headers", required=False, max_length=8000,
                                   widget=forms.Textarea(attrs={"rows": 2}), help_text="Name: value per line.")
    command = forms.CharField(required=False, max_length=500, help_text="stdio: the executable to start.")
    args_text = forms.CharField(label="Arguments", required=False, max_length=8000,
                                widget=forms.Textarea(attrs={"rows": 2}), help_text="One argument per line.")
    env_text = forms.CharField(label="Environment", required=False, max_length=8000,
                               widget=forms.Textarea(attrs={"rows": 2}), help_text="KEY=value per line.")
    protocol_era = forms.ChoiceField(choices=McpServer.ProtocolEra.choices, initial=McpServer.ProtocolEra.AUTO)

    def __init__(self, *args: Any, allow_commands: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.allow_commands = allow_commands
        if not allow_commands:  # not even shown: a stdio command runs a program on this host
            for name in ("command", "args_text", "env_text"):
                del self.fields[name]
            self.fields["transport"].choices = [(McpServer.Transport.HTTP, McpServer.Transport.HTTP.label)]

    def clean_headers_text(self) -> dict[str, str]:
        return parse_pairs(self.cleaned_data["headers_text"], ":", "headers")

    def clean_env_text(self) -> dict[str, str]:
        return parse_pairs(self.cleaned_data["env_text"], "=", "environment variables")

    def clean_args_text(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["args_text"].splitlines() if line.strip()]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        transport = data.get("transport")
        if transport == McpServer.Transport.STDIO and not data.get("command"):
            self.add_error("command", "A stdio server needs a command to start.")
        if transport == McpServer.Transport.HTTP and not data.get("url"):
            self.add_error("url", "A streamable HTTP server needs a URL.")
        return data

    def config(self) -> ServerConfig:
        data = self.cleaned_data
        return ServerConfig(
            name=data.get("name") or "scratch", transport=data["transport"],
            command=data.get("command", "") if self.allow_commands else "",
            args=tuple(data.get("args_text") or ()) if self.allow_commands else (),
            env=dict(data.get("env_text") or {}) if self.allow_commands else {},
            url=data.get("url") or "", headers=dict(data.get("headers_text") or {}),
            protocol_era=data.get("protocol_era") or McpServer.ProtocolEra.AUTO,
        )


@dataclass
class ShownTool:
    name: str
    description: str
    schema_json: str
    schema_cut: bool


@dataclass
class Listing:
    tools: list[ShownTool]
    offered: int
    server: str
    protocol_version: str


def _run(coro: Any, timeout: float) -> Any:
    if not _slots.acquire(blocking=False):
        coro.close()
        raise ScratchBusy(f"{MAX_AT_ONCE} scratch connections are already open in this process; try again in a moment")
    try:
        return background_loop().run(coro, timeout=timeout)
    finally:
        _slots.release()


def list_tools(config: ServerConfig) -> Listing:
    """Connect, list the tools (at most MCP_MAX_TOOLS_PER_SERVER held, TOOLS_SHOWN shown), close."""
    keep = min(settings.MCP_MAX_TOOLS_PER_SERVER, TOOLS_SHOWN)

    async def run() -> tuple[list[McpToolListing], int, str, str]:
        async with open_connection(config, connect_timeout=CONNECT_SECONDS) as connection:
            tools = await connection.list_tools(timeout=CONNECT_SECONDS, keep=keep)
            info = connection.server_info
            who = f"{info.name} {info.version}" if info is not None else "a server that does not name itself"
            return tools, connection.tools_offered, who, connection.protocol_version

    tools, offered, who, version = _run(run(), CONNECT_SECONDS * 2 + 10)
    shown = []
    limit = settings.MCP_MAX_TOOL_DESCRIPTION_CHARS
    for tool in tools:
        schema = json.dumps(tool.input_schema, indent=2, ensure_ascii=False, default=str)
        shown.append(ShownTool(
            name=scrub_for(config, tool.name[:200]),
            description=scrub_for(config, tool.description[:limit] + (" … (cut)" if len(tool.description) > limit else "")),
            schema_json=scrub_for(config, schema[:SHOWN_SCHEMA_CHARS]), schema_cut=len(schema) > SHOWN_SCHEMA_CHARS,
        ))
    return Listing(tools=shown, offered=offered, server=scrub_for(config, who), protocol_version=version)


def parse_arguments(text: str) -> dict[str, Any]:
    if len(text.encode()) > MAX_ARGUMENT_BYTES:
        raise ValueError(f"the arguments are over {MAX_ARGUMENT_BYTES // 1024} KB")
    value = safe_json.loads(text or "{}")
    if not isinstance(value, dict):
        raise ValueError("the arguments must be a JSON object")
    return value


def call_tool(config: ServerConfig, name: str, arguments: dict[str, Any]) -> McpCallResult:
    """Connect, call one tool, close."""

    async def run() -> McpCallResult:
        async with open_connection(config, connect_timeout=CONNECT_SECONDS) as connection:
            return await connection.call_tool(name, arguments, timeout=CALL_SECONDS)

    return _run(run(), CONNECT_SECONDS + CALL_SECONDS + 15)


def shown_result(config: ServerConfig, result: McpCallResult) -> dict[str, Any]:
    texts = []
    for block in result.content:
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        else:
            texts.append(f"[{block.get('type', 'unknown')} content: {block.get('mimeType', '')}]")
    text = "\n".join(texts)
    structured = json.dumps(result.structured, indent=2, ensure_ascii=False, default=str) if result.structured is not None else ""
    cut = len(text) > SHOWN_RESULT_CHARS
    return {"is_error": result.is_error, "duration_ms": round(result.duration_ms, 1),
            "text": scrub_for(config, text[:SHOWN_RESULT_CHARS]) + ("\n… (cut)" if cut else ""),
            "structured": scrub_for(config, structured[:SHOWN_RESULT_CHARS])}


def error_text(config: ServerConfig, exc: BaseException) -> str:
    text = str(exc) if isinstance(exc, (McpConnectionError, ScratchBusy)) else describe_error(exc)
    return scrub_for(config, text)
