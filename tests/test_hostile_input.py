"""Hostile input on the main pages: a clear 4xx (or the page with a form error), never a 5xx.

Hypothesis drives the GET query parameters and the forms (tools list, inspector, model view,
compare, catalog import, tool-call form, profile settings) with values people or scripts can send:
NUL bytes, 100k characters, JSON nested thousands deep, 5,000-digit numbers, nan/inf, bytes that
are not UTF-8, long select: lists. Run it on PostgreSQL too (DATABASE_URL), where NUL in text is
an error of the database itself.
"""
from __future__ import annotations

from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.mcp_servers.models import McpServer
from playground.registry.models import AgentProfile, Tool

pytestmark = pytest.mark.django_db

HOSTILE = [
    "\x00", "a\x00b", "select:Read\x00", "x" * 100_000, "word " * 20_000,
    "[" * 3_000 + "]" * 3_000, '{"a":' * 3_000 + "1" + "}" * 3_000, "1" * 5_000, "-" + "9" * 5_000,
    "nan", "NaN", "inf", "-Infinity", "1e309", "[1e309]", '{"a": NaN}',
    "k1=nan", "k1=inf", 'field_weights={"name": 1e309}', "depth=1e12", "k1=" + "9" * 5_000,
    "select:" + "Read," * 20_000, "\ufffd\ufffe", "\U0001f600" * 1_000, "é" * 50_000, "' OR 1=1 --", "<script>",
    "-1", "0", "99999999999999999999", "1.5", "", " ",
]
# Query strings that no dict encodes: bytes that are not UTF-8, broken escapes.
RAW_QUERIES = ["%ff%fe", "%c3%28", "%", "%zz", "%00", "%e2%82", "q=%ff&q=%00"]

hostile = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=50))
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def assert_no_server_error(response, what) -> None:
    assert response.status_code < 500, f"{what}: {response.status_code}"


@pytest.fixture
def world(db, admin_user, viewer_user):
    server = McpServer.objects.create(name="offline", transport="stdio", command="/bin/false", enabled=False)
    tool = Tool.objects.create(
        name="mcp__offline__do", description="Do things", server=server, source="mcp",
        input_schema={"type": "object", "properties": {
            "text": {"type": "string"}, "count": {"type": "integer"}, "ratio": {"type": "number"},
            "items": {"type": "array"}, "options": {"type": "object"}, "flag": {"type": "boolean"},
            "kind": {"enum": ["a", "b"]},
        }},
    )
    Tool.objects.create(name="Read", description="Read a file", source=Tool.Source.BUILTIN)
    profile = AgentProfile.objects.create(name="P", tool_search_mode="true", wire_style="native")
    return {"server": server, "tool": tool, "profile": profile, "admin": client_of(admin_user), "viewer": client_of(viewer_user)}


PARAMS = {
    "registry:tool_list": ["q", "deferred", "always_load", "enabled", "server", "source", "page"],
    "registry:inspector": ["q", "backend", "settings", "profile", "max_results", "mode", "wire_style"],
    "registry:model_view": ["profile", "discovered", "mode", "wire_style"],
    "registry:tool_export": ["format", "q", "server"],
    "conversations:list": ["q", "profile", "status", "provider", "task_run", "page"],
    "agenteval:index": ["x"],
}


@pytest.mark.parametrize("who", ["viewer", "admin"])
@pytest.mark.parametrize("page", sorted(PARAMS))
def test_get_parameters(world, page, who):
    client = world[who]

    @SETTINGS
    @given(values=st.dictionaries(st.sampled_from(PARAMS[page]), hostile, min_size=1, max_size=3))
    def check(values):
        assert_no_server_error(client.get(reverse(page), values), f"GET {page} {values!r:.200}")

    check()
    for raw in RAW_QUERIES:
        assert_no_server_error(client.get(f"{reverse(page)}?q={raw}&{raw}"), f"GET {page}?{raw}")


def test_inspector_posts(world):
    @SETTINGS
    @given(values=st.dictionaries(st.sampled_from(PARAMS["registry:inspector"]), hostile, min_size=1, max_size=3))
    def check(values):
        for who in ("viewer", "admin"):
            assert_no_server_error(world[who].post(reverse("registry:inspector"), values), f"POST inspector {values!r:.200}")

    check()


def test_nul_in_a_path_or_query_is_a_clear_400(world):
    client = world["viewer"]
    for url in ("/tools/?q=%00", "/conversations/compare/%00/", "/inspector/?q=a%00b", "/tools/%00/", "/mcp/?x=%00"):
        response = client.get(url)
        assert response.status_code in (400, 404), url
        if response.status_code == 400:
            assert b"NUL byte" in response.content
    response = client.post("/inspector/", {"q": "github\x00"})
    assert response.status_code == 400 and b"NUL byte" in response.content


