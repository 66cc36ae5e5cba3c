"""The Messages API double takes mid-conversation tool changes as the beta allows, and refuses the rest (real SDK)."""
from __future__ import annotations

import anthropic
import pytest
from anthropic.types.tool_reference_unresolved_error import ToolReferenceUnresolvedError

from playground.conversations.testing.fake_api import FakeMessagesAPI, text_reply

BETA = "mid-conversation-tool-changes-2026-07-01"
SCHEMA = {"type": "object", "properties": {}}
TOOLS = [{"name": "echo", "description": "echo", "input_schema": SCHEMA},
         {"name": "weather", "description": "forecast", "input_schema": SCHEMA, "defer_loading": True}]


def change(kind: str, tool: dict) -> dict:
    return {"type": kind, "tool": tool}


def ref(name: str) -> dict:
    return {"type": "tool_reference", "name": name}


def send(server, system_blocks, *, betas=(BETA,), tools=TOOLS):
    client = anthropic.Anthropic(api_key="sk-test", base_url=server.url, max_retries=0)
    messages = [{"role": "user", "content": "hi"}, {"role": "system", "content": system_blocks}]
    kwargs = {"betas": list(betas)} if betas else {}
    return client.beta.messages.create(model="claude-test", max_tokens=10, messages=messages, tools=tools, **kwargs)


@pytest.fixture
def server():
    with FakeMessagesAPI() as fake:
        yield fake


def test_an_addition_then_a_removal_of_a_declared_tool_is_accepted(server):
    server.replies.extend([text_reply("ok")])
    message = send(server, [{"type": "text", "text": "weather is available"}, change("tool_addition", ref("weather")),
                            change("tool_removal", ref("weather"))])
    assert message.content[0].text == "ok"
    assert BETA in server.message_requests[-1].headers["anthropic-beta"]


@pytest.mark.parametrize(("blocks", "betas", "error", "code"), [
    ([change("tool_addition", ref("weather"))], (), anthropic.BadRequestError, ""),  # no beta: no system role
    ([change("tool_addition", ref("nowhere"))], (BETA,), ToolReferenceUnresolvedError, "tool_reference_unresolved"),
    ([change("tool_removal", ref("weather"))], (BETA,), ToolReferenceUnresolvedError, "tool_reference_unresolved"),
    ([change("tool_addition", {"type": "tool_definition", "definition": {"name": "inline", "input_schema": SCHEMA}})],
     (BETA,), anthropic.BadRequestError, ""),  # inline definitions need the inline-tools beta
    ([change("tool_addition", {"type": "mcp_toolset_reference", "server_name": "github"})], (BETA,),
     ToolReferenceUnresolvedError, "tool_reference_unresolved"),
    ([change("tool_removal", {"type": "tool_definition", "definition": {"name": "x", "input_schema": SCHEMA}})],
     (BETA, "inline-tools-2026-09-15"), anthropic.BadRequestError, ""),
    ([{"type": "image", "source": {}}], (BETA,), anthropic.BadRequestError, ""),
])
def test_what_the_beta_does_not_allow_is_refused(server, blocks, betas, error, code):
    with pytest.raises(error) as caught:
        send(server, blocks, betas=betas)
    assert caught.value.status_code == 400 and (caught.value.error_code or "") == code
    assert server.message_requests[-1].status == 400


def test_an_inline_definition_is_accepted_under_the_inline_tools_beta(server):
    server.replies.extend([text_reply("ok")])
    send(server, [change("tool_addition", {"type": "tool_definition", "definition": {"name": "inline", "input_schema": SCHEMA}}),
                  change("tool_removal", ref("inline"))], betas=(BETA, "inline-tools-2026-09-15"))
    assert server.message_requests[-1].status == 200
