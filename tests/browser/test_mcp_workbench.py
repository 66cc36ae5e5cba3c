"""The MCP workbench in Chromium against the live server (daphne + a Celery worker): a server added
through the form shows its tools and status without a reload; ping, a resource listed and read, a
prompt got with an argument, a stderr line arriving live in the server log, the call history, and
a crash turning the badge to Failed — all without reloading the page."""
from __future__ import annotations

import sys

from playground.mcp_servers.models import McpServer
from tests.browser.conftest import screenshot
from tests.mcp_servers.conftest import HttpDemoServer


def test_the_workbench_of_a_newly_added_stdio_server(logged_in_page):
    page = logged_in_page
    page.goto("/mcp/new/")
    page.wait_for_selector("body[data-page=mcp-server-form]")
    page.fill("[name=name]", "demo")
    page.select_option("[name=transport]", "stdio")
    page.fill("[name=command]", sys.executable)
    page.fill("[name=args_text]", "-m\nplayground.mcp_servers.demo_server")
    page.click("[data-testid=save-server]")
    page.wait_for_selector("body[data-page=mcp-server-detail]")

    # The first sync runs on the worker; the page follows it: status and tool table, no reload.
    page.wait_for_selector("[data-testid=server-status][data-status=connected]", timeout=60_000)
    page.wait_for_function("document.querySelector('[data-testid=server-tools] h2').textContent.trim() === 'Tools (15)'",
                           timeout=60_000)
    assert page.locator("[data-testid=tool-row]").count() == 15

    page.click("[data-testid=ping]")
    outcome = page.wait_for_selector("[data-testid=ping-outcome][data-ok=true]")
    assert float(page.locator("[data-testid=ping-ms]").inner_text()) > 0, outcome.inner_text()

    page.click("[data-testid=list-resources]")
    page.wait_for_selector("[data-testid=resource-row][data-uri='demo://readme']")
    page.click("[data-testid=resource-row][data-uri='demo://readme'] [data-testid=read-resource]")
    page.wait_for_selector("[data-testid=resource-outcome][data-ok=true][data-uri='demo://readme']")
    assert "# playground-demo" in page.locator("[data-testid=resource-text]").inner_text()

    page.click("[data-testid=list-prompts]")
    form = page.wait_for_selector("[data-testid=prompt-form][data-prompt=plan_trip]")
    form.query_selector("[name=parg__city]").fill("Tokyo")
    form.query_selector("[data-testid=get-prompt]").click()
    page.wait_for_selector("[data-testid=prompt-outcome][data-ok=true]")
    assert "Plan a 2-day trip to Tokyo" in page.locator("[data-testid=prompt-message]").first.inner_text()

    # A tool call makes the server write to stderr: the line arrives in the log pane over the socket.
    assert page.locator("[data-testid=log-line]", has_text="echo called with").count() == 0
    page.click("[data-testid=tool-row][data-tool=mcp__demo__echo] summary")
    call_form = page.locator("[data-testid=call-form][data-tool=mcp__demo__echo]")
    call_form.locator("input[name$=arg__text]").fill("hello workbench")
    call_form.locator("[data-testid=call-tool]").click()
    page.wait_for_selector("[data-testid=call-outcome][data-ok=true]")
    page.locator("[data-testid=log-line][data-source=stderr]", has_text="echo called with 15 characters").wait_for()
    page.locator("[data-testid=log-line][data-source='log:info']", has_text="echo: hello workbench").wait_for()

    history = page.locator("[data-testid=history-row]")
    kinds = history.evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert kinds[:5] == ["tool", "prompt", "list", "resource", "list"] and "ping" in kinds, kinds
    assert '"text": "hello workbench"' in page.locator("[data-testid=history-arguments]").first.inner_text()  # JSON, not a repr
    screenshot(page, "mcp-workbench")

    # Raw JSON is sent even with the form's required field left empty (the browser must not block it).
    call_form.locator("input[name$=arg__text]").fill("")
    call_form.locator("input[name$=mode][value=raw]").check()
    call_form.locator("details.mcp-raw summary").click()
    call_form.locator("textarea[name$=raw_arguments]").fill('{"text": "raw hello"}')
    call_form.locator("[data-testid=call-tool]").click()
    page.locator("[data-testid=history-arguments]", has_text='"text": "raw hello"').first.wait_for()

    # A crash: the badge leaves "Connected" without a reload.
    page.click("[data-testid=tool-row][data-tool=mcp__demo__crash] summary")
    page.locator("[data-testid=call-form][data-tool=mcp__demo__crash] [data-testid=call-tool]").click()
    page.wait_for_selector("[data-testid=call-form][data-tool=mcp__demo__crash] [data-testid=call-outcome][data-ok=false]")
    page.wait_for_selector("h1 [data-testid=server-status][data-status=failed]")
    screenshot(page, "mcp-workbench-after-crash")


