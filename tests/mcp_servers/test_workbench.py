"""The workbench on a server's page, against the project's own demo server over stdio: ping,
resources (list, read: text, image blob, size cap), prompts (list, get with arguments), servers
without resources or prompts, the call history, the live server log (stderr and log messages,
scrubbed) and a status that follows a crash."""
from __future__ import annotations


import pytest
from django.urls import reverse

from playground.mcp_servers import server_log, services
from playground.mcp_servers.connection import MAX_SHOWN_CHARS, list_server_tools
from playground.mcp_servers.executor import call_registered_tool
from playground.mcp_servers.models import McpCallRecord, McpLogLine, McpServer
from playground.mcp_servers.secrets import SECRET_MASK
from playground.mcp_servers.session_pool import session_pool
from playground.mcp_servers.status import render_status_fragment
from playground.mcp_servers.transports import ServerConfig
from tests.mcp_servers.conftest import DEMO_ARGS, demo_config
from tests.polling import wait_until

pytestmark = [pytest.mark.usefixtures("no_stray_processes")]

HTMX = {"HTTP_HX_REQUEST": "true"}


def post(client, name, server, data=None):
    return client.post(reverse(f"mcp_servers:{name}", args=[server.pk]), data or {}, **HTMX)


@pytest.fixture
def tools_only_row(db):
    import sys

    return McpServer.objects.create(name="bare", command=sys.executable, args=DEMO_ARGS, env={"DEMO_SERVER_TOOLS_ONLY": "1"})


@pytest.mark.django_db(transaction=True)
def test_ping_shows_the_round_trip_and_is_kept_in_the_history(admin_client, stdio_demo_row, admin_user):
    html = post(admin_client, "server_ping", stdio_demo_row).content.decode()
    assert 'data-testid="ping-outcome" data-ok="true"' in html and "round trip" in html
    call = McpCallRecord.objects.get(server=stdio_demo_row)
    assert call.kind == "ping" and call.ok and call.user == admin_user and call.duration_ms > 0
    assert 'data-testid="history-row" data-kind="ping"' in html  # the history card is swapped in with the answer
    # The first ping also opened the session (a process start): its row shows the round trip the
    # result shows, not the whole call (before: 1.3 ms on the result, 551.9 ms in the history).
    import re

    shown = float(re.search(r'data-testid="ping-ms">([0-9.]+)<', html).group(1))
    assert abs(call.duration_ms - shown) < 0.1, (call.duration_ms, shown)
    assert 'data-testid="ping-total"' in html and "this ping also opened the session" in html


@pytest.mark.django_db(transaction=True)
def test_resources_are_listed_and_read_safely(admin_client, stdio_demo_row):
    html = post(admin_client, "resource_list", stdio_demo_row).content.decode()
    for uri in ("demo://readme", "demo://cities", "demo://badge.png", "demo://large"):
        assert f'data-uri="{uri}"' in html

    text = post(admin_client, "resource_read", stdio_demo_row, {"uri": "demo://readme"}).content.decode()
    assert 'data-ok="true"' in text and "# playground-demo" in text and "text/markdown" in text

    image = post(admin_client, "resource_read", stdio_demo_row, {"uri": "demo://badge.png"}).content.decode()
    assert 'data-testid="resource-image"' in image and "data:image/png;base64," in image and "binary" in image

    large = post(admin_client, "resource_read", stdio_demo_row, {"uri": "demo://large"}).content.decode()
    assert 'data-testid="resource-cut"' in large and f"first {MAX_SHOWN_CHARS} of 300000 characters" in large
    assert "0123456789" * 10 in large and len(large) < MAX_SHOWN_CHARS + 20_000

    kinds = list(McpCallRecord.objects.filter(server=stdio_demo_row).values_list("kind", "name", "ok"))
    assert ("resource", "demo://readme", True) in kinds and ("list", "resources/list", True) in kinds


@pytest.mark.django_db(transaction=True)
def test_an_unknown_resource_is_an_error_answer_not_a_dead_server(admin_client, stdio_demo_row):
    stdio_demo_row.status = McpServer.Status.CONNECTED
    stdio_demo_row.save()
    html = post(admin_client, "resource_read", stdio_demo_row, {"uri": "demo://nothing"}).content.decode()
    assert 'data-ok="false"' in html and "demo://nothing" in html
    stdio_demo_row.refresh_from_db()
    assert stdio_demo_row.status == McpServer.Status.CONNECTED
    assert not McpCallRecord.objects.get(server=stdio_demo_row, kind="resource").ok


