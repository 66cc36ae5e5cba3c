"""A local HTTP server that speaks OpenAI's Responses and Chat Completions APIs, for the real SDK in tests.

Like `fake_api.FakeMessagesAPI` for Anthropic: a threaded server on port 0 that
`openai.OpenAI(base_url=server.url, api_key=...)` talks to over HTTP (`server.url` ends in `/v1`).
Each test scripts replies (output items for `/v1/responses`, a message for `/v1/chat/completions`)
and reads back the requests. Before taking a scripted reply it validates the request as the real
API does and answers `400` with OpenAI's error shape (`{"error": {"message", "type", "param",
"code"}}`) for what the real API rejects:

Responses (`validate_responses_request`):
- deferred tools (`defer_loading: true`, alone or in a namespace) without a `tool_search` tool, or
  more than one `tool_search` tool; `parameters`/`description` on a server-executed one;
- a namespace without functions, with a duplicate function name, or a duplicate namespace name;
- duplicate top-level function names; a function name outside `^[a-zA-Z0-9_-]{1,64}$`;
- an unknown tool type, an unknown input item type, an unknown content part type;
- a `function_call_output` / `tool_search_output` (execution "client") whose `call_id` matches no
  earlier call; a `function_call` or client `tool_search_call` left without its output.
Chat Completions (`validate_chat_request`): roles, `tool` messages answering a prior `tool_calls`
id, every tool call answered, function tools only (no `defer_loading`), unique names.

Scripted replies may also be `ErrorReply` (429, 500…) to exercise the SDK's retries.
"""
from __future__ import annotations

import itertools
import json
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from playground.conversations.testing.local_double import LocalAPIDouble, RawBody
from playground.engine.history import search_output_tool_names

FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_TYPES = ("function", "namespace", "tool_search", "custom", "mcp", "web_search", "web_search_preview",
              "file_search", "code_interpreter", "image_generation", "computer_use_preview", "local_shell", "shell",
              "apply_patch")
INPUT_ITEM_TYPES = ("message", "function_call", "function_call_output", "tool_search_call", "tool_search_output",
                    "reasoning", "item_reference", "additional_tools", "compaction", "custom_tool_call",
                    "custom_tool_call_output", "mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response")
CONTENT_PART_TYPES = ("input_text", "input_image", "input_file", "output_text", "refusal")
ROLES = ("user", "assistant", "system", "developer")


class InvalidRequest(Exception):
    """What the real API answers with 400 invalid_request_error."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param, self.code = param, code


@dataclass
class ErrorReply:
    status: int
    message: str = "scripted error"
    error_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def body(self, param: str | None = None, code: str | None = None) -> dict[str, Any]:
        kind = self.error_type or {400: "invalid_request_error", 401: "authentication_error", 404: "invalid_request_error",
                                   429: "rate_limit_exceeded"}.get(self.status, "server_error")
        return {"error": {"message": self.message, "type": kind, "param": param, "code": code}}


Reply = dict[str, Any] | ErrorReply | Callable[[dict[str, Any]], "dict[str, Any] | ErrorReply"]


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int = 0
    error: str = ""


_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_fake_{next(_ids):04d}"


# -- scripted Responses output ------------------------------------------------------------------------------
def response_reply(output: list[dict[str, Any]], *, model: str = "gpt-test", input_tokens: int = 100,
                   output_tokens: int = 20, cached_tokens: int = 0) -> dict[str, Any]:
    return {
        "id": _id("resp"), "object": "response", "created_at": int(time.time()), "model": model, "status": "completed",
        "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
        "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens, "total_tokens": input_tokens + output_tokens,
                  "input_tokens_details": {"cached_tokens": cached_tokens}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


def message_item(text: str) -> dict[str, Any]:
    return {"type": "message", "id": _id("msg"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def function_call_item(name: str, arguments: dict[str, Any], *, namespace: str = "", call_id: str = "") -> dict[str, Any]:
    item = {"type": "function_call", "id": _id("fc"), "call_id": call_id or _id("call"), "name": name,
            "arguments": json.dumps(arguments), "status": "completed"}
    if namespace:
        item["namespace"] = namespace
    return item


def tool_search_call_item(arguments: dict[str, Any], *, execution: str = "client", call_id: str = "") -> dict[str, Any]:
    return {"type": "tool_search_call", "id": _id("ts"), "call_id": call_id or _id("call"), "arguments": arguments,
            "execution": execution, "status": "completed"}


def hosted_search_reply(query: str, found: list[str], *, then: list[dict[str, Any]] | None = None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """OpenAI's own search (execution "server"): a tool_search_call and a tool_search_output loading
    the deferred definitions named `found` (catalog names) from the request's own tools, then `then`."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        loaded: list[dict[str, Any]] = []
        for tool in body.get("tools", []):
            if tool.get("type") == "namespace":
                members = [m for m in tool["tools"] if search_output_tool_names({"tools": [{**tool, "tools": [m]}]})[0] in found]
                if members:
                    loaded.append({**tool, "tools": members})
            elif tool.get("type") == "function" and tool.get("name") in found:
                loaded.append(tool)
        call = tool_search_call_item({"query": query}, execution="server")
        output = {"type": "tool_search_output", "id": _id("tso"), "call_id": call["call_id"], "execution": "server",
                  "status": "completed", "tools": loaded}
        return response_reply([call, output, *(then or [])])

    return reply


