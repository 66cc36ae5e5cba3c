"""The evaluation page works out of the box: the labelled set that ships with the project is chosen
by default and runs, whether or not TOOLSETS_DIR finds the shared toolsets."""
from __future__ import annotations

import re

from tests.browser.conftest import screenshot


def test_the_shipped_demo_set_is_the_default_and_runs(logged_in_page):
    page = logged_in_page
    page.goto("/evaluation/")
    source = page.inner_text("#toolset-source")
    assert "demo ships with the project" in source and "TOOLSETS_DIR" in source
    form = page.locator("form:has([name=toolset])")
    assert form.locator("select[name=toolset]").input_value() == "demo"
    screenshot(page, "evaluation-index")
    for box in form.locator("input[name=backends]").all():
        if box.is_checked():
            box.uncheck()
    form.locator("input[name=backends][value=bm25]").check()
    form.locator("input[name=query_limit]").fill("12")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("body[data-page=evaluation-run]")
    page.wait_for_selector("[data-status=done]", timeout=120_000)
    assert "demo" in page.inner_text("main")
    # the no-match gate's two rates beside recall: labelled queries answered empty, nonsense "no match"
    assert page.locator("th", has_text="answered empty").count() == 1 and page.locator("th", has_text="nonsense no match").count() == 1
    assert re.fullmatch(r"\d+ of 12", page.inner_text("td.empty-answers").strip())
    assert re.fullmatch(r"\d+ of 19", page.inner_text("td.nonsense").strip())
    screenshot(page, "evaluation-demo-set-done")

    # Back on the index at 1280 px, the latest run's fourteen-column table sits in the half-width card
    # beside the form: it scrolls in its own box, the page does not grow sideways.
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/evaluation/")
    table = page.wait_for_selector("table.eval-table")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    boxes = table.evaluate("t => { const card = t.closest('.card').getBoundingClientRect(), box = t.parentElement.getBoundingClientRect();"
                           " return {card: card.right, box: box.right, scrolls: getComputedStyle(t.parentElement).overflowX}; }")
    assert boxes["card"] <= 1280 and boxes["box"] <= boxes["card"] and boxes["scrolls"] == "auto", boxes
    screenshot(page, "evaluation-index-latest-run")
