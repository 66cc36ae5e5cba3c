"""Tools a request names: a tool's name pasted into a request ranks that tool first, in every backend.

A person (or a model) who writes `find_symbol`, "find symbol", `FindSymbol` or
`mcp__server__find_symbol` in a request means that tool, whatever siblings describe the same thing
in more matching words. `SearchBackend.search` asks `named_tools` after the backend ranked and puts
the named tools first (`promote_named`), so every backend — keyword, BM25, embeddings, hybrid,
PostgreSQL — honours it by the same rule, and its explanation says why.

What counts as naming a tool (rules on the shape of names only, never on a particular tool):
- the tool's whole name as one token of the request, any case (`mcp__github__create_issue`,
  `WebFetch`); for an MCP tool, also its own name after `mcp__<server>__` (`create_issue`);
- a token shaped like an identifier (an `_` or a camelCase boundary in it) whose words are the
  name's (`FindSymbol`, `Find_Symbol` for `find_symbol`);
- the words of the name, in order and next to each other (`find symbol`, `github create issue`):
  the "spaced form" — only in a keyword-style request (`text.natural_request` false). In a
  sentence, two ordinary words that happen to be a tool's name ("stock price", "home page", "air
  quality") are not a mention: on the dev split they named a wrong tool four times out of five
  (docs/search-quality.md, "Named tools").
Only names of two or more words count: a one-word name (`Read`, `weather`) is an ordinary word of
a request, not a mention of the tool.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from playground.engine.search.names import matches_required_term, parse_tool_name
from playground.engine.search.text import natural_request
from playground.engine.tools import MCP_PREFIX, ToolCatalog

MENTION_RULE = "tool named in the request"
_MAX_PHRASE_WORDS = 8  # longer names are pasted whole (an identifier), not spelled out word by word
_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Mention:
    name: str  # the tool
    form: str  # how the request named it: the identifier or the words found
    words: int  # how many words of its name the mention covers (the longer, the surer)


class MentionIndex:
    """A catalog's deferred tools by the forms a request can name them in."""

    def __init__(self, catalog: ToolCatalog):
        self.identifiers: dict[str, list[str]] = {}
        self.phrases: dict[tuple[str, ...], list[str]] = {}
        for tool in catalog.deferred:
            own = tool.name
            if tool.name.startswith(MCP_PREFIX):
                _, sep, rest = tool.name[len(MCP_PREFIX):].partition("__")
                own = rest if sep and rest else own
            for name in dict.fromkeys((tool.name, own)):
                words = _words_of(name)
                if len(words) < 2:
                    continue
                self.identifiers.setdefault(name.lower(), []).append(tool.name)
                if len(words) <= _MAX_PHRASE_WORDS:
                    self.phrases.setdefault(words, []).append(tool.name)
        self.longest = max((len(words) for words in self.phrases), default=0)

    def mentions(self, query: str, *, spaced: bool = True) -> list[Mention]:
        """The tools `query` names, surest first (an identifier, then the most words), each once.
        `spaced`: whether plain words count too (the spaced form), not only identifier-shaped tokens."""
        found: dict[str, Mention] = {}
        for token in _IDENTIFIER.findall(query):
            names = self.identifiers.get(token.lower(), ())
            if not names and ("_" in token or _CAMEL.search(token)):
                names = self.phrases.get(_words_of(token), ())
            for name in names:
                if name not in found:
                    found[name] = Mention(name, token, len(_words_of(token)) + _MAX_PHRASE_WORDS)
        if not spaced:
            return sorted(found.values(), key=lambda m: -m.words)
        words = _WORD.findall(_CAMEL.sub(r"\1 \2", query).replace("_", " ").lower())
        for size in range(min(self.longest, len(words)), 1, -1):
            for start in range(len(words) - size + 1):
                phrase = tuple(words[start:start + size])
                for name in self.phrases.get(phrase, ()):
                    if name not in found:
                        found[name] = Mention(name, " ".join(phrase), size)
        return sorted(found.values(), key=lambda m: -m.words)  # stable: equal ones keep their order


def _words_of(name: str) -> tuple[str, ...]:
    if name.startswith(MCP_PREFIX):
        return parse_tool_name(name).parts
    return tuple(_WORD.findall(_CAMEL.sub(r"\1 \2", name).replace("_", " ").replace("-", " ").lower()))


def mention_index(catalog: ToolCatalog) -> MentionIndex:
    """The catalog's index, built once per catalog and kept with it (`ToolCatalog.kept`, as the
    required-term filter is): every backend over the catalog shares it."""
    return catalog.kept(("mention index", MentionIndex), lambda: MentionIndex(catalog))


def named_tools(query: str, catalog: ToolCatalog, required: Sequence[str] = ()) -> list[Mention]:
    """The deferred tools `query` names that also pass its `+required` terms (Claude Code's rule)."""
    mentions = mention_index(catalog).mentions(query, spaced=not natural_request(query))
    if not required or not mentions:
        return mentions
    kept = []
    for mention in mentions:
        tool = catalog.get(mention.name)
        parsed = parse_tool_name(mention.name)
        if tool is not None and all(matches_required_term(parsed, term, tool.description.lower(), tool.search_hint.lower())
                                    for term in required):
            kept.append(mention)
    return kept
