"""The tool detail page: what each agent profile's model gets of the tool, as a conversation decides it."""
from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from playground.registry import adapter
from playground.registry.models import AgentProfile, PermissionRule, Tool
from tests.registry.conftest import make_tool

ROW = re.compile(r'<tr data-profile="([^"]+)" data-effect="(\w+)">')


@pytest.fixture
def profiles(db, tools, deny_delete_rule):
    """Four profiles whose models get the github tools differently."""
    open_profile = AgentProfile.objects.create(name="Open", tool_search_mode="true")
    careful = AgentProfile.objects.create(name="Careful", tool_search_mode="true")
    PermissionRule.objects.create(effect="ask", pattern="mcp__github__*", profile=careful)
    slack_only = AgentProfile.objects.create(name="Slack only", tool_search_mode="true", allowed_tools=["mcp__slack__*"])
    sub = AgentProfile.objects.create(name="Sub", tool_search_mode="true", is_subagent=True,
                                      disallowed_tools=["mcp__github__create_issue"])
    return [open_profile, careful, slack_only, sub]


def verdicts(client, name: str) -> dict[str, str]:
    tool = Tool.objects.get(name=name)
    body = client.get(reverse("registry:tool_detail", args=[tool.pk])).content.decode()
    return dict(ROW.findall(body))


def test_each_profile_shows_whether_its_model_sees_the_tool_and_why(viewer_client, profiles):
    assert verdicts(viewer_client, "mcp__github__create_issue") == {
        "Open": "allow", "Careful": "ask", "Slack only": "excluded", "Sub": "excluded"}
    assert verdicts(viewer_client, "mcp__github__delete_repo") == {
        "Open": "deny", "Careful": "deny", "Slack only": "excluded", "Sub": "deny"}
    body = viewer_client.get(reverse("registry:tool_detail", args=[Tool.objects.get(name="mcp__github__delete_repo").pk])).content.decode()
    assert "deny mcp__github__delete_repo" in body and "not on this profile&#x27;s tool list" in body


def test_the_page_agrees_with_what_a_conversation_sends(viewer_client, profiles):
    for tool in Tool.objects.filter(enabled=True):
        shown = verdicts(viewer_client, tool.name)
        for profile in profiles:
            catalog, filtered = adapter.filtered_catalog(profile)
            kept = {t.name for t in filtered.permitted}
            expected = ("excluded" if tool.name not in catalog
                        else "deny" if tool.name not in kept
                        else "ask" if tool.name in filtered.ask else "allow")
            assert shown[profile.name] == expected, (tool.name, profile.name)


def test_a_disabled_tool_says_no_model_sees_it(viewer_client, profiles):
    tool = Tool.objects.get(name="mcp__slack__list_channels")
    body = viewer_client.get(reverse("registry:tool_detail", args=[tool.pk])).content.decode()
    assert 'data-testid="profile-verdicts-disabled"' in body and not ROW.search(body)


def test_queries_do_not_grow_with_the_number_of_profiles(viewer_client, profiles):
    url = reverse("registry:tool_detail", args=[Tool.objects.get(name="mcp__github__create_issue").pk])

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert viewer_client.get(url).status_code == 200
        return len(queries)

    few = count()
    for index in range(6):
        profile = AgentProfile.objects.create(name=f"Extra {index}", tool_search_mode="true")
        PermissionRule.objects.create(effect="ask", pattern="mcp__github", profile=profile)
    assert count() == few
    assert len(verdicts(viewer_client, "mcp__github__create_issue")) == 10


def test_past_searches_show_to_their_owner_and_staff_only(viewer_client, viewer_user, admin_user, django_user_model, tools):
    from django.test import Client

    from playground.conversations.models import Conversation, ToolSearchUsage

    admin_client = Client()  # the `client` fixture is viewer_client itself
    admin_client.force_login(admin_user)
    tool = Tool.objects.get(name="mcp__github__create_issue")
    carol = django_user_model.objects.create_user("carol", "carol@example.com", "pw-carol-123")
    for owner, query in ((viewer_user, "file a bug ticket"), (carol, "carol's private request")):
        conversation = Conversation.objects.create(owner=owner)
        ToolSearchUsage.objects.create(conversation=conversation, query=query, tool_name=tool.name, query_hash=query)
    url = reverse("registry:tool_detail", args=[tool.pk])
    own = viewer_client.get(url).content.decode()
    assert "file a bug ticket" in own and "carol" not in own
    everything = admin_client.get(url).content.decode()
    assert "file a bug ticket" in everything and "carol&#x27;s private request" in everything
    other = Tool.objects.get(name="mcp__slack__post_message")
    assert 'data-testid="no-past-searches"' in viewer_client.get(reverse("registry:tool_detail", args=[other.pk])).content.decode()


def test_a_built_in_without_an_implementation_is_labelled_simulated_where_it_is_listed(admin_client, db):
    """Claude Code's Write is shipped as a built-in definition the model sees; this playground has no
    implementation of it, so its calls get a simulated result: the pages say so, its answer too."""
    from playground.engine.tools import Tool as EngineTool
    from playground.mcp_servers.executor import SIMULATED_PREFIX, PlaygroundExecutor

    write = make_tool("Write", "Write a text file.", source=Tool.Source.BUILTIN)
    calculator = make_tool("calculator", "Evaluate arithmetic.", source=Tool.Source.BUILTIN)
    assert (write.source_label, calculator.source_label) == ("Built-in · simulated", "Built-in")
    detail = admin_client.get(reverse("registry:tool_detail", args=[write.pk])).content.decode()
    assert "Built-in · simulated" in detail and "simulated result" in detail
    listed = admin_client.get(reverse("registry:tool_list")).content.decode()
    assert 'data-testid="simulated-builtin"' in listed and listed.count("Built-in · simulated") == 1
    answer = PlaygroundExecutor().execute(EngineTool(name="Write"), {"file_path": "notes.txt", "content": "hi"})
    text = answer.content[0]["text"]
    assert answer.simulated and text.startswith(SIMULATED_PREFIX)
    assert "catalog-only tool with no backend" not in text and "Built-in · simulated" in text
