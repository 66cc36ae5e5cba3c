from __future__ import annotations

import pytest

from playground.engine.announcements import announce, announced_names, estimate_tokens


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


# Layouts: how the names are written. Flat is the default and Claude Code's.

GITHUB = [f"mcp__github__{t}" for t in ("create_issue", "list_issues", "create_pull_request", "get_file_contents")]
SLACK = [f"mcp__slack__{t}" for t in ("post_message", "list_channels")]


def test_the_flat_layout_is_the_default_and_writes_one_name_per_line():
    assert announce(["Read", *GITHUB], [], "full").text == announce(["Read", *GITHUB], [], "full", layout="flat").text
    assert announce(["Read", *GITHUB], [], "full").text.splitlines()[1:-1] == ["Read", *GITHUB]


def test_the_grouped_layout_writes_one_line_per_server_and_says_how_names_are_made():
    text = announce(["Read", *GITHUB, *SLACK], [], "full", layout="grouped").text
    lines = text.splitlines()
    assert lines[0] == "<available-deferred-tools>" and lines[-1] == "</available-deferred-tools>"
    assert lines[1].startswith("#") and "mcp__<server>__<tool>" in lines[1]
    assert lines[2:-1] == [
        "Read",
        "mcp__github: create_issue, list_issues, create_pull_request, get_file_contents",
        "mcp__slack: post_message, list_channels",
    ]
    many = [f"mcp__github__tool_{i}" for i in range(20)]
    assert len(announce(many, [], "full", layout="grouped").text) < 0.7 * len(announce(many, [], "full").text)


def test_grouped_deltas_replace_a_servers_line_and_remove_a_gone_server():
    first = announce([*GITHUB, *SLACK], [], "delta", layout="grouped")
    history = [user_with(first.text)]
    assert announce([*GITHUB, *SLACK], history, "delta", layout="grouped") is None
    delta = announce([*GITHUB, "mcp__github__merge_pull_request"], history, "delta", layout="grouped")
    assert delta.kind == "delta" and delta.removed == ("mcp__slack",)
    assert delta.added == ("mcp__github: " + ", ".join([*(n.split("__")[2] for n in GITHUB), "merge_pull_request"]),)
    history.append(user_with(delta.text))
    assert announced_names(history) == ["mcp__github"]
    assert announce([*GITHUB, "mcp__github__merge_pull_request"], history, "delta", layout="grouped") is None


def big_catalog(servers: int, per_server: int) -> list[str]:
    return [f"mcp__server{s}__do_thing{t}_widget" for s in range(servers) for t in range(per_server)]


def test_the_budgeted_layout_is_grouped_while_that_fits():
    assert announce(GITHUB, [], "full", layout="budgeted", budget_tokens=4000).text == announce(GITHUB, [], "full", layout="grouped").text


@pytest.mark.parametrize("servers,per_server,budget", [(50, 20, 300), (2000, 50, 4000), (5, 4000, 100), (1, 3, 100)])
def test_the_budgeted_layout_never_exceeds_its_budget(servers, per_server, budget):
    announcement = announce(big_catalog(servers, per_server), [], "full", layout="budgeted", budget_tokens=budget)
    assert estimate_tokens(announcement.text) <= budget
    assert announcement.layout == "budgeted"


def test_past_the_budget_servers_are_summarised_largest_first_with_a_line_for_the_rest():
    names = big_catalog(3, 2) + [f"mcp__huge__create_repository_{i}" for i in range(40)] + ["Read"]
    text = announce(names, [], "full", layout="budgeted", budget_tokens=110).text
    lines = text.splitlines()[1:-1]
    assert "mcp__<server>" in lines[0] and lines[0].startswith("#")
    assert lines[1].startswith("mcp__huge (40 tools): ") and "repository" in lines[1] and "create" not in lines[1]
    assert lines[-1].startswith("~more (")
    assert estimate_tokens(text) <= 110
    # Every deferred tool is accounted for by a line's count.
    counts = [int(line.split("(", 1)[1].split(" ", 1)[0]) for line in lines[1:]]
    assert sum(counts) == len(names)


def test_a_flat_list_above_the_cap_is_never_sent_the_budgeted_layout_goes_with_the_reason():
    names = big_catalog(100, 100)
    announcement = announce(names, [], "full", layout="flat", budget_tokens=4000, max_tokens=10_000)
    assert announcement.layout == "budgeted" and estimate_tokens(announcement.text) <= 4000
    assert "flat list of 10,000 tools" in announcement.reason and "budgeted" in announcement.reason
    small = announce(GITHUB, [], "full", layout="flat", budget_tokens=4000, max_tokens=10_000)
    assert (small.layout, small.reason) == ("flat", "")


def test_unknown_layouts_and_missing_budgets_are_errors():
    with pytest.raises(ValueError, match="layout"):
        announce(["a"], [], "full", layout="tree")
    with pytest.raises(ValueError, match="budget"):
        announce(["a"], [], "full", layout="budgeted")


def test_budgeted_summaries_name_words_not_letters():
    # Before: "mcp__notion (3 tools): p, i, page" — an acronym split into single letters.
    from playground.engine.announcements import summary_lines

    names = ["mcp__notion__API-post-page", "mcp__notion__API-patch-page", "mcp__notion__API-get-page-v2"]
    (line,) = summary_lines(names)
    assert line == "mcp__notion (3 tools): api, page"


def test_budgeted_summaries_are_the_same_text_in_every_process():
    # Ties between common words were ordered by a set's iteration, which changes with each process's
    # string hashing: the announcement (and so the cached prompt prefix) differed between processes.
    import os
    import subprocess
    import sys

    code = ("from playground.engine.announcements import summary_lines;"
            "print(summary_lines(['mcp__notion__API-post-page', 'mcp__notion__API-patch-page', 'mcp__notion__API-get-page-v2',"
            " 'mcp__notion__search-blocks-comments', 'mcp__notion__query-database-rows']))")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(8)}
    assert len(outputs) == 1, outputs