@pytest.mark.django_db(transaction=True)
def test_bad_workbench_input_is_a_400(admin_client, stdio_demo_row):
    assert post(admin_client, "resource_read", stdio_demo_row, {"uri": ""}).status_code == 400
    assert admin_client.post(reverse("mcp_servers:prompt_get", args=[stdio_demo_row.pk]), {"name": ""}).status_code == 400
    bad_declared = {"name": "plan_trip", "declared": "{not json"}
    assert admin_client.post(reverse("mcp_servers:prompt_get", args=[stdio_demo_row.pk]), bad_declared).status_code == 400


@pytest.mark.django_db(transaction=True)
def test_prompts_are_listed_with_a_form_from_their_arguments_and_got_with_them(admin_client, stdio_demo_row):
    html = post(admin_client, "prompt_list", stdio_demo_row).content.decode()
    assert 'data-prompt="plan_trip"' in html
    assert 'name="parg__city"' in html and "required" in html and 'name="parg__days"' in html and "days (optional, text)" in html and "city (required, text)" in html

    declared = '[{"name": "city", "required": true}, {"name": "days", "required": false}]'
    got = post(admin_client, "prompt_get", stdio_demo_row,
               {"name": "plan_trip", "declared": declared, "parg__city": "Tokyo", "parg__days": "3"}).content.decode()
    assert 'data-ok="true"' in got and "Plan a 3-day trip to Tokyo" in got
    call = McpCallRecord.objects.get(server=stdio_demo_row, kind="prompt")
    assert call.arguments == {"city": "Tokyo", "days": "3"} and "Tokyo" in call.summary

    missing = post(admin_client, "prompt_get", stdio_demo_row, {"name": "plan_trip", "declared": declared}).content.decode()
    assert 'data-invalid="true"' in missing and "city" in missing


@pytest.mark.django_db(transaction=True)
def test_a_server_without_resources_or_prompts_says_so_plainly(admin_client, tools_only_row):
    resources = post(admin_client, "resource_list", tools_only_row).content.decode()
    prompts = post(admin_client, "prompt_list", tools_only_row).content.decode()
    assert 'data-testid="resources-unsupported"' in resources and "does not offer resources" in resources
    assert 'data-testid="prompts-unsupported"' in prompts and "error" not in prompts.split("mcp-history")[0].lower()
    assert all(call.ok for call in McpCallRecord.objects.filter(server=tools_only_row))


@pytest.mark.django_db(transaction=True)
def test_the_workbench_and_its_history_are_for_admins(client, django_user_model, stdio_demo_row):
    from django.contrib.auth.models import Group

    viewer = django_user_model.objects.create_user("vera", password="pw-vera-123")
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    page = client.get(reverse("mcp_servers:server_detail", args=[stdio_demo_row.pk])).content.decode()
    assert 'data-testid="workbench-note"' in page and 'data-testid="server-log"' not in page
    assert 'data-testid="call-history"' not in page
    assert post(client, "server_ping", stdio_demo_row).status_code == 403
    assert client.get(reverse("mcp_servers:server_history", args=[stdio_demo_row.pk])).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_stderr_and_log_messages_reach_the_server_log_scrubbed(admin_client):
    import sys

    secret = "s3cr3t-token-value-42"
    server = McpServer.objects.create(name="demo", command=sys.executable, args=DEMO_ARGS, env={"DEMO_TOKEN": secret})
    outcome, _ = call_registered_tool(server, "mcp__demo__echo", {"text": f"the token is {secret}"})
    assert not outcome.is_error
    wait_until(lambda: McpLogLine.objects.filter(server_id=server.pk, source="log:info").exists()
               and McpLogLine.objects.filter(server_id=server.pk, source="stderr", text__contains="echo called").exists(),
               "the call's log message and its stderr line", 20,
               details=lambda: list(McpLogLine.objects.filter(server_id=server.pk).values_list("source", "text")))
    texts = list(McpLogLine.objects.filter(server_id=server.pk).values_list("text", flat=True))
    assert not any(secret in text for text in texts) and any(SECRET_MASK in text for text in texts)
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[server.pk])).content.decode()
    assert 'data-testid="log-line" data-source="stderr"' in page and "echo called with" in page and secret not in page


def log_of(server) -> list[tuple[str, str]]:
    return list(McpLogLine.objects.filter(server_id=server.pk).values_list("source", "text"))


