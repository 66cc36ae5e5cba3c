"""The gateway for clients of every kind, with the SDK's client against the gateway under Daphne:
a client that opens a session per request calls what an earlier session found; an MCP server's
structuredContent and every content type reach the client unchanged; the resources and prompts of
the servers a profile may use are offered (and those of a denied server are not); a client that
answers elicitations confirms an `ask` call itself."""
from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.gateway.test_live_client import in_thread_db, names, text_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@asynccontextmanager
async def connect(url: str, token: str, *, client_name: str = "pytest-every-client", elicitation=None):
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicitation,
                                     client_info=types.Implementation(name=client_name, version="1")) as session:
                await session.initialize()
                yield session


@pytest.fixture
def demo_server(gateway_world):
    """The playground's demo MCP server over stdio behind the profile, with its content samples tool,
    and two of its tools in the catalog (deferred, as MCP tools are)."""
    from playground.gateway import upstream
    from playground.mcp_servers.models import McpServer
    from playground.registry import adapter
    from playground.registry.models import Tool

    server = McpServer.objects.create(name="demo", transport="stdio", command=sys.executable,
                                      args=["-m", "playground.mcp_servers.demo_server"],
                                      env={"DEMO_SERVER_CONTENT_SAMPLES": "1"})
    for name, description, schema in [
        ("lookup_city_timezone", "Look up the IANA time zone of a well-known city.",
         {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        ("content_samples", "Answer with one content block of every MCP type.", {"type": "object", "properties": {}}),
    ]:
        Tool.objects.create(name=f"mcp__demo__{name}", server=server, source=Tool.Source.MCP, description=description,
                            input_schema=schema)
    adapter.reset_caches()
    upstream.reset_cache()
    return server


# -- one-shot clients ---------------------------------------------------------------------------------
def test_a_client_that_opens_a_session_per_request_calls_what_its_last_session_found(live_gateway, gateway_world):
    from playground.gateway.models import GatewayDiscovery, GatewaySession
    from playground.registry.models import PermissionRule

    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)

    async def search():
        async with connect(url, token, client_name="one-shot") as session:
            found = await session.call_tool("ToolSearch", {"query": "select:word_count"})
            assert json.loads(found.content[0].text)["matches"] == ["word_count"]

    async def call(client_name: str = "one-shot"):
        async with connect(url, token, client_name=client_name) as session:
            listed = names(await session.list_tools())
            return listed, await session.call_tool("word_count", {"text": "one two three"})

    anyio.run(search)
    listed, called = anyio.run(call)
    assert "word_count" in listed
    assert not called.is_error and "3" in text_of(called)

    # Another client on the same token found nothing: the engine's "select it first" answer.
    listed, other = anyio.run(call, "another-client")
    assert "word_count" not in listed
    assert other.is_error and "select:word_count" in text_of(other)

    # A deny rule wins over a remembered discovery (the turn's check_call decides, at call time).
    PermissionRule.objects.create(effect="deny", pattern="word_count", profile=None)
    _, denied = anyio.run(call)
    assert denied.is_error and "denied" in text_of(denied)

    sessions = list(GatewaySession.objects.filter(profile=profile, client_name="one-shot").order_by("pk"))
    assert len(sessions) == 3
    started = sessions[1].events.get(type="session_started").payload
    assert started["remembered"] == ["word_count"]
    call_event = sessions[1].events.get(type="tool_call").payload
    assert call_event["name"] == "word_count" and call_event["permission"] == "allow" and not call_event["is_error"]
    assert GatewayDiscovery.objects.filter(token=gateway_world["token_row"], client_name="one-shot").count() == 1


def test_remembered_discoveries_expire(live_gateway, gateway_world, settings):
    from django.utils import timezone

    from playground.gateway.models import GatewayDiscovery

    profile, token = gateway_world["profile"], gateway_world["token"]
    url = live_gateway.endpoint(profile.pk)

    async def search():
        async with connect(url, token, client_name="one-shot") as session:
            await session.call_tool("ToolSearch", {"query": "select:calculator"})

    async def call():
        async with connect(url, token, client_name="one-shot") as session:
            return await session.call_tool("calculator", {"expression": "2+3"})

    anyio.run(search)
    GatewayDiscovery.objects.update(found_at=timezone.now() - timezone.timedelta(seconds=settings.GATEWAY_DISCOVERY_TTL_SECONDS + 5))
    expired = anyio.run(call)
    assert expired.is_error and "select:calculator" in text_of(expired)
    anyio.run(search)  # found again: remembered again
    assert not anyio.run(call).is_error


# -- results passed on unchanged ------------------------------------------------------------------------
def test_structured_content_and_every_content_type_pass_through(live_gateway, gateway_world, demo_server):
    profile, token = gateway_world["profile"], gateway_world["token"]

    async def flow():
        async with connect(live_gateway.endpoint(profile.pk), token) as session:
            await session.call_tool("ToolSearch", {"query": "select:mcp__demo__lookup_city_timezone,mcp__demo__content_samples"})
            zone = await session.call_tool("mcp__demo__lookup_city_timezone", {"city": "Tokyo"})
            samples = await session.call_tool("mcp__demo__content_samples", {})
            return zone, samples

    zone, samples = anyio.run(flow)
    assert not zone.is_error, text_of(zone)
    assert zone.structured_content == {"city": "Tokyo", "timezone": "Asia/Tokyo"}
    assert not samples.is_error, text_of(samples)
    assert [c.type for c in samples.content] == ["text", "image", "audio", "resource_link", "resource"]
    image, audio, link, embedded = samples.content[1:]
    assert image.mime_type == "image/png" and image.data
    assert audio.mime_type == "audio/wav" and audio.data
    assert str(link.uri) == "demo://readme" and link.name == "readme"
    assert str(embedded.resource.uri) == "demo://cities" and "Asia/Tokyo" in embedded.resource.text


# -- resources and prompts --------------------------------------------------------------------------------
def test_the_resources_and_prompts_of_the_profiles_servers_are_offered(live_gateway, gateway_world, demo_server):
    from playground.gateway.models import GatewaySession

    profile, token = gateway_world["profile"], gateway_world["token"]

    async def flow():
        async with connect(live_gateway.endpoint(profile.pk), token) as session:
            listed = await session.list_resources()
            templates = await session.list_resource_templates()
            readme = await session.read_resource("demo://readme")
            city = await session.read_resource("demo://city/tokyo")  # through the template
            badge = await session.read_resource("demo://badge.png")
            with pytest.raises(MCPError) as unknown:
                await session.read_resource("other://nothing")
            prompts = await session.list_prompts()
            prompt = await session.get_prompt("mcp__demo__plan_trip", {"city": "Tokyo", "days": "3"})
            with pytest.raises(MCPError) as no_prompt:
                await session.get_prompt("mcp__elsewhere__plan_trip", {"city": "Tokyo"})
            return listed, templates, readme, city, badge, unknown.value, prompts, prompt, no_prompt.value

    listed, templates, readme, city, badge, unknown, prompts, prompt, no_prompt = anyio.run(flow)
    # Listed under server-qualified addresses (two servers may offer one URI), the upstream URI in _meta.
    assert {"mcp-server://demo/demo%3A%2F%2Freadme", "mcp-server://demo/demo%3A%2F%2Fbadge.png"} <= {
        str(r.uri) for r in listed.resources}
    assert {(r.meta or {}).get("toolsearch/uri") for r in listed.resources} >= {"demo://readme", "demo://cities"}
    assert {"demo://city/{name}", "demo://cities/{city}"} == {t.uri_template for t in templates.resource_templates}
    assert "playground-demo" in readme.contents[0].text
    assert city.contents[0].text == "Asia/Tokyo"
    assert badge.contents[0].mime_type == "image/png" and badge.contents[0].blob
    assert "No resource 'other://nothing' is offered here" in unknown.error.message and unknown.error.code == -32002
    assert [p.name for p in prompts.prompts] == ["mcp__demo__plan_trip"]
    assert {a.name for a in prompts.prompts[0].arguments} == {"city", "days"}
    assert "Plan a 3-day trip to Tokyo" in prompt.messages[0].content.text
    assert "No prompt 'mcp__elsewhere__plan_trip' is offered here" in no_prompt.error.message

    session = GatewaySession.objects.get(profile=profile)
    reads = [e.payload for e in session.events.filter(type="resource_read").order_by("sequence")]
    assert [(r["uri"], r.get("server"), "error" in r) for r in reads] == [
        ("demo://readme", "demo", False), ("demo://city/tokyo", "demo", False), ("demo://badge.png", "demo", False),
        ("other://nothing", None, True)]
    got = [e.payload for e in session.events.filter(type="prompt_got").order_by("sequence")]
    assert got[0]["server"] == "demo" and got[0]["messages"] == 1 and got[0]["arguments"] == {"city": "Tokyo", "days": "3"}


def test_a_denied_server_offers_no_resources_or_prompts(live_gateway, gateway_world, demo_server):
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(effect="deny", pattern="mcp__demo", profile=gateway_world["profile"])
    profile, token = gateway_world["profile"], gateway_world["token"]

    async def flow():
        async with connect(live_gateway.endpoint(profile.pk), token) as session:
            listed = await session.list_resources()
            templates = await session.list_resource_templates()
            prompts = await session.list_prompts()
            with pytest.raises(MCPError) as refused:
                await session.read_resource("demo://readme")
            with pytest.raises(MCPError) as no_prompt:
                await session.get_prompt("mcp__demo__plan_trip", {"city": "Tokyo"})
            return listed, templates, prompts, refused.value, no_prompt.value

    listed, templates, prompts, refused, no_prompt = anyio.run(flow)
    assert listed.resources == [] and templates.resource_templates == [] and prompts.prompts == []
    assert "is offered here" in refused.error.message and "is offered here" in no_prompt.error.message


# -- elicitation -------------------------------------------------------------------------------------------
def test_a_client_that_answers_elicitations_confirms_an_ask_call_itself(live_gateway, gateway_world):
    from playground.gateway.models import GatewaySession
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(effect="ask", pattern="calculator", profile=None)
    profile, token = gateway_world["profile"], gateway_world["token"]
    asked: list[str] = []
    answers = iter(["accept", "decline"])

    async def answer(context, params):
        asked.append(params.message)
        return types.ElicitResult(action=next(answers), content={})

    async def flow():
        async with connect(live_gateway.endpoint(profile.pk), token, elicitation=answer) as session:
            await session.call_tool("ToolSearch", {"query": "select:calculator"})
            accepted = await session.call_tool("calculator", {"expression": "6*7"})
            declined = await session.call_tool("calculator", {"expression": "1+1"})
            return accepted, declined

    accepted, declined = anyio.run(flow)
    assert not accepted.is_error and "42" in text_of(accepted)
    assert declined.is_error and "denied" in text_of(declined)
    assert len(asked) == 2 and "calculator" in asked[0] and '"expression": "6*7"' in asked[0]

    session = GatewaySession.objects.get(profile=profile)
    assert list(session.prompts.order_by("pk").values_list("status", flat=True)) == ["allowed", "denied"]
    answered = [e.payload for e in session.events.filter(type="permission_answered").order_by("sequence")]
    assert [(a["answer"], a["by"]) for a in answered] == [
        ("allowed", "the person at the MCP client (elicitation)"), ("denied", "the person at the MCP client (elicitation)")]
    assert all(e.payload["ask_client"] for e in session.events.filter(type="permission_asked"))
    calls = [e.payload for e in session.events.filter(type="tool_call").order_by("sequence")]
    assert [(c["permission"], c["answer"], c["is_error"]) for c in calls] == [("ask", "allowed", False), ("ask", "denied", True)]


def test_a_client_that_cancels_the_elicitation_leaves_the_answer_to_the_dashboard(live_gateway, gateway_world):
    from playground.gateway.models import GatewayPrompt
    from playground.gateway.service import answer_prompt
    from playground.registry.models import PermissionRule

    PermissionRule.objects.create(effect="ask", pattern="calculator", profile=None)
    profile, token = gateway_world["profile"], gateway_world["token"]

    async def cancel(context, params):
        return types.ElicitResult(action="cancel")

    def allow_on_the_dashboard():
        from tests.polling import wait_until

        wait_until(lambda: GatewayPrompt.objects.filter(status="pending").exists(), "a pending prompt", 10)
        assert answer_prompt(GatewayPrompt.objects.get(status="pending").pk, "allowed")

    async def flow():
        async with connect(live_gateway.endpoint(profile.pk), token, elicitation=cancel) as session:
            await session.call_tool("ToolSearch", {"query": "select:calculator"})
            results = {}

            async def call():
                results["call"] = await session.call_tool("calculator", {"expression": "6*7"})

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await in_thread_db(allow_on_the_dashboard)
            return results["call"]

    result = anyio.run(flow)
    assert not result.is_error and "42" in text_of(result)
