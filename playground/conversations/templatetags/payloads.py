"""Payloads (tool arguments, results, model request and response bodies) shown as the JSON they are on the wire.

`{{ value|pretty_json }}` gives the text; `{% json_block value %}` gives it in an unclipped <pre> with a
copy button (static/js/copy.js). Python reprs (`{'owner': "x"}`) cannot be pasted anywhere JSON is expected.
"""
from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.html import format_html

from playground.mcp_servers.secrets import mask_arguments

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """JSON with two-space indents and real characters (not \\u escapes); anything json cannot encode is str()-ed."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def masked(value: Any) -> Any:
    """Tool arguments with secrets masked (`mask_arguments`, the one scrubber's), before they are shown."""
    return mask_arguments(value)


@register.simple_tag
def json_block(value: Any, testid: str = "json", label: str = "Copy") -> str:
    return format_html(
        '<div class="json-block"><button type="button" class="copy-button" data-copy-button '
        'title="Copy the JSON to the clipboard">{}</button><pre class="json" data-testid="{}">{}</pre></div>',
        label, testid, pretty_json(value),
    )


@register.filter
def json_or_text(value: Any) -> str:
    """A tool's text result: re-indented when it is a JSON object or array (MCP tools often answer so), else as it is."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return pretty_json(json.loads(stripped))
            except ValueError:
                pass
        return value
    return pretty_json(value)


@register.filter
def response_body(payload: dict[str, Any]) -> dict[str, Any]:
    """A model_response event as the Messages API body it was read from (stop reason, usage, content blocks)."""
    return {"stop_reason": payload.get("stop_reason"), "usage": payload.get("usage", {}), "content": payload.get("content", [])}
