"""MCP client config files: a server exported as an `mcp.json` entry, and servers imported from a
Claude Desktop `claude_desktop_config.json` or a project's `.mcp.json` (both hold `mcpServers`).

Secrets. The registry never shows an env or header value, admins included; an export does not
either: each value becomes a `${NAME}` placeholder (Claude Code's `.mcp.json` expands them from the
environment), and URL credentials and secret arguments are masked as on the page. An import stores
the values the file gives, which the registry then masks as it masks every stored secret.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from playground.engine import safe_json
from playground.mcp_servers.models import SERVER_NAME_VALIDATOR, McpServer
from playground.mcp_servers.protocol_eras import DEFAULT_PROTOCOL_ERA
from playground.mcp_servers.secrets import mask_args, mask_url

MAX_FILE_BYTES = 1024 * 1024
HTTP_TYPES = {"http", "streamable-http", "streamableHttp"}


def placeholder(name: str) -> str:
    return "${" + re.sub(r"[^A-Za-z0-9_]", "_", name).upper() + "}"


def export_entry(server: McpServer) -> dict[str, Any]:
    """`{"mcpServers": {name: entry}}` for one server, secrets as placeholders."""
    if server.is_remote:  # OAuth tokens are never exported: the importer presses Connect
        entry: dict[str, Any] = {"type": server.transport, "url": mask_url(server.url or "")}
        if server.headers:
            entry["headers"] = {key: placeholder(f"{server.name}_{key}") for key in server.headers}
    else:
        entry = {"command": server.command, "args": mask_args(server.args or [])}
        if server.env:
            entry["env"] = {key: placeholder(key) for key in server.env}
    if server.always_load:
        entry["alwaysLoad"] = True  # Claude Code's per-server flag: its tools are never deferred
    return {"mcpServers": {server.name: entry}}


class ConfigFileError(ValueError):
    """The file cannot be read as an MCP client config: the message says why, for the page."""


@dataclass
class ImportOutcome:
    created: list[McpServer] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "name: why"


def read_config(data: bytes) -> dict[str, dict[str, Any]]:
    """The `mcpServers` object of a config file, or ConfigFileError."""
    if len(data) > MAX_FILE_BYTES:
        raise ConfigFileError(f"the file is larger than {MAX_FILE_BYTES // 1024} KB; an MCP client config is a few KB")
    try:
        parsed = safe_json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ConfigFileError("the file is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"the file is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ConfigFileError("the file is JSON, but not an object with an mcpServers key")
    servers = parsed.get("mcpServers")
    if not isinstance(servers, dict):
        raise ConfigFileError('no "mcpServers" object in the file (Claude Desktop\'s claude_desktop_config.json and a '
                              "project's .mcp.json both have one)")
    if not servers:
        raise ConfigFileError('"mcpServers" is empty: there is nothing to import')
    return servers


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise ConfigFileError(f"{what} must be a list of strings")
    return [str(v) for v in value]


def _pairs(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float, bool)) for v in value.values()):
        raise ConfigFileError(f"{what} must be an object of strings")
    return {str(k): str(v) for k, v in value.items()}


def server_fields(name: str, entry: Any) -> dict[str, Any]:
    """The `McpServer` fields for one entry, or ConfigFileError saying what is wrong with it."""
    try:
        SERVER_NAME_VALIDATOR(name)
    except ValidationError:
        raise ConfigFileError("the name must be letters, digits, '-' and single '_' (it becomes the mcp__<name>__ prefix)") from None
    if len(name) > 40:
        raise ConfigFileError("the name is longer than 40 characters")
    if not isinstance(entry, dict):
        raise ConfigFileError("the entry must be an object")
    always_load = entry.get("alwaysLoad", False)
    if not isinstance(always_load, bool):
        raise ConfigFileError("alwaysLoad must be true or false")
    kind = entry.get("type") or ("http" if "url" in entry else "stdio")
    if kind in HTTP_TYPES or kind == "sse":
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")) or len(url) > 500:
            raise ConfigFileError("an HTTP server needs a url starting with http:// or https://")
        transport = McpServer.Transport.SSE if kind == "sse" else McpServer.Transport.HTTP
        return {"name": name, "transport": transport, "url": url, "headers": _pairs(entry.get("headers"), "headers"),
                "always_load": always_load, "protocol_era": DEFAULT_PROTOCOL_ERA}
    if kind != "stdio":
        raise ConfigFileError(f"transport {kind!r} is not one the playground speaks (stdio, streamable HTTP and the deprecated SSE)")
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip() or len(command) > 500:
        raise ConfigFileError("a stdio server needs a command")
    return {"name": name, "transport": McpServer.Transport.STDIO, "command": command, "args": _strings(entry.get("args"), "args"),
            "env": _pairs(entry.get("env"), "env"), "always_load": always_load, "protocol_era": DEFAULT_PROTOCOL_ERA}


def import_servers(servers: dict[str, Any]) -> ImportOutcome:
    """Create a server per entry (an existing name is left alone); each entry's problem is reported,
    not raised. The caller queues their syncs."""
    outcome = ImportOutcome()
    existing = set(McpServer.objects.filter(name__in=list(servers)).values_list("name", flat=True))
    for name, entry in servers.items():
        name = str(name)
        if name in existing:
            outcome.skipped.append(f"{name}: a server of that name exists already (edit it instead)")
            continue
        try:
            fields = server_fields(name, entry)
        except ConfigFileError as exc:
            outcome.skipped.append(f"{name}: {exc}")
            continue
        outcome.created.append(McpServer.objects.create(**fields))
    return outcome
