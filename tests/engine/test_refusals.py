"""Refusal codes (engine/refusals.py): the turn's refusals are codes of the one vocabulary, each code is
one measure kind, and a tool_result saved before codes still reads by the loop's own note."""
from __future__ import annotations

import pytest

from playground.engine import refusals
from playground.engine.permissions import PermissionRule
from tests.engine.test_turn import GITHUB, turn_for


def test_every_refusal_the_turn_gives_is_a_code_of_the_vocabulary(small_catalog):
    turn = turn_for(small_catalog, rules=[PermissionRule("deny", "Bash")])
    given = {turn.check_call(GITHUB).refusal, turn.check_call("Bash").refusal, turn.check_call("Nope").refusal,
             turn_for(small_catalog, wire="server", server_search="bm25").check_call("ToolSearch").refusal}
    assert given == {refusals.DEFERRED, refusals.DENIED, refusals.UNKNOWN, refusals.SERVER_SEARCH}
    assert given <= set(refusals.CODES)


@pytest.mark.parametrize(("code", "kind"), [
    ("deferred", "tool_not_loaded"), ("denied", "permission_denied"), ("person_denied", "permission_denied"),
    ("prompt_timeout", "permission_denied"), ("unknown", "unknown_tool"), ("cancelled", "cancelled"),
    ("server_search", "tool_error"), ("bad_input", "tool_error"), ("", "tool_error"),
])
def test_each_code_is_one_kind_whatever_the_note_says(code, kind):
    # The note's words do not count once there is a code: "denied" in it changes nothing.
    assert refusals.error_kind({"refusal": code, "error": "Access denied; cancelled; does not exist"}) == kind


def test_a_tool_result_without_a_code_is_a_tools_own_error_unless_the_loop_noted_why():
    assert refusals.refusal_of({"is_error": True, "error": ""}) == ""
    assert refusals.refusal_of({"error": "deferred tool called before it was loaded"}) == refusals.DEFERRED
    assert refusals.refusal_of({"error": "Tool 'mcp__a__denied_list' does not exist or is not available in this conversation."}) \
        == refusals.UNKNOWN
    assert refusals.refusal_of({"error": "The person denied permission to use echo."}) == refusals.PERSON_DENIED
    assert refusals.refusal_of({"error": "Agent needs a non-empty 'prompt'."}) == ""
