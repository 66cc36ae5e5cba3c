"""The authorisation matrix: every URL pattern and every WebSocket route, requested by every role.

The routes come from the URL resolver (walked recursively) and from `playground/*/routing.py`; what
each may answer comes from the `access_rules` table next to the routes (each app's urls.py and
routing.py, built with `playground.access.allow`). A route with no rule fails here, and so does a rule
for a route that no longer exists. Path parameters are filled from a small world of objects; the
conversation belongs to the operator, so "owned" routes are seen by the operator and the admin and
are a 404 for anyone else.

Outcome classes: ok (2xx, a redirect that is not to the login page, or a 400/409 — the view ran and
refused the empty form), login (302 to the login page), forbidden (403), hidden (404), not_allowed (405).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from urllib.parse import urlparse

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Group
from django.db import transaction
from django.shortcuts import resolve_url
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from playground.access import ADMIN, EDITOR, FORBIDDEN, HIDDEN, LOGIN, NOT_ALLOWED, OK, OPERATOR, ROLES, VIEWER, Rule

PACKAGE = Path(__file__).resolve().parents[1] / "playground"
ROLES_AND_ANONYMOUS = (None, *ROLES)
METHODS = ("GET", "POST")


# -- the routes and their declared rules --------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    name: str  # namespaced: registry:tool_detail
    params: tuple[str, ...]
    rule: Rule | None
    where: str  # the module whose access_rules should hold the rule


def _rules_of(module) -> dict[str, Rule]:
    return getattr(module, "access_rules", {}) if isinstance(module, ModuleType) else {}


def http_routes() -> tuple[list[Route], list[str]]:
    """Every named URL pattern with the rule declared for it, and the declared rules with no route."""
    routes: list[Route] = []
    stale: list[str] = []

    def walk(resolver: URLResolver, namespace: str, inherited: Rule | None) -> None:
        module = resolver.urlconf_module
        rules = _rules_of(module)
        used: set[str] = set()
        where = getattr(module, "__name__", repr(namespace))
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver):
                child_rule = inherited
                if entry.namespace and entry.namespace in rules:
                    child_rule = rules[entry.namespace]
                    used.add(entry.namespace)
                walk(entry, f"{namespace}{entry.namespace}:" if entry.namespace else namespace, child_rule)
                continue
            assert isinstance(entry, URLPattern)
            if inherited is None and not entry.name:
                routes.append(Route(f"{namespace}<unnamed {entry.pattern}>", (), None, where))
                continue
            rule = inherited if inherited is not None else rules.get(entry.name)
            used.add(entry.name)
            routes.append(Route(f"{namespace}{entry.name}", tuple(entry.pattern.converters), rule, where))
        stale.extend(f"{where}: {name}" for name in set(rules) - used)

    walk(get_resolver(), "", None)
    return routes, stale


def socket_routes() -> tuple[list[tuple[str, Rule | None, str]], list[str]]:
    found, stale = [], []
    for path in sorted(PACKAGE.glob("*/routing.py")):
        module = importlib.import_module(f"playground.{path.parent.name}.routing")
        rules = _rules_of(module)
        routes = [str(p.pattern) for p in module.websocket_urlpatterns]
        found.extend((route, rules.get(route), module.__name__) for route in routes)
        stale.extend(f"{module.__name__}: {name}" for name in set(rules) - set(routes))
    return found, stale


HTTP_ROUTES, STALE_HTTP_RULES = http_routes()
SOCKET_ROUTES, STALE_SOCKET_RULES = socket_routes()
CHECKED = [r for r in HTTP_ROUTES if r.rule is not None and not r.rule.delegated]


def test_every_route_declares_who_may_use_it():
    missing = [f"{r.name} (add it to access_rules in {r.where})" for r in HTTP_ROUTES if r.rule is None]
    missing += [f"socket {route} (add it to access_rules in {where})" for route, rule, where in SOCKET_ROUTES if rule is None]
    assert missing == []


def test_no_rule_outlives_its_route():
    assert STALE_HTTP_RULES + STALE_SOCKET_RULES == []


def test_the_walk_finds_the_apps_routes_and_sockets():
    names = {r.name for r in HTTP_ROUTES}
    assert {"home", "registry:tool_detail", "mcp_servers:tool_call", "conversations:answer", "evaluation:index",
            "accounts:set_role", "admin:index"} <= names
    assert {route for route, _, _ in SOCKET_ROUTES} >= {"ws/conversations/<int:pk>/", "ws/mcp/status/"}


# -- the world the requests run in ---------------------------------------------------------------------
@dataclass
class World:
    users: dict[str, object]
    objects: dict[str, dict[str, object]]  # route name → its URL kwargs


def _user(django_user_model, name: str, role: str | None):
    user = django_user_model.objects.create_user(name, f"{name}@example.com", "pw-matrix-123")
    if role is not None:
        user.groups.add(Group.objects.get(name=role))
    return user


def build_world(django_user_model) -> World:
    from playground.agenteval.models import TaskRun, TaskSet
    from playground.conversations import services as conversations
    from playground.conversations import sharing
    from playground.conversations.models import UsageBudget
    from playground.evaluation.models import EvaluationRun
    from playground.gateway.models import GatewayPrompt, GatewaySession
    from playground.gateway.tokens import issue_token
    from playground.mcp_servers.models import McpCallRecord, McpServer, McpServerRequest
    from playground.registry import services as registry
    from playground.registry.models import AgentProfile, PermissionRule, Tool

    users = {
        VIEWER: _user(django_user_model, "vera", VIEWER),
        OPERATOR: _user(django_user_model, "otto", None),  # no group: a plain user is an operator
        EDITOR: _user(django_user_model, "edith", EDITOR),
        ADMIN: _user(django_user_model, "ada", ADMIN),
    }
    target = _user(django_user_model, "tess", None)
    tool = Tool.objects.create(name="echo", description="Return the text", input_schema={"type": "object", "properties": {}})
    profile = AgentProfile.objects.create(name="matrix", tool_search_mode="true", wire_style="native")
    # An HTTP server on a closed port: a connection test fails at once instead of starting anything.
    server = McpServer.objects.create(name="matrix", transport=McpServer.Transport.HTTP, url="http://127.0.0.1:9/mcp")
    server_tool = Tool.objects.create(name="mcp__matrix__ping", description="Ping", server=server,
                                      input_schema={"type": "object", "properties": {}}, source=Tool.Source.MCP)
    server_request = McpServerRequest.objects.create(server=server, kind=McpServerRequest.Kind.SAMPLING,
                                                     params={"messages": [], "maxTokens": 10})
    call_record = McpCallRecord.objects.create(server=server, kind=McpCallRecord.Kind.PING, name="ping")
    rule = PermissionRule.objects.create(pattern="echo", effect="ask")
    staged, _ = registry.stage_import('{"name": "imported_tool", "description": "From an import"}\n', filename="t.jsonl")
    conversation = conversations.start_conversation(users[OPERATOR], profile=profile, compare_group="matrix-group")
    share = sharing.create_link(conversation, user=users[OPERATOR], hours=1)
    replay = conversations.start_conversation(users[OPERATOR], profile=profile)
    type(replay).objects.filter(pk=replay.pk).update(replay_of=conversation, replay_plan={"origin": conversation.pk, "messages": []})
    share_token = sharing.token_for(share)
    run = EvaluationRun.objects.create(toolset="toy", backends=["bm25"], status="done", results={"rows": []})
    task_set = TaskSet.objects.create(name="matrix tasks", source=TaskSet.Source.UPLOAD)
    task_run = TaskRun.objects.create(task_set=task_set, profiles=[{"id": profile.pk, "name": profile.name}], status="done")
    token, _ = issue_token(profile, "matrix client", user=users[ADMIN])
    session = GatewaySession.objects.create(session_id="matrix-session", profile=profile, token=token)
    gateway_prompt = GatewayPrompt.objects.create(session=session, tool_name="echo")
    budget = UsageBudget.objects.create(profile=profile, metric="tokens", period="day", limit=10**9)
    objects = {
        "registry:tool_detail": {"pk": tool.pk}, "registry:tool_edit": {"pk": tool.pk},
        "registry:tool_import_commit": {"pk": staged.pk},
        "registry:rule_row": {"pk": rule.pk}, "registry:rule_edit": {"pk": rule.pk}, "registry:rule_delete": {"pk": rule.pk},
        "registry:profile_detail": {"pk": profile.pk}, "registry:profile_edit": {"pk": profile.pk},
        **{f"mcp_servers:{n}": {"pk": server.pk} for n in (
            "server_detail", "server_edit", "server_delete", "server_test", "server_sync", "server_sync_progress",
            "server_tools", "server_history", "server_ping", "resource_list", "resource_read", "prompt_list", "prompt_get",
            "server_roots", "resource_templates", "resource_template_read", "resource_subscribe", "completion", "server_log_level", "server_export",
            "server_protocol", "server_protocol_export")},
        **{f"mcp_servers:{n}": {"pk": server.pk} for n in ("server_oauth", "server_oauth_connect", "server_oauth_disconnect")},
        "mcp_servers:tool_call": {"pk": server.pk, "tool_pk": server_tool.pk},
        "mcp_servers:tool_body": {"pk": server.pk, "tool_pk": server_tool.pk},
        "mcp_servers:server_request_answer": {"pk": server.pk, "request_pk": server_request.pk},
        "mcp_servers:history_rerun": {"pk": server.pk, "call_pk": call_record.pk},
        **{f"conversations:{n}": {"pk": conversation.pk} for n in (
            "detail", "export", "send", "answer", "cancel", "present", "share_create", "feedback", "feedback_withdraw")},
        "conversations:budget_delete": {"pk": budget.pk},
        "conversations:share_revoke": {"pk": conversation.pk, "link": share.pk},
        "conversations:labelled_set_export": {"profile_id": profile.pk},
        "conversations:replay": {"pk": conversation.pk},
        **{f"conversations:{n}": {"pk": replay.pk} for n in ("replay_view", "replay_figures")},
        "conversations:shared": {"token": share_token}, "conversations:shared_present": {"token": share_token},
        "ws/shared/<str:token>/": {"token": share_token},
        "conversations:compare_view": {"group": "matrix-group"},
        "conversations:compare_figures": {"group": "matrix-group"},
        "evaluation:detail": {"pk": run.pk}, "evaluation:progress": {"pk": run.pk},
        "accounts:set_role": {"pk": target.pk},
        **{f"agenteval:{n}": {"pk": task_set.pk} for n in ("taskset_detail", "taskset_import_catalog")},
        **{f"agenteval:{n}": {"pk": task_run.pk} for n in ("run_detail", "run_cancel", "run_export")},
        "agenteval:save_conversation": {"pk": conversation.pk},
        "ws/agenteval/runs/<int:pk>/": {"pk": task_run.pk},
        "gateway:session_detail": {"pk": session.pk},
        "gateway:session_protocol": {"pk": session.pk}, "gateway:session_protocol_export": {"pk": session.pk},
        "gateway:prompt_answer": {"pk": gateway_prompt.pk}, "gateway:token_revoke": {"pk": token.pk},
        "ws/conversations/<int:pk>/": {"pk": conversation.pk},
        "ws/mcp/status/<int:server_id>/": {"server_id": server.pk},
        "ws/gateway/sessions/<int:pk>/": {"pk": session.pk},
    }
    return World(users, objects)


def outcome(response) -> str:
    status = response.status_code
    if status in (301, 302, 303, 307, 308):
        location = urlparse(response["Location"])
        if location.path == resolve_url(settings.LOGIN_URL) and "next=" in location.query:
            return LOGIN
        return OK
    if status == 403:
        return FORBIDDEN
    if status == 404:
        return HIDDEN
    if status == 405:
        return NOT_ALLOWED
    if 200 <= status < 300 or status in (400, 409):
        return OK
    return f"status {status}"


@pytest.fixture(autouse=True)
def no_background_work(monkeypatch, settings):
    """Nothing leaves the process: queued runs and syncs are dropped (the on_commit hooks of a test
    transaction never fire anyway), and sockets use the in-memory channel layer."""
    from playground.conversations import tasks

    monkeypatch.setattr(tasks.run_conversation_task, "delay", lambda *args, **kwargs: None)
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.mark.django_db
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("route", CHECKED, ids=lambda r: r.name)
def test_each_role_gets_what_the_route_declares(route, method, django_user_model):
    seen, wanted = {}, {}
    world = build_world(django_user_model)  # once a test: it was most of the matrix's time, built for each role
    if route.params and route.name not in world.objects:
        pytest.fail(f"{route.name} takes {route.params}: add its objects to build_world()")
    url = reverse(route.name, kwargs=world.objects.get(route.name) or None)
    for role in ROLES_AND_ANONYMOUS:
        # Each role's request in a savepoint rolled back after: a POST that deletes or changes
        # something (an editor deleting the rule) must not decide what the next role gets.
        with transaction.atomic():
            client = Client()
            user = world.users[role] if role else None
            if user is not None:
                client.force_login(user)
            seen[role or "anonymous"] = outcome(client.generic(method, url))
            wanted[role or "anonymous"] = route.rule.expected(method, role, owner=user is not None and user.pk == world.users[OPERATOR].pk)
            transaction.set_rollback(True)
    wrong = {role: f"got {seen[role]}, declared {sorted(wanted[role])}" for role in seen if seen[role] not in wanted[role]}
    assert wrong == {}, f"{method} {url} ({route.name})"


@pytest.mark.django_db
def test_django_admin_keeps_out_everyone_without_the_staff_flag(django_user_model):
    """The admin site is delegated to Django: none of the role users has is_staff, so none gets in."""
    world = build_world(django_user_model)
    for role in ROLES_AND_ANONYMOUS:
        client = Client()
        if role:
            client.force_login(world.users[role])
        response = client.get(reverse("admin:index"))
        assert response.status_code == 302 and urlparse(response["Location"]).path == reverse("admin:login"), role


# -- sockets ------------------------------------------------------------------------------------------
SOCKET_OUTCOME = {OK: "accepted", LOGIN: 4401, FORBIDDEN: 4403, HIDDEN: 4403}


async def _connect(path: str, user) -> object:
    from playground.routing import websocket_urlpatterns

    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=10)
    assert connected  # refusals accept first, then close with their code (playground.realtime)
    if await communicator.receive_nothing(timeout=0.2):
        result: object = "accepted"
    else:
        message = await communicator.receive_output(timeout=1)
        result = message.get("code") if message["type"] == "websocket.close" else "accepted"
    await communicator.disconnect()
    return result


@pytest.mark.django_db(transaction=True)
def test_each_role_gets_what_each_socket_declares(django_user_model):
    world = build_world(django_user_model)
    owner = world.users[OPERATOR]
    wrong = {}
    for route, rule, _ in SOCKET_ROUTES:
        kwargs = world.objects.get(route, {})
        path = "/" + route
        for key, value in kwargs.items():
            path = path.replace(f"<int:{key}>", str(value)).replace(f"<str:{key}>", str(value))
        assert "<" not in path, f"socket {route}: add its objects to build_world()"
        for role in ROLES_AND_ANONYMOUS:
            user = world.users[role] if role else AnonymousUser()
            if role:
                user = django_user_model.objects.get(pk=user.pk)  # a fresh object: no cached role
            wanted = {SOCKET_OUTCOME[o] for o in rule.expected("CONNECT", role, owner=role is not None and user.pk == owner.pk)}
            got = async_to_sync(_connect)(path, user)
            if got not in wanted:
                wrong[f"{route} as {role or 'anonymous'}"] = f"got {got}, declared {sorted(map(str, wanted))}"
    assert wrong == {}



# -- the secret scan: no role below admin sees a server's credential anywhere (issue 32) ---------------
PATH_TOKEN = "pathtoken7f3a9c2e"
HEADER_ARG_TOKEN = "headerarg-8d1e"
SHORT_FLAG_VALUE = "shortflag-4c2b"
USERINFO_PASSWORD = "userinfo-9a7f"
HEADER_VALUE = "headervalue-3e5d"
ENV_VALUE = "envvalue-6b8c"
FIXTURE_SECRETS = (PATH_TOKEN, HEADER_ARG_TOKEN, SHORT_FLAG_VALUE, USERINFO_PASSWORD, HEADER_VALUE, ENV_VALUE)


def add_secret_servers():
    """The shapes of issue 32: a key in the URL's path, `--header "Authorization: Bearer …"` in
    stdio arguments (the mcp-remote style), a short flag's value, userinfo beside a header; each
    with a failed sync's error naming the server, and a tool."""
    from playground.mcp_servers import services
    from playground.mcp_servers.models import McpServer
    from playground.registry.models import Tool

    servers = [
        McpServer.objects.create(name="pathkey", transport="http", url=f"https://mcp.example.com/v1/{PATH_TOKEN}/mcp"),
        McpServer.objects.create(
            name="remote", transport="stdio", command="/usr/local/bin/npx", env={"AUTH_TOKEN": ENV_VALUE},
            args=["-y", "mcp-remote", f"https://mcp.example.com/{PATH_TOKEN}/sse", "--header",
                  f"Authorization: Bearer {HEADER_ARG_TOKEN}", "-p", SHORT_FLAG_VALUE]),
        McpServer.objects.create(name="both", transport="http", url=f"https://bob:{USERINFO_PASSWORD}@mcp.example.com/mcp",
                                 headers={"Authorization": f"Bearer {HEADER_VALUE}"}),
    ]
    for server in servers:
        Tool.objects.create(name=f"mcp__{server.name}__do", description="Do", server=server, source=Tool.Source.MCP,
                            input_schema={"type": "object", "properties": {}})
        # What a failed connection stores: the error names the server and quotes its own secrets
        # (scrubbed on the way in).
        services.set_status(server, McpServer.Status.FAILED, last_error=(
            f"could not connect to {server.url or ' '.join([server.command, *server.args])}: refused; "
            + " ".join(f"{k}={v}" for k, v in {**server.env, **server.headers}.items())))
    return servers