def chat_reply(text: str = "", *, tool_calls: list[tuple[str, dict[str, Any]]] = (), model: str = "gpt-test",
               prompt_tokens: int = 100, completion_tokens: int = 20) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = [{"id": _id("call"), "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                                 for name, args in tool_calls]
    return {"id": _id("chatcmpl"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop", "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


# -- validation ---------------------------------------------------------------------------------------------
def _function(tool: dict[str, Any], where: str) -> bool:
    """Check one function tool; True when it is deferred."""
    name = tool.get("name")
    if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
        raise InvalidRequest(f"Invalid '{where}.name': string does not match pattern. Expected a string that matches "
                             "the pattern '^[a-zA-Z0-9_-]+$'.", f"{where}.name", "invalid_value")
    parameters = tool.get("parameters")
    if parameters is not None and (not isinstance(parameters, dict) or parameters.get("type") != "object"):
        raise InvalidRequest(f"Invalid schema for function '{name}': schema must be a JSON Schema of 'type: \"object\"'.",
                             f"{where}.parameters", "invalid_function_parameters")
    return bool(tool.get("defer_loading"))


def _tool_definitions(tools: list[Any], where: str, *, in_output: bool = False) -> tuple[bool, int, list[dict[str, Any]]]:
    """Validate a tools list: (any deferred, tool_search tools, the tool_search tools)."""
    deferred, searches, names, namespaces = False, [], set(), set()
    for index, tool in enumerate(tools):
        at = f"{where}[{index}]"
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind not in TOOL_TYPES:
            raise InvalidRequest(f"Invalid value: '{kind}'. Supported values are: {', '.join(repr(t) for t in TOOL_TYPES)}.",
                                 f"{at}.type", "invalid_value")
        if kind == "function":
            deferred |= _function(tool, at)
            if tool["name"] in names:
                raise InvalidRequest(f"Duplicate function name '{tool['name']}' in {where}.", at, "duplicate_function_name")
            names.add(tool["name"])
        elif kind == "namespace":
            name = tool.get("name")
            if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name) or not isinstance(tool.get("description"), str):
                raise InvalidRequest(f"Invalid '{at}': a namespace needs a valid 'name' and a 'description'.", at, "invalid_value")
            if name in namespaces:
                raise InvalidRequest(f"Duplicate namespace name '{name}' in {where}.", at, "duplicate_namespace_name")
            namespaces.add(name)
            members = tool.get("tools")
            if not isinstance(members, list) or not members:
                raise InvalidRequest(f"Invalid '{at}.tools': a namespace must contain at least one function.", f"{at}.tools", "empty_array")
            inner: set[str] = set()
            for m_index, member in enumerate(members):
                m_at = f"{at}.tools[{m_index}]"
                if not isinstance(member, dict) or member.get("type") not in ("function", "custom"):
                    raise InvalidRequest(f"Invalid value at '{m_at}.type': a namespace holds function or custom tools.",
                                         f"{m_at}.type", "invalid_value")
                deferred |= _function(member, m_at)
                if member["name"] in inner:
                    raise InvalidRequest(f"Duplicate function name '{member['name']}' in namespace '{name}'.", m_at,
                                         "duplicate_function_name")
                inner.add(member["name"])
        elif kind == "tool_search":
            if in_output:
                raise InvalidRequest("A tool_search_output cannot load a tool_search tool.", at, "invalid_value")
            execution = tool.get("execution", "server")
            if execution not in ("server", "client"):
                raise InvalidRequest(f"Invalid value: '{execution}'. Supported values are: 'server' and 'client'.",
                                     f"{at}.execution", "invalid_value")
            if execution == "server" and ("parameters" in tool or "description" in tool):
                raise InvalidRequest("'parameters' and 'description' are only supported for tool_search with execution 'client'.",
                                     at, "invalid_value")
            if execution == "client" and "parameters" in tool and (
                    not isinstance(tool["parameters"], dict) or tool["parameters"].get("type") != "object"):
                raise InvalidRequest("Invalid schema for tool_search: schema must be of 'type: \"object\"'.",
                                     f"{at}.parameters", "invalid_function_parameters")
            searches.append(tool)
        elif tool.get("defer_loading"):
            deferred = True
    return deferred, len(searches), searches


def validate_responses_request(body: dict[str, Any]) -> None:
    """Raise InvalidRequest with the real API's kind of message for what `/v1/responses` rejects."""
    if not body.get("model"):
        raise InvalidRequest("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    max_output = body.get("max_output_tokens")
    if max_output is not None and (not isinstance(max_output, int) or max_output < 16):
        raise InvalidRequest(f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got "
                             f"{max_output} instead.", "max_output_tokens", "integer_below_min_value")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise InvalidRequest("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
    deferred, searches, search_tools = _tool_definitions(tools, "tools")
    if searches > 1:
        raise InvalidRequest("Only one tool_search tool may be provided.", "tools", "invalid_value")
    if deferred and not searches:
        raise InvalidRequest("Deferred tools (defer_loading: true) require a tool_search tool in 'tools'.", "tools",
                             "invalid_value")
    client_search = any(t.get("execution") == "client" for t in search_tools)
    items = body.get("input")
    if isinstance(items, str):
        return
    if not isinstance(items, list) or not items:
        raise InvalidRequest("Missing required parameter: 'input'.", "input", "missing_required_parameter")
    function_calls: set[str] = set()
    search_calls: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        at = f"input[{index}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"Invalid type for '{at}': expected an object.", at, "invalid_type")
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in INPUT_ITEM_TYPES:
            raise InvalidRequest(f"Invalid value: '{kind}'. Supported values are: {', '.join(repr(t) for t in INPUT_ITEM_TYPES)}.",
                                 f"{at}.type", "invalid_value")
        if kind == "message":
            if item.get("role") not in ROLES:
                raise InvalidRequest(f"Invalid value: '{item.get('role')}'. Supported values are: 'user', 'assistant', "
                                     "'system', and 'developer'.", f"{at}.role", "invalid_value")
            content = item.get("content")
            if isinstance(content, list):
                for p_index, part in enumerate(content):
                    if not isinstance(part, dict) or part.get("type") not in CONTENT_PART_TYPES:
                        kind_of = part.get("type") if isinstance(part, dict) else None
                        raise InvalidRequest(f"Invalid value: '{kind_of}'. Supported values are: "
                                             f"{', '.join(repr(t) for t in CONTENT_PART_TYPES)}.",
                                             f"{at}.content[{p_index}].type", "invalid_value")
            elif not isinstance(content, str):
                raise InvalidRequest(f"Invalid type for '{at}.content': expected a string or an array.", f"{at}.content",
                                     "invalid_type")
        elif kind == "function_call":
            if not item.get("call_id") or not isinstance(item.get("name"), str) or not isinstance(item.get("arguments"), str):
                raise InvalidRequest(f"Invalid '{at}': a function_call needs 'call_id', 'name' and 'arguments' (a string).", at,
                                     "invalid_value")
            function_calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item.get("call_id") not in function_calls:
                raise InvalidRequest(f"No tool call found for function call output with call_id {item.get('call_id')}.",
                                     f"{at}.call_id", "invalid_value")
            answered.add(item["call_id"])
        elif kind == "tool_search_call":
            if item.get("execution", "server") == "client":
                if not client_search:
                    raise InvalidRequest("A client tool_search_call needs a tool_search tool with execution 'client'.", at,
                                         "invalid_value")
                search_calls.add(item.get("call_id") or "")
        elif kind == "tool_search_output":
            if item.get("execution", "server") == "client":
                if item.get("call_id") not in search_calls:
                    raise InvalidRequest(f"No tool_search_call found for tool_search_output with call_id {item.get('call_id')}.",
                                         f"{at}.call_id", "invalid_value")
                answered.add(item["call_id"])
            if not isinstance(item.get("tools"), list):
                raise InvalidRequest(f"Missing required parameter: '{at}.tools'.", f"{at}.tools", "missing_required_parameter")
            _tool_definitions(item["tools"], f"{at}.tools", in_output=True)
    missing = sorted((function_calls | search_calls) - answered)
    if missing:
        raise InvalidRequest(f"No tool output found for function call {missing[0]}.", "input", "invalid_value")


def validate_chat_request(body: dict[str, Any]) -> None:
    """Raise InvalidRequest for what `/v1/chat/completions` rejects."""
    if not body.get("model"):
        raise InvalidRequest("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
    names: set[str] = set()
    for index, tool in enumerate(body.get("tools") or []):
        at = f"tools[{index}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            raise InvalidRequest(f"Invalid value: '{tool.get('type')}'. Supported values are: 'function' and 'custom'.",
                                 f"{at}.type", "invalid_value")
        extra = set(tool) - {"type", "function"} or set(function) - {"name", "description", "parameters", "strict"}
        if extra:
            raise InvalidRequest(f"Unrecognized request argument supplied: {sorted(extra)[0]}", at, "unknown_parameter")
        _function(function, f"{at}.function")
        if function["name"] in names:
            raise InvalidRequest(f"Duplicate function name '{function['name']}' in tools.", at, "duplicate_function_name")
        names.add(function["name"])
    pending: list[str] = []
    for index, message in enumerate(messages):
        at = f"messages[{index}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in (*ROLES, "tool"):
            raise InvalidRequest(f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'tool', "
                                 "'function', and 'developer'.", f"{at}.role", "invalid_value")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                raise InvalidRequest("Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                                     "message with 'tool_calls'.", f"{at}.role", None)
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            raise InvalidRequest("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                                 f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                                 f"{', '.join(pending)}", "messages", None)
        if role == "assistant":
            pending = [call.get("id", "") for call in message.get("tool_calls") or []]
            if pending and not names:
                raise InvalidRequest("Invalid 'messages': tool_calls need 'tools' in the request.", at, None)
    if pending:
        raise InvalidRequest("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                             f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}",
                             "messages", None)


VALIDATORS: dict[str, Callable[[dict[str, Any]], None]] = {
    "/v1/responses": validate_responses_request,
    "/v1/chat/completions": validate_chat_request,
}


class FakeOpenAIAPI(LocalAPIDouble):
    """The server. Use as a context manager; `url` is the SDK's base_url (it ends in /v1)."""

    base_path = "/v1"
    thread_name = "fake-openai-api"
    request_id_header = "x-request-id"

    def __init__(self, *, retry_after_ms: int = 5) -> None:
        self.retry_after_ms = retry_after_ms
        super().__init__()
        self.replies: deque[Reply]
        self.requests: list[RecordedRequest]

    def _answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        record = RecordedRequest(path=path, headers=headers, body=body)
        with self._lock:
            self.requests.append(record)
        validator = VALIDATORS.get(path)
        if validator is None:
            record.status = 404
            return 404, ErrorReply(404, f"Invalid URL (POST {path})").body(), {}
        try:
            validator(body)
        except InvalidRequest as exc:
            record.status, record.error = 400, str(exc)
            return 400, ErrorReply(400, str(exc)).body(exc.param, exc.code), {}
        with self._lock:
            reply: Reply | None = self.replies.popleft() if self.replies else None
        if reply is None:  # 418 is not retried by the SDK: an unscripted call fails the test at once
            record.status, record.error = 418, "no scripted reply left"
            return 418, ErrorReply(418, "fake API: no scripted reply left for this request").body(), {}
        if callable(reply):
            reply = reply(body)
        if isinstance(reply, ErrorReply):
            record.status, record.error = reply.status, reply.message
            return reply.status, reply.body(), {"retry-after-ms": str(self.retry_after_ms), **reply.headers}
        if isinstance(reply, RawBody):
            record.status = reply.status
            return reply.status, reply, {}
        record.status = 200
        return 200, reply, {}

    def _invalid_json(self) -> dict[str, Any]:
        return ErrorReply(400, "We could not parse the JSON body of your request.").body()

    def _request_id(self) -> str:
        return _id("req")
