"""The resources and prompts of the MCP servers behind a profile, as the gateway offers them.

Which servers: those the profile's turn may use (`TurnPlan.permitted_servers`: at least one of
their tools permitted by the rules and the profile's tool lists), registered and enabled. A deny
rule on `mcp__github` (or on every one of its tools) hides github's resources and prompts too; the
gateway restates no rule. Resources are listed under server-qualified addresses,
`mcp-server://<server>/<the upstream URI, percent-encoded>` (`_meta` keeps the upstream URI), since two
servers may both offer `file:///README.md`; a read of such an address goes to that server. A read of an
upstream URI as it is (a resource link in a tool's result) goes to the one offered server that lists
it, or whose resource template matches it — and when two do, the client is told both qualified
addresses instead of one being picked silently. Prompts are named like tools,
`mcp__<server>__<prompt>`, for the same reason.

Synchronous code (run in worker threads by server.py): every request to a server goes through the
process's session pool, as tool calls do. A server that is down or answers an error is left out
of a list (and logged); a read or get on it gets the error.
"""
from __future__ import annotations

import logging
import re
from urllib.parse import quote, unquote
import threading
import time
from dataclasses import dataclass
from typing import Any

from mcp.shared.exceptions import MCPError

from playground.engine.tools import server_of
from playground.mcp_servers.connection import McpConnection, McpConnectionError
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.secrets import scrub_for
from playground.mcp_servers.session_pool import session_pool
from playground.mcp_servers.transports import ServerConfig

logger = logging.getLogger(__name__)

# A server's lists are kept this long per process: a read finds the server that offers a URI
# without listing every server again.
LISTING_TTL_SECONDS = 30.0
MAX_URI_CHARS = 2000


class UpstreamError(Exception):
    """A read or get that cannot be answered: the message is meant for the client. `not_offered`:
    no offered server has it (rather than a server failing to answer)."""

    def __init__(self, message: str, *, not_offered: bool = False) -> None:
        super().__init__(message)
        self.not_offered = not_offered


@dataclass
class Listing:
    resources: list[dict[str, Any]]
    resource_templates: list[dict[str, Any]]
    prompts: list[dict[str, Any]]


_lock = threading.Lock()
_cache: dict[tuple[int, str], tuple[float, Listing]] = {}


def reset_cache() -> None:
    """For tests: forget the servers' lists."""
    with _lock:
        _cache.clear()


def offered_servers(permitted_servers: tuple[str, ...] | list[str]) -> list[McpServer]:
    """The registered, enabled servers among those a profile's turn may use, in name order."""
    return list(McpServer.objects.filter(name__in=list(permitted_servers), enabled=True).order_by("name"))


def _run(server: McpServer, operation):
    try:
        return session_pool().run(server.pk, ServerConfig.from_server(server), operation)
    except McpConnectionError as exc:
        raise UpstreamError(scrub_for(server, f"MCP server {server.name!r} is unavailable: {exc}")) from None
    except MCPError as exc:  # the server answered with an error (unknown resource, bad arguments)
        raise UpstreamError(scrub_for(server, f"MCP server {server.name!r} answered with error {exc.code}: {exc}")) from None


async def _list_everything(connection: McpConnection) -> Listing:
    offered = connection.capabilities
    resources: list[dict[str, Any]] = []
    templates: list[dict[str, Any]] = []
    prompts: list[dict[str, Any]] = []
    if offered["resources"]:
        resources = await connection.list_resources()
        templates = await connection._paged(connection.session.list_resource_templates, "resource_templates",
                                            "resources/templates/list", 30.0)
    if offered["prompts"]:
        prompts = await connection.list_prompts()
    return Listing(resources, templates, prompts)


def listing(server: McpServer) -> Listing | None:
    """The server's resources, resource templates and prompts (kept LISTING_TTL_SECONDS per
    process), or None when it cannot be reached or answers an error (logged)."""
    key = (server.pk, server.updated_at.isoformat() if server.updated_at else "")
    now = time.monotonic()
    with _lock:
        kept = _cache.get(key)
        if kept is not None and now - kept[0] < LISTING_TTL_SECONDS:
            return kept[1]
    try:
        found = _run(server, _list_everything)
    except UpstreamError as exc:
        logger.warning("MCP gateway: left out %s's resources and prompts: %s", server.name, exc)
        return None
    with _lock:
        _cache[key] = (now, found)
    return found


QUALIFIED_SCHEME = "mcp-server://"
SERVER_META_KEY = "toolsearch/server"
UPSTREAM_URI_META_KEY = "toolsearch/uri"


