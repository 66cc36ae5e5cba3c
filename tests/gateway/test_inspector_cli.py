"""The MCP Inspector's command line (a second, independent client) against the live gateway.
Skips with the reason when npx is missing or the Inspector cannot be fetched from npm."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# 2.x warns that it wants Node 22 but runs on the machines' Node 20.
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
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_mcp_inspector_lists_the_tools_and_searches(live_gateway, gateway_world):
    url, token = live_gateway.endpoint(gateway_world["profile"].pk), gateway_world["token"]
    listed = inspector(url, token, "--method", "tools/list")
    names = [t["name"] for t in listed["result"]["tools"]]
    assert "ToolSearch" in names and "echo" in names and "word_count" not in names
    found = inspector(url, token, "--method", "tools/call", "--tool-name", "ToolSearch", "--tool-arg", "query=+count words")
    assert json.loads(found["result"]["content"][0]["text"])["matches"] == ["word_count"]