def test_an_http_servers_log_pane_says_it_has_no_stderr_and_shows_what_it_has(logged_in_page):
    # An HTTP server has no stderr for us: the pane says so, and shows its connection, its session
    # and the log messages it sends — live, secrets masked.
    secret = "q-s3cr3t-value-9876"
    server = HttpDemoServer()
    try:
        row = McpServer.objects.create(name="demo-http", transport="http", url=f"{server.url}?token={secret}")
        page = logged_in_page
        page.goto(f"/mcp/{row.pk}/")
        page.wait_for_selector("body[data-page=mcp-server-detail]")
        assert "An HTTP server has no stderr here" in page.inner_text("[data-testid=no-stderr-note]")
        empty = page.locator("[data-testid=server-log] [data-testid=log-empty]")
        assert empty.is_visible() and "an HTTP server has no stderr" in empty.inner_text()

        page.click("[data-testid=ping]")
        page.wait_for_selector("[data-testid=ping-outcome][data-ok=true]")
        connected = page.locator("[data-testid=log-line][data-source=session]", has_text="connected to streamable HTTP")
        connected.wait_for()  # pushed over the socket, no reload
        page.locator("[data-testid=log-line][data-source=session]", has_text="the server opened session").wait_for()
        assert not empty.is_visible()  # the explanation steps aside once lines arrive
        assert page.locator("[data-testid=log-line][data-source=stderr]").count() == 0
        assert secret not in page.inner_text("[data-testid=server-log]")
        screenshot(page, "mcp-workbench-http-log")
    finally:
        server.stop()


def _synced_demo_row(name: str = "demo") -> McpServer:
    from playground.mcp_servers import services
    from playground.mcp_servers.connection import list_server_tools
    from playground.mcp_servers.transports import ServerConfig

    row = McpServer.objects.create(name=name, transport="stdio", command=sys.executable, args=["-m", "playground.mcp_servers.demo_server"])
    assert services.apply_listing(row, *list_server_tools(ServerConfig.from_server(row))).ok
    return row


def _call(page, tool: str, **arguments: str) -> None:
    page.click(f"[data-testid=tool-row][data-tool={tool}] summary")
    form = page.locator(f"[data-testid=call-form][data-tool={tool}]")
    for name, value in arguments.items():
        form.locator(f"input[name$=arg__{name}]").fill(value)
    form.locator("[data-testid=call-tool]").click()


