"""The one prompt card: the conversation page, the gateway session page and the inbox render the same
template, with the arguments as JSON (never a Python dict) and secrets masked by the one scrubber."""
from __future__ import annotations

import json
import re
from html import unescape

import pytest
from django.urls import reverse

from playground.mcp_servers.secrets import SECRET_MASK, mask_arguments
from tests.inbox.conftest import SECRET_ARGUMENTS, waiting_conversation, waiting_gateway_call

pytestmark = pytest.mark.django_db
SECRET = SECRET_ARGUMENTS["api_key"]


def shown_arguments(page: str) -> list[dict]:
    blocks = re.findall(r'<pre class="json" data-testid="prompt-arguments">(.*?)</pre>', page, re.S)
    return [json.loads(unescape(block)) for block in blocks]


def test_the_three_pages_show_one_card_with_json_arguments_and_the_secret_masked(admin_user, admin_client):
    conversation, _ = waiting_conversation(admin_user)
    session, _ = waiting_gateway_call()
    pages = {
        "conversation": admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode(),
        "gateway": admin_client.get(reverse("gateway:session_detail", args=[session.pk])).content.decode(),
        "inbox": admin_client.get(reverse("inbox:index")).content.decode(),
    }
    expected = {"path": "/tmp/notes.txt", "api_key": SECRET_MASK, "retries": 3}
    for name, page in pages.items():
        assert SECRET not in page, name
        assert "{'path'" not in page and "&#x27;path&#x27;" not in page, name  # no Python repr
        assert expected in shown_arguments(page), name
        assert re.search(r'data-testid="prompt-card" data-source="\w+"', page), name
        assert 'data-testid="answer-once"' in page and 'data-testid="answer-deny"' in page, name
        assert re.search(r'data-testid="prompt-expires" data-expires-at="[^"]+"[^>]*>\d+ s left<', page), name
    assert len(shown_arguments(pages["inbox"])) == 2


def test_masking_keeps_the_structure_and_hides_secrets_by_name_and_by_shape():
    masked = mask_arguments({"Authorization": "Bearer abc", "auth": {"user": "ann", "password": "hunter22"},
                             "max_tokens": 100, "note": "use ghp_" + "a" * 30, "items": ["https://u:pw@h/x", 2]})
    assert masked == {"Authorization": SECRET_MASK, "auth": {"user": "ann", "password": SECRET_MASK}, "max_tokens": 100,
                      "note": f"use {SECRET_MASK}", "items": [f"https://{SECRET_MASK}:{SECRET_MASK}@h/x", 2]}


def test_a_gateway_tool_call_shows_its_arguments_as_masked_json(admin_client):
    from playground.gateway.events import record_event
    from playground.gateway.models import GatewayEvent

    session, _ = waiting_gateway_call()
    record_event(session.pk, GatewayEvent.Type.TOOL_CALL, {"name": "mcp__files__read", "arguments": SECRET_ARGUMENTS,
                                                           "permission": "allow", "summary": "ok", "duration_ms": 1.0})
    page = admin_client.get(reverse("gateway:session_detail", args=[session.pk])).content.decode()
    call = re.search(r'data-testid="call-arguments">(.*?)</pre>', page, re.S).group(1)
    assert json.loads(unescape(call)) == {"path": "/tmp/notes.txt", "api_key": SECRET_MASK, "retries": 3}
    assert SECRET not in page
