"""Prompt inbox fixtures: users of each role, and open prompts made as their own services make them."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from playground.conversations.events import PermissionPrompt, record_event
from playground.conversations.models import Conversation
from playground.gateway.events import record_event as record_gateway_event
from playground.gateway.models import GatewayEvent, GatewayPrompt, GatewaySession
from playground.registry.models import AgentProfile
from tests.gateway.conftest import redis_layer  # noqa: F401 - fixture: the real channel layer

SECRET_ARGUMENTS = {"path": "/tmp/notes.txt", "api_key": "sk-live-do-not-show-1234567890", "retries": 3}


def user_with_role(django_user_model, username: str, role: str | None):
    user = django_user_model.objects.create_user(username, f"{username}@example.com", f"pw-{username}-123")
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def operator(django_user_model):
    return user_with_role(django_user_model, "olga", "operator")


@pytest.fixture
def other_operator(django_user_model):
    return user_with_role(django_user_model, "oscar", "operator")


@pytest.fixture
def viewer(django_user_model):
    return user_with_role(django_user_model, "vera", "viewer")


def waiting_conversation(owner, *, tool: str = "write_file", arguments: dict | None = None, title: str = "Notes"):
    """A conversation whose run is paused on a prompt, as the loop leaves it (loop.py `pause`)."""
    conversation = Conversation.objects.create(owner=owner, title=title, status=Conversation.Status.RUNNING,
                                               run_token="run-1")
    prompt = record_event(conversation, PermissionPrompt(tool_use_id="toolu_1", name=tool,
                                                         arguments=arguments if arguments is not None else SECRET_ARGUMENTS,
                                                         reason="ask rule on write_file", timeout_seconds=300),
                          status=Conversation.Status.WAITING)
    Conversation.objects.filter(pk=conversation.pk).update(
        paused_run={"prompt_sequence": prompt.sequence, "timeout": 300, "call": {"id": "toolu_1", "name": tool}})
    conversation.refresh_from_db()
    return conversation, prompt


def waiting_gateway_call(*, tool: str = "mcp__files__delete", arguments: dict | None = None):
    """A gateway call waiting under an `ask` rule, as service.open_prompt leaves it."""
    profile = AgentProfile.objects.create(name="Served", tool_search_mode="true")
    session = GatewaySession.objects.create(session_id="gw-1", profile=profile, client_name="claude-code")
    arguments = arguments if arguments is not None else SECRET_ARGUMENTS
    prompt = GatewayPrompt.objects.create(session=session, tool_name=tool, arguments=arguments, reason="ask rule on delete")
    record_gateway_event(session.pk, GatewayEvent.Type.PERMISSION_ASKED, {
        "prompt_id": prompt.pk, "name": tool, "arguments": arguments, "reason": "ask rule on delete", "timeout_seconds": 120})
    return session, prompt