def test_sampling_is_answered_by_hand_and_by_the_profiles_model(logged_in_page):
    from playground.registry.models import AgentProfile

    AgentProfile.objects.create(name="sampler")
    row = _synced_demo_row()
    page = logged_in_page
    page.goto(f"/mcp/{row.pk}/")
    assert page.locator("[data-testid=server-requests-empty]").is_visible()

    # The server asks mid-call: the call form says so at once, and the request arrives over the socket.
    _call(page, "mcp__demo__ask_model", question="What is the capital of France?")
    page.wait_for_selector("[data-testid=call-form][data-tool=mcp__demo__ask_model] [data-testid=call-waiting]")
    card = page.locator("[data-testid=server-request][data-kind=sampling][data-status=pending]")
    card.wait_for()
    assert not page.locator("[data-testid=server-requests-empty]").is_visible()
    assert card.locator("[data-testid=sampling-message]").inner_text() == "What is the capital of France?"
    card.locator("[data-testid=sampling-text]").fill("Paris.")
    screenshot(page, "mcp-workbench-sampling")
    card.locator("[data-testid=sampling-send]").click()
    page.wait_for_selector("[data-testid=server-request][data-status=answered]")
    # The call's result replaces the waiting note, pushed when the call ended; the history follows.
    result = page.locator("[data-testid=call-form][data-tool=mcp__demo__ask_model] [data-testid=call-outcome][data-ok=true]")
    result.wait_for()
    assert "answered: Paris." in result.inner_text()
    page.locator("[data-testid=history-row][data-kind=tool]").first.wait_for()

    # Now a profile's model answers (no API key here: the offline demo agent, named as such).
    page.locator("[data-testid=call-form][data-tool=mcp__demo__ask_model] input[name$=arg__question]").fill("Say hello")
    page.locator("[data-testid=call-form][data-tool=mcp__demo__ask_model] [data-testid=call-tool]").click()
    pending = page.locator("[data-testid=server-request][data-status=pending]")
    pending.wait_for()
    pending.locator("[data-testid=sampling-profile]").select_option(label="sampler")
    pending.locator("[data-testid=sampling-model]").click()
    answered = page.locator("[data-testid=server-request][data-status=answered]", has_text="offline demo agent (profile sampler)")
    answered.wait_for(timeout=60_000)  # a Celery worker asked the model
    page.locator("[data-testid=call-form][data-tool=mcp__demo__ask_model] [data-testid=call-outcome][data-ok=true]",
                 has_text="offline demo agent (profile sampler)").wait_for()
    screenshot(page, "mcp-workbench-sampling-answered")


def test_roots_are_offered_to_the_server_and_a_change_is_announced(logged_in_page):
    row = _synced_demo_row()
    page = logged_in_page
    page.goto(f"/mcp/{row.pk}/")
    page.fill("[data-testid=roots-form] textarea", "file:///srv/project Project")
    page.click("[data-testid=save-roots]")
    page.wait_for_selector("[data-testid=roots-saved][data-notified=false]")  # no session open yet

    _call(page, "mcp__demo__list_roots")
    outcome = page.locator("[data-testid=call-form][data-tool=mcp__demo__list_roots] [data-testid=call-outcome][data-ok=true]")
    outcome.wait_for()
    assert "file:///srv/project (Project)" in outcome.inner_text()
    page.locator("[data-testid=log-line]", has_text="listed the client's roots (roots/list): 1 root(s)").wait_for()

    # A change with the session open: it is told, and the server's own note of it arrives in the log.
    page.fill("[data-testid=roots-form] textarea", "file:///home/ada/notes Notes\nfile:///srv/shared")
    page.click("[data-testid=save-roots]")
    page.wait_for_selector("[data-testid=roots-saved][data-notified=true]")
    page.locator("[data-testid=log-line][data-source=stderr]", has_text="the client's roots changed").wait_for()
    page.locator("[data-testid=call-form][data-tool=mcp__demo__list_roots] [data-testid=call-tool]").click()
    page.locator("[data-testid=call-form][data-tool=mcp__demo__list_roots] [data-testid=call-outcome]",
                 has_text="file:///home/ada/notes (Notes)").wait_for()

    page.fill("[data-testid=roots-form] textarea", "https://example.com/not-a-root")
    page.click("[data-testid=save-roots]")
    assert "a root is a file:// URI" in page.locator("[data-testid=roots-error]").inner_text()
    screenshot(page, "mcp-workbench-roots")


