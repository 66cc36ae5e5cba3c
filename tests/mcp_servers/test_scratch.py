"""Trying a server without registering it (the "Try a server" page, scratch.py): it lists and calls
over a connection of its own and stores nothing; editors may try a URL and never see a command
field; only admins try a command and register; bad input and a dead server are clear answers."""
from __future__ import annotations

import json
import sys

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from playground.mcp_servers import scratch
from playground.mcp_servers.models import McpCallRecord, McpLogLine, McpProtocolMessage, McpServer
from playground.mcp_servers.secrets import SECRET_MASK
from playground.registry.models import Tool
from tests.mcp_servers.conftest import DEMO_ARGS, free_port

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_stray_processes")]
URL = reverse("mcp_servers:server_try")
SECRET = "s3cr3t-token-value-42"


def stdio_fields(**extra) -> dict[str, str]:
    return {"transport": "stdio", "command": sys.executable, "args_text": "\n".join(DEMO_ARGS),
            "env_text": f"DEMO_TOKEN={SECRET}", "protocol_era": "auto", "url": "", "headers_text": "", "name": "", **extra}


def nothing_stored() -> bool:
    return not (McpServer.objects.exists() or Tool.objects.filter(name__startswith="mcp__").exists()
                or McpLogLine.objects.exists() or McpProtocolMessage.objects.exists() or McpCallRecord.objects.exists())


def as_role(client, django_user_model, role: str):
    user = django_user_model.objects.create_user(role, password="pw")
    user.groups.add(Group.objects.get(name=role))
    client.force_login(user)
    return client


def test_an_admin_lists_and_calls_a_command_and_nothing_is_stored(admin_client):
    page = admin_client.get(URL).content.decode()
    assert 'name="command"' in page and 'data-testid="scratch-register"' in page
    listed = admin_client.post(URL, {**stdio_fields(), "action": "list"})
    body = listed.content.decode()
    assert listed.status_code == 200 and 'data-tool="echo"' in body and "Nothing was stored" in body
    index = body.count('data-testid="scratch-tool"')
    assert index >= 5
    position = body.index('data-tool="echo"')
    echo_index = body[position:].split('name="tool__', 1)[1].split('"', 1)[0]
    called = admin_client.post(URL, {**stdio_fields(), "action": "call", "call_tool": echo_index,
                                     f"tool__{echo_index}": "echo", f"args__{echo_index}": json.dumps({"text": f"hi {SECRET}"})})
    text = called.content.decode()
    assert called.status_code == 200 and 'data-testid="scratch-outcome"' in text and f"hi {SECRET_MASK}" in text
    assert SECRET not in text and SECRET not in body
    assert nothing_stored()


def test_bad_arguments_an_unknown_tool_and_a_dead_url_are_clear_answers(admin_client):
    bad = admin_client.post(URL, {**stdio_fields(), "action": "call", "call_tool": "0", "tool__0": "echo", "args__0": "[1, 2"})
    assert bad.status_code == 400 and "Arguments:" in bad.content.decode()
    not_object = admin_client.post(URL, {**stdio_fields(), "action": "call", "call_tool": "0", "tool__0": "echo", "args__0": "[1]"})
    assert not_object.status_code == 400 and "JSON object" in not_object.content.decode()
    unknown = admin_client.post(URL, {**stdio_fields(), "action": "call", "call_tool": "0", "tool__0": "no_such_tool", "args__0": "{}"})
    assert unknown.status_code == 200 and ("scratch-error" in unknown.content.decode() or "mcp-result-error" in unknown.content.decode())
    dead = admin_client.post(URL, {"transport": "http", "url": f"http://127.0.0.1:{free_port()}/mcp?api_key={SECRET}",
                                   "protocol_era": "auto", "action": "list"})
    assert dead.status_code == 200 and "could not connect" in dead.content.decode() and SECRET not in dead.content.decode()
    missing = admin_client.post(URL, {"transport": "http", "url": "", "protocol_era": "auto", "action": "list"})
    assert missing.status_code == 400 and "needs a URL" in missing.content.decode()
    assert nothing_stored()


def test_an_editor_tries_a_url_but_never_sees_or_sends_a_command(client, django_user_model, http_demo_server):
    editor = as_role(client, django_user_model, "editor")
    page = editor.get(URL).content.decode()
    assert 'name="command"' not in page and 'name="env_text"' not in page and 'value="stdio"' not in page
    assert 'data-testid="scratch-register"' not in page
    assert editor.post(URL, {**stdio_fields(), "action": "list"}).status_code == 403
    assert editor.post(URL, {"transport": "http", "url": http_demo_server.url, "command": sys.executable,
                             "action": "list"}).status_code == 403
    fields = {"transport": "http", "url": f"{http_demo_server.url}?api_key={SECRET}", "protocol_era": "legacy",
              "headers_text": f"Authorization: Bearer {SECRET}"}
    listed = editor.post(URL, {**fields, "action": "list"}).content.decode()
    assert 'data-tool="echo"' in listed and SECRET not in listed and 'data-testid="scratch-register"' not in listed
    called = editor.post(URL, {**fields, "action": "call", "call_tool": "0", "tool__0": "echo",
                               "args__0": json.dumps({"text": f"the key is {SECRET}"})}).content.decode()
    assert "the key is" in called and SECRET not in called
    assert nothing_stored()


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_below_editor_the_page_is_refused(client, django_user_model, role):
    user = as_role(client, django_user_model, role)
    assert user.get(URL).status_code == 403
    assert 'data-testid="try-server"' not in user.get(reverse("mcp_servers:server_list")).content.decode()


def test_register_posts_the_same_fields_to_the_server_form(admin_client):
    response = admin_client.post(reverse("mcp_servers:server_create"), {**stdio_fields(name="tried"), "enabled": "on"})
    assert response.status_code == 302
    server = McpServer.objects.get(name="tried")
    assert server.command == sys.executable and server.args == DEMO_ARGS and server.env == {"DEMO_TOKEN": SECRET}


def test_a_process_refuses_past_its_scratch_slots(admin_client, monkeypatch):
    import threading

    monkeypatch.setattr(scratch, "_slots", threading.BoundedSemaphore(1))
    scratch._slots.acquire()
    try:
        busy = admin_client.post(URL, {**stdio_fields(), "action": "list"}).content.decode()
    finally:
        scratch._slots.release()
    assert "already open in this process" in busy


def test_the_scratch_form_reads_environment_and_headers_as_the_server_form_does():
    """Register posts the scratch form's fields to the server form: a value must not change on the way."""
    from playground.mcp_servers.forms import parse_pairs

    env, headers = "GREETING= hello there\n# a comment\nEMPTY=\n", "X-Trace:  abc \nAuthorization: Bearer t"
    form = scratch.ScratchConnectionForm({"transport": "stdio", "command": sys.executable, "env_text": env,
                                          "headers_text": headers, "protocol_era": "legacy"}, allow_commands=True)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["env_text"] == parse_pairs(env.strip(), "=", "environment variables") == {
        "GREETING": " hello there", "EMPTY": ""}  # an environment value is kept as written, leading space included
    assert form.cleaned_data["headers_text"] == {"X-Trace": "abc", "Authorization": "Bearer t"}
    bad = scratch.ScratchConnectionForm({"transport": "stdio", "command": "x", "env_text": "A B=1", "protocol_era": "legacy"}, allow_commands=True)
    assert not bad.is_valid() and bad.errors["env_text"] == ["line 1: the name 'A B' contains spaces"]
