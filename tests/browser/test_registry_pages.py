"""Registry pages in a real browser: log in, tool form errors, catalog import, inspector, permissions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.conftest import doc_screenshot, screenshot

CATALOG = Path(__file__).with_name("catalog.jsonl")

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def seed_catalog() -> int:
    """Import the small test catalog through the registry's own service (committed: transactional_db)."""
    from playground.registry import services

    staged, preview = services.stage_import(CATALOG.read_text(), filename="catalog.jsonl")
    assert preview.ok
    return services.commit_import(staged)["new"]


def test_log_in_and_see_the_dashboard(page, admin_user):
    page.goto("/")
    page.wait_for_selector("body[data-page=login]")
    screenshot(page, "login")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "wrong password")
    page.click("button[type=submit]")
    page.wait_for_selector("body[data-page=login] .errorlist, body[data-page=login] .errornote")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "pw-alice-123")
    page.click("button[type=submit]")
    page.wait_for_selector("body[data-page=home]")
    assert "alice" in page.inner_text("header .who")
    screenshot(page, "home")


def test_a_tool_with_an_invalid_schema_shows_the_error_and_saves_once_fixed(logged_in_page):
    from playground.registry.models import Tool

    page = logged_in_page
    page.goto("/tools/new/")
    page.wait_for_selector("[data-testid=tool-form][data-state=editing]")
    page.fill("[name=name]", "mcp__demo__broken_tool")
    page.fill("[name=description]", "A tool whose schema names a type JSON Schema does not have")
    page.fill("[name=input_schema]", json.dumps({"type": "object", "properties": {"x": {"type": "banana"}}}))
    page.click("[data-testid=save-tool]")
    page.wait_for_selector("[data-testid=tool-form][data-state=invalid]")
    error = page.locator("[data-testid=field-error][data-field=input_schema]")
    assert "banana" in error.inner_text() or "valid" in error.inner_text().lower()
    assert page.input_value("[name=name]") == "mcp__demo__broken_tool"  # nothing typed is lost
    screenshot(page, "tool-form-invalid")
    assert not Tool.objects.filter(name="mcp__demo__broken_tool").exists()

    page.fill("[name=input_schema]", json.dumps({"type": "object", "properties": {"x": {"type": "string"}}}))
    page.click("[data-testid=save-tool]")
    page.wait_for_selector("body[data-page=tool-detail]")
    assert Tool.objects.filter(name="mcp__demo__broken_tool").exists()
    screenshot(page, "tool-detail")


def test_import_a_catalog_with_a_preview_first(logged_in_page):
    from playground.registry.models import Tool

    page = logged_in_page
    page.goto("/tools/import/")
    page.wait_for_selector("body[data-page=tool-import]")
    # An invalid catalog: the preview says so and nothing is imported.
    page.fill("[name=text]", CATALOG.read_text() + '{"name": "bad name with spaces", "input_schema": {"type": "object"}}\n')
    page.click("[data-testid=import-preview-button]")
    page.wait_for_selector("[data-testid=import-preview][data-state=invalid]")
    assert page.locator("[data-testid=invalid-item]").count() == 1
    assert page.locator("[data-testid=import-commit]").count() == 0

    page.fill("[name=text]", CATALOG.read_text())
    page.click("[data-testid=import-preview-button]")
    preview = page.wait_for_selector("[data-testid=import-preview][data-state=ready]")
    assert preview.get_attribute("data-new") == "12"
    screenshot(page, "tool-import-preview")
    page.click("[data-testid=import-commit]")
    table = page.wait_for_selector("body[data-page=tool-list] [data-testid=tool-table]")
    assert table.get_attribute("data-result-count") == "12"
    assert page.locator("[data-testid=tool-row][data-tool=mcp__github__create_issue]").count() == 1
    assert Tool.objects.count() == 12
    screenshot(page, "tool-list")


