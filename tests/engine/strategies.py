"""Hypothesis strategies shared by the engine tests: random catalogs, queries, rules and histories."""
from __future__ import annotations

from hypothesis import strategies as st

from playground.engine.tools import Tool, ToolCatalog

# A small vocabulary so random names, descriptions and queries collide often (collisions are where
# scoring rules interact); plus punctuation, regex metacharacters and non-ASCII text.
WORDS = ["get", "issue", "create", "github", "slack", "send", "message", "file", "files", "read", "c", "e", "mail", "x"]
ODD = ["c++", "e-mail", ".", "+", "*", "(", "\\b", "a.b", "é", "café", "搜索", "ß", "İ", "_", "-", "$", "[x]", "?", "|", "K"]
SERVERS = ["github", "slack", "fs", "git-hub", "a_b", "x"]

name_part = st.sampled_from(WORDS + ["Read", "File", "Tool", "HTTP", "x1", "2"])
text_token = st.one_of(st.sampled_from(WORDS), st.sampled_from(ODD), st.text(max_size=4))


@st.composite
def tool_names(draw) -> str:
    if draw(st.booleans()):
        server = draw(st.sampled_from(SERVERS))
        action = "_".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)))
        return f"mcp__{server}__{action}"[:64]
    return "".join(draw(st.lists(name_part, min_size=1, max_size=3))).replace("+", "")[:64]


@st.composite
def texts(draw, max_tokens: int = 8) -> str:
    tokens = draw(st.lists(text_token, max_size=max_tokens))
    separators = draw(st.lists(st.sampled_from([" ", "", ", ", ".", "-", "\n", "/"]), min_size=len(tokens), max_size=len(tokens)))
    text = "".join(t + s for t, s in zip(tokens, separators))
    if draw(st.booleans()):
        text = text.upper() if draw(st.booleans()) else text.title()
    return text


@st.composite
def tools(draw) -> Tool:
    name = draw(tool_names())
    is_mcp = name.startswith("mcp__")
    return Tool(
        name=name,
        description=draw(texts()),
        search_hint=draw(st.one_of(st.just(""), texts(max_tokens=3))),
        is_mcp=is_mcp,
        should_defer=draw(st.booleans()) if not is_mcp else False,
        always_load=draw(st.booleans()) and draw(st.booleans()),
    )


@st.composite
def catalogs(draw, min_size: int = 0, max_size: int = 12) -> ToolCatalog:
    drawn = draw(st.lists(tools(), min_size=min_size, max_size=max_size, unique_by=lambda t: t.name))
    return ToolCatalog(drawn)


@st.composite
def queries(draw) -> str:
    terms = draw(st.lists(st.one_of(st.sampled_from(WORDS), st.sampled_from(ODD), st.text(max_size=5)), max_size=5))
    terms = [("+" + t) if draw(st.booleans()) and draw(st.booleans()) else t for t in terms]
    separator = draw(st.sampled_from([" ", "  ", "\t", " \u3000 ", "\ufeff"]))
    return separator.join(terms)
