"""Pages show each role only the links and buttons it may use."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from playground.mcp_servers.models import McpServer
from playground.registry.models import Tool

pytestmark = pytest.mark.django_db


def _client(django_user_model, name: str, role: str) -> Client:
    user = django_user_model.objects.create_user(name)
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def world(db):
    tool = Tool.objects.create(name="echo", description="Return the text", input_schema={"type": "object", "properties": {}})
    server = McpServer.objects.create(name="demo", transport=McpServer.Transport.HTTP, url="http://127.0.0.1:9/mcp")
    return tool, server


NAV = {"conversations:list": "viewer",  # every role watches conversations
       "registry:permissions": "editor", "accounts:users": "admin"}
EDIT_TOOL = 'data-testid="edit-tool"'
ADD_SERVER = 'data-testid="add-server"'


@pytest.mark.parametrize("role", ["viewer", "operator", "editor", "admin"])
def test_links_and_buttons_follow_the_role(django_user_model, world, role):
    tool, _ = world
    client = _client(django_user_model, f"user-{role}", role)
    order = ["viewer", "operator", "editor", "admin"]
    home = client.get(reverse("home")).content.decode()
    for name, needed in NAV.items():
        assert (f'href="{reverse(name)}"' in home) == (order.index(role) >= order.index(needed)), name
    assert f'data-testid="user-role">{role}<' in home
    tool_page = client.get(reverse("registry:tool_detail", args=[tool.pk])).content.decode()
    assert (EDIT_TOOL in tool_page) == (role in ("editor", "admin"))
    servers = client.get(reverse("mcp_servers:server_list")).content.decode()
    assert (ADD_SERVER in servers) == (role == "admin")