def test_typing_in_the_inspector_changes_the_scores(logged_in_page):
    seed_catalog()
    page = logged_in_page
    page.goto("/inspector/")
    page.wait_for_selector("body[data-page=inspector]")
    query = page.locator("[data-testid=inspector-query]")

    query.fill("github pull request")
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-query="github pull request"]')
    first = scores(page)
    assert first and all(name.startswith("mcp__github__") for name in list(first)[:2]), first

    query.fill("slack message")
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-query="slack message"]')
    second = scores(page)
    assert second and next(iter(second)).startswith("mcp__slack__"), second
    assert first != second
    assert page.locator("[data-testid=term-contribution]").count() > 0  # the term-by-term breakdown
    screenshot(page, "inspector")
    doc_screenshot(page, "inspector", scroll_to="[data-testid=inspector-form]")  # the README's picture (only with UPDATE_DOC_SCREENSHOTS=1)

    query.fill("+weather alerts")
    page.wait_for_selector('[data-testid=inspector-results][data-query="+weather alerts"]')
    assert list(scores(page)) == ["mcp__weather__get_alerts"] or next(iter(scores(page))) == "mcp__weather__get_alerts"

    # A request of two parts: the hybrid backend says how it split it, and covers both parts.
    request = "open a github issue about the outage and post a slack message to the team"
    query.fill(request)
    page.wait_for_selector(f'[data-testid=inspector-results][data-state=ready][data-query="{request}"]')
    notes = page.locator("[data-testid=query-note]").all_inner_texts()
    note = next((line for line in notes if "aspect coverage" in line), "")
    assert "2 clauses for aspect coverage" in note and "post a slack message to the team" in note, notes
    # and what the encoder read: the one-sentence request as what a tool does
    assert f"the encoder reads the request as \u201ca tool to {request}\u201d" in "\n".join(notes), notes
    top_two = list(scores(page))[:2]
    assert {name.split("__")[1] for name in top_two} == {"github", "slack"}, top_two
    screenshot(page, "inspector-clauses")

    # Settings typed beside the backend tune this search: without aspect coverage, no clause note.
    page.select_option("[data-testid=inspector-backend]", "hybrid")
    page.fill("[data-testid=inspector-settings]", "aspect_weight=0")
    page.press("[data-testid=inspector-settings]", "Enter")
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-backend="hybrid:aspect_weight=0"]')
    assert not any("aspect coverage" in line for line in page.locator("[data-testid=query-note]").all_inner_texts())
    page.fill("[data-testid=inspector-settings]", "aspect_wieght=0")
    page.press("[data-testid=inspector-settings]", "Enter")
    error = page.wait_for_selector("[data-testid=inspector-error]")
    assert "unknown option 'aspect_wieght'" in error.inner_text()
    screenshot(page, "inspector-settings-error")


def test_a_long_select_list_goes_to_the_inspector_as_a_post(logged_in_page):
    # ~70 KB of names: as a GET its URL would pass what the live server takes.
    seed_catalog()
    page = logged_in_page
    page.goto("/inspector/")
    page.wait_for_selector("body[data-page=inspector]")
    names = ",".join(f"mcp__nowhere__tool_{i}" for i in range(3_000)) + ",mcp__github__create_issue"
    methods: list[str] = []
    page.on("request", lambda request: methods.append(request.method) if "/inspector/" in request.url else None)
    page.locator("[data-testid=inspector-query]").fill(f"select:{names}")
    page.wait_for_function("(document.querySelector('[data-testid=inspector-results]').dataset.query || '').length > 60000")
    results = page.locator("[data-testid=inspector-results]")
    assert results.get_attribute("data-state") == "ready" and results.get_attribute("data-result-count") == "1"
    assert "POST" in methods, methods


def test_the_inspector_shows_what_was_learned_and_staff_can_forget_it(logged_in_page, admin_user):
    from playground.conversations.models import Conversation, ToolSearchUsage

    seed_catalog()
    conversation = Conversation.objects.create(owner=admin_user, title="taught")
    ToolSearchUsage.objects.create(conversation=conversation, query="file a bug ticket", tool_name="mcp__github__create_issue",
                                   query_hash="file a bug ticket")
    page = logged_in_page
    page.goto("/inspector/?q=bug+ticket&backend=bm25")
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-query="bug ticket"]')
    assert next(iter(scores(page))) == "mcp__github__create_issue"  # only the learned words match it
    assert page.locator('[data-testid=term-contribution][data-rule="bm25 usage"]').count() == 2  # bug, ticket
    line = page.locator("[data-testid=usage-line]")
    assert line.get_attribute("data-entries") == "1" and "1 past search for 1 tool" in line.inner_text()
    screenshot(page, "inspector-usage")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=usage-forget] button")
    page.wait_for_selector("body[data-page=inspector]")
    assert "Forgot 1 learned search" in page.inner_text("body")
    assert not ToolSearchUsage.objects.exists()


