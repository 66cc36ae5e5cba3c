"""The offline demo agent: deterministic argument filling, and the whole path on the demo data with a real MCP server."""
from __future__ import annotations

import sys
import uuid

import pytest
from django.core.management import call_command

from playground.conversations.providers.demo import DemoAgentProvider
from playground.conversations.providers.demo_arguments import clock_times, fill_arguments, find_mentions, missing
from playground.engine.prompt_cache import account, with_cache_breakpoints
from playground.engine.search.text import request_terms
from tests.conversations.conftest import converse, event_types, events_of

TIME_SCHEMA = {"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA timezone name"}},
               "required": ["timezone"]}
CONVERT_SCHEMA = {
    "type": "object",
    "properties": {
        "source_timezone": {"type": "string", "description": "Source IANA timezone name"},
        "time": {"type": "string", "description": "Time to convert in 24-hour format (HH:MM)"},
        "target_timezone": {"type": "string", "description": "Target IANA timezone name"},
    },
    "required": ["source_timezone", "time", "target_timezone"],
}


def test_a_city_becomes_its_iana_timezone():
    assert fill_arguments(TIME_SCHEMA, "What time is it in Tokyo?") == {"timezone": "Asia/Tokyo"}
    assert fill_arguments(TIME_SCHEMA, "time in new york please") == {"timezone": "America/New_York"}
    assert fill_arguments(TIME_SCHEMA, "what time is it?") == {"timezone": "UTC"}  # required: a safe default


def test_cities_times_numbers_and_quoted_strings_fill_their_properties():
    assert fill_arguments(CONVERT_SCHEMA, "Convert 14:30 from Paris to Tokyo") == {
        "source_timezone": "Europe/Paris", "time": "14:30", "target_timezone": "Asia/Tokyo"}
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "count": {"type": "integer"},
                                                "ratio": {"type": "number"}, "mode": {"type": "string", "enum": ["fast", "slow"]}}}
    assert fill_arguments(schema, 'Create "Fix login" 3 times at 0.5 in slow mode') == {
        "title": "Fix login", "count": 3, "ratio": 0.5, "mode": "slow"}


def test_clock_times_in_twelve_and_twenty_four_hour_forms():
    assert clock_times("convert 9am, 9:30 pm, 12 p.m. and 12am; then 14:30 and 23:59") == [
        "09:00", "21:30", "12:00", "00:00", "14:30", "23:59"]
    assert clock_times("13pm, at 7, 25:00 or 3 apples") == []  # no hour, no clock, no time
    assert fill_arguments(CONVERT_SCHEMA, "Convert 9am New York time to Berlin time")["time"] == "09:00"


def test_a_conversion_takes_the_cities_on_either_side_of_to():
    arguments = fill_arguments(CONVERT_SCHEMA, "What time is it in Tokyo, and convert 9am New York time to Berlin time?")
    assert arguments == {"source_timezone": "America/New_York", "time": "09:00", "target_timezone": "Europe/Berlin"}
    assert fill_arguments(TIME_SCHEMA, "What time is it in Tokyo, and convert 9am New York time to Berlin?") == {
        "timezone": "Asia/Tokyo"}  # one timezone: the first city, as before


def after_search(message: str, loaded: str, schema: dict) -> dict:
    """The request a model gets once ToolSearch has loaded `loaded` (native tool_reference)."""
    return {
        "model": "m", "max_tokens": 10,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": message}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {"query": "convert time"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": [{"type": "tool_reference", "tool_name": loaded}]}]},
        ],
        "tools": [{"name": "ToolSearch", "input_schema": {"type": "object"}},
                  {"name": loaded, "description": "Convert time between timezones", "input_schema": schema, "defer_loading": True}],
    }


