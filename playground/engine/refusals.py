"""Why a tool call did not run (or did not finish), as a code saved on its `tool_result` event.

The turn says why it refuses a call (`TurnPlan.check_call` → `CallCheck.refusal`: deferred, denied,
unknown, server_search); the loop adds what happens after the turn said yes (a person said no, nobody
answered, the call was cancelled, its input was unusable). The event keeps the code beside the text
the model reads, so what reads the events (the task measures) counts kinds by code, never by the
words of a message. A tool's own error (it ran and answered is_error) has no code.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# From the turn (CallCheck.refusal).
DEFERRED = "deferred"  # a deferred tool called before a ToolSearch loaded it
DENIED = "denied"  # a deny rule
UNKNOWN = "unknown"  # no such tool here
SERVER_SEARCH = "server_search"  # our ToolSearch where the vendor's server-side search replaces it
# From the loop.
PERSON_DENIED = "person_denied"  # an "ask" rule's prompt answered no
PROMPT_TIMEOUT = "prompt_timeout"  # an "ask" rule's prompt nobody answered in time
CANCELLED = "cancelled"  # the person cancelled while it ran
BAD_INPUT = "bad_input"  # input the call cannot run with (an Agent call without a prompt)
CODES = (DEFERRED, DENIED, UNKNOWN, SERVER_SEARCH, PERSON_DENIED, PROMPT_TIMEOUT, CANCELLED, BAD_INPUT)

# The task measures' error kinds (docs/agent-eval.md); a code not listed and a tool's own error: "tool_error".
TOOL_ERROR = "tool_error"
ERROR_KIND_OF = {
    DEFERRED: "tool_not_loaded",
    DENIED: "permission_denied",
    PERSON_DENIED: "permission_denied",
    PROMPT_TIMEOUT: "permission_denied",
    UNKNOWN: "unknown_tool",
    CANCELLED: "cancelled",
}

# The notes the loop saved in a refused call's `error` before results carried a code, each as the
# loop wrote it (fixed texts, not a model's or a tool's words): how such an old event still reads.
_OLD_NOTES = (
    (lambda note: note == "deferred tool called before it was loaded", DEFERRED),
    (lambda note: note == "cancelled while it ran", CANCELLED),
    (lambda note: note.startswith("Tool ") and note.endswith("it is denied by a permission rule."), DENIED),
    (lambda note: note.startswith("Tool ") and note.endswith("does not exist or is not available in this conversation."), UNKNOWN),
    (lambda note: note.startswith("The person denied permission to use "), PERSON_DENIED),
    (lambda note: note.startswith("Permission to use "), PROMPT_TIMEOUT),  # "… was not granted: nobody answered within …"
)


def refusal_of(result: Mapping[str, Any]) -> str:
    """A tool_result payload's code: the one it carries, else (saved before codes) the one its
    loop's note stands for, else "" (the tool's own error, or a note no code stands for)."""
    if "refusal" in result:
        return str(result.get("refusal") or "")
    note = str(result.get("error") or "")
    return next((code for matches, code in _OLD_NOTES if note and matches(note)), "")


def error_kind(result: Mapping[str, Any]) -> str:
    """The measures' kind of an error tool_result, by its code."""
    return ERROR_KIND_OF.get(refusal_of(result), TOOL_ERROR)