def test_compare_backends_side_by_side_above_the_fold(logged_in_page):
    seed_catalog()
    page = logged_in_page
    page.set_viewport_size({"width": 1280, "height": 800})  # a laptop screen: the first match must show without scrolling
    page.goto("/inspector/")
    page.wait_for_selector("body[data-page=inspector]")
    page.select_option("[data-testid=inspector-backend]", "bm25")
    page.wait_for_selector('[data-testid=inspector-results][data-backend="bm25"]')
    page.locator("[data-testid=inspector-query]").fill("create message")
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-query="create message"][data-columns="1"]')
    first = page.locator("[data-testid=scored-list] > [data-testid=scored-tool]").first.bounding_box()
    assert first and first["y"] < 800, first  # one backend: the single view, with its breakdown
    assert page.locator("[data-testid=term-contribution]").count() > 0
    screenshot(page, "inspector-1280x800")

    page.check('[data-testid=compare-backend][value="claude-code"]')
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-columns="2"]')
    columns = page.locator("[data-testid=compare-column]")
    assert [c.get_attribute("data-backend") for c in columns.all()] == ["bm25", "claude-code"]
    assert all(c.get_attribute("data-state") == "ready" for c in columns.all())
    cells = page.locator("[data-testid=compare-row][data-rank='1'] [data-testid=compare-cell]")
    assert cells.count() == 2 and {c.get_attribute("data-normalised") for c in cells.all()} == {"1.000"}
    # bm25 also finds a tool the keyword scorer leaves out (no query term in its text): marked in its column.
    marked = page.locator("[data-testid=compare-cell][data-disagrees=yes] [data-testid=disagreement]")
    assert "≠ claude-code: not in its top 5" in marked.all_inner_texts()
    assert page.locator("[data-testid=term-contribution]").count() == 0
    top = cells.first.bounding_box()
    assert top and top["y"] < 800, top
    assert "compare=claude-code" in page.url  # the comparison is a link to share
    screenshot(page, "inspector-compare")

    page.uncheck('[data-testid=compare-backend][value="claude-code"]')
    page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-columns="1"]')
    assert page.locator("[data-testid=term-contribution]").count() > 0  # back to the single view

    # A typed field other than the query searches as it is typed too: the results and the address bar
    # follow the form without leaving the field (they stayed one change behind until it lost focus).
    page.locator("input[name=max_results]").fill("7")
    page.wait_for_function("() => location.search.includes('max_results=7')", timeout=15_000)
    assert page.locator("input[name=max_results]").evaluate("e => e === document.activeElement")


def scores(page) -> dict[str, float]:
    """Tool → score in rank order, read from the data-* attributes of the results."""
    result = {}
    for item in page.locator("[data-testid=scored-list] > [data-testid=scored-tool]").all():
        result[item.get_attribute("data-tool")] = float(item.get_attribute("data-score") or 0)
    return result


def test_editing_a_permission_rule_changes_the_preview(logged_in_page):
    seed_catalog()
    page = logged_in_page
    page.goto("/permissions/")
    preview = '[data-testid=permissions-preview] [data-testid=model-view][data-state=ready]'
    before = page.wait_for_selector(preview)
    total_before = visible_tool_total(before)
    assert total_before >= 12
    empty = page.locator("[data-testid=rules-empty]")
    assert empty.is_visible() and "every tool is allowed" in empty.inner_text()  # the empty table explains itself

    # Add: deny every GitHub tool. The preview reloads on the rulesChanged event.
    page.select_option("[data-testid=rule-form] [name=effect]", "deny")
    page.fill("[data-testid=rule-form] [name=pattern]", "mcp__github")
    page.click("[data-testid=add-rule]")
    row = page.wait_for_selector("[data-testid=rule-row][data-pattern=mcp__github][data-effect=deny]")
    rule_id = row.get_attribute("data-rule-id")
    assert not empty.is_visible()
    after_add = wait_for_preview_total(page, preview, total_before - 4)
    assert after_add == total_before - 4

    # Edit the rule: deny Slack instead (3 tools) — GitHub's 4 come back.
    page.click(f"[data-testid=rule-row][data-rule-id='{rule_id}'] [data-testid=edit-rule]")
    page.wait_for_selector(f"[data-testid=rule-edit-row][data-rule-id='{rule_id}'][data-state=editing]")
    page.fill(f"[data-testid=rule-edit-row][data-rule-id='{rule_id}'] [name=pattern]", "mcp__slack")
    page.click(f"[data-testid=rule-edit-row][data-rule-id='{rule_id}'] [data-testid=save-rule]")
    page.wait_for_selector(f"[data-testid=rule-row][data-rule-id='{rule_id}'][data-pattern=mcp__slack]")
    after_edit = wait_for_preview_total(page, preview, total_before - 3)
    assert after_edit == total_before - 3
    assert page.locator("[data-testid=history-row]").count() >= 2
    screenshot(page, "permissions")

    page.goto("/model/")
    page.wait_for_selector("body[data-page=model-view] [data-testid=model-view][data-state=ready]")
    screenshot(page, "model-view")