def test_an_elicitation_form_is_built_from_the_servers_schema_and_answered(logged_in_page):
    row = _synced_demo_row()
    page = logged_in_page
    page.goto(f"/mcp/{row.pk}/")
    _call(page, "mcp__demo__book_table", restaurant="Chez Demo")
    page.wait_for_selector("[data-testid=call-form][data-tool=mcp__demo__book_table] [data-testid=call-waiting]")
    card = page.locator("[data-testid=server-request][data-kind=elicitation][data-status=pending]")
    card.wait_for()
    assert "Book a table at Chez Demo" in card.locator("[data-testid=elicitation-message]").inner_text()
    # The schema's fields, types and bounds: the browser itself refuses 40 guests (maximum 12).
    guests = card.locator("input[name$=el__guests]")
    assert guests.get_attribute("type") == "number" and guests.get_attribute("max") == "12"
    card.locator("input[name$=el__name]").fill("Ada")
    guests.fill("40")
    card.locator("[data-testid=elicitation-accept]").click()
    assert not guests.evaluate("e => e.validity.valid")
    guests.fill("4")
    card.locator("select[name$=el__seating]").select_option("outdoor")
    box = card.locator("input[name$=el__vegetarian]")
    box.check()
    # The yes/no field: its box at the left of its field, on its label's row (it stood alone mid-row).
    field, checkbox = box.locator("xpath=..").bounding_box(), box.bounding_box()
    label = box.locator("xpath=..").locator("label").first.bounding_box()
    assert checkbox["x"] - field["x"] < 20, (field, checkbox)
    assert abs((checkbox["y"] + checkbox["height"] / 2) - (label["y"] + label["height"] / 2)) < label["height"], (checkbox, label)
    screenshot(page, "mcp-workbench-elicitation")
    card.locator("[data-testid=elicitation-accept]").click()
    page.wait_for_selector("[data-testid=server-request][data-kind=elicitation][data-status=answered]")
    page.locator("[data-testid=call-form][data-tool=mcp__demo__book_table] [data-testid=call-outcome][data-ok=true]",
                 has_text="a table at Chez Demo for 4 under Ada, outdoor, vegetarian").wait_for()

    # Decline with the required fields empty: sent as it is, the browser does not hold it back.
    page.locator("[data-testid=call-form][data-tool=mcp__demo__book_table] [data-testid=call-tool]").click()
    pending = page.locator("[data-testid=server-request][data-kind=elicitation][data-status=pending]")
    pending.wait_for()
    pending.locator("[data-testid=elicitation-decline]").click()
    page.wait_for_selector("[data-testid=server-request][data-kind=elicitation][data-status=declined]")
    page.locator("[data-testid=call-form][data-tool=mcp__demo__book_table] [data-testid=call-outcome]",
                 has_text="No booking: the person chose decline").wait_for()


def test_a_resource_template_is_filled_and_read_and_a_subscription_shows_updates_live(logged_in_page):
    row = _synced_demo_row()
    page = logged_in_page
    page.goto(f"/mcp/{row.pk}/")
    page.click("[data-testid=list-templates]")
    form = page.locator("[data-testid=template-form][data-template='demo://cities/{city}']")
    form.locator("input[data-variable=city]").fill("san francisco")
    form.locator("[data-testid=read-template]").click()
    page.wait_for_selector("[data-testid=resource-outcome][data-ok=true][data-uri='demo://cities/san%20francisco']")
    assert "America/Los_Angeles" in page.locator("[data-testid=resource-text]").inner_text()

    page.click("[data-testid=list-resources]")
    counter = page.locator("[data-testid=resource-row][data-uri='demo://counter']")
    counter.locator("[data-testid=subscribe-resource]").click()
    page.wait_for_selector("[data-testid=subscription-outcome][data-action=subscribe][data-ok=true]")
    _call(page, "mcp__demo__bump_counter")
    page.locator("[data-testid=log-line][data-source=notification]", has_text="notifications/resources/updated demo://counter").wait_for()
    screenshot(page, "mcp-workbench-templates-subscriptions")

    counter.locator("[data-testid=unsubscribe-resource]").click()
    page.wait_for_selector("[data-testid=subscription-outcome][data-action=unsubscribe][data-ok=true]")
    page.locator("[data-testid=call-form][data-tool=mcp__demo__bump_counter] [data-testid=call-tool]").click()
    page.locator("[data-testid=call-form][data-tool=mcp__demo__bump_counter] [data-testid=call-outcome]",
                 has_text="0 subscribed session(s) told").wait_for()
    assert page.locator("[data-testid=log-line][data-source=notification]").count() == 1


