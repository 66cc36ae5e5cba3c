"""OpenAI's request shapes: what OpenAI's three wire styles (engine/wires/openai_*.py) and the
providers speaking to OpenAI build and read.

- Tools: Responses function tools (`function_tool`), Chat Completions ones (`chat_function_tool`),
  the client-executed `tool_search` carrying ToolSearch's description and schema, and deferred
  tools as OpenAI's hosted search takes them (`deferred_namespaces`): one namespace per MCP server
  (named `mcp__<server>`, functions by their short names, the server's description); a server with
  more than `NAMESPACE_MAX_TOOLS` tools is split, in catalog order, into parts `mcp__<server>__1`,
  `…__2` of at most that many (OpenAI's guide advises fewer than about 10 functions per namespace; a
  part's description adds "part k of n" and its tools' short names). Other deferred tools go as
  single deferred functions.
- Searches: our backend's answer to a client `tool_search_call` (`tool_search_output_item`), a hosted
  search as OpenAI returns it (`hosted_search_items`, `hosted_searches`).
- The history: it stays in the engine's Messages API shape; `responses_input` and `chat_messages`
  write it in each API's shape. Responses items stored as they came (a `tool_search_call`, a
  `tool_search_output`, any item without a `role`) pass through unchanged, except that a
  `tool_search_output` keeps only tools this turn may still call (a tool denied since is dropped);
  so do `responses_item` blocks of an assistant message (items a provider kept as they came).
- What the model sees of a body's tools (`visible_tools`), one accounting for both vendors.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from playground.engine.announcements import _common_words
from playground.engine.history import (
    RESPONSES_ITEM,
    Message,
    blocks_of,
    loaded_by,
    reference_marker,
    referenced_tool_names,
    result_text,
    search_output_tool_names,
    server_search_tool_names,
    tool_search_use_ids,
)
from playground.engine.tools import MCP_PREFIX, TOOL_SEARCH_NAME, Tool, server_of
from playground.engine.toolsearch_tool import TOOL_SEARCH_TOOL

if TYPE_CHECKING:
    from playground.engine.tokens import TokenCounter

NAMESPACE_MAX_TOOLS = 10
TOOL_SEARCH_TYPE = "tool_search"
TOOL_SEARCH_CALL, TOOL_SEARCH_OUTPUT = "tool_search_call", "tool_search_output"

# ToolSearch's description, for OpenAI's client-executed tool_search: the same query language.
CLIENT_TOOL_SEARCH_DESCRIPTION = TOOL_SEARCH_TOOL.description


# -- tool definitions ------------------------------------------------------------------------------------
def function_tool(tool: Tool, *, name: str | None = None, defer_loading: bool = False) -> dict[str, Any]:
    """A Responses API function tool. `strict: false`: MCP schemas rarely meet strict mode's rules."""
    definition: dict[str, Any] = {
        "type": "function",
        "name": name or tool.name,
        "description": tool.description,
        "parameters": dict(tool.input_schema),
        "strict": False,
    }
    if defer_loading:
        definition["defer_loading"] = True
    return definition


def chat_function_tool(tool: Tool) -> dict[str, Any]:
    """A Chat Completions function tool."""
    return {"type": "function", "function": {"name": tool.name, "description": tool.description,
                                             "parameters": dict(tool.input_schema)}}


def client_tool_search_tool() -> dict[str, Any]:
    return {"type": TOOL_SEARCH_TYPE, "execution": "client", "description": CLIENT_TOOL_SEARCH_DESCRIPTION,
            "parameters": dict(TOOL_SEARCH_TOOL.input_schema)}


def namespace_tool_name(namespace: str, name: str) -> str:
    """The catalog name of function `name` called in `namespace` (`mcp__github` / `mcp__github__2`,
    `create_issue` → `mcp__github__create_issue`); a name outside a server namespace is its own."""
    if namespace.startswith(MCP_PREFIX):
        server = server_of(f"{namespace}__x")
        if server:
            return f"{MCP_PREFIX}{server}__{name}"
    return name


def server_description(server: str, tools: Sequence[Tool], descriptions: dict[str, str]) -> str:
    """The server's own description, else one made from its tool names (no catalog words invented)."""
    given = (descriptions.get(server) or "").strip()
    if given:
        return given
    words = _common_words(t.name.rsplit("__", 1)[-1] for t in tools)
    about = f" about {', '.join(words)}" if words else ""
    return f"Tools of the MCP server {server}{about}."