@pytest.mark.django_db(transaction=True)
def test_an_http_servers_log_shows_its_messages_session_and_errors_scrubbed_and_says_it_has_no_stderr(
        admin_client, http_demo_server):
    # No stderr to read over HTTP: the pane shows the log messages the server sends, the connection
    # and its session, and errors — with the URL's and the header's secrets masked like stderr.
    query_secret, header_secret = "q-s3cr3t-value-9876", "h-s3cr3t-value-5432"
    server = McpServer.objects.create(name="demo-http", transport="http", url=f"{http_demo_server.url}?token={query_secret}",
                                      headers={"Authorization": f"Bearer {header_secret}"})
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[server.pk])).content.decode()
    assert 'data-testid="no-stderr-note"' in page and "An HTTP server has no stderr here" in page
    assert 'data-testid="log-empty"' in page and 'data-testid="log-line"' not in page  # the empty pane explains itself

    outcome, _ = call_registered_tool(server, "mcp__demo-http__echo", {"text": f"the header was Bearer {header_secret}"})
    assert not outcome.is_error, outcome.content
    wait_until(lambda: any(source == "log:info" for source, _ in log_of(server)), "the server's log message", 20,
               details=lambda: log_of(server))
    session_pool().close_all()  # the pooled session closes: "disconnected"
    wait_until(lambda: ("session", "disconnected") in log_of(server), "the disconnected line", 20, details=lambda: log_of(server))
    lines = log_of(server)
    sources = [source for source, _ in lines]
    assert "stderr" not in sources
    connected = next(text for source, text in lines if source == "session" and text.startswith("connected to"))
    assert "streamable HTTP: http://127.0.0.1:" in connected and "playground-demo" in connected and "MCP protocol" in connected
    assert any(source == "session" and text.startswith("the server opened session ") for source, text in lines), lines
    assert any(source == "log:info" and "echo: the header was " in text for source, text in lines), lines
    assert sources.index("session") < sources.index("log:info") < len(sources) - 1  # connected, the log, then disconnected
    assert not any(query_secret in text or header_secret in text for _, text in lines), lines
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[server.pk])).content.decode()
    assert 'data-testid="log-line" data-source="session"' in page and 'data-source="log:info"' in page
    assert query_secret not in page and header_secret not in page

    # An endpoint that answers 404: the error status and the failed connection are in the log, scrubbed.
    wrong = McpServer.objects.create(name="wrong", transport="http",
                                     url=http_demo_server.url.replace("/mcp", "/nope") + f"?token={query_secret}")
    outcome, _ = call_registered_tool(wrong, "mcp__wrong__echo", {"text": "hi"})
    assert outcome.is_error
    errors = wait_until(lambda: [text for source, text in log_of(wrong) if source == "error"], "the error lines", 20,
                        details=lambda: log_of(wrong))
    assert any(text.startswith("HTTP 404 Not Found for POST http://127.0.0.1:") for text in errors), errors
    assert any("could not connect" in text for text in errors), errors
    assert not any(query_secret in text for _, text in log_of(wrong))
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[wrong.pk])).content.decode()
    assert 'class="mcp-log-line mcp-log-error" data-testid="log-line" data-source="error"' in page


@pytest.mark.django_db(transaction=True)
def test_the_log_keeps_only_the_newest_lines():
    server = McpServer.objects.create(name="demo", command="x")
    server_log.record(server.pk, [("stderr", f"line {n}") for n in range(server_log.KEEP_LINES + 5)], server)
    kept = list(McpLogLine.objects.filter(server_id=server.pk).values_list("text", flat=True))
    assert len(kept) == server_log.KEEP_LINES and kept[0] == "line 5" and kept[-1] == f"line {server_log.KEEP_LINES + 4}"


@pytest.mark.django_db(transaction=True)
def test_a_crash_marks_the_server_failed_and_a_later_answer_connected_again(stdio_demo_row):
    listing = list_server_tools(demo_config())
    assert services.apply_listing(stdio_demo_row, *listing).ok
    stdio_demo_row.refresh_from_db()
    assert stdio_demo_row.status == McpServer.Status.CONNECTED

    outcome, _ = call_registered_tool(stdio_demo_row, "mcp__demo__crash", {})
    assert outcome.is_error
    stdio_demo_row.refresh_from_db()
    assert stdio_demo_row.status == McpServer.Status.FAILED and "closed the connection" in stdio_demo_row.last_error

    outcome, _ = call_registered_tool(stdio_demo_row, "mcp__demo__echo", {"text": "back"})
    assert not outcome.is_error
    stdio_demo_row.refresh_from_db()
    assert stdio_demo_row.status == McpServer.Status.CONNECTED and stdio_demo_row.last_error == ""