def test_with_breakpoints_the_demo_reports_the_cache_models_split():
    """PROMPT_CACHE on: the demo's usage is the engine's cache model (write, then read what it wrote);
    without breakpoints, every input token is uncached as before."""
    system = f"Demo cache test {uuid.uuid4()}. " + "Answer with care. " * 200  # unique: the cache is per process
    first = with_cache_breakpoints({**after_search("What time is it in Tokyo?", "mcp__time__get_current_time", TIME_SCHEMA),
                                    "system": system}, "1h")
    second = with_cache_breakpoints({**first, "messages": [*first["messages"], {"role": "assistant", "content": "Noon."},
                                                           {"role": "user", "content": "And in Paris?"}]}, "1h")
    expected = account([(0, first), (1, second)], ttl="1h")
    usages = [DemoAgentProvider().create(body).usage for body in (first, second)]
    assert [(u["input"], u["cache_write"], u["cache_read"]) for u in usages] == [
        (t.uncached_tokens, t.cache_write_tokens, t.cache_read_tokens) for t in expected]
    assert usages[0]["cache_write"] > 1024 and usages[1]["cache_read"] == usages[0]["cache_write"]
    plain = DemoAgentProvider().create(after_search("What time is it in Tokyo?", "mcp__time__get_current_time", TIME_SCHEMA))
    assert plain.usage["cache_read"] == plain.usage["cache_write"] == 0 and plain.usage["input"] > 0


def test_the_agent_asks_for_a_required_value_the_message_does_not_give():
    # Before: it called convert_time without "time", and the time server rejected the call.
    response = DemoAgentProvider().create(after_search("Convert New York time to Berlin time", "mcp__time__convert_time", CONVERT_SCHEMA))
    assert response.stop_reason == "end_turn" and not response.tool_uses()
    assert "does not say its time (Time to convert in 24-hour format (HH:MM))" in response.content[0]["text"]

    response = DemoAgentProvider().create(after_search("Convert 9am New York time to Berlin time", "mcp__time__convert_time", CONVERT_SCHEMA))
    assert response.stop_reason == "tool_use"
    assert response.tool_uses()[0]["input"] == {"source_timezone": "America/New_York", "time": "09:00", "target_timezone": "Europe/Berlin"}


def test_a_required_list_or_object_it_cannot_fill_is_sent_empty_so_the_call_still_goes_out():
    # Asking for it stopped the demo before an "ask" rule's prompt (mcp__github__push_files needs files).
    schema = {"type": "object", "properties": {"repo": {"type": "string"}, "files": {"type": "array"}, "meta": {"type": "object"}},
              "required": ["repo", "files", "meta"]}
    response = DemoAgentProvider().create(after_search("Push files to the GitHub repository 'playground'", "mcp__github__push_files", schema))
    assert response.stop_reason == "tool_use"
    assert response.tool_uses()[0]["input"] == {"repo": "playground", "files": [], "meta": {}}


def test_an_expression_property_gets_the_arithmetic_in_the_message():
    schema = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}
    assert fill_arguments(schema, "What is (3 + 4) * 2?") == {"expression": "(3 + 4) * 2"}
    assert fill_arguments(schema, "Convert 14:30 please") == {}  # none: the agent asks, never sends the message


def test_search_terms_are_the_engines_request_terms():
    assert request_terms("What time is it in Tokyo?") == ["time", "tokyo"]


def test_it_is_deterministic(tool_world):
    request = {"model": "m", "max_tokens": 10, "system": "<available-deferred-tools>\nmcp__time__get_current_time\n</available-deferred-tools>",
               "messages": [{"role": "user", "content": [{"type": "text", "text": "What time is it in Tokyo?"}]}],
               "tools": [{"name": "ToolSearch", "input_schema": {"type": "object"}}, {"name": "echo", "input_schema": {"type": "object"}}]}
    first, second = DemoAgentProvider().create(request), DemoAgentProvider().create(request)
    assert first == second
    assert first.tool_uses()[0]["name"] == "ToolSearch" and first.tool_uses()[0]["input"] == {"query": "time tokyo"}


