"""The documentation holds together: a short README that names the two commands and links every page
of docs/, links that resolve (files, and anchors when a link has one), pictures that exist, and a
configuration page that lists every variable of .env.example.

Plain file reading: no Django, no database.
"""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250

# [text](target) and ![alt](target); the target ends at whitespace or ')', an optional "title" after it.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def markdown_files() -> list[Path]:
    return [README, *doc_pages()]


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code (links there are examples, not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text(encoding="utf-8")))


def is_relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith("//")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, markup and punctuation dropped, spaces → '-'."""
    text = re.sub(r"`|\*\*|__(?=\w)|(?<=\w)__", "", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_slug_follows_github():
    assert slug("Isolation: TEST_RUN_ID") == "isolation-test_run_id"
    assert slug("`make run`") == "make-run"
    assert slug("registry: tools, permissions and the inspector") == "registry-tools-permissions-and-the-inspector"
    assert slug('Faster natural-language requests: `hybrid:piece_vectors="pooled"`') == "faster-natural-language-requests-hybridpiece_vectorspooled"


def test_the_docs_folder_has_the_expected_pages():
    names = {path.name for path in doc_pages()}
    assert {
        "architecture.md", "configuration.md", "conversations.md", "search-quality.md",
        "benchmarks.md", "operations.md", "testing.md",
    } <= names


def test_readme_is_at_most_250_lines():
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= README_MAX_LINES, f"README.md has {count} lines; move detail into docs/"


def test_readme_names_both_commands():
    text = README.read_text(encoding="utf-8")
    assert "make run" in text and "make test" in text
    assert ".ci/run" in text  # CI runs the same `make test`


def test_readme_links_every_docs_page():
    linked = {(README.parent / unquote(target.split("#", 1)[0])).resolve() for target in links(README) if is_relative(target)}
    missing = [path.name for path in doc_pages() if path.resolve() not in linked]
    assert not missing, f"README.md does not link: {missing}"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = []
    for target in links(path):
        if not is_relative(target):
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / unquote(file_part)).resolve() if file_part else path.resolve()
        if not destination.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and destination.suffix == ".md" and unquote(anchor) not in anchors(destination):
            broken.append(f"{target} (no heading with that anchor)")
    assert not broken, f"{path.relative_to(ROOT)}: {broken}"


def test_readme_pictures_exist_and_are_png():
    pictures = [target for target in LINK.findall(README.read_text(encoding="utf-8")) if target.startswith("docs/img/")]
    assert {"docs/img/conversation.png", "docs/img/inspector.png"} <= set(pictures)
    for target in pictures:
        picture = ROOT / target
        assert picture.exists(), target
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{target} is not a PNG file"


def test_configuration_page_lists_every_variable_of_env_example():
    documented = (DOCS / "configuration.md").read_text(encoding="utf-8")
    names = set()
    for line in (ROOT / ".env.example").read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\s*#?\s*([A-Z][A-Z0-9_]*)=", line)
        if match:
            names.add(match.group(1))
    assert names, "the scan found no variable in .env.example"
    missing = sorted(name for name in names if f"`{name}`" not in documented)
    assert not missing, f"docs/configuration.md does not document: {missing}"


def test_the_gateway_docs_inspector_search_finds_what_it_asks_for(tmp_path):
    """docs/gateway.md's Inspector example searched "+count words" and got five unrelated tools on the
    demo data (word_count is always loaded, so never searched): each documented query's first result
    must hold every required term."""
    from playground.registry.demo_data import CATALOGS
    from tests.cli_runner import run_cli

    text = (ROOT / "docs" / "gateway.md").read_text(encoding="utf-8")
    queries = [q for q in re.findall(r'--tool-arg "query=([^"]+)"', text) if "+" in q]
    assert queries, "no keyword ToolSearch example in docs/gateway.md"
    for query in queries:
        result = run_cli("search", "--catalog", CATALOGS[0], "--max-results", "5", "--json", query)
        assert result.returncode == 0, result.stderr
        found = json.loads(result.stdout)
        first = found["results"][0] if isinstance(found, dict) else found[0]
        name = first["name"] if isinstance(first, dict) else str(first)
        for term in (word[1:] for word in query.split() if word.startswith("+")):
            assert term in name.lower(), (query, name)
