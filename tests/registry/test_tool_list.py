from __future__ import annotations

import pytest
from django.urls import reverse

from playground.registry.models import Tool

from .conftest import bulk_tools

pytestmark = pytest.mark.django_db
URL = reverse("registry:tool_list")


def test_it_requires_login(client):
    response = client.get(URL)
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


def test_viewer_sees_the_list_without_bulk_controls(viewer_client, tools):
    response = viewer_client.get(URL)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'data-tool="mcp__github__create_issue"' in body
    assert 'data-testid="bulk-apply"' not in body
    assert 'data-testid="new-tool"' not in body


def test_staff_sees_bulk_controls(admin_client, tools):
    body = admin_client.get(URL).content.decode()
    assert 'data-testid="bulk-apply"' in body


def test_it_shows_token_cost_per_tool_and_in_total(admin_client, tools):
    response = admin_client.get(URL)
    expected_total = sum(t.token_estimate for t in Tool.objects.all())
    assert response.context["totals"] == {"count": 7, "tokens": expected_total}
    assert f'data-tokens="{expected_total}"' in response.content.decode()


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"deferred": "yes"}, {"mcp__github__create_issue", "mcp__github__list_issues", "mcp__github__delete_repo",
                               "mcp__slack__post_message", "mcp__slack__list_channels"}),
        ({"deferred": "no"}, {"Read", "Write"}),
        ({"always_load": "yes"}, {"Read"}),
        ({"server": "slack"}, {"mcp__slack__post_message", "mcp__slack__list_channels"}),
        ({"source": "builtin"}, {"Read", "Write"}),
        ({"enabled": "no"}, {"mcp__slack__list_channels"}),
        ({"q": "issue"}, {"mcp__github__create_issue", "mcp__github__list_issues"}),
        ({"q": "slack channels", "enabled": "yes"}, set()),
        ({"q": "Slack", "enabled": "yes"}, {"mcp__slack__post_message"}),
    ],
)
def test_filters(admin_client, tools, params, expected):
    response = admin_client.get(URL, params)
    assert {t.name for t in response.context["page"].object_list} == expected


def test_htmx_filtering_returns_only_the_table(admin_client, tools):
    response = admin_client.get(URL, {"q": "github"}, headers={"HX-Request": "true", "HX-Target": "tool-table"})
    body = response.content.decode()
    assert 'data-testid="tool-table"' in body
    assert "<html" not in body
    assert 'data-result-count="3"' in body


def test_it_paginates(admin_client):
    bulk_tools(120)
    response = admin_client.get(URL, {"page": 3})
    page = response.context["page"]
    assert page.number == 3 and len(page.object_list) == 20
    assert 'data-testid="pager"' in response.content.decode()


def test_the_query_count_does_not_grow_with_the_number_of_tools(admin_client, django_assert_max_num_queries):
    bulk_tools(10, server="small")
    with django_assert_max_num_queries(12) as small:
        admin_client.get(URL)
    bulk_tools(300, server="large")
    with django_assert_max_num_queries(12) as large:
        admin_client.get(URL)
    assert len(large.captured_queries) == len(small.captured_queries)


def test_staff_bulk_disables_and_defers(admin_client, tools):
    ids = list(Tool.objects.filter(name__in=["Write", "mcp__github__list_issues"]).values_list("pk", flat=True))
    response = admin_client.post(reverse("registry:tool_bulk"), {"action": "disable", "ids": ids})
    assert response.status_code == 302
    assert set(Tool.objects.filter(enabled=False).values_list("name", flat=True)) == {
        "Write", "mcp__github__list_issues", "mcp__slack__list_channels"}
    write = Tool.objects.get(name="Write")
    admin_client.post(reverse("registry:tool_bulk"), {"action": "defer", "ids": [write.pk]})
    write.refresh_from_db()
    assert write.should_defer and write.deferred


def test_bulk_without_a_selection_changes_nothing(admin_client, tools):
    response = admin_client.post(reverse("registry:tool_bulk"), {"action": "disable"}, follow=True)
    assert "Select at least one tool." in response.content.decode()
    assert Tool.objects.filter(enabled=False).count() == 1


def test_viewer_cannot_bulk_edit(viewer_client, tools):
    ids = list(Tool.objects.values_list("pk", flat=True))
    response = viewer_client.post(reverse("registry:tool_bulk"), {"action": "disable", "ids": ids})
    assert response.status_code == 403
    assert Tool.objects.filter(enabled=False).count() == 1


def test_each_row_shows_its_global_permission(admin_client, tools, deny_delete_rule):
    body = admin_client.get(URL, {"server": "github"}).content.decode()
    row = body[body.index('data-tool="mcp__github__delete_repo"'):]
    assert 'data-permission="deny"' in row[: row.index("</tr>")]


def _many_servers(count: int) -> None:
    Tool.objects.bulk_create(
        Tool(name=f"mcp__srv{n:04d}__ping", description="Ping", input_schema={"type": "object", "properties": {}},
             server_name=f"srv{n:04d}", source=Tool.Source.IMPORTED)
        for n in range(count)
    )


def test_the_server_filter_offers_a_page_of_servers_and_finds_the_others_as_one_types(viewer_client, tools):
    import re

    from playground.registry.selectors import SERVER_SUGGESTIONS

    _many_servers(400)
    body = viewer_client.get(URL).content.decode()
    datalist = body[body.index('<datalist id="server-options"'): body.index("</datalist>")]
    assert len(re.findall("<option ", datalist)) == SERVER_SUGGESTIONS and 'data-more="true"' in datalist
    assert 'value="github"' in datalist and 'value="srv0399"' not in datalist  # the first by name
    # Typing asks for the servers whose name contains the text.
    found = viewer_client.get(reverse("registry:tool_servers"), {"server": "srv039"}).content.decode()
    assert re.findall(r'<option value="([^"]+)"', found) == [f"srv039{n}" for n in range(10)] and 'data-more="false"' in found
    none = viewer_client.get(reverse("registry:tool_servers"), {"server": "x" * 5000}).content.decode()
    assert "<option" not in none
    # A server beyond the first page filters the list as any other, and stays in the input.
    page = viewer_client.get(URL, {"server": "srv0399"}).content.decode()
    assert 'data-tool="mcp__srv0399__ping"' in page and 'data-tool="mcp__srv0001__ping"' not in page
    assert 'name="server" value="srv0399"' in page


def test_server_suggestions_need_a_login(client):
    response = client.get(reverse("registry:tool_servers"), {"server": "git"})
    assert response.status_code == 302
