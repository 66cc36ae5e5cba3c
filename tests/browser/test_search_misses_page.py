"""Search misses in the browser: an admin goes from the conversations list to a profile's failed
searches, reads the rank the engine gives the missed tool today, adds the row to the labelled set and
sees the evaluation page offer that set as a toolset."""
from __future__ import annotations

import pytest

from playground.registry import labelled_sets
from playground.registry.models import LabelledQuery
from tests.browser.conftest import screenshot
from tests.conversations.conftest import make_profile
from tests.conversations.test_search_misses_view import ISSUE, SLACK, call, conversation_with, done, found, search
from tests.registry.conftest import make_tool

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_an_editor_labels_a_missed_search_and_evaluates_the_set(logged_in_page, admin_user):
    make_tool(ISSUE, "Create a new issue in a GitHub repository")
    make_tool(SLACK, "Post a message to a Slack channel")
    profile = make_profile("Misses profile", search_backend="bm25")
    conversation_with(admin_user, profile, [("user", "Open an issue about the login bug"), search("s1", "bug report"), found("s1", SLACK),
                                            search("s2", f"select:{ISSUE}"), found("s2", ISSUE), call("c1", ISSUE), done("c1")])
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/conversations/", timeout=120_000)  # the first open of a fresh server is slow on a busy machine
    page.click("[data-testid=search-misses-link]")
    page.wait_for_selector("body[data-page=search-misses]")
    page.select_option("select[name=profile]", str(profile.pk))
    page.click("[data-testid=misses-filters] button[type=submit]")
    row = page.locator("[data-testid=miss-row]")
    assert row.count() == 1 and row.get_attribute("data-tool") == ISSUE and row.get_attribute("data-kind") == "missed"
    rank = labelled_sets.ranks_now(profile, [("bug report", ISSUE)])[("bug report", ISSUE)]
    assert row.get_attribute("data-rank") == (str(rank) if rank else "")  # the engine's rank, as the page shows it
    summary = page.locator("[data-testid=misses-summary]")
    assert summary.get_attribute("data-searches") == "1" and summary.get_attribute("data-failed") == "1"
    screenshot(page, "search-misses")

    page.click("[data-testid=add-to-labelled-set]")
    page.wait_for_selector("[data-testid=labelled]")
    split = labelled_sets.split_of_query("bug report")
    assert page.inner_text("[data-testid=labelled]") == f"in {split}"
    assert LabelledQuery.objects.filter(profile=profile, tool_name=ISSUE).count() == 1
    assert f"1 {split}" in page.inner_text("[data-testid=labelled-set]").replace(" and ", " ").replace("quer", " quer")

    page.click("[data-testid=labelled-set] >> text=Evaluation")
    page.wait_for_selector("body[data-page=evaluation]")
    assert page.locator("select[name=toolset]").input_value() == labelled_sets.toolset_name(profile)
    screenshot(page, "evaluation-profile-set")
