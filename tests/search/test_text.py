from __future__ import annotations

from playground.engine.search import text
from playground.engine.tools import Tool


def test_split_identifier_handles_camel_snake_double_underscore_and_digits():
    assert text.split_identifier("getWeatherForecast_v2") == ["get", "weather", "forecast", "v", "2"]
    assert text.split_identifier("mcp__git_hub__PRList") == ["mcp", "git", "hub", "pr", "list"]
    assert text.split_identifier("read-file.txt") == ["read", "file", "txt"]


def test_analyze_drops_stopwords_and_stems_both_sides_alike():
    assert text.analyze("Creating the issues") == ["creat", "issu"]
    assert text.analyze("create_issue") == ["creat", "issu"]
    assert text.analyze("the of and") == []


def test_tool_fields_split_name_server_and_schema():
    tool = Tool(
        name="mcp__github__create_issue",
        description="Create an issue",
        input_schema={"type": "object", "properties": {"repoName": {"type": "string", "description": "owner/repo"}}},
        is_mcp=True,
    )
    fields = text.tool_fields(tool)
    assert fields["name"] == "create_issue"
    assert fields["server"] == "github"
    assert "repoName" in fields["schema"] and "owner/repo" in fields["schema"]
    assert text.tool_document(tool).startswith("create issue (github): Create an issue")


def test_keyword_query_rule_is_deterministic_and_documented():
    query = "Could you please find the weather forecast for Paris for the next 3 days and convert the timezone?"
    derived = text.keyword_query(query)
    assert derived == "weather forecast paris convert timezone"
    assert text.keyword_query(query) == derived
    assert text.keyword_query("the and of") == ""
    assert len(text.keyword_query("alpha beta gamma delta epsilon zeta eta theta").split()) == 5