def deferred_namespaces(tools: Iterable[Tool], descriptions: dict[str, str] | None = None,
                        max_tools: int = NAMESPACE_MAX_TOOLS) -> list[dict[str, Any]]:
    """Deferred tools as OpenAI sends them for hosted search: one namespace per MCP server (split in
    parts of at most `max_tools`), every function `defer_loading: true`; other tools as single
    deferred functions, after the namespaces."""
    descriptions = descriptions or {}
    servers: dict[str, list[Tool]] = {}
    loose: list[Tool] = []
    for tool in tools:
        server = server_of(tool.name)
        (servers.setdefault(server, []) if server else loose).append(tool)
    result: list[dict[str, Any]] = []
    for server, members in servers.items():
        about = server_description(server, members, descriptions)
        parts = [members[i:i + max_tools] for i in range(0, len(members), max_tools)]
        for number, part in enumerate(parts, start=1):
            short = [t.name[len(MCP_PREFIX) + len(server) + 2:] for t in part]
            if len(parts) == 1:
                name, description = f"{MCP_PREFIX}{server}", about
            else:
                name = f"{MCP_PREFIX}{server}__{number}"
                description = f"{about} Part {number} of {len(parts)}: {', '.join(short)}."
            result.append({"type": "namespace", "name": name, "description": description,
                           "tools": [function_tool(t, name=s, defer_loading=True) for t, s in zip(part, short, strict=True)]})
    result += [function_tool(t, defer_loading=True) for t in loose]
    return result


def wire_tool_names(body: dict[str, Any]) -> list[str]:
    """Every catalog tool name a request body carries, whatever its shape: Messages API tools,
    Responses functions and namespaces (and a client tool_search: ToolSearch), Chat Completions
    functions, and the tools `tool_search_output` items in the input loaded."""
    names: dict[str, None] = {}
    for tool in body.get("tools", []):
        if tool.get("type") == "namespace":
            names.update(dict.fromkeys(namespace_tool_name(tool["name"], t.get("name", "")) for t in tool.get("tools", [])))
        elif tool.get("type") == TOOL_SEARCH_TYPE:
            if tool.get("execution") == "client":
                names.setdefault(TOOL_SEARCH_NAME, None)
        elif isinstance(tool.get("function"), dict):
            names.setdefault(tool["function"].get("name", ""), None)
        else:
            names.setdefault(tool.get("name", ""), None)
    for item in body.get("input", []):
        if isinstance(item, dict) and item.get("type") == TOOL_SEARCH_OUTPUT:
            names.update(dict.fromkeys(search_output_tool_names(item)))
    return list(names)


# -- answering the model -----------------------------------------------------------------------------------
def tool_search_output_item(call_id: str, loaded: Sequence[str], definitions: Callable[[str], Tool | None]) -> dict[str, Any]:
    """Our backend's answer to a client `tool_search_call`: the loaded tools' function definitions
    (`loaded`: a ToolSearch result's matches). A search that found nothing loads no tools."""
    tools = [function_tool(t) for t in (definitions(n) for n in loaded) if t is not None]
    return {"type": TOOL_SEARCH_OUTPUT, "call_id": call_id, "execution": "client", "status": "completed", "tools": tools}


