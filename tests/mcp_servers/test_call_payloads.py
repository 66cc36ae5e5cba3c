"""A tool call's arguments and structured result are JSON with a copy button beside each."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.mcp_servers import services
from playground.mcp_servers.connection import list_server_tools
from playground.registry.models import Tool

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_stray_processes")]


def test_call_arguments_and_structured_content_can_be_copied(admin_client, stdio_demo_row):
    from tests.mcp_servers.conftest import demo_config

    assert services.apply_listing(stdio_demo_row, *list_server_tools(demo_config())).ok
    tool = Tool.objects.get(name="mcp__demo__add")
    p = f"t{tool.pk}"
    html = admin_client.post(reverse("mcp_servers:tool_call", args=[stdio_demo_row.pk, tool.pk]),
                             {f"{p}-mode": "form", f"{p}-arg__a": "2", f"{p}-arg__b": "40", f"{p}-timeout": "10"},
                             HTTP_HX_REQUEST="true").content.decode()
    assert '<pre class="mono" data-testid="call-arguments">{\n  &quot;a&quot;: 2' in html
    assert html.count("data-copy-button") == 2  # arguments, structured content