def visible_tool_total(model_view) -> int:
    """Tools the model can see: sent with full schemas plus deferred (names only)."""
    return int(model_view.get_attribute("data-tools-sent")) + int(model_view.get_attribute("data-deferred-count"))


def wait_for_preview_total(page, selector: str, wanted: int) -> int:
    """Wait until the preview (swapped in by htmx) shows `wanted` visible tools; return what it shows."""
    page.wait_for_function(
        """([selector, wanted]) => {
            const view = document.querySelector(selector);
            return !!view && Number(view.dataset.toolsSent) + Number(view.dataset.deferredCount) === wanted;
        }""",
        arg=[selector, wanted],
    )
    return visible_tool_total(page.wait_for_selector(selector))


def test_what_the_model_sees_shows_the_engines_accounting_for_a_grouped_announcement(logged_in_page):
    """Every figure on the page is the engine's for that turn: tools sent, announcement, baseline, saving."""
    import re

    from playground.engine.requests import ConversationState, build_request
    from playground.registry import adapter
    from playground.registry.models import AgentProfile

    seed_catalog()
    profile = AgentProfile.objects.create(name="Grouped", tool_search_mode="true", announcement_layout="grouped")
    adapter.reset_caches()
    plan = build_request(adapter.profile_catalog(profile), adapter.permission_policy(profile), adapter.agent_settings(profile),
                         ConversationState(), token_counter=adapter.token_counter())
    page = logged_in_page
    page.goto(f"/model/?profile={profile.pk}")
    view = page.wait_for_selector("body[data-page=model-view] [data-testid=model-view][data-state=ready]")
    assert int(view.get_attribute("data-tokens-sent")) == plan.tokens.sent_tokens
    assert int(view.get_attribute("data-tokens-baseline")) == plan.tokens.baseline_tokens
    totals = page.inner_text("[data-testid=token-totals]")
    shown = [int(n) for n in re.findall(r"\d+", totals.split("(")[0])]
    assert shown == [plan.tokens.sent_tokens, plan.tokens.announcement_tokens, plan.tokens.baseline_tokens], totals
    assert f"{plan.tokens.saved_percent}% saved" in totals
    announcement = page.inner_text("[data-testid=announcement]")
    assert announcement.strip() == plan.announcement.text.strip() and "mcp__github: " in announcement
    assert "grouped layout" in page.inner_text("[data-testid=model-view]")
    screenshot(page, "model-view-grouped")


def test_the_inspectors_counts_and_decision_are_the_engines_turn(logged_in_page):
    """The inspector's "N deferred of M permitted", what permissions excluded and the mode decision
    are the engine's plan for a first turn of that profile, with tool search on and off (it said
    "Searching 11 deferred" for a profile whose turn defers nothing)."""
    from playground.engine.turn import plan_turn
    from playground.registry import adapter
    from playground.registry.models import AgentProfile, PermissionRule

    seed_catalog()
    page = logged_in_page
    for mode in ("true", "false"):
        profile = AgentProfile.objects.create(name=f"Counted {mode}", tool_search_mode=mode)
        PermissionRule.objects.create(effect="deny", pattern="mcp__github__create_issue", profile=profile)
        adapter.reset_caches()
        plan = plan_turn(adapter.profile_catalog(profile), adapter.permission_policy(profile), adapter.agent_settings(profile),
                         token_counter=adapter.token_counter()).request
        page.goto(f"/inspector/?profile={profile.pk}&backend=bm25&q=create+issue")
        page.wait_for_selector('[data-testid=inspector-results][data-state=ready][data-query="create issue"]')
        assert int(page.inner_text("[data-testid=inspector-deferred-count]")) == len(plan.deferred_tools), mode
        assert (len(plan.deferred_tools) > 0) == (mode == "true")
        assert int(page.inner_text("[data-testid=inspector-permitted-count]")) == len(plan.permitted)
        assert int(page.get_attribute("[data-testid=excluded]", "data-excluded-count")) == len(plan.excluded) == 1
        decision = page.locator("[data-testid=inspector-mode-decision]")
        assert decision.get_attribute("data-tool-search") == ("on" if plan.decision.enabled else "off")
        assert plan.decision.reason in decision.inner_text()
        assert page.locator("[data-testid=scored-tool]").count() > 0  # off: what a search would find, still shown
        screenshot(page, f"inspector-counts-{mode}")