def test_compare(world):
    client = world["viewer"]

    @SETTINGS
    @given(group=hostile, values=st.dictionaries(st.sampled_from(["profile_a", "profile_b", "provider", "message"]), hostile, max_size=3))
    def check(group, values):
        path = "/conversations/compare/" + quote(group[:2_000], safe="") + "/"
        assert_no_server_error(client.get(path), f"GET compare/{group!r:.100}")
        # Only invalid forms: a valid one would start two conversations (not this test's subject).
        values = {**values, "profile_a": values.get("profile_a", "x")}
        assert_no_server_error(client.post(reverse("conversations:compare"), values), f"POST compare {values!r:.200}")

    check()


def test_catalog_import(world):
    client = world["admin"]

    @SETTINGS
    @given(text=hostile, server_name=hostile, wrap=st.sampled_from(["{}", '{{"name": "t", "input_schema": {}}}', '[{{"name": "t", "input_schema": {{"type": "object", "properties": {{"x": {}}}}}}}]']))
    def check(text, server_name, wrap):
        payload = wrap.format(text) if wrap != "{}" else text
        response = client.post(reverse("registry:tool_import"), {"text": payload, "server_name": server_name[:100]})
        assert_no_server_error(response, f"import {payload!r:.200}")

    check()
    deep = '{"name": "deep", "input_schema": {"type": "object", "properties": {"x": ' + '{"items": ' * 3_000 + "{}" + "}" * 3_000 + "}}}"
    huge = '{"name": "big", "input_schema": {"type": "object", "properties": {}, "maximum": ' + "9" * 5_000 + "}}"
    for payload, message in ((deep, "nested more than 64 levels deep"), (huge, "an integer longer than 64 digits")):
        response = client.post(reverse("registry:tool_import"), {"text": payload})
        assert response.status_code < 500 and message in response.content.decode()


def test_tool_call_form(world):
    client = world["admin"]
    tool = world["tool"]
    url = reverse("mcp_servers:tool_call", args=[world["server"].pk, tool.pk])
    prefix = f"t{tool.pk}-"
    fields = ["raw_arguments", "timeout", "arg__text", "arg__count", "arg__ratio", "arg__items", "arg__options", "arg__flag", "arg__kind"]

    @SETTINGS
    @given(mode=st.sampled_from(["raw", "form", "\x00"]), values=st.dictionaries(st.sampled_from(fields), hostile, max_size=4))
    def check(mode, values):
        data = {prefix + "mode": mode, prefix + "timeout": "5", **{prefix + k: v for k, v in values.items()}}
        assert_no_server_error(client.post(url, data), f"tool call {data!r:.200}")

    check()
    response = client.post(url, {prefix + "mode": "raw", prefix + "timeout": "5", prefix + "raw_arguments": "[" * 3_000 + "]" * 3_000})
    assert response.status_code < 500 and "nested more than 64 levels deep" in response.content.decode()


def test_profile_settings(world):
    client = world["admin"]
    base = {"name": "Hostile", "system_prompt": "", "model": "", "tool_search_mode": "true", "wire_style": "client",
            "search_backend": "bm25", "backend_settings": "", "max_results": 5, "announcement_style": "delta",
            "allowed_tools": "", "disallowed_tools": "", "is_subagent": ""}
    edit = reverse("registry:profile_edit", args=[world["profile"].pk])

    @SETTINGS
    @given(values=st.dictionaries(st.sampled_from(list(base)), hostile, min_size=1, max_size=3))
    def check(values):
        for url in (reverse("registry:profile_create"), edit):
            assert_no_server_error(client.post(url, {**base, **values}), f"profile {values!r:.200}")

    check()
    for settings_text, message in (("k1=nan", "must be a finite number"), ("k1=inf", "must be a finite number"),
                                   ('field_weights={"name": 1e309}', "the number 1e309 is too large"), ("b=7", "from 0 to 1")):
        response = client.post(edit, {**base, "backend_settings": settings_text})
        assert response.status_code == 400 and message in response.content.decode(), settings_text
        assert AgentProfile.objects.get(pk=world["profile"].pk).search_backend == ""


def test_tool_form_schema(world):
    client = world["admin"]
    base = {"name": "mcp__x__new_tool", "description": "d", "input_schema": "{}", "search_hint": "", "enabled": "on"}

    @SETTINGS
    @given(schema=hostile, name=hostile)
    def check(schema, name):
        for url in (reverse("registry:tool_create"), reverse("registry:tool_edit", args=[world["tool"].pk])):
            assert_no_server_error(client.post(url, {**base, "name": name, "input_schema": schema}), f"tool form {schema!r:.100}")

    check()
    deep = '{"type": "object", "properties": {"x": ' + '{"items": ' * 3_000 + "{}" + "}" * 3_000 + "}}"
    response = client.post(reverse("registry:tool_create"), {**base, "input_schema": deep})
    assert response.status_code < 500 and "Enter valid JSON: nested more than 64 levels deep" in response.content.decode()


