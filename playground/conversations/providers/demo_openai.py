"""The offline demo agent on OpenAI's wire: every OpenAI style without a key, labelled as the demo.

The engine builds the turn's OpenAI request (`wires.registry.settings_for_vendor` picks the style from the
profile, as it does for the OpenAI provider), and this agent reads that body as a model would read
it: the instructions, the input items or chat messages, the tools it may call (functions, a
namespace's functions, the tools a `tool_search_output` loaded) and the deferred names it may look
for (the announcement in the instructions; in the hosted style the namespaces' names, which is what
OpenAI's model sees of them). It decides with the demo agent's own policy (`demo.py`: one step per
request) and answers in the API's output shapes, which `openai_api` turns into the loop's blocks
exactly as it does for a real OpenAI reply:

- `openai-client`: a ToolSearch becomes a `tool_search_call` (execution "client"); the loop answers
  it with the profile's backend and the engine sends the `tool_search_output`;
- `openai-functions`: a `ToolSearch` function call over Chat Completions;
- `openai-hosted`: OpenAI searches inside the response. Offline nobody can, so the agent plays that
  search: the claude-code keyword scorer over the request's deferred functions, a
  `tool_search_call` and `tool_search_output` (execution "server") with the loaded functions in
  their namespaces, and the next step of the policy in the same response. The conversation page
  marks such a search as simulated (`simulated_search_note`).

Usage is the engine's estimate (labelled so): the body's tokens split by OpenAI's automatic prompt
cache as the engine models it (`prompt_cache.OpenAICacheModel`).
"""
from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from playground.conversations.providers.base import USAGE_ESTIMATE, NeutralMessage, ProviderResponse, chat_completions_request
from playground.conversations.providers.demo import DemoAgentProvider
from playground.conversations.providers.openai_api import chat_content, responses_content
from playground.engine.openai_wire import (
    TOOL_SEARCH_CALL,
    TOOL_SEARCH_OUTPUT,
    TOOL_SEARCH_TYPE,
    called_tool_name,
    namespace_tool_name,
)
from playground.engine.prompt_cache import OpenAICacheModel
from playground.engine.requests import AgentSettings
from playground.engine.search.base import SearchBackend
from playground.engine.search.keyword import ClaudeCodeKeywordBackend
from playground.engine.wires.base import CHAT_COMPLETIONS_API, MESSAGES_API, RESPONSES_API
from playground.engine.wires.registry import profile_styles, settings_for_vendor
from playground.engine.wires.vendors import OPENAI
from playground.engine.tokens import CharEstimateCounter
from playground.engine.tools import MCP_PREFIX, TOOL_SEARCH_NAME, Tool, ToolCatalog, ToolDefinitionError
from playground.engine.toolsearch_tool import TOOL_SEARCH_TOOL, ToolSearchInputError, run_tool_search

DEMO_MODEL = "offline-demo-agent"
HOSTED_SEARCH_NOTE = ("Simulated by the offline demo agent: OpenAI's own search is played by the claude-code keyword "
                      "scorer over the request's deferred functions.")
_ESTIMATE = CharEstimateCounter()
_OPENAI_CACHE = OpenAICacheModel(counter=_ESTIMATE, vendor="openai")  # OpenAI caches every prompt by prefix
_CACHE_LOCK = threading.Lock()
_PRUNE_ABOVE = 10_000
_HOSTED_SCORER: SearchBackend = ClaudeCodeKeywordBackend()
SEEN_DEFERRED = "_seen_deferred"  # a view's key: the deferred names the model sees without an announcement


@dataclass
class WireView:
    """An OpenAI request body as the demo policy reads requests (Messages API shapes), and where
    each callable function sits on the wire."""

    request: dict[str, Any]
    hosted: bool = False  # OpenAI's own tool_search: the agent plays its search
    namespaces: dict[str, tuple[str, str]] = field(default_factory=dict)  # catalog name → (namespace, function name)
    deferred: list[dict[str, Any]] = field(default_factory=list)  # the request's deferred functions (hosted search)

    def with_search(self, call_id: str, query: str, loaded: list[str]) -> WireView:
        """The view once a search loaded `loaded`: the call and its result in the history."""
        messages = [*self.request["messages"],
                    {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": TOOL_SEARCH_NAME,
                                                       "input": {"query": query}}]},
                    {"role": "user", "content": [_search_result(call_id, loaded)]}]
        return WireView({**self.request, "messages": messages}, self.hosted, self.namespaces, self.deferred)


