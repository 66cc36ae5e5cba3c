from __future__ import annotations

from playground.engine.announcements import announce, announced_names


def user_with(block_text):
    return {"role": "user", "content": [{"type": "text", "text": block_text}]}


def test_the_full_style_lists_every_deferred_tool_each_time():
    first = announce(["a", "b"], [], "full")
    assert first.kind == "full" and first.text == "<available-deferred-tools>\na\nb\n</available-deferred-tools>"
    assert announce(["a", "b"], [user_with(first.text)], "full").kind == "full"


def test_the_delta_style_starts_full_then_says_only_what_changed():
    first = announce(["a", "b"], [], "delta")
    assert first.kind == "full"
    history = [user_with(first.text)]
    assert announce(["a", "b"], history, "delta") is None
    delta = announce(["b", "c"], history, "delta")
    assert (delta.kind, delta.added, delta.removed) == ("delta", ("c",), ("a",))
    history.append(user_with(delta.text))
    assert announced_names(history) == ["b", "c"]
    assert announce(["c", "b"], history, "delta") is None


def test_after_a_compaction_the_history_holds_no_announcement_so_the_next_is_full():
    # The messages after a boundary are all the request builder sees.
    assert announce(["a"], [{"role": "user", "content": "summary follows"}], "delta").kind == "full"