@pytest.fixture
def demo_data(db):
    from playground.mcp_servers.models import McpServer
    from playground.mcp_servers.services import sync_server
    from playground.mcp_servers.session_pool import session_pool

    call_command("load_demo_data", verbosity=0)
    time_server = McpServer.objects.get(name="time")
    assert time_server.command == sys.executable
    result = sync_server(time_server)
    assert time_server.tools.filter(name="mcp__time__get_current_time").exists(), result
    yield
    session_pool().close_all()


@pytest.mark.slow
def test_the_demo_agent_searches_loads_and_calls_the_real_time_server(admin_user, demo_data):
    from playground.registry.models import AgentProfile

    profile = AgentProfile.objects.get(name="Tool search on (native)")
    conversation, outcome = converse(admin_user, "What time is it in Tokyo?", profile=profile, provider=DemoAgentProvider())
    assert outcome.reason == "end_turn", event_types(conversation)

    search = events_of(conversation, "toolsearch_query")[0].payload
    assert "mcp__time__get_current_time" in search["loaded"] and search["scored"]
    turns = events_of(conversation, "turn_started")
    # Deferred on the first turn (the event keeps the first 200 names and the full count).
    assert "mcp__time__get_current_time" not in turns[0].payload["loaded_tools"]
    assert turns[0].payload["deferred_count"] > 700 and len(turns[0].payload["deferred_tools"]) == 200
    assert "mcp__time__get_current_time" in turns[1].payload["discovered_tools"]
    assert turns[0].payload["tokens"]["sent_tokens"] < turns[0].payload["tokens"]["baseline_tokens"] / 5
    call = events_of(conversation, "tool_call")[0].payload
    assert call == {"tool_use_id": call["tool_use_id"], "name": "mcp__time__get_current_time",
                    "arguments": {"timezone": "Asia/Tokyo"}, "permission": "allow"}
    result = events_of(conversation, "tool_result")[0].payload
    assert not result["is_error"] and not result["simulated"] and "Asia/Tokyo" in result["content"][0]["text"]
    answer = events_of(conversation, "message")[-1].payload
    assert answer["role"] == "assistant" and "Asia/Tokyo" in answer["text"]
    kinds = event_types(conversation)
    assert kinds.index("toolsearch_query") < kinds.index("tool_call") < kinds.index("tool_result") < len(kinds) - 1


def test_place_properties_get_the_place_the_person_named_not_the_whole_sentence():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert fill_arguments(schema, "What is the weather forecast for Paris?") == {"city": "Paris"}
    assert fill_arguments(schema, "Weather in Ouagadougou tomorrow?") == {"city": "Ouagadougou"}  # a tz city
    assert fill_arguments(schema, "Any rain expected in Springfield Gardens today?") == {"city": "Springfield Gardens"}
    # No place at all: nothing, so the agent asks; the message is never pasted into an argument.
    assert fill_arguments(schema, "what is the weather like?") == {}


def test_a_quoted_string_goes_to_a_title_like_property_first():
    schema = {"type": "object", "properties": {"owner": {"type": "string"}, "repo": {"type": "string"}, "title": {"type": "string"}},
              "required": ["owner", "repo", "title"]}
    arguments = fill_arguments(schema, "Create a GitHub issue titled 'Login broken'")
    assert arguments == {"title": "Login broken"} and missing(schema, arguments) == ["owner", "repo"]  # asked for, not made up
    arguments = fill_arguments(schema, "Create an issue 'Login broken' in octo/playground")
    assert list(arguments.items()) == [("owner", "octo"), ("repo", "playground"), ("title", "Login broken")]  # the schema's order


