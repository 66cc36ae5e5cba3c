"""Same operation on other servers (engine/search/equivalence.py) and the evaluation's figure that counts it."""
from __future__ import annotations

from playground.engine.catalog_io import LabelledQuery
from playground.engine.search import quality
from playground.engine.search.equivalence import SameOperation, groups_in_results, operation_key
from playground.engine.tools import ToolCatalog
from tests.search.conftest import mcp

BROWSE = "Navigate the browser to a URL and wait for the page to load"


def browser_catalog() -> ToolCatalog:
    return ToolCatalog([
        mcp("playwright", "playwright_navigate", BROWSE),
        mcp("puppeteer", "puppeteer_navigate", "Navigate to a URL in the browser page"),
        mcp("filesystem", "read_file", "Read the complete contents of a file from the file system."),
        mcp("desktop-commander", "read_file", "Read a file or a URL; returns its text content with line numbers."),
        mcp("weather", "get_weather", "Get the current weather for a city"),
        mcp("youtube-transcript", "get_transcript", "Get the transcript of a YouTube video"),
        mcp("mirror-a", "fetch_page", "Fetches a web page and returns it as markdown text"),
        mcp("mirror-b", "download", "Fetches a web page and returns it as markdown text"),
        mcp("filesystem", "write_file", "Write a file"),
        mcp("desktop-commander", "write_file_alt", "Write a file"),
    ])


def test_server_words_are_dropped_from_the_tool_part():
    catalog = browser_catalog()
    assert operation_key(catalog.get("mcp__playwright__playwright_navigate")) == "navigate"
    assert operation_key(catalog.get("mcp__filesystem__read_file")) == "read file"


def test_groups_come_from_the_tool_part_or_the_description_and_span_servers():
    same = SameOperation(browser_catalog().deferred)
    assert same.group("mcp__playwright__playwright_navigate") == ("mcp__playwright__playwright_navigate", "mcp__puppeteer__puppeteer_navigate")
    assert same.others("mcp__filesystem__read_file") == {"mcp__desktop-commander__read_file"}
    assert same.others("mcp__mirror-a__fetch_page") == {"mcp__mirror-b__download"}  # same description
    # one word left ("get") and descriptions that do not agree: different operations
    assert same.group("mcp__weather__get_weather") == () and same.group("mcp__youtube-transcript__get_transcript") == ()
    # a description too short to tell ("Write a file") groups nothing by itself
    assert same.group("mcp__desktop-commander__write_file_alt") == ()
    assert len(same.groups()) == 3 and len(same) == 6


def test_same_operation_recall_is_reported_beside_the_strict_figure():
    same = SameOperation(browser_catalog().deferred)
    query = LabelledQuery(id="q", query="open example.com and save a page",
                          expected_tool_names=("mcp__playwright__playwright_navigate", "mcp__filesystem__write_file"))
    ranked = ["mcp__puppeteer__puppeteer_navigate", "mcp__weather__get_weather"]
    scores = quality.score_query(ranked, query, same)
    assert scores["recall@5"] == 0.0  # strict: neither gold tool
    assert scores["same_op_recall@5"] == 0.5 and scores["same_op_recall@1"] == 0.5 and scores["same_op_complete@5"] == 0.0
    assert "same_op_recall@5" not in quality.score_query(ranked, query)


def test_the_suite_prints_both_figures(tmp_path):
    import json

    folder = tmp_path / "browsers"
    folder.mkdir()
    catalog = browser_catalog()
    (folder / "catalog.jsonl").write_text("\n".join(json.dumps({"name": t.name, "description": t.description, "server": t.server,
                                                                "input_schema": t.input_schema}) for t in catalog) + "\n")
    queries = [{"id": f"q{i}", "query": "navigate to the puppeteer page", "expected_tool_names": ["mcp__playwright__playwright_navigate"]}
               for i in range(3)]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    [result] = quality.run_suite(["browsers"], ["claude-code"], styles=["natural"], split="all", root=tmp_path)
    m = result.metrics
    assert m["same_op_recall@1"] == 1.0 and m["recall@1"] == 0.0  # puppeteer's navigate ranks first
    assert "same operation on other servers: 6 tools in 3 groups" in result.notes
    assert "| recall@5 same-op |" in quality.format_table([result])