def assert_no_fixture_secret(text: str, where: str) -> None:
    leaked = [secret for secret in FIXTURE_SECRETS if secret in text]
    assert not leaked, f"{where} shows {leaked}"


@pytest.mark.django_db
def test_no_role_below_admin_sees_a_server_credential_on_any_page_export_or_frame(django_user_model, caplog):
    import logging

    from playground.mcp_servers.status import render_row_fragment, render_status_fragment

    caplog.set_level(logging.DEBUG)
    world = build_world(django_user_model)
    servers = add_secret_servers()
    for role in (VIEWER, OPERATOR, EDITOR, ADMIN):
        client = Client()
        client.force_login(world.users[role])
        for route in CHECKED:
            if route.name.endswith("_edit") and role == ADMIN:
                continue  # the admins' edit form shows the URL and arguments in full: they edit them
            kwargs_list = [world.objects.get(route.name)] if route.params else [None]
            if route.name.startswith("mcp_servers:") and route.params:
                kwargs_list = [{**(world.objects.get(route.name) or {}), "pk": server.pk} for server in servers]
                if "tool_pk" in route.params:
                    continue  # a POST-only call form
            for kwargs in kwargs_list:
                url = reverse(route.name, kwargs=kwargs)
                response = client.get(url)
                if response.status_code == 200 and not getattr(response, "streaming", False):
                    assert_no_fixture_secret(response.content.decode(errors="replace"), f"GET {url} as {role}")
    for server in servers:  # the status frames every open server page gets, whoever watches
        assert_no_fixture_secret(render_row_fragment(server.pk), f"the status row of {server.name}")
        assert_no_fixture_secret(render_status_fragment(server, with_summary=True), f"the status frame of {server.name}")
    assert_no_fixture_secret(caplog.text, "the log")