def test_arithmetic_goes_to_a_loaded_calculator_without_a_search():
    calculator = {"name": "calculator", "input_schema": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}
    request = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "text", "text": "What is 17 * 23?"}]}],
               "tools": [{"name": "ToolSearch", "input_schema": {"type": "object"}}, calculator]}
    response = DemoAgentProvider().create(request)
    assert response.tool_uses() == [{"type": "tool_use", "id": response.tool_uses()[0]["id"], "name": "calculator", "input": {"expression": "17 * 23"}}]
    # A message that holds arithmetic-looking text among other words is not arithmetic: it searches.
    request["messages"][0]["content"][0]["text"] = "What is on my calendar for 2026-12-03?"
    assert DemoAgentProvider().create(request).tool_uses()[0]["name"] == "ToolSearch"


def test_after_a_search_it_calls_nothing_that_shares_no_word_with_the_request():
    # Search ranks something first even for "hello"; the demo called it.
    request = after_search("hello there", "mcp__opgg-mcp__lol-summoner-game-history", {"type": "object", "properties": {}})
    response = DemoAgentProvider().create(request)
    assert response.stop_reason == "end_turn" and not response.tool_uses()
    assert "mcp__opgg-mcp__lol-summoner-game-history" in response.content[0]["text"] and "called none" in response.content[0]["text"]


@pytest.mark.parametrize("style", ["full", "delta"])
def test_the_demo_agent_reads_the_announced_names_in_every_layout(style):
    from playground.engine.announcements import announce

    names = ["Read", "mcp__github__create_issue", "mcp__github__list_issues", "mcp__time__get_current_time"]
    for layout in ("flat", "grouped"):
        announcement = announce(names, [], style, layout=layout)
        request = {"system": announcement.text, "messages": [{"role": "user", "content": "hi"}]}
        assert DemoAgentProvider._announced(request) == names
    # Past its budget a server is a summary line; the agent scores its words.
    many = [f"mcp__github__create_repository_{i}" for i in range(300)]
    summary = announce(many, [], "full", layout="budgeted", budget_tokens=100)
    lines = DemoAgentProvider._announced({"system": summary.text, "messages": []})
    assert lines and lines[0].startswith("mcp__github (300 tools)")
    # A delta in the history adds to the system prompt's full list.
    delta = announce([*names, "mcp__time__convert_time"], [{"role": "user", "content": announce(names, [], "full", layout="grouped").text}], "delta", layout="grouped")
    request = {"system": announce(names, [], "full", layout="grouped").text, "messages": [{"role": "user", "content": [delta.to_block()]}]}
    assert "mcp__time__convert_time" in DemoAgentProvider._announced(request)


# -- the extractor -------------------------------------------------------------------------------
PUSH_SCHEMA = {  # mcp__github__push_files in the demo catalog
    "type": "object",
    "properties": {"owner": {"type": "string", "description": "Repository owner (username or organization)"},
                   "repo": {"type": "string", "description": "Repository name"},
                   "branch": {"type": "string", "description": "Branch to push to (e.g., 'main' or 'master')"},
                   "files": {"type": "array", "items": {"type": "object"}, "description": "Array of files to push"},
                   "message": {"type": "string", "description": "Commit message"}},
    "required": ["owner", "repo", "branch", "files", "message"],
}
SLACK_SCHEMA = {"type": "object", "properties": {"channel_id": {"type": "string", "description": "The ID of the channel to post to"},
                                                 "text": {"type": "string", "description": "The message text to post"}},
                "required": ["channel_id", "text"]}