@pytest.mark.django_db(transaction=True)
def test_a_sync_that_changed_the_tools_makes_open_pages_fetch_the_table_again(admin_client, stdio_demo_row):
    assert 'id="mcp-tools-refresh"' not in render_status_fragment(stdio_demo_row, with_summary=True)
    fragment = render_status_fragment(stdio_demo_row, with_summary=True, tools_changed=True)
    url = reverse("mcp_servers:server_tools", args=[stdio_demo_row.pk])
    assert 'id="mcp-tools-refresh"' in fragment and f'hx-get="{url}"' in fragment and 'hx-trigger="load"' in fragment

    listing = list_server_tools(demo_config())
    assert services.apply_listing(stdio_demo_row, *listing).ok
    table = admin_client.get(url).content.decode()
    assert f"Tools ({len(listing[0])})" in table and 'data-testid="call-tool"' in table and "(admins only)" not in table


@pytest.mark.django_db(transaction=True)
def test_a_page_opened_while_the_first_sync_runs_follows_it(admin_client, stdio_demo_row):
    assert stdio_demo_row.status == McpServer.Status.PENDING
    page = admin_client.get(reverse("mcp_servers:server_detail", args=[stdio_demo_row.pk])).content.decode()
    assert reverse("mcp_servers:server_sync_progress", args=[stdio_demo_row.pk]) in page


def test_pooled_operations_answer_through_one_session(no_stray_processes):
    config = demo_config()
    pool = session_pool()

    async def everything(connection):
        return (connection.capabilities, await connection.list_resources(), await connection.list_prompts(),
                await connection.read_resource("demo://cities"), await connection.timed_ping())

    capabilities, resources, prompts, contents, ping_ms = pool.run("workbench-test", config, everything)
    assert capabilities["resources"] and capabilities["prompts"]
    assert {r["uri"] for r in resources} >= {"demo://readme", "demo://badge.png"}
    assert [p["name"] for p in prompts] == ["plan_trip"] and prompts[0]["arguments"][0]["name"] == "city"
    assert '"tokyo": "Asia/Tokyo"' in contents[0]["text"] and ping_ms > 0
    assert pool.open_count() == 1
    bare = ServerConfig(name="bare", transport="stdio", command=config.command, args=config.args, env={"DEMO_SERVER_TOOLS_ONLY": "1"})
    assert pool.run("workbench-bare", bare, lambda c: _caps(c)) == {"resources": False, "subscribe": False, "prompts": False,
                                                                  "logging": False, "completions": False}


async def _caps(connection):
    return connection.capabilities


def test_an_unexpected_error_answers_with_a_reference_the_log_carries(admin_client, stdio_demo_row, monkeypatch, caplog):
    """Never database or stack text: a generic message whose reference finds the log line."""
    import logging
    import re

    from playground.mcp_servers import views

    class Broken:
        def run(self, *args, **kwargs):
            raise RuntimeError('relation "mcp_servers_secret" does not exist: SELECT token FROM mcp_servers_secret')

    monkeypatch.setattr(views, "workbench_pool", lambda: Broken())
    caplog.set_level(logging.ERROR)
    response = post(admin_client, "server_ping", stdio_demo_row)
    text = response.content.decode()
    assert response.status_code == 500 and "SELECT" not in text and "RuntimeError" not in text
    reference = re.search(r"reference ([0-9a-f]{12})", text)
    assert reference, text
    logged = [r for r in caplog.records if reference.group(1) in r.getMessage()]
    assert logged and logged[0].exc_info and "SELECT token" in str(logged[0].exc_info[1])


def test_the_gateway_answers_an_unexpected_error_with_a_reference(caplog):
    import logging

    from playground.gateway.server import _unexpected

    caplog.set_level(logging.ERROR)
    error = _unexpected("tools/call", ValueError('duplicate key value violates unique constraint "gateway_x"'))
    assert "duplicate key" not in error.error.message and "reference" in error.error.message
    reference = error.error.message.split("reference ")[1].split(")")[0]
    assert any(reference in r.getMessage() and "duplicate key" in str(r.exc_info[1]) for r in caplog.records)
