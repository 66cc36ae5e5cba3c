"""Behaviour unchanged: every wire style renders the requests it rendered at e2b5cb0, byte for byte.

`wire_goldens.render()` renders, for fixed conversations, each style's first request and its request
after a discovery (as `toolsearch request` prints them), a simulated conversation's requests (the
style's own history after each discovery, cached and not, and the all-tools baseline), their cost
figures, and what one `TurnPlan` answers (wire request, tokens, announcement, cache vendor, call
checks, cache-aware figures). The golden file was written by the code before the wire styles
became one family (`engine/wires/`), and is compared part by part so a failure names the style.
One intended change since: `toolsearch request --discovered` builds its history with the style's
own `discovery_messages` (as the loop, the model view and the cost command do), so its
`request/*/discovered` bodies were regenerated then; their tool tokens are unchanged.
The "tool-changes" style, added after, has its renders in the golden too (captured at 394d1cc, every
older entry byte for byte as it was): a style is pinned from the day it is registered, and a style
registered without a golden entry fails here rather than going unchecked.
"""
from __future__ import annotations

import json

import pytest

from tests.engine import wire_goldens

GOLDEN = json.loads(wire_goldens.GOLDEN.read_text())


@pytest.fixture(scope="module")
def rendered() -> dict:
    return wire_goldens.render()


def test_the_golden_covers_every_wire_style():
    assert set(GOLDEN["request"]) >= {"anthropic-native", "anthropic-client", "anthropic-server", "openai-hosted",
                                       "openai-client", "openai-functions", "anthropic-tool-changes"}
    assert set(GOLDEN["simulated"]) == set(GOLDEN["cost"]) == {*GOLDEN["request"]} - {"anthropic-server-regex"} | {"all-tools"}


@pytest.mark.parametrize("part", ["request", "simulated", "cost", "turn", "prices"])
def test_each_style_renders_what_it_rendered_before_the_refactor(rendered, part):
    for key, golden in GOLDEN[part].items():
        assert rendered[part].get(key) == golden, f"{part}/{key} differs from the golden"
    assert set(rendered[part]) == set(GOLDEN[part]), "a style renders without a golden entry (or lost one)"