def test_arguments_are_completed_as_the_person_types(logged_in_page):
    row = _synced_demo_row()
    page = logged_in_page
    page.goto(f"/mcp/{row.pk}/")

    def offered(argument_list):
        return lambda: page.locator(f"datalist#{argument_list} option").evaluate_all("options => options.map(o => o.value)")

    page.click("[data-testid=list-prompts]")
    city = page.locator("[data-testid=prompt-form][data-prompt=plan_trip] input[name=parg__city]")
    city.press_sequentially("sa", delay=50)
    page.wait_for_function("document.querySelectorAll('#prompt0-parg__city-options option').length === 2")
    assert offered("prompt0-parg__city-options")() == ["san francisco", "sao paulo"]
    city.press_sequentially("n", delay=50)
    page.wait_for_function("document.querySelectorAll('#prompt0-parg__city-options option').length === 1")
    assert offered("prompt0-parg__city-options")() == ["san francisco"]

    page.click("[data-testid=list-templates]")
    variable = page.locator("[data-testid=template-form][data-template='demo://cities/{city}'] input[data-variable=city]")
    variable.press_sequentially("to", delay=50)
    page.wait_for_function("[...document.querySelectorAll('#tvar-1-city-options option')].map(o => o.value).join() === 'tokyo'")
    screenshot(page, "mcp-workbench-completion")


def test_the_log_level_set_decides_which_server_log_messages_arrive(logged_in_page):
    row = _synced_demo_row()
    page = logged_in_page
    page.goto(f"/mcp/{row.pk}/")
    page.select_option("[data-testid=log-level]", "warning")
    page.click("[data-testid=set-log-level]")
    page.wait_for_selector("[data-testid=log-level-outcome][data-level=warning][data-ok=true]")
    _call(page, "mcp__demo__emit_logs", message="browser-check")
    page.locator("[data-testid=call-outcome]", has_text="sent 2 of 5").wait_for()
    page.locator("[data-testid=log-line][data-source='log:error']", has_text="error: browser-check").wait_for()
    page.locator("[data-testid=log-line][data-source='log:warning']", has_text="warning: browser-check").wait_for()
    assert page.locator("[data-testid=log-line]", has_text="info: browser-check").count() == 0  # never sent
    screenshot(page, "mcp-workbench-log-level")


def test_the_notifications_pane_shows_progress_list_changed_and_log_messages_live(logged_in_page):
    row = _synced_demo_row()
    page = logged_in_page
    page.goto(f"/mcp/{row.pk}/")
    pane = page.locator("[data-testid=notifications]")
    assert pane.locator("[data-testid=notifications-empty]").is_visible()

    _call(page, "mcp__demo__long_task", steps="3")
    pane.locator("[data-testid=notification-line]", has_text="notifications/progress 3/3: step 3 of 3").wait_for()
    assert pane.locator("[data-testid=notification-line]", has_text="notifications/progress").count() == 3
    assert not pane.locator("[data-testid=notifications-empty]").is_visible()

    _call(page, "mcp__demo__toggle_extra_tool")
    pane.locator("[data-testid=notification-line]", has_text="notifications/tools/list_changed").wait_for()
    _call(page, "mcp__demo__echo", text="to the pane")
    pane.locator("[data-testid=notification-line][data-source='log:info']", has_text="echo: to the pane").wait_for()
    # The echo's stderr line went to the server log, not to the pane.
    page.locator("[data-testid=server-log] [data-testid=log-line][data-source=stderr]", has_text="echo called with").wait_for()
    assert pane.locator("[data-source=stderr]").count() == 0
    # Newest first.
    assert "echo: to the pane" in pane.locator("[data-testid=notification-line]").first.inner_text()
    screenshot(page, "mcp-workbench-notifications")