WRITE_SCHEMA = {"type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["file_path", "content"]}


def test_the_extractor_finds_each_kind_of_value_in_the_order_written():
    found = find_mentions("Compare octo/site with \"release notes\" at https://example.org/a/b, see #deploys and #ops, "
                          "files /etc/hosts and docs/setup.md, 3 retries at 0.5, by 9:30 pm in Paris, issue #42")
    assert found.quoted == ["release notes"]
    assert found.repos == [("octo", "site")]
    assert found.urls == ["https://example.org/a/b"]
    assert found.paths == ["/etc/hosts", "docs/setup.md"]
    assert found.channels == ["deploys", "ops"]
    assert found.numbers == ["3", "0.5", "42"]  # the clock time and the #42 channel-like mark are not channels or times twice
    assert found.times == ["21:30"] and found.zones == ["Europe/Paris"]
    # An apostrophe is not a quote.
    assert find_mentions("What's the plan? Don't 'ship it' yet").quoted == ["ship it"]


def test_values_go_to_the_properties_named_for_them_and_nothing_is_pasted():
    message = "Push files to octo/playground on branch main with the message 'Update docs'"
    assert fill_arguments(PUSH_SCHEMA, message) == {
        "owner": "octo", "repo": "playground", "branch": "main", "files": [], "message": "Update docs"}
    assert fill_arguments(PUSH_SCHEMA, "push to the main branch of octo/site, message \"fix\"")["branch"] == "main"
    # What the message does not give is left out (the agent asks), never filled with the message.
    partial = fill_arguments(PUSH_SCHEMA, "Push files to the GitHub repository 'playground'")
    assert partial == {"repo": "playground", "files": []} and missing(PUSH_SCHEMA, partial) == ["owner", "branch", "message"]
    assert fill_arguments(SLACK_SCHEMA, "Post 'Deploy done' to #general") == {"channel_id": "general", "text": "Deploy done"}
    assert fill_arguments(SLACK_SCHEMA, "Send a message to #general saying hi") == {"channel_id": "general"}
    assert fill_arguments(WRITE_SCHEMA, "Write 'hello world' to notes.txt") == {"file_path": "notes.txt", "content": "hello world"}
    # A repository property without an owner beside it takes the full name; query properties the search terms.
    assert fill_arguments({"properties": {"repository": {"type": "string"}}}, "Stars of octo/site?") == {"repository": "octo/site"}
    assert fill_arguments({"properties": {"query": {"type": "string"}}}, "Please find open issues about login") == {
        "query": "open issues login"}
    # An enum takes a value it names, else asks (its choices are listed in the question).
    enum = {"properties": {"state": {"type": "string", "enum": ["open", "closed"]}}, "required": ["state"]}
    assert fill_arguments(enum, "list the closed issues") == {"state": "closed"} and fill_arguments(enum, "list issues") == {}


def demo_request(message: str, tools: list[dict], announced: list[str] = ()) -> dict:
    system = "<available-deferred-tools>\n" + "\n".join(announced) + "\n</available-deferred-tools>" if announced else ""
    return {"model": "m", "max_tokens": 10, "system": system,
            "messages": [{"role": "user", "content": [{"type": "text", "text": message}]}],
            "tools": [{"name": "ToolSearch", "input_schema": {"type": "object"}}, *tools]}


WRITE = {"name": "Write", "description": "Write a text file , replacing it if it exists.", "input_schema": WRITE_SCHEMA}
DEFERRED_WRITES = ["mcp__filesystem__write_file", "mcp__desktop-commander__write_file"]


def test_a_loaded_tool_that_fits_is_called_before_a_deferred_one():
    # Before: it searched and called the deferred write_file, so the demo's "ask Write" rule never fired.
    response = DemoAgentProvider().create(demo_request("Write 'hello' to a file notes.txt", [WRITE], DEFERRED_WRITES))
    assert response.tool_uses()[0]["name"] == "Write"
    assert response.tool_uses()[0]["input"] == {"file_path": "notes.txt", "content": "hello"}
    assert response.content[0]["text"] == "Write is loaded and fits: calling it with file_path=notes.txt, content=hello."
    # A loaded tool the message cannot fill does not stop a search for a deferred one that fits better.
    response = DemoAgentProvider().create(demo_request("Write the weather forecast", [WRITE], ["mcp__weather__get_forecast"]))
    assert response.tool_uses()[0]["name"] == "ToolSearch"
    assert response.content[0]["text"] == "No loaded tool fits, so I am searching the deferred tools for “write weather forecast”."


def test_the_agent_asks_and_then_reads_the_answer_with_the_question():
    ask = DemoAgentProvider().create(demo_request("Write to notes.txt", [WRITE], DEFERRED_WRITES))
    assert not ask.tool_uses() and ask.stop_reason == "end_turn"
    assert ask.content[0]["text"] == "Write is loaded and fits, but your message does not say its content. Tell me, and I will call it."
    follow_up = demo_request("Write to notes.txt", [WRITE], DEFERRED_WRITES)
    follow_up["messages"] += [{"role": "assistant", "content": ask.content}, {"role": "user", "content": "'hello there'"}]
    response = DemoAgentProvider().create(follow_up)
    assert response.tool_uses()[0]["name"] == "Write"
    assert response.tool_uses()[0]["input"] == {"file_path": "notes.txt", "content": "hello there"}


def test_the_final_answer_says_what_was_called_with_which_arguments():
    request = demo_request("What time is it in Tokyo?", [])
    request["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "mcp__time__get_current_time", "input": {"timezone": "Asia/Tokyo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "09:00 JST"}]},
    ]
    answer = DemoAgentProvider().create(request)
    assert answer.content[0]["text"] == "I called mcp__time__get_current_time with timezone=Asia/Tokyo. It returned:\n09:00 JST"