def _search_result(call_id: str, loaded: list[str]) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id,
            "content": [{"type": "tool_reference", "tool_name": name} for name in loaded]}


def _function(name: str, tool: dict[str, Any], *, deferred: bool = False) -> dict[str, Any]:
    definition = {"name": name, "description": tool.get("description") or "",
                  "input_schema": tool.get("parameters") or {"type": "object", "properties": {}}}
    if deferred:
        definition["defer_loading"] = True
    return definition


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str))


# A tagged section the engine puts in a user's text (a summary, an announcement): its own block, as
# the Messages API history holds it; Chat Completions joins a message's texts into one string.
_TAGGED = re.compile(r"(<([a-z][\w-]*)>.*?</\2>)", re.S)


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    texts = [content] if isinstance(content, str) else [
        p["text"] for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    blocks = []
    for text in texts:
        for index, part in enumerate(_TAGGED.split(text)):
            if index % 3 == 2:
                continue  # the tag's name, captured for the back reference
            if part.strip():
                blocks.append({"type": "text", "text": part.strip()})
    return blocks


def _arguments(value: Any) -> dict[str, Any]:
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class _History:
    """Messages API messages built item by item; neighbours of one role share a message."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def add(self, role: str, block: dict[str, Any]) -> None:
        if self.messages and self.messages[-1]["role"] == role:
            self.messages[-1]["content"].append(block)
        else:
            self.messages.append({"role": role, "content": [block]})


def responses_view(body: dict[str, Any]) -> WireView:
    """A Responses API body read as the demo policy reads a Messages API request."""
    view = WireView({"model": body.get("model", ""), "system": body.get("instructions") or "", "messages": [], "tools": []})
    tools = view.request["tools"]
    for tool in body.get("tools") or []:
        kind = tool.get("type")
        if kind == TOOL_SEARCH_TYPE:
            view.hosted = tool.get("execution") != "client"
            tools.append(_function(TOOL_SEARCH_NAME, {"description": tool.get("description") or "",
                                                      "parameters": tool.get("parameters") or dict(TOOL_SEARCH_TOOL.input_schema)}))
        elif kind == "namespace":
            for member in tool.get("tools") or []:
                name = namespace_tool_name(tool["name"], member.get("name", ""))
                view.namespaces[name] = (tool["name"], member.get("name", ""))
                tools.append(_function(name, member, deferred=bool(member.get("defer_loading"))))
                if member.get("defer_loading"):
                    view.deferred.append({**member, "name": name})
        elif kind == "function":
            tools.append(_function(tool["name"], tool, deferred=bool(tool.get("defer_loading"))))
            if tool.get("defer_loading"):
                view.deferred.append(tool)
    known = {t["name"] for t in tools}
    history = _History()
    items = body.get("input") or []
    for item in [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") in ("user", "assistant"):
            for block in _text_blocks(item.get("content")):
                history.add(item["role"], block)
        elif kind == "function_call":
            history.add("assistant", {"type": "tool_use", "id": item.get("call_id", ""), "name": called_tool_name(item),
                                      "input": _arguments(item.get("arguments"))})
        elif kind == "function_call_output":
            history.add("user", {"type": "tool_result", "tool_use_id": item.get("call_id", ""), "content": _text(item.get("output"))})
        elif kind == TOOL_SEARCH_CALL:
            history.add("assistant", {"type": "tool_use", "id": item.get("call_id", ""), "name": TOOL_SEARCH_NAME,
                                      "input": _arguments(item.get("arguments"))})
        elif kind == TOOL_SEARCH_OUTPUT:
            loaded: list[str] = []
            for tool in item.get("tools") or []:  # a loaded namespace's functions by their catalog names
                members = [(namespace_tool_name(tool["name"], m.get("name", "")), m) for m in tool.get("tools") or []] \
                    if tool.get("type") == "namespace" else [(tool.get("name", ""), tool)]
                for name, member in members:
                    loaded.append(name)
                    if name not in known:  # the client style sends found tools only here
                        tools.append(_function(name, member))
                        known.add(name)
            history.add("user", _search_result(item.get("call_id", ""), loaded))
    view.request["messages"] = history.messages
    # What the model sees of the deferred tools where no announcement names them (hosted): each
    # namespace's name and each single deferred function's name.
    view.request[SEEN_DEFERRED] = list(dict.fromkeys(
        [namespace for namespace, _ in view.namespaces.values()] + [f["name"] for f in view.deferred if f["name"] not in view.namespaces]))
    return view


def chat_view(body: dict[str, Any]) -> WireView:
    """A Chat Completions body read as the demo policy reads a Messages API request."""
    system: list[str] = []
    history = _History()
    for message in body.get("messages") or []:
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text(message.get("content")))
        elif role == "user":
            for block in _text_blocks(message.get("content")):
                history.add("user", block)
        elif role == "assistant":
            if message.get("content"):
                history.add("assistant", {"type": "text", "text": _text(message["content"])})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                history.add("assistant", {"type": "tool_use", "id": call.get("id", ""), "name": function.get("name", ""),
                                          "input": _arguments(function.get("arguments"))})
        elif role == "tool":
            history.add("user", {"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""),
                                 "content": _text(message.get("content"))})
    tools = [_function(t["function"]["name"], t["function"]) for t in body.get("tools") or [] if isinstance(t.get("function"), dict)]
    return WireView({"model": body.get("model", ""), "system": "\n".join(system), "messages": history.messages, "tools": tools})


class OpenAIWireDemoAgent(DemoAgentProvider):
    key = "demo-openai"
    label = "offline demo agent (OpenAI wire)"
    offline = True
    vendor = "openai"
    apis = (RESPONSES_API, CHAT_COMPLETIONS_API)
    wire_styles = tuple(style.name for style in profile_styles())  # the hosted style's search is played, and marked so
    simulated_search_note = HOSTED_SEARCH_NOTE

    @classmethod
    def default_model(cls) -> str:
        return settings.OPENAI_MODEL

    def adapt_settings(self, agent_settings: AgentSettings) -> AgentSettings:
        return settings_for_vendor(agent_settings, OPENAI, self.default_model())

    def complete(self, system: str, messages: list[NeutralMessage], max_tokens: int, *, model: str = "") -> ProviderResponse:
        return self.create(chat_completions_request(system, messages, max_tokens, model or self.default_model()),
                           api=CHAT_COMPLETIONS_API)

    def _announced(self, request_kwargs: dict[str, Any]) -> list[str]:
        return [*super()._announced(request_kwargs), *request_kwargs.get(SEEN_DEFERRED, [])]

    def create(self, request_kwargs: dict[str, Any], *, api: str = MESSAGES_API) -> ProviderResponse:
        self.check_api(api)
        if api == CHAT_COMPLETIONS_API:  # the functions style
            decided = self._decide(chat_view(request_kwargs).request)
            content = chat_content(_chat_message(decided.content))
        else:
            content = responses_content(self._responses_output(responses_view(request_kwargs)))
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
        return ProviderResponse(content=content, stop_reason=stop_reason, usage=_usage(request_kwargs, content),
                                model=DEMO_MODEL, usage_source=USAGE_ESTIMATE)

    def _responses_output(self, view: WireView) -> list[dict[str, Any]]:
        decided = self._decide(view.request).content
        call = next((b for b in decided if b.get("type") == "tool_use"), None)
        if not (view.hosted and call is not None and call["name"] == TOOL_SEARCH_NAME):
            return _responses_items(decided, view, search_execution="client")
        # OpenAI would search here, inside the response: play that search, then take the next step.
        query = str((call.get("input") or {}).get("query", ""))
        loaded = _hosted_search(view, query)
        searched = view.with_search(call["id"], query, loaded)
        search_items = [{"type": TOOL_SEARCH_CALL, "id": f"ts_{call['id']}", "call_id": call["id"], "arguments": {"query": query},
                         "execution": "server", "status": "completed"},
                        {"type": TOOL_SEARCH_OUTPUT, "id": f"tso_{call['id']}", "call_id": call["id"], "execution": "server",
                         "status": "completed", "tools": _loaded_definitions(view, loaded)}]
        after = self._decide(searched.request).content
        return [*_responses_items([b for b in decided if b.get("type") == "text"], view), *search_items,
                *_responses_items(after, searched)]


def _hosted_search(view: WireView, query: str) -> list[str]:
    """The played hosted search: the engine's query language and claude-code scorer over the request's deferred functions."""
    tools: list[Tool] = []
    for function in view.deferred:
        name = function["name"]
        try:
            tools.append(Tool(name=name, description=function.get("description") or "", is_mcp=name.startswith(MCP_PREFIX),
                              should_defer=True, input_schema=function.get("parameters") or {"type": "object", "properties": {}}))
        except ToolDefinitionError:
            continue  # a definition the engine cannot read is one the played search cannot find
    try:
        return list(run_tool_search({"query": query}, ToolCatalog(tools), _HOSTED_SCORER).matches)
    except (ToolSearchInputError, ToolDefinitionError):
        return []


def _loaded_definitions(view: WireView, loaded: list[str]) -> list[dict[str, Any]]:
    """The loaded functions as OpenAI returns them: inside their request namespaces, or alone."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    singles: list[dict[str, Any]] = []
    by_name = {f["name"]: f for f in view.deferred}
    for name in loaded:
        function = by_name.get(name)
        if function is None:
            continue
        if name in view.namespaces:
            namespace, short = view.namespaces[name]
            grouped.setdefault(namespace, []).append({**function, "name": short})
        else:
            singles.append(function)
    return [*({"type": "namespace", "name": n, "description": "", "tools": members} for n, members in grouped.items()), *singles]


def _responses_items(content: list[dict[str, Any]], view: WireView, *, search_execution: str = "client") -> list[dict[str, Any]]:
    """The policy's blocks as Responses output items (a namespaced function is called in its namespace)."""
    items: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") == "text" and block.get("text"):
            items.append({"type": "message", "id": f"msg_demo_{len(items)}", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": block["text"], "annotations": []}]})
        elif block.get("type") == "tool_use" and block["name"] == TOOL_SEARCH_NAME:
            items.append({"type": TOOL_SEARCH_CALL, "id": f"ts_{block['id']}", "call_id": block["id"],
                          "arguments": block.get("input") or {}, "execution": search_execution, "status": "completed"})
        elif block.get("type") == "tool_use":
            item = {"type": "function_call", "id": f"fc_{block['id']}", "call_id": block["id"], "name": block["name"],
                    "arguments": json.dumps(block.get("input") or {}), "status": "completed"}
            if block["name"] in view.namespaces:
                item["namespace"], item["name"] = view.namespaces[block["name"]]
            items.append(item)
    return items


def _chat_message(content: list[dict[str, Any]]) -> dict[str, Any]:
    text = "\n".join(b["text"] for b in content if b.get("type") == "text" and b.get("text"))
    calls = [{"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})}}
             for b in content if b.get("type") == "tool_use"]
    return {"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})}


def _usage(body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
    """The engine's estimate, split as OpenAI's automatic prompt cache would bill it."""
    with _CACHE_LOCK:
        now = time.monotonic()
        if len(_OPENAI_CACHE.entries) > _PRUNE_ABOVE:
            _OPENAI_CACHE.prune(now)
        split = _OPENAI_CACHE.send(body, now)
    return {"input": split.uncached_tokens, "output": _ESTIMATE.count_text(json.dumps(content)),
            "cache_read": split.cache_read_tokens, "cache_write": 0}

