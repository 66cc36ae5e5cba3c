"""Credentials in an MCP server's URL, arguments, env, headers and error output stay off pages,
status frames, stored errors and logs; a stored secret does not follow a changed URL or command."""
from __future__ import annotations

import logging
import re
import socket
import sys
from html import unescape
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from playground.mcp_servers import services
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.secrets import SECRET_MASK, known_secrets, mask_args, mask_url, scrub, scrub_for
from playground.mcp_servers.tasks import sync_server_task
from playground.mcp_servers.transports import ServerConfig

ENV_SECRET = "envsecret-4411"
ARG_SECRET = "argsecret-7722"
FLAG_SECRET = "flagsecret-9933"
URL_PASSWORD = "urlpass-5566"
QUERY_SECRET = "querysecret-8877"
HEADER_SECRET = "hdrsecret-1199"
SECRETS = [ENV_SECRET, ARG_SECRET, FLAG_SECRET, URL_PASSWORD, QUERY_SECRET, HEADER_SECRET]

# A "server" that prints its secrets to stderr and exits before initializing.
LEAKY_SCRIPT = "import os, sys; sys.stderr.write('starting with ' + ' '.join(sys.argv) + ' key=' + os.environ['API_TOKEN'] + '\\n'); sys.exit(3)"


def assert_clean(text: str, where: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"{where} shows {leaked}: {text[:2000]}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def leaky_stdio(db):
    return McpServer.objects.create(
        name="leaky", transport="stdio", command=sys.executable,
        args=["-c", LEAKY_SCRIPT, f"--token={ARG_SECRET}", "--api-key", FLAG_SECRET, "--verbose"],
        env={"API_TOKEN": ENV_SECRET},
    )


@pytest.fixture
def leaky_http(db):
    return McpServer.objects.create(
        name="leakyweb", transport="http",
        url=f"http://bob:{URL_PASSWORD}@127.0.0.1:{free_port()}/mcp?api_key={QUERY_SECRET}&region=eu",
        headers={"Authorization": f"Bearer {HEADER_SECRET}"},
    )


def location(html: str) -> str:
    """The server's location as its detail page shows it (command line or URL)."""
    match = re.search(r'data-testid="server-location">(.*?)</dd>', html, re.DOTALL)
    assert match, "no server location on the page"
    return unescape(match.group(1)).strip()


def viewer(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- the functions ------------------------------------------------------------------------------

def test_mask_url_hides_userinfo_and_every_query_value():
    assert mask_url("https://user:pa%40ss@mcp.example.com:8443/mcp?api_key=abc&region=eu") == \
        f"https://{SECRET_MASK}:{SECRET_MASK}@mcp.example.com:8443/mcp?api_key={SECRET_MASK}&region={SECRET_MASK}"
    assert mask_url("https://TOKEN123@mcp.example.com/mcp") == f"https://{SECRET_MASK}@mcp.example.com/mcp"
    assert mask_url("http://127.0.0.1:8765/mcp") == "http://127.0.0.1:8765/mcp"
    assert mask_url("http://[::1/mcp") == f"http://{SECRET_MASK}"  # unparseable: all of it


def test_mask_args_hides_the_values_of_secret_flags():
    args = ["-m", "server", "--token=abc1234", "--api-key", "xyz98765", "--port", "8080", "--verbose",
            "GITHUB_TOKEN=ghx", "--password", "--debug", "ghp_abcdefghijklmnopqrstuvwxyz0123", "/usr/lib/python3/dist-packages",
            "http://u:p4ss@host/x?k=v"]
    assert mask_args(args) == ["-m", "server", f"--token={SECRET_MASK}", "--api-key", SECRET_MASK, "--port", "8080", "--verbose",
                               f"GITHUB_TOKEN={SECRET_MASK}", "--password", "--debug", SECRET_MASK, "/usr/lib/python3/dist-packages",
                               f"http://{SECRET_MASK}:{SECRET_MASK}@host/x?k={SECRET_MASK}"]


def test_scrub_replaces_known_secrets_and_secret_looking_values():
    server = ServerConfig(name="x", transport="http", url=f"https://bob:{URL_PASSWORD}@h/mcp?api_key={QUERY_SECRET}",
                          headers={"Authorization": f"Bearer {HEADER_SECRET}"}, env={"API_TOKEN": ENV_SECRET, "SHORT": "1"},
                          args=("--token", ARG_SECRET))
    assert set(SECRETS) - {FLAG_SECRET} <= set(known_secrets(server))
    text = (f"401 for https://bob:{URL_PASSWORD}@h/mcp?api_key={QUERY_SECRET}; sent {HEADER_SECRET}, env {ENV_SECRET}, "
            f"arg {ARG_SECRET}; --password hunter2x password=zz99zz Authorization: Bearer abc123xyz; the token expired; KeyError: 1")
    scrubbed = scrub_for(server, text)
    assert_clean(scrubbed, "scrub")
    assert "hunter2x" not in scrubbed and "zz99zz" not in scrubbed and "abc123xyz" not in scrubbed
    assert "the token expired" in scrubbed and "KeyError: 1" in scrubbed  # prose stays readable
    assert scrub("") == "" and scrub("nothing secret here") == "nothing secret here"


# --- pages, stored errors, logs -----------------------------------------------------------------

@pytest.mark.usefixtures("no_stray_processes")
def test_a_failed_stdio_sync_stores_and_shows_no_secret(leaky_stdio, viewer_user, admin_user, caplog):
    caplog.set_level(logging.DEBUG)
    result = sync_server_task.run(leaky_stdio.pk)  # what the worker runs, and what Celery logs as the task's result
    assert not result["ok"] and "server stderr" in result["error"] and SECRET_MASK in result["error"]
    assert_clean(repr(result), "the task result")
    leaky_stdio.refresh_from_db()
    assert leaky_stdio.status == McpServer.Status.FAILED
    assert_clean(leaky_stdio.last_error, "the stored last_error")
    assert_clean(repr(leaky_stdio.last_sync_result), "the stored sync result")
    client = viewer(viewer_user)
    for url in (reverse("mcp_servers:server_list"), reverse("mcp_servers:server_detail", args=[leaky_stdio.pk]),
                reverse("mcp_servers:server_sync_progress", args=[leaky_stdio.pk])):
        html = client.get(url).content.decode()
        assert_clean(html, url)
    # A viewer sees the program's name, not its arguments; an admin the arguments, masked.
    viewer_page = client.get(reverse("mcp_servers:server_detail", args=[leaky_stdio.pk])).content.decode()
    assert location(viewer_page) == Path(sys.executable).name
    admin_page = viewer(admin_user).get(reverse("mcp_servers:server_detail", args=[leaky_stdio.pk])).content.decode()
    assert "--api-key" in location(admin_page)
    assert_clean(admin_page, "the admin's detail page")
    assert_clean(caplog.text, "the log")


def test_a_failed_http_sync_stores_and_shows_no_secret(leaky_http, viewer_user, admin_user, caplog):
    caplog.set_level(logging.DEBUG)
    result = services.sync_server(leaky_http, timeout=5)
    assert not result.ok and "could not connect" in result.error
    leaky_http.refresh_from_db()
    assert_clean(leaky_http.last_error + repr(leaky_http.last_sync_result), "the stored error")
    for client in (viewer(viewer_user), viewer(admin_user)):
        for url in (reverse("mcp_servers:server_list"), reverse("mcp_servers:server_detail", args=[leaky_http.pk]),
                    reverse("mcp_servers:server_sync_progress", args=[leaky_http.pk])):
            html = client.get(url).content.decode()
            assert_clean(html, url)
        assert "127.0.0.1" in client.get(reverse("mcp_servers:server_detail", args=[leaky_http.pk])).content.decode()
    test = viewer(admin_user).post(reverse("mcp_servers:server_test", args=[leaky_http.pk]), HTTP_HX_REQUEST="true")
    assert "Connection failed" in test.content.decode()
    assert_clean(test.content.decode(), "the test-connection result")
    assert_clean(caplog.text, "the log")


def test_an_error_stored_before_scrubbing_is_scrubbed_when_shown(leaky_http, viewer_user):
    McpServer.objects.filter(pk=leaky_http.pk).update(
        status="failed", last_error=f"401: Bearer {HEADER_SECRET} rejected at {leaky_http.url}",
        last_sync_result={"ok": False, "error": f"401 for {leaky_http.url}"},
    )
    client = viewer(viewer_user)
    for url in (reverse("mcp_servers:server_detail", args=[leaky_http.pk]), reverse("mcp_servers:server_sync_progress", args=[leaky_http.pk])):
        html = client.get(url).content.decode()
        assert "401" in html
        assert_clean(html, url)


def test_set_status_scrubs_the_error_it_stores(leaky_http):
    services.set_status(leaky_http, McpServer.Status.FAILED, last_error=f"refused {HEADER_SECRET} at {leaky_http.url}")
    leaky_http.refresh_from_db()
    assert leaky_http.last_error.startswith("refused ") and SECRET_MASK in leaky_http.last_error
    assert_clean(leaky_http.last_error, "last_error")


# --- a stored secret does not follow a changed destination --------------------------------------

def edit_data(server: McpServer, **changes) -> dict:
    data = {"name": server.name, "transport": server.transport, "command": server.command, "url": server.url,
            "args_text": "\n".join(server.args), "env_text": "\n".join(f"{k}={SECRET_MASK}" for k in server.env),
            "headers_text": "\n".join(f"{k}: {SECRET_MASK}" for k in server.headers), "enabled": "on"}
    data.update(changes)
    return data


def test_a_masked_header_is_refused_when_the_url_changes(admin_client, leaky_http):
    url = reverse("mcp_servers:server_edit", args=[leaky_http.pk])
    response = admin_client.post(url, edit_data(leaky_http, url="https://elsewhere.example.net/mcp"))
    assert response.status_code == 200
    assert "The URL changed: enter the value of Authorization again" in response.content.decode()
    leaky_http.refresh_from_db()
    assert leaky_http.url.startswith("http://bob:")  # nothing saved
    # Re-entered: saved, with the new value.
    response = admin_client.post(url, edit_data(leaky_http, url="https://elsewhere.example.net/mcp", headers_text="Authorization: Bearer new-1"))
    assert response.status_code == 302
    leaky_http.refresh_from_db()
    assert leaky_http.url == "https://elsewhere.example.net/mcp" and leaky_http.headers == {"Authorization": "Bearer new-1"}


def test_a_masked_header_is_kept_while_the_url_stays(admin_client, leaky_http):
    response = admin_client.post(reverse("mcp_servers:server_edit", args=[leaky_http.pk]), edit_data(leaky_http, name="renamed"))
    assert response.status_code == 302
    leaky_http.refresh_from_db()
    assert leaky_http.headers == {"Authorization": f"Bearer {HEADER_SECRET}"} and leaky_http.name == "renamed"


def test_a_masked_env_value_is_refused_when_the_command_changes(admin_client, leaky_stdio):
    url = reverse("mcp_servers:server_edit", args=[leaky_stdio.pk])
    response = admin_client.post(url, edit_data(leaky_stdio, command="/usr/bin/other-server"))
    assert response.status_code == 200 and "The command changed: enter the value of API_TOKEN again" in response.content.decode()
    leaky_stdio.refresh_from_db()
    assert leaky_stdio.command == sys.executable


# --- status frames pushed to every open page -----------------------------------------------------

@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_status_frames_to_a_plain_user_carry_no_secret(django_user_model, caplog):
    from channels.db import database_sync_to_async

    from tests.conftest import require_service
    from tests.mcp_servers.test_status_push import connect, redis_answers

    require_service(redis_answers(), "Redis (channel layer)")
    caplog.set_level(logging.DEBUG)
    user = await database_sync_to_async(django_user_model.objects.create_user)("dave", password="pw-dave-12345")
    server = await database_sync_to_async(McpServer.objects.create)(
        name="leakyweb", transport="http", url=f"http://bob:{URL_PASSWORD}@127.0.0.1:{free_port()}/mcp?api_key={QUERY_SECRET}",
        headers={"Authorization": f"Bearer {HEADER_SECRET}"},
    )
    listing = await connect(user)
    detail = await connect(user, f"/ws/mcp/status/{server.pk}/")
    assert (await listing.connect(timeout=5))[0] and (await detail.connect(timeout=5))[0]
    try:
        result = await database_sync_to_async(services.sync_server, thread_sensitive=False)(server, timeout=5)
        assert not result.ok
        frames = [await listing.receive_from(timeout=30), await listing.receive_from(timeout=30),
                  await detail.receive_from(timeout=30), await detail.receive_from(timeout=30)]
    finally:
        await listing.disconnect()
        await detail.disconnect()
    assert 'data-status="failed"' in frames[1] and 'data-status="failed"' in frames[3]
    assert "could not connect" in frames[3] and "127.0.0.1" in frames[1]  # the error and the (masked) URL are shown
    for frame in frames:
        assert_clean(frame, "a status frame")
    assert_clean(caplog.text, "the log")


# --- masking by position (issue 32): path keys, --header values, short flags, userinfo + header ---

PATH_KEY = "pathkey8d7f6e5a"
HEADER_ARG_SECRET = "hdrarg-3141"
SHORT_FLAG_SECRET = "shortflag-2718"
USERINFO_SECRET = "userinfo-1618"
POSITION_SECRETS = [PATH_KEY, HEADER_ARG_SECRET, SHORT_FLAG_SECRET, USERINFO_SECRET]


def assert_no_position_secret(text: str, where: str) -> None:
    leaked = [s for s in POSITION_SECRETS if s in text]
    assert not leaked, f"{where} shows {leaked}: {text[:2000]}"


@pytest.fixture
def position_servers(db):
    """The shapes masking by name missed: a key in the URL's path, the mcp-remote style
    `--header "Authorization: Bearer …"`, a short flag's value, and userinfo beside a header."""
    path_key = McpServer.objects.create(name="pathkey", transport="http",
                                        url=f"https://mcp.example.com/v1/{PATH_KEY}/mcp")
    remote = McpServer.objects.create(
        name="remote", transport="stdio", command="/usr/local/bin/npx",
        args=["-y", "mcp-remote", f"https://mcp.example.com/{PATH_KEY}/sse", "--header", f"Authorization: Bearer {HEADER_ARG_SECRET}",
              "-p", SHORT_FLAG_SECRET],
    )
    both = McpServer.objects.create(name="both", transport="http",
                                    url=f"https://bob:{USERINFO_SECRET}@mcp.example.com/mcp",
                                    headers={"Authorization": f"Bearer {HEADER_SECRET}"})
    return path_key, remote, both


def test_mask_args_goes_by_position():
    args = ["-y", "mcp-remote", f"https://h.example/{PATH_KEY}/sse", "--header", f"Authorization: Bearer {HEADER_ARG_SECRET}",
            f"--header=X-Api-Key:{HEADER_ARG_SECRET}", "-H", "Cookie: a=b", "-p", SHORT_FLAG_SECRET, "-u", "bob:pw",
            "-m", "module", "--port", "8080"]
    assert mask_args(args) == [
        "-y", "mcp-remote", f"https://h.example/{SECRET_MASK}/sse", "--header", f"Authorization: {SECRET_MASK}",
        f"--header=X-Api-Key: {SECRET_MASK}", "-H", f"Cookie: {SECRET_MASK}", "-p", SECRET_MASK, "-u", SECRET_MASK,
        "-m", "module", "--port", "8080"]
    config = ServerConfig(name="r", transport="stdio", command="npx", args=tuple(args))
    assert {PATH_KEY, HEADER_ARG_SECRET, f"Bearer {HEADER_ARG_SECRET}", SHORT_FLAG_SECRET, "bob:pw"} <= set(known_secrets(config))


def test_mask_url_masks_path_keys_and_keeps_plain_segments():
    assert mask_url(f"https://mcp.example.com/v1/{PATH_KEY}/mcp") == f"https://mcp.example.com/v1/{SECRET_MASK}/mcp"
    assert mask_url("http://127.0.0.1:8000/gateway/mcp/1/") == "http://127.0.0.1:8000/gateway/mcp/1/"
    assert mask_url("https://server.smithery.ai/@acme/weather/mcp") == "https://server.smithery.ai/@acme/weather/mcp"
    assert mask_url("https://h.example/0f3c9a77-1b2c-4d5e-8f90-123456789abc/sse") == f"https://h.example/{SECRET_MASK}/sse"


def test_viewers_get_the_program_name_and_the_scheme_and_host():
    from playground.mcp_servers.secrets import command_basename, viewer_url

    assert viewer_url(f"https://bob:{USERINFO_SECRET}@mcp.example.com:8443/v1/{PATH_KEY}/mcp?k=v") == \
        f"https://mcp.example.com:8443/{SECRET_MASK}"
    assert viewer_url("http://127.0.0.1:8765") == "http://127.0.0.1:8765"
    assert command_basename("/usr/local/bin/npx") == "npx" and command_basename("python") == "python"


def test_only_secret_env_values_are_masked_in_free_text():
    config = ServerConfig(name="x", transport="stdio", command="python", env={
        "PYTHONPATH": "/srv/app/lib", "PORT": "8080", "API_TOKEN": ENV_SECRET, "GREETING": "sk-abcdefghijklmnopqrstu",
        "DATABASE_URL": f"postgres://bob:{URL_PASSWORD}@db/x"})
    secrets_known = known_secrets(config)
    assert "/srv/app/lib" not in secrets_known and "8080" not in secrets_known
    assert {ENV_SECRET, "sk-abcdefghijklmnopqrstu", URL_PASSWORD} <= set(secrets_known)
    scrubbed = scrub_for(config, f"ImportError: no module in /srv/app/lib (port 8080), token {ENV_SECRET}")
    assert "/srv/app/lib" in scrubbed and "8080" in scrubbed and ENV_SECRET not in scrubbed


def test_viewers_see_no_position_secret_on_any_server_page(position_servers, viewer_user, admin_user):
    path_key, remote, both = position_servers
    for user in (viewer_user, admin_user):
        client = viewer(user)
        pages = [reverse("mcp_servers:server_list")]
        for server in position_servers:
            pages += [reverse("mcp_servers:server_detail", args=[server.pk]),
                      reverse("mcp_servers:server_sync_progress", args=[server.pk]),
                      reverse("mcp_servers:server_tools", args=[server.pk])]
        for url in pages:
            html = client.get(url).content.decode()
            assert_no_position_secret(html, f"{url} for {user.username}")
            assert HEADER_SECRET not in html
    viewer_detail = viewer(viewer_user).get(reverse("mcp_servers:server_detail", args=[remote.pk])).content.decode()
    assert location(viewer_detail) == "npx"
    viewer_http = viewer(viewer_user).get(reverse("mcp_servers:server_detail", args=[path_key.pk])).content.decode()
    assert location(viewer_http) == f"https://mcp.example.com/{SECRET_MASK}"
    admin_detail = viewer(admin_user).get(reverse("mcp_servers:server_detail", args=[remote.pk])).content.decode()
    assert "mcp-remote" in location(admin_detail) and "Authorization: " + SECRET_MASK in location(admin_detail)
    listing = viewer(viewer_user).get(reverse("mcp_servers:server_list")).content.decode()
    assert "mcp-remote" not in listing and f"https://mcp.example.com/{SECRET_MASK}" in listing


def test_the_log_line_of_an_http_request_carries_no_path_key(caplog):
    """httpx2 (the MCP SDK's HTTP client) logs every request's URL (`HTTP Request: POST https://…`); the log filter masks its path key."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    import httpx2

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass  # the test server's own access log is not the one under test

    server = HTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    caplog.set_level(logging.INFO, logger="httpx2")
    try:
        httpx2.get(f"http://127.0.0.1:{server.server_port}/v1/{PATH_KEY}/mcp", timeout=5)
    finally:
        server.shutdown()
    assert "HTTP Request: GET" in caplog.text
    assert PATH_KEY not in caplog.text and f"/v1/{SECRET_MASK}/mcp" in caplog.text


@pytest.mark.usefixtures("no_stray_processes")
def test_a_failed_sync_of_position_servers_stores_no_secret(position_servers, caplog):
    caplog.set_level(logging.DEBUG)
    _, remote, both = position_servers
    for server in (remote, both):
        McpServer.objects.filter(pk=server.pk).update(command=sys.executable if server.transport == "stdio" else "")
        server.refresh_from_db()
        result = services.sync_server(server, timeout=5)
        assert not result.ok
        server.refresh_from_db()
        assert_no_position_secret(server.last_error + repr(server.last_sync_result), "the stored error")
    assert_no_position_secret(caplog.text, "the log")


def test_a_masked_env_value_does_not_follow_an_arguments_only_change(admin_client, leaky_stdio):
    """With an interpreter as the command, new arguments are a new program."""
    url = reverse("mcp_servers:server_edit", args=[leaky_stdio.pk])
    response = admin_client.post(url, edit_data(leaky_stdio, args_text="-c\nimport os; print(os.environ['API_TOKEN'])"))
    assert response.status_code == 200
    assert "The arguments changed: enter the value of API_TOKEN again" in response.content.decode()
    leaky_stdio.refresh_from_db()
    assert "--verbose" in leaky_stdio.args  # nothing saved
    response = admin_client.post(url, edit_data(leaky_stdio, args_text="-c\nprint(1)", env_text="API_TOKEN=typed-again-1"))
    assert response.status_code == 302
    leaky_stdio.refresh_from_db()
    assert leaky_stdio.env == {"API_TOKEN": "typed-again-1"}


def test_a_masked_header_does_not_follow_a_transport_change(admin_client, leaky_http):
    url = reverse("mcp_servers:server_edit", args=[leaky_http.pk])
    response = admin_client.post(url, edit_data(leaky_http, transport="stdio", command=sys.executable))
    assert response.status_code == 200
    assert "The transport and command changed: enter the value of Authorization again" in response.content.decode()


def test_a_configured_authorization_header_wins_over_url_userinfo():
    """The HTTP client would replace the header with Basic auth built from the URL's userinfo."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from playground.mcp_servers.connection import McpConnectionError, check_connection

    received: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(self.headers.get("Authorization", ""))
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass  # the test server's own access log is not the one under test

    server = HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = ServerConfig(name="both", transport="http", url=f"http://bob:{USERINFO_SECRET}@127.0.0.1:{server.server_port}/mcp",
                          headers={"Authorization": f"Bearer {HEADER_SECRET}"})
    try:
        with pytest.raises(McpConnectionError):
            check_connection(config, timeout=5)
    finally:
        server.shutdown()
    assert received and set(received) == {f"Bearer {HEADER_SECRET}"}


def test_a_record_is_scrubbed_once_though_its_logger_and_the_handler_both_filter_it(monkeypatch):
    # settings.LOGGING puts the filter on the HTTP and MCP clients' loggers and on the console handler:
    # a client's record met both, and was scrubbed twice (every model request logs one).
    from playground.mcp_servers import secrets

    scrubbed: list[str] = []
    real = secrets.scrub
    monkeypatch.setattr(secrets, "scrub", lambda text, known=(): scrubbed.append(text) or real(text, known))
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: POST %s", ("https://host/v1/abcdefghijklmnop1234/mcp",), None)
    assert secrets.ScrubLogFilter().filter(record) and secrets.ScrubLogFilter().filter(record)
    assert len(scrubbed) == 1 and "abcdefghijklmnop1234" not in record.getMessage()
