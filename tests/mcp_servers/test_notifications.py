"""The workbench's notifications pane, against the demo server: a call's progress (the workbench
session asks for it), a tool list that changed, and log messages are kept and shown in the pane
(pushed live over the server's socket, listed on load); stderr and connection events are not."""
from __future__ import annotations

import pytest
from django.urls import reverse

from playground.mcp_servers import server_log, services
from playground.mcp_servers.connection import list_server_tools
from playground.mcp_servers.models import McpLogLine
from playground.registry.models import Tool
from tests.mcp_servers.conftest import demo_config
from tests.polling import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_stray_processes")]

HTMX = {"HTTP_HX_REQUEST": "true"}


def call(client, server, tool_name, **arguments):
    tool = Tool.objects.get(name=tool_name)
    data = {f"t{tool.pk}-mode": "form", f"t{tool.pk}-timeout": "20"}
    data.update({f"t{tool.pk}-arg__{key}": value for key, value in arguments.items()})
    return client.post(reverse("mcp_servers:tool_call", args=[server.pk, tool.pk]), data, **HTMX).content.decode()


def texts(server):
    return [line.text for line in McpLogLine.objects.filter(server_id=server.pk, source="notification").order_by("id")]


def test_progress_list_changed_and_log_messages_reach_the_notifications_pane(admin_client, stdio_demo_row):
    assert services.apply_listing(stdio_demo_row, *list_server_tools(demo_config())).ok
    assert "done after 3 steps" in call(admin_client, stdio_demo_row, "mcp__demo__long_task", steps="3")
    wait_until(lambda: [t for t in texts(stdio_demo_row) if "progress" in t] == [
        "notifications/progress 1/3: step 1 of 3", "notifications/progress 2/3: step 2 of 3", "notifications/progress 3/3: step 3 of 3"],
        "three progress notifications, in order", timeout=20, details=lambda: texts(stdio_demo_row))

    assert "added extra_tool" in call(admin_client, stdio_demo_row, "mcp__demo__toggle_extra_tool")
    wait_until(lambda: "notifications/tools/list_changed" in texts(stdio_demo_row), "the list_changed notification", timeout=20)
    call(admin_client, stdio_demo_row, "mcp__demo__echo", text="pane check")
    wait_until(lambda: McpLogLine.objects.filter(server_id=stdio_demo_row.pk, source="log:info", text__contains="pane check").exists(),
               "the echo's log message", timeout=20)

    page = admin_client.get(reverse("mcp_servers:server_detail", args=[stdio_demo_row.pk])).content.decode()
    pane = page.split('data-testid="notifications"')[1].split("</div></div>")[0]
    assert "notifications/progress 3/3" in pane and "notifications/tools/list_changed" in pane and "echo: pane check" in pane
    assert "echo called with" not in pane and "connected to stdio" not in pane  # stderr and session lines stay in the log


def test_only_notifications_count_for_the_pane():
    assert server_log.is_notification("notification") and server_log.is_notification("log:warning")
    assert not any(server_log.is_notification(source) for source in ("stderr", "session", "error"))