def qualified_uri(server: McpServer, uri: str) -> str:
    return f"{QUALIFIED_SCHEME}{server.name}/{quote(uri, safe='')}"


def unqualified(uri: str) -> tuple[str, str] | None:
    """(server name, upstream URI) of a server-qualified address, else None."""
    if not uri.startswith(QUALIFIED_SCHEME):
        return None
    server_name, _, encoded = uri[len(QUALIFIED_SCHEME):].partition("/")
    return (server_name, unquote(encoded)) if server_name and encoded else None


def resources(servers: list[McpServer]) -> list[dict[str, Any]]:
    """Each server's resources under server-qualified addresses, the upstream URI kept in `_meta`."""
    return [{**item, "uri": qualified_uri(server, str(item.get("uri", ""))),
             "_meta": {**(item.get("_meta") or {}), SERVER_META_KEY: server.name,
                       UPSTREAM_URI_META_KEY: str(item.get("uri", ""))}}
            for server in servers if (found := listing(server)) for item in found.resources]


def resource_templates(servers: list[McpServer]) -> list[dict[str, Any]]:
    return [item for server in servers if (found := listing(server)) for item in found.resource_templates]


def prompts(servers: list[McpServer]) -> list[dict[str, Any]]:
    """Each server's prompts, named `mcp__<server>__<prompt>`."""
    return [{**item, "name": f"{server.tool_prefix}{item.get('name', '')}"}
            for server in servers if (found := listing(server)) for item in found.prompts]


def template_matches(template: str, uri: str) -> bool:
    """Whether `uri` is an expansion of the RFC 6570 `template` (each `{…}` stands for one or more
    characters; `{+…}` and `{/…}` may hold slashes, the others may not)."""
    pattern = ""
    for literal, expression in re.findall(r"([^{]*)(\{[^}]*\})?", template):
        pattern += re.escape(literal)
        if expression:
            pattern += ".+" if expression[1:2] in ("+", "#", "/") else "[^/]+"
    return re.fullmatch(pattern, uri) is not None


def owner_of(servers: list[McpServer], uri: str) -> tuple[McpServer, str]:
    """(the offered server, the upstream URI) for a read: the server a qualified address names; else
    the one server that lists `uri`, else the one whose template matches it. Two that do are an
    error naming both qualified addresses (no silent pick)."""
    if len(uri) > MAX_URI_CHARS:
        # Matched against templates by regular expression: a client's endless URI must not hold a thread.
        raise UpstreamError(f"A resource URI may have at most {MAX_URI_CHARS} characters; this one has {len(uri)}.",
                            not_offered=True)
    qualified = unqualified(uri)
    if qualified is not None:
        server = next((s for s in servers if s.name == qualified[0]), None)
        if server is None:
            raise UpstreamError(f"No resource {uri!r} is offered here: {qualified[0]!r} is not an MCP server this "
                                "profile may use.", not_offered=True)
        return server, qualified[1]
    listings = [(server, listing(server)) for server in servers]
    for found_by in (
        [server for server, found in listings if found and any(item.get("uri") == uri for item in found.resources)],
        [server for server, found in listings if found and any(
            template_matches(str(item.get("uriTemplate", "")), uri) for item in found.resource_templates)],
    ):
        if len(found_by) == 1:
            return found_by[0], uri
        if len(found_by) > 1:
            raise UpstreamError(f"{len(found_by)} MCP servers offer {uri!r}; read it as one of "
                                + ", ".join(qualified_uri(server, uri) for server in found_by) + ".",
                                not_offered=True)
    raise UpstreamError(f"No resource {uri!r} is offered here: none of the MCP servers this profile may use "
                        "lists it or a template that matches it.", not_offered=True)


def read_resource(server: McpServer, uri: str) -> list[dict[str, Any]]:
    """The resource's contents as the server sent them (text or base64 blob items). Raises UpstreamError."""
    return _run(server, lambda connection: connection.read_resource(uri))


def prompt_owner(servers: list[McpServer], name: str) -> tuple[McpServer, str]:
    """(the offered server, the prompt's own name) for a gateway prompt name. Raises UpstreamError."""
    server_name = server_of(name)
    server = next((s for s in servers if s.name == server_name), None)
    original = name.removeprefix(server.tool_prefix) if server is not None else ""
    if server is None or not original:
        raise UpstreamError(f"No prompt {name!r} is offered here: prompts are named mcp__<server>__<prompt>, "
                            "of the MCP servers this profile may use (prompts/list names them).", not_offered=True)
    return server, original


def get_prompt(server: McpServer, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    """The prompt's description and messages as the server sent them. Raises UpstreamError."""
    return _run(server, lambda connection: connection.get_prompt(name, arguments))
