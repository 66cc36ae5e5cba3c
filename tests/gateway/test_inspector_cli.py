"""The MCP Inspector's command line (a second, independent client) against the live gateway.
Skips with the reason when npx is missing or the Inspector cannot be fetched from npm.

Each invocation of the CLI opens its own MCP session: a search and the call of what it found are
two sessions, joined by the tools the gateway remembers per token and client name."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Pinned: unpinned, npm on Node 20 resolves the newest version whose `engines` allow Node 20, 0.15.0,
# which has no --header. 2.12.0 (engines: Node >= 22.19) warns on Node 20 and works; docs/gateway.md
# names the versions.
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


def inspector(url: str, token: str, *args: str) -> dict:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed (Node.js): the Inspector CLI test needs it")
    argv = [npx, "-y", INSPECTOR, "--cli", "--server-url", url, "--transport", "http", "--format", "json",
            *args, "--header", f"Authorization: Bearer {token}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.skip("the MCP Inspector did not answer within 240 s (fetching it from npm?)")
    if "npm error" in done.stderr and not done.stdout.strip():
        pytest.skip(f"could not fetch {INSPECTOR} from npm: {done.stderr.strip().splitlines()[-1]}")
    if not done.stdout.strip():
        pytest.fail(f"the MCP Inspector printed no result (exit status {done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_mcp_inspector_lists_the_tools_and_searches(live_gateway, gateway_world):
    url, token = live_gateway.endpoint(gateway_world["profile"].pk), gateway_world["token"]
    listed = inspector(url, token, "--method", "tools/list")
    names = [t["name"] for t in listed["result"]["tools"]]
    assert "ToolSearch" in names and "echo" in names and "word_count" not in names
    found = inspector(url, token, "--method", "tools/call", "--tool-name", "ToolSearch", "--tool-arg", "query=+count words")
    assert json.loads(found["result"]["content"][0]["text"])["matches"] == ["word_count"]


def test_the_mcp_inspector_searches_in_one_invocation_and_calls_what_it_found_in_the_next(live_gateway, gateway_world):
    from playground.gateway.models import GatewaySession

    url, token = live_gateway.endpoint(gateway_world["profile"].pk), gateway_world["token"]
    found = inspector(url, token, "--method", "tools/call", "--tool-name", "ToolSearch", "--tool-arg", "query=select:word_count")
    assert json.loads(found["result"]["content"][0]["text"])["matches"] == ["word_count"]
    called = inspector(url, token, "--method", "tools/call", "--tool-name", "word_count", "--tool-arg", "text=one two three")
    result = called["result"]
    assert not result.get("isError"), result
    assert "3" in result["content"][0]["text"]
    sessions = GatewaySession.objects.filter(profile=gateway_world["profile"]).order_by("pk")
    assert sessions.count() == 2 and sessions[1].events.filter(type="session_started").get().payload["remembered"] == ["word_count"]
