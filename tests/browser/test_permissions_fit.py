"""The permissions page at 1280 px: the rules table stays inside its card, a duplicate rule is refused in place."""
from __future__ import annotations

import pytest

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_rules_table_fits_its_card_and_a_duplicate_is_refused(logged_in_page):
    from playground.registry.models import AgentProfile, PermissionRule

    profile = AgentProfile.objects.create(name="a-rather-long-profile-name-for-review")
    PermissionRule.objects.create(effect="ask", pattern="mcp__github_enterprise_server__create_pull_request_review_comment",
                                  profile=profile, note="ask before writing anything to the company's GitHub, please")
    PermissionRule.objects.create(effect="deny", pattern="mcp__filesystem__delete_directory_recursively", note="never")
    page = logged_in_page
    page.goto("/permissions/")
    page.wait_for_selector("[data-testid=rules-table]")
    card = page.locator("[data-testid=rules-table]").evaluate(
        "t => { const c = t.closest('.card').getBoundingClientRect(), r = t.getBoundingClientRect();"
        " return {card: [c.left, c.right], table: [r.left, r.right], scroll: t.closest('.card').scrollWidth - t.closest('.card').clientWidth}; }")
    assert card["table"][1] <= card["card"][1] + 0.5 and card["scroll"] <= 0, card
    table_right = card["table"][1]
    buttons = page.locator("[data-testid=delete-rule]").evaluate_all("bs => bs.map(b => b.getBoundingClientRect().right)")
    assert buttons and max(buttons) <= table_right + 0.5, (buttons, table_right)

    page.select_option("[data-testid=rule-form] [name=effect]", "deny")
    page.fill("[data-testid=rule-form] [name=pattern]", "mcp__filesystem__delete_directory_recursively")
    page.click("[data-testid=add-rule]")
    page.wait_for_selector("[data-testid=form-error]")
    assert "already exists" in page.inner_text("[data-testid=form-error]")
    assert page.locator("[data-testid=rule-row]").count() == 2
    screenshot(page, "ux-permissions-1280")


def test_importing_a_catalog_the_registry_already_has_offers_no_import(logged_in_page):
    from tests.browser.test_registry_pages import CATALOG, seed_catalog

    seed_catalog()
    page = logged_in_page
    page.goto("/tools/import/")
    page.fill("[data-testid=import-form] textarea[name=text]", CATALOG.read_text())
    page.click("[data-testid=import-preview-button]")
    page.wait_for_selector("[data-testid=import-preview]")
    button = page.locator("[data-testid=import-commit]")
    assert button.is_disabled() and float(button.evaluate("b => getComputedStyle(b).opacity")) < 0.6  # looks disabled too
    assert "Nothing to import" in page.inner_text("[data-testid=import-nothing]")
    screenshot(page, "ux-import-nothing-new")