def test_the_history_updates_live_in_every_tab_and_a_call_is_made_again_from_it(logged_in_page):
    row = _synced_demo_row()
    page = logged_in_page
    other = page.context.new_page()  # a second tab of the same admin
    other.goto(f"/mcp/{row.pk}/")
    page.goto(f"/mcp/{row.pk}/")
    _call(page, "mcp__demo__echo", text="seen in the other tab")
    page.wait_for_selector("[data-testid=call-form][data-tool=mcp__demo__echo] [data-testid=call-outcome][data-ok=true]")
    # The other tab did nothing, yet its history shows the call (pushed over its socket).
    other.locator("[data-testid=history-row][data-kind=tool] [data-testid=history-arguments]", has_text="seen in the other tab").wait_for()

    page.locator("[data-testid=history-row][data-kind=tool] [data-testid=rerun]").first.click()
    outcome = page.locator("[data-testid=rerun-outcome] [data-testid=call-outcome][data-ok=true]")
    outcome.wait_for()
    assert "seen in the other tab" in outcome.inner_text()
    page.wait_for_function("document.querySelectorAll('[data-testid=history-row][data-kind=tool]').length === 2")
    other.wait_for_function("document.querySelectorAll('[data-testid=history-row][data-kind=tool]').length === 2")
    screenshot(page, "mcp-workbench-rerun")
    other.close()


def test_servers_are_imported_from_a_config_file_and_exported_as_an_mcp_json_entry(logged_in_page):
    import json

    secret = "ghp_browser_import_secret_0123456789"
    config = {"mcpServers": {
        "imported-demo": {"command": sys.executable, "args": ["-m", "playground.mcp_servers.demo_server"], "env": {"GITHUB_TOKEN": secret}},
        "old-sse": {"type": "sse", "url": "http://127.0.0.1:9/sse"},  # the deprecated transport, still imported
        "socket": {"type": "websocket", "url": "ws://127.0.0.1:9/"},  # a transport the playground does not speak
    }}
    page = logged_in_page
    page.goto("/mcp/")
    page.click("[data-testid=import-servers]")
    page.set_input_files("[data-testid=import-file]", files=[{"name": "claude_desktop_config.json", "mimeType": "application/json",
                                                              "buffer": json.dumps(config).encode()}])
    page.click("[data-testid=import-submit]")
    outcome = page.locator("[data-testid=import-outcome]")
    outcome.wait_for()
    assert "2 servers imported: imported-demo, old-sse." in outcome.inner_text()
    assert "socket: transport 'websocket' is not one the playground speaks" in outcome.inner_text()
    page.click("[data-testid=imported-server][data-server=imported-demo]")
    page.wait_for_selector("[data-testid=server-status][data-status=connected]", timeout=60_000)  # its first sync ran
    assert secret not in page.content() and "GITHUB_TOKEN=********" in page.inner_text("[data-testid=masked-env]")

    with page.expect_download() as download:
        page.click("[data-testid=export-server]")
    from pathlib import Path

    exported = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    assert exported == {"mcpServers": {"imported-demo": {"command": sys.executable, "args": ["-m", "playground.mcp_servers.demo_server"],
                                                         "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}}}

    page.goto("/mcp/import/")
    page.fill("[data-testid=import-text]", '{"servers": []}')
    page.click("[data-testid=import-submit]")
    assert "no \"mcpServers\" object" in page.inner_text("[data-testid=import-error]")
    screenshot(page, "mcp-import-error")