def test_the_inspector_groups_list_the_members_with_their_ranks():
    catalog = browser_catalog()
    [group] = groups_in_results(catalog, ["mcp__puppeteer__puppeteer_navigate", "mcp__weather__get_weather"])
    assert group.operation == "navigate" and group.servers == 2
    assert group.members == (("mcp__playwright__playwright_navigate", "playwright", None), ("mcp__puppeteer__puppeteer_navigate", "puppeteer", 1))


def _plain_groups(tools) -> list[tuple[str, ...]]:
    """The rules as the module states them, every pair compared (no shortcuts): the reference."""
    from playground.engine.search.equivalence import _descriptions_agree, description_key

    tools = list(tools)
    parent = {t.name: t.name for t in tools}

    def find(name):
        while parent[name] != name:
            name = parent[name]
        return name

    for n, a in enumerate(tools):
        for b in tools[:n]:
            same_description = description_key(a) and description_key(a) == description_key(b)
            operation = operation_key(a)
            same_operation = bool(operation) and operation == operation_key(b) and (
                " " in operation or _descriptions_agree(a, b, operation))
            if same_description or same_operation:
                parent[find(a.name)] = find(b.name)
    members: dict[str, list[str]] = {}
    for tool in tools:
        members.setdefault(find(tool.name), []).append(tool.name)
    servers = {t.name: t.server for t in tools}
    return sorted(tuple(names) for names in members.values() if len({servers[n] for n in names}) > 1)


def test_the_groups_are_the_plain_rules_groups_on_real_toolsets():
    """The shortcuts (text split once, stems made once, tools of one group not compared again) change
    no group: every pair compared by the plain rules, on a shared toolset's catalog and a grown one."""
    from playground.bench.scorer import scaled_catalog, source_tools
    from playground.engine.catalog_io import toolsets_dir

    catalogs = [browser_catalog()]
    if (toolsets_dir() / "mcp-combined").exists():  # the shared toolsets, when this checkout has them beside it
        base = source_tools(toolsets_dir())
        catalogs += [ToolCatalog(base[:300]), scaled_catalog(base[:60], 300)]
    for catalog in catalogs:
        assert sorted(SameOperation(catalog.deferred).groups()) == _plain_groups(catalog.deferred)


def test_groups_stored_by_the_build_are_read_not_made(monkeypatch):
    from playground.engine.search import equivalence
    from playground.engine.search.stored import MemoryIndexStore

    catalog = browser_catalog()
    store = MemoryIndexStore()
    equivalence.save_same_operation(catalog, store)
    made = groups_in_results(catalog, ["mcp__filesystem__read_file", "mcp__weather__get_weather"])
    made_groups = SameOperation(catalog.deferred).groups()
    monkeypatch.setattr(equivalence, "_cache", type(equivalence._cache)())  # a fresh process
    monkeypatch.setattr(equivalence, "_Keys", lambda: (_ for _ in ()).throw(AssertionError("the groups were made, not read")))
    assert groups_in_results(catalog, ["mcp__filesystem__read_file", "mcp__weather__get_weather"], store) == made
    read = equivalence.same_operation_for(catalog, store)
    assert read.groups() == made_groups
    assert read.others("mcp__filesystem__read_file") == {"mcp__desktop-commander__read_file"}
    assert read.group("mcp__weather__get_weather") == () and read.group("no_such_tool") == ()
    assert read.collapse(["mcp__playwright__playwright_navigate", "mcp__weather__get_weather", "mcp__puppeteer__puppeteer_navigate"]) == [
        ("mcp__playwright__playwright_navigate", ["mcp__puppeteer__puppeteer_navigate"]), ("mcp__weather__get_weather", [])]
    # another catalog has no stored groups: they are made
    monkeypatch.undo()
    other = ToolCatalog(list(catalog.deferred)[:4])
    assert equivalence.same_operation_for(other, store).group("mcp__playwright__playwright_navigate")
