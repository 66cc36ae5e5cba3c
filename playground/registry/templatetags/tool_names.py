"""Tool names in narrow columns: they wrap where a person reads a break, never mid-word."""
from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_BREAK_AFTER = re.compile(r"(_+|-|\.|/|\*)")


@register.filter
def breakable(name: object) -> SafeString:
    """`mcp__github__create_issue` with a line-break opportunity after each underscore run, hyphen,
    dot or slash (`<wbr>`): a column too narrow for the whole name breaks it between its words,
    where `overflow-wrap: anywhere` broke it anywhere ("mcp__filesyste / m__delete_dire …")."""
    return mark_safe(_BREAK_AFTER.sub(r"\1<wbr>", escape(str(name))))
