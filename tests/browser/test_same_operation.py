"""The inspector groups same-operation tools of several servers (engine/search/equivalence.py)."""
from __future__ import annotations

import json

import pytest

from tests.browser.conftest import screenshot
from tests.browser.test_registry_pages import seed_catalog

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_inspector_shows_the_same_operation_on_three_servers(logged_in_page):
    from playground.registry import services

    seed_catalog()
    more = "\n".join(json.dumps({"name": f"mcp__{server}__create_issue", "server": server, "description": f"Open a new issue in a {server} project",
                                 "input_schema": {"type": "object", "properties": {"title": {"type": "string"}}}})
                     for server in ("gitlab", "gitea"))
    staged, preview = services.stage_import(more, filename="more.jsonl")
    assert preview.ok
    services.commit_import(staged)

    page = logged_in_page
    page.goto("/inspector/")
    page.wait_for_selector("body[data-page=inspector]")
    page.locator("[data-testid=inspector-query]").fill("create issue")
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-query="create issue"]')
    group = page.locator('[data-testid=same-operation-group][data-operation="create issue"]')
    group.wait_for()
    assert group.get_attribute("data-servers") == "3"
    assert "same operation on 3 servers" in group.inner_text()
    members = group.locator("[data-testid=same-operation-member]")
    names = {members.nth(i).get_attribute("data-tool"): members.nth(i).get_attribute("data-rank") for i in range(members.count())}
    assert set(names) == {"mcp__github__create_issue", "mcp__gitlab__create_issue", "mcp__gitea__create_issue"}
    ranked = {page.locator("[data-testid=scored-tool]").nth(i).get_attribute("data-tool"): str(i + 1)
              for i in range(page.locator("[data-testid=scored-tool]").count())}
    assert all(rank == ranked.get(name, "") for name, rank in names.items())  # the ranks shown are the results' ranks
    screenshot(page, "inspector-same-operation")

    # a query whose only match has no copy elsewhere shows no group
    page.locator("[data-testid=inspector-query]").fill("+weather alerts")
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-query="+weather alerts"]')
    assert page.locator("[data-testid=same-operation]").count() == 0
