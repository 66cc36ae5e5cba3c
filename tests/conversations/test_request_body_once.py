"""A turn's request body is made once (the model-request event and the cache strip share it), serialised
once, and never walked for credentials when its JSON holds no key that looks like one; the stored body
and the size note are exactly what the walk-everything code gave."""
from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings as hypothesis_settings, strategies as st

from playground.conversations import events as ev
from playground.conversations.testing.fake_api import text_reply, tool_use_reply
from tests.conversations.conftest import converse, events_of, make_profile

_OLD_SECRET_KEY = re.compile(r"(api[_-]?key|authorization|secret|password|passwd|(^|_)token$)", re.IGNORECASE)


def old_request_body(request: dict[str, Any]) -> dict[str, Any]:
    """The code before: copy the whole body without credentials, serialise it, read it back."""
    def without(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ("[not stored]" if isinstance(k, str) and isinstance(v, str) and _OLD_SECRET_KEY.search(k) else without(v))
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [without(v) for v in value]
        return value

    body = without({k: v for k, v in request.items() if k not in ev._DROPPED_KEYS})
    encoded = json.dumps(body, ensure_ascii=False, default=str)
    size = len(encoded.encode("utf-8"))
    if size > ev.MAX_STORED_BODY_BYTES:
        return ev._body_note(size)
    return json.loads(encoded)


# Keys built from the words the credential rule looks for, in any case, with the letters outside
# ASCII that IGNORECASE folds onto them, quotes and backslashes that JSON escapes, and plain ones.
_PIECES = ["api", "_", "-", "key", "Key", "API", "token", "TOKEN", "secret", "passwd", "Password", "authorization",
           "x", "name", '"', "\\", "\u017f", "\u212a", "\u0130", "\u0131", "é", "\n", " ",
           "\u017fecret", "to\u212aen", "ap\u0131_key", "pa\u017f\u017fwd"]
keys = st.lists(st.sampled_from(_PIECES), max_size=5).map("".join)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False, width=32),
                    st.lists(st.sampled_from(_PIECES), max_size=6).map("".join), st.just('": "'))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                                         st.dictionaries(keys, inner, max_size=4)), max_leaves=25)


@hypothesis_settings(max_examples=400, deadline=None)
@given(st.dictionaries(keys, values, max_size=5))
def test_the_body_and_its_size_are_exactly_the_walk_everything_codes(request):
    assert ev.request_body(request) == old_request_body(request)


@pytest.mark.parametrize("key", ["\u017fecret", "to\u212aen", "ap\u0131_key", "AP\u0130-KEY", "x_Token", 'my "secret"', "Authorization"])
def test_a_credential_like_key_spelt_any_way_is_hidden_as_before(key):
    request = {"model": "m", "metadata": {key: "sk-1", "plain": "kept"}, "messages": [{"role": "user", "content": key}]}
    assert ev.request_body(request) == old_request_body(request)
    assert ev.request_body(request)["metadata"][key] == "[not stored]"


def test_a_large_body_without_credentials_is_a_note_of_its_exact_size_without_a_walk(monkeypatch):
    walked: list[Any] = []
    real = ev._without_secrets
    monkeypatch.setattr(ev, "_without_secrets", lambda value: walked.append(value) or real(value))
    tools = [{"name": f"mcp__s__t{i}", "description": "Creates an API token for the password manager. " * 6,
              "input_schema": {"type": "object", "properties": {"api_key": {"type": "string"}, "token": {"type": "string"}}}}
             for i in range(800)]
    request = {"model": "m", "max_tokens": 10, "tools": tools, "messages": [{"role": "user", "content": "hi"}],
               "extra_headers": {"x-api-key": "sk-1"}}
    note = ev.request_body(request)
    assert note == old_request_body(request) and note["too_large"] is True
    assert walked == []  # the schemas' `api_key` / `token` properties are dicts, the descriptions text: nothing to hide
    small = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": {"user_token": "sk-2"}}
    assert ev.request_body(small)["metadata"] == {"user_token": "[not stored]"}
    assert walked  # a string under a credential-like key: the walk hides it


def test_each_model_turn_makes_its_request_body_once(admin_user, tool_world, fake_api, claude, monkeypatch):
    made: list[int] = []
    real = ev.request_body
    monkeypatch.setattr(ev, "request_body", lambda request: made.append(1) or real(request))
    fake_api.script(tool_use_reply("ToolSearch", {"query": "select:mcp__time__get_current_time"}), text_reply("Noon."))
    conversation, outcome = converse(admin_user, "What time is it?", profile=make_profile("cached", prompt_cache="on"),
                                     provider=claude)
    assert outcome.reason == "end_turn"
    requests, strips = events_of(conversation, "model_request"), events_of(conversation, "cache_strip")
    assert len(requests) == len(strips) == 2
    assert len(made) == 2  # one per turn (it was two: the event's and the cache strip's)
    sent = [r.body for r in fake_api.message_requests]
    for event, body in zip(requests, sent, strict=True):  # the SDK adds its `stream` flag on the wire
        assert event.payload["body"] == {k: v for k, v in body.items() if k != "stream"}
