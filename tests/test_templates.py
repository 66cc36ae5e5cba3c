"""Checks over every template file."""
from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
# Django's {# … #} comment ends on its own line; one that spans lines is printed on the page as text.
OPEN_COMMENT = re.compile(r"\{#(?![^\n]*#\})")


def test_no_template_comment_spans_lines():
    spans = [f"{path.relative_to(TEMPLATES)}:{text[: m.start()].count(chr(10)) + 1}"
             for path in sorted(TEMPLATES.rglob("*.html")) for text in [path.read_text()] for m in OPEN_COMMENT.finditer(text)]
    assert spans == [], f"use {{% comment %}} for comments over several lines: {spans}"