def _import_tools(lines: list[str], filename: str) -> None:
    """Add tools (JSON lines) to the registry through the import service, as an admin's upload does."""
    from playground.registry import services

    staged, preview = services.stage_import("\n".join(lines) + "\n", filename=filename)
    assert preview.ok
    services.commit_import(staged)


def _search_with_hybrid(page, request: str):
    """The inspector with the hybrid backend, `request` typed and its results shown."""
    page.goto("/inspector/")
    page.wait_for_selector("body[data-page=inspector]")
    page.select_option("[data-testid=inspector-backend]", "hybrid")
    page.locator("[data-testid=inspector-query]").fill(request)
    page.wait_for_selector(f'[data-testid=inspector-results][data-state=ready][data-query="{request}"]')
    return page


def test_the_inspector_shows_the_capabilities_a_request_implies_and_the_slot_each_filled(logged_in_page):
    seed_catalog()
    write_file = {"name": "mcp__files__write_file", "server": "files", "input_schema": {"type": "object", "properties": {}},
                  "description": "Create a new file or overwrite an existing file with new content."}
    _import_tools([json.dumps(write_file)], "files.jsonl")
    page = _search_with_hybrid(logged_in_page, "List the open pull requests of my repository and put the list in /tmp/prs.md")
    notes = page.locator("[data-testid=query-note]").all_inner_texts()
    assert any("capabilities implied: produce a file" in line and "/tmp/prs.md" in line for line in notes), notes
    slot = page.locator("[data-testid=capability-slot]")
    assert slot.count() == 1 and slot.get_attribute("data-tool") == "mcp__files__write_file"
    assert "capability slot 5: produce a file" in slot.inner_text() and "write content to a file" in slot.inner_text()
    ranked = list(scores(page))
    assert ranked[4] == "mcp__files__write_file" and all(name.startswith("mcp__github__") for name in ranked[:2]), ranked
    screenshot(page, "inspector-capabilities")


def test_the_inspector_shows_a_documents_chain_of_steps_and_what_made_room(logged_in_page):
    """A request for a presentation reads as a chain (create, add, save) answered by one server;
    the inspector lists the steps and, for a step placed in the top k, the tool it replaced."""
    seed_catalog()
    tools = [
        ("stocks", "get_historical_prices", "Get the historical daily prices of a stock ticker for a date range."),
        ("stocks", "get_income_statement", "Get the income statement of a company by its stock ticker."),
        ("slides", "create_presentation", "Create a new PowerPoint presentation."),
        ("slides", "add_slide", "Add a new slide with a title and body text to the presentation."),
        ("slides", "save_presentation", "Save the presentation to a .pptx file on disk."),
        ("pptinfo", "get_pptx_info", "Get information about the slides of a PowerPoint presentation file."),
    ]
    lines = [json.dumps({"name": f"mcp__{server}__{tool}", "server": server, "description": description,
                         "input_schema": {"type": "object", "properties": {}}}) for server, tool, description in tools]
    _import_tools(lines, "slides.jsonl")
    page = _search_with_hybrid(logged_in_page, "Analyze ACME's stock prices for the past year and summarize them in a PPT in /root/ppt/acme.pptx.")
    notes = page.locator("[data-testid=query-note]").all_inner_texts()
    assert any("in steps" in line and "save the presentation to a file" in line for line in notes), notes
    slots = {item.get_attribute("data-tool"): item.inner_text() for item in page.locator("[data-testid=capability-slot]").all()}
    step = slots.get("mcp__slides__add_slide", "")
    assert "step 2 of 3" in step and "in place of mcp__pptinfo__get_pptx_info" in step, slots
    ranked = list(scores(page))
    assert {"mcp__slides__create_presentation", "mcp__slides__add_slide", "mcp__slides__save_presentation"} <= set(ranked[:5]), ranked
    assert "mcp__pptinfo__get_pptx_info" not in ranked[:5], ranked
    screenshot(page, "inspector-capability-chain")