def hosted_search_items(call_id: str, loaded: Sequence[str], definitions: Callable[[str], Tool | None],
                        descriptions: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A hosted search as OpenAI returns it (execution "server"): the `tool_search_call` and the
    `tool_search_output` with the loaded tools in their namespaces (what a history holds after one)."""
    tools = deferred_namespaces([t for t in (definitions(n) for n in loaded) if t is not None], descriptions)
    return [{"type": TOOL_SEARCH_CALL, "call_id": call_id, "arguments": {"query": f"select:{','.join(loaded)}"},
             "execution": "server", "status": "completed"},
            {"type": TOOL_SEARCH_OUTPUT, "call_id": call_id, "execution": "server", "status": "completed", "tools": tools}]


@dataclass(frozen=True)
class HostedSearch:
    """One search OpenAI ran inside a response (execution "server"): its call, query and what it loaded."""

    call_id: str
    arguments: dict[str, Any]
    loaded: list[str]
    status: str = "completed"


def hosted_searches(items: Iterable[dict[str, Any]]) -> list[HostedSearch]:
    """The hosted searches among a response's output items (each `tool_search_call` with execution
    "server", and the tools its `tool_search_output` loaded, by catalog name)."""
    items = [i for i in items if isinstance(i, dict)]
    outputs = {i.get("call_id"): i for i in items if i.get("type") == TOOL_SEARCH_OUTPUT}
    searches = []
    for item in items:
        if item.get("type") != TOOL_SEARCH_CALL or item.get("execution") == "client":
            continue
        output = outputs.get(item.get("call_id"), {})
        arguments = item.get("arguments") if isinstance(item.get("arguments"), dict) else {}
        searches.append(HostedSearch(str(item.get("call_id", "")), arguments, search_output_tool_names(output),
                                     str(output.get("status") or item.get("status") or "")))
    return searches


def called_tool_name(item: dict[str, Any]) -> str:
    """The catalog name a Responses `function_call` item calls (its namespace's function, or itself)."""
    namespace = item.get("namespace")
    return namespace_tool_name(namespace, item.get("name", "")) if namespace else item.get("name", "")


# -- the history in each API's shape ----------------------------------------------------------------------
def _image_url(block: dict[str, Any]) -> str:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    return str(source.get("url", ""))


def responses_input(messages: Sequence[Message], *, definitions: Callable[[str], Tool | None],
                    callable_names: set[str], namespaced: bool = False, drop_texts: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The engine's history as Responses API input items.

    A ToolSearch call becomes a `tool_search_call` (execution "client") and its result a
    `tool_search_output` with the definitions of the tools it loaded (`definitions`), limited to
    `callable_names`; a result that loaded nothing (no match, an error) answers with no tools and
    its text follows as user input. `namespaced` (the hosted style, where OpenAI searches): function
    calls of MCP tools name their namespace, and an earlier ToolSearch of ours (another style's
    turn) becomes the text marker "[ToolSearch loaded: …]" (its tools are sent deferred anyway). `drop_texts`: text blocks left out (an announcement the style does not send).
    """
    items: list[dict[str, Any]] = []
    search_ids = tool_search_use_ids(messages)
    dropped = set(drop_texts)
    for message in messages:
        role = message.get("role")
        if role is None or "type" in message:  # a Responses item stored as it came (Messages API ones have no type)
            items.append(_kept_item(message, callable_names))
            continue
        parts: list[dict[str, Any]] = []
        for block in blocks_of(message):
            kind = block.get("type")
            if kind == "text" and block.get("text") not in dropped:
                parts.append({"type": "input_text" if role == "user" else "output_text", "text": block["text"]})
            elif kind == "image" and role == "user":
                parts.append({"type": "input_image", "image_url": _image_url(block), "detail": "auto"})
            elif kind == RESPONSES_ITEM and isinstance(block.get("item"), dict):
                items += _flush(role, parts)
                items.append(_kept_item(block["item"], callable_names))
            elif kind == "tool_use" and namespaced and block.get("id") in search_ids:
                continue  # our ToolSearch, where OpenAI searches: its result stays as a text marker
            elif kind == "tool_use":
                items += _flush(role, parts)
                items.append(_call_item(block, search_ids, namespaced))
            elif kind == "tool_result" and namespaced and block.get("tool_use_id") in search_ids:
                parts.append({"type": "input_text", "text": reference_marker(loaded_by(block))})
            elif kind == "tool_result":
                items += _flush(role, parts)
                if block.get("tool_use_id") in search_ids:
                    loaded = [n for n in loaded_by(block) if n in callable_names]
                    tools = [function_tool(t) for t in (definitions(n) for n in loaded) if t is not None]
                    items.append({"type": TOOL_SEARCH_OUTPUT, "call_id": block["tool_use_id"], "execution": "client",
                                  "status": "completed", "tools": tools})
                    if not loaded:
                        parts.append({"type": "input_text", "text": result_text(block) or "ToolSearch found nothing."})
                else:
                    items.append({"type": "function_call_output", "call_id": block.get("tool_use_id", ""),
                                  "output": result_text(block) or ("error" if block.get("is_error") else "")})
        items += _flush(role, parts)
    return items


def _flush(role: str, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not parts:
        return []
    item = {"type": "message", "role": role, "content": list(parts)}
    parts.clear()
    return [item]


def _call_item(block: dict[str, Any], search_ids: set[str], namespaced: bool) -> dict[str, Any]:
    call_id, name, arguments = block.get("id", ""), block.get("name", ""), block.get("input") or {}
    if call_id in search_ids:
        return {"type": TOOL_SEARCH_CALL, "call_id": call_id, "arguments": arguments, "execution": "client",
                "status": "completed"}
    item: dict[str, Any] = {"type": "function_call", "call_id": call_id, "name": name,
                            "arguments": json.dumps(arguments, ensure_ascii=False)}
    server = server_of(name)
    if namespaced and server:
        item["namespace"], item["name"] = f"{MCP_PREFIX}{server}", name[len(MCP_PREFIX) + len(server) + 2:]
    return item


def _kept_item(item: dict[str, Any], callable_names: set[str]) -> dict[str, Any]:
    kept = copy.deepcopy(item)
    if kept.get("type") == TOOL_SEARCH_OUTPUT:
        kept["tools"] = [t for t in kept.get("tools", []) if _loaded_names(t) <= callable_names]
    return kept


def _loaded_names(tool: dict[str, Any]) -> set[str]:
    return set(search_output_tool_names({"tools": [tool]}))


def chat_messages(system: str, messages: Sequence[Message], drop_texts: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The engine's history (client style: ToolSearch results are JSON text) as Chat Completions messages."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    dropped = set(drop_texts)
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant") or "type" in message:
            continue  # a Responses item has no Chat Completions form
        texts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for block in blocks_of(message):
            kind = block.get("type")
            if kind == "text" and block.get("text") not in dropped:
                texts.append({"type": "text", "text": block["text"]})
            elif kind == "image" and role == "user":
                texts.append({"type": "image_url", "image_url": {"url": _image_url(block)}})
            elif kind == "tool_use" and role == "assistant":
                calls.append({"id": block.get("id", ""), "type": "function", "function": {
                    "name": block.get("name", ""), "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)}})
            elif kind == "tool_result":
                out.append({"role": "tool", "tool_call_id": block.get("tool_use_id", ""), "content": result_text(block)})
        if role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": "\n".join(t["text"] for t in texts) or None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        elif texts:
            only_text = all(t["type"] == "text" for t in texts)
            out.append({"role": "user", "content": "\n".join(t["text"] for t in texts) if only_text else texts})
    return out


# -- what the model sees of the tools (one accounting for both vendors) ----------------------------------------
def visible_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool definitions of a request body as far as the model sees them before any search:
    a deferred namespace shows its name and description, a deferred function its name and
    description (OpenAI's guide), an Anthropic tool with defer_loading nothing until a
    tool_reference in the messages loads it; everything else in full, and the tools
    `tool_search_output` items in the input loaded."""
    seen: list[dict[str, Any]] = []
    messages = body.get("messages", [])
    # Expanded by the API: tools our ToolSearch referenced, and those Anthropic's server-side search loaded.
    referenced = {*referenced_tool_names(messages), *server_search_tool_names(messages)}
    for tool in body.get("tools", []):
        if tool.get("type") == "namespace":
            if all(t.get("defer_loading") for t in tool.get("tools", [])):
                seen.append({"type": "namespace", "name": tool["name"], "description": tool.get("description", "")})
            else:
                seen.append(tool)
        elif tool.get("defer_loading") and tool.get("type") == "function":
            seen.append({"type": "function", "name": tool["name"], "description": tool.get("description", "")})
        elif not tool.get("defer_loading") or tool.get("name") in referenced:
            seen.append(tool)
    for item in body.get("input", []):  # tools a search loaded, injected by the API
        if isinstance(item, dict) and item.get("type") == TOOL_SEARCH_OUTPUT:
            seen += item.get("tools", [])
    return seen


def chat_functions(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages API tool dicts as Chat Completions function tools: what an OpenAI model is sent when
    a client (an MCP client, a gateway) passes the same tools on."""
    return [{"type": "function", "function": {"name": t.get("name", ""), "description": t.get("description", ""),
                                              "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}}
            for t in tools]


def tool_tokens_by_vendor(tools: Sequence[dict[str, Any]], counter: TokenCounter) -> dict[str, int]:
    """The same tools' tokens as each vendor's model gets them (Messages API tools; OpenAI function
    tools), by one counter: what the gateway's tools/list costs whichever model the client runs."""
    return {"anthropic": counter.count_tools(list(tools)), "openai": counter.count_tools(chat_functions(tools))}


def tool_tokens(body: dict[str, Any], counter: TokenCounter, *, announcement: str = "") -> int:
    """Tokens of the tools the model sees (`visible_tools`) plus the deferred-tools announcement
    the request carries (empty for the hosted style, whose namespaces replace it)."""
    return counter.count_tools(visible_tools(body)) + (counter.count_text(announcement) if announcement else 0)