READ = {"name": "Read", "description": "Read a text file . Returns the file's lines with line numbers.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string", "description": "Path of the file"}},
                         "required": ["file_path"]}}
PUSH = "Push files to octo/playground on branch main with the message 'Update docs'"


def test_the_announcement_is_read_after_the_profiles_own_system_prompt():
    # Before: a system prompt ahead of the announcement hid every deferred name, so a loaded tool that
    # shared one word with the message ("files" in Read's description) won over push_files.
    request = demo_request(PUSH, [READ, WRITE], ["mcp__github__push_files", "mcp__gitlab__push_files"])
    request["system"] = "You are a helpful assistant. Use ToolSearch to find tools you do not have yet.\n\n" + request["system"]
    response = DemoAgentProvider().create(request)
    assert response.tool_uses()[0]["name"] == "ToolSearch", response.content[0]["text"]
    assert response.tool_uses()[0]["input"] == {"query": "push files octo playground"}
    # The same with the system prompt as blocks.
    request["system"] = [{"type": "text", "text": request["system"]}]
    assert DemoAgentProvider().create(request).tool_uses()[0]["name"] == "ToolSearch"


def test_the_demo_agent_chooses_among_what_it_was_offered_and_fails_when_the_right_tool_was_not():
    time_tool = {"name": "mcp__time__get_current_time", "description": "Get the current time in a timezone.", "input_schema": TIME_SCHEMA}
    echo = {"name": "echo", "description": "Echo a message back.", "input_schema": {"type": "object", "properties": {}}}
    offered = demo_request("What time is it in Tokyo?", [time_tool, echo], [])
    assert DemoAgentProvider().create(offered).tool_uses()[0]["name"] == "mcp__time__get_current_time"
    # Not offered, but ToolSearch is: it searches, as a model would.
    deferred = demo_request("What time is it in Tokyo?", [echo], ["mcp__time__get_current_time"])
    assert DemoAgentProvider().create(deferred).tool_uses()[0]["name"] == "ToolSearch"
    # Not offered and no ToolSearch: it calls nothing and says so (the task fails).
    without_search = {**deferred, "tools": [echo], "system": ""}
    response = DemoAgentProvider().create(without_search)
    assert response.tool_uses() == [] and response.content[0]["text"] == "None of my tools fits that request."
    # Offered only with defer_loading and never loaded: not callable, so it searches rather than call it.
    hidden = demo_request("What time is it in Tokyo?", [echo, {**time_tool, "defer_loading": True}], [])
    assert DemoAgentProvider().create(hidden).tool_uses()[0]["name"] == "ToolSearch"