# -- issue 32: JSON-escaped NUL, the MCP server form ----------------------------------------------------
JSON_NUL = "\\u0000"  # what a JSON text carries: the escape, six characters, that decodes to NUL


@pytest.mark.postgres
def test_a_json_escaped_nul_in_an_import_is_stored_escaped_and_shown(world):
    """PostgreSQL refuses NUL in text and jsonb; an import used to end in a 500 there."""
    client = world["admin"]
    line = ('{"name": "nul_tool", "description": "before' + JSON_NUL + 'after", "input_schema": {"type": "object", '
            '"properties": {"x' + JSON_NUL + '": {"type": "string", "description": "d' + JSON_NUL + '"}}}}')
    response = client.post(reverse("registry:tool_import"), {"text": line})
    assert response.status_code == 200
    from playground.registry.models import ToolImport

    staged = ToolImport.objects.latest("pk")
    response = client.post(reverse("registry:tool_import_commit", args=[staged.pk]))
    assert response.status_code == 302
    tool = Tool.objects.get(name="nul_tool")
    assert tool.description == "before\\u0000after"
    assert "x\\u0000" in tool.input_schema["properties"]
    page = client.get(reverse("registry:tool_detail", args=[tool.pk])).content.decode()
    assert "before\\u0000after" in page


@pytest.mark.postgres
def test_a_json_escaped_nul_in_a_workbench_call_is_recorded_and_shown(world):
    client = world["admin"]
    tool, server = world["tool"], world["server"]
    prefix = f"t{tool.pk}-"
    response = client.post(reverse("mcp_servers:tool_call", args=[server.pk, tool.pk]), {
        prefix + "mode": "raw", prefix + "timeout": "5", prefix + "raw_arguments": '{"text": "a' + JSON_NUL + 'b"}'})
    assert response.status_code == 200
    record = server.call_records.get()
    assert record.arguments == {"text": "a\\u0000b"}
    history = client.get(reverse("mcp_servers:server_history", args=[server.pk])).content.decode()
    assert "u0000" in history


def test_every_text_and_json_column_stores_a_nul_escaped():
    """One place handles it for every model: save, update and bulk_create alike."""
    from playground.conversations.models import Conversation
    from playground.gateway.models import GatewayEvent, GatewaySession
    from playground.mcp_servers.models import McpCallRecord, McpLogLine

    server = McpServer.objects.create(name="nul", transport="stdio", command="x\x00y", args=["a\x00"], env={"K\x00": "v\x00"})
    server.refresh_from_db()
    assert (server.command, server.args, server.env) == ("x\\u0000y", ["a\\u0000"], {"K\\u0000": "v\\u0000"})
    McpServer.objects.filter(pk=server.pk).update(last_error="err\x00")
    McpLogLine.objects.bulk_create([McpLogLine(server_id=server.pk, source="stderr", text="line\x00")])
    McpCallRecord.objects.create(server=server, kind="tool", name="n\x00", arguments={"a": ["\x00"]}, summary="s\x00")
    assert McpServer.objects.get(pk=server.pk).last_error == "err\\u0000"
    assert McpLogLine.objects.get(server_id=server.pk).text == "line\\u0000"
    record = McpCallRecord.objects.get(server=server)
    assert (record.name, record.arguments, record.summary) == ("n\\u0000", {"a": ["\\u0000"]}, "s\\u0000")
    profile = AgentProfile.objects.create(name="nul profile", system_prompt="p\x00")
    session = GatewaySession.objects.create(session_id="s", profile=profile, client_name="c\x00")
    event = GatewayEvent.objects.create(session=session, sequence=1, type="tool_call", payload={"q\x00": "\x00"})
    assert event.payload == {"q\\u0000": "\\u0000"}  # the saved object matches the row: a live frame shows what a reload shows
    event.refresh_from_db()
    assert event.payload == {"q\\u0000": "\\u0000"}
    assert GatewaySession.objects.get(pk=session.pk).client_name == "c\\u0000"
    assert Conversation._meta.get_field("title").__class__.__name__.startswith("Storable")


def test_mcp_server_form(world):
    client = world["admin"]
    base = {"name": "hostile", "transport": "stdio", "command": "/bin/false", "url": "", "args_text": "",
            "env_text": "", "headers_text": "", "enabled": ""}
    edit = reverse("mcp_servers:server_edit", args=[world["server"].pk])

    @SETTINGS
    @given(values=st.dictionaries(st.sampled_from(["name", "transport", "command", "url", "args_text", "env_text", "headers_text"]),
                                  st.one_of(hostile, st.sampled_from([
                                      "https://u:p@h/v1/key123456789/mcp", "--header\nAuthorization: Bearer x", "A=********",
                                      "Authorization: ********", "http://[::1/mcp", "http", "-p\nx"])), min_size=1, max_size=3))
    def check(values):
        for url in (reverse("mcp_servers:server_create"), edit):
            assert_no_server_error(client.post(url, {**base, **values}), f"server form {values!r:.200}")

    check()
