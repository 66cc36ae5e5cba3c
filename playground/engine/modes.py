"""When tool search is on: `ENABLE_TOOL_SEARCH` and the gates that switch it off, each with a reason.

Values: unset (Claude Code's default: on, MCP tools deferred), `true`, `false`, `auto` (= `auto:10`)
and `auto:N` (N clamped to 0–100; `auto:0` is always on, `auto:100` always off; otherwise on when
the deferred tools' tokens ≥ floor(context_window × N / 100)).

Gates, in order (the first that applies decides):
1. `false` → off.
2. ToolSearch denied by permissions → off (nothing could load a deferred tool).
3. native wire style and the model matches a "no tool_reference support" pattern → off.
4. native wire style, mode unset and `ANTHROPIC_BASE_URL` not Anthropic's → off (gateways often reject
   `defer_loading`; an explicit `true`/`auto` overrides this, as in Claude Code).
5. no deferred tools among the permitted ones → off (nothing to defer), unless MCP servers are still
   connecting: then on, so ToolSearch is there to find their tools when they arrive (and names the
   pending servers meanwhile), as in Claude Code.
6. `true` / unset / `auto:0` → on; `auto:100` → off; `auto:N` → the token threshold, compared with
   the saving net of the announcement (the deferred tools' tokens minus the tokens announcing them
   on every request; Claude Code compares the deferred tokens alone — the same when no
   announcement is passed).
The client wire style needs neither `tool_reference` nor `defer_loading`, so gates 3 and 4 do not
apply to it: that is what it is for.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import urlparse

from playground.engine.tokens import TokenCounter
from playground.engine.toolsearch_tool import NATIVE_STYLE

ModeKind = Literal["unset", "true", "false", "auto"]
DEFAULT_AUTO_PERCENT = 10
DEFAULT_UNSUPPORTED_MODEL_PATTERNS: tuple[str, ...] = ("haiku",)
FIRST_PARTY_HOSTS = ("api.anthropic.com",)


@dataclass(frozen=True)
class ModeSetting:
    raw: str
    kind: ModeKind
    percent: int | None = None  # auto only, clamped to 0–100

    @property
    def label(self) -> str:
        if self.kind == "auto":
            return f"auto:{self.percent}"
        return self.kind


def parse_mode(value: str | None) -> ModeSetting:
    """Read ENABLE_TOOL_SEARCH. Raises ValueError naming the accepted values."""
    raw = "" if value is None else str(value)
    text = raw.strip().lower()
    if text == "":
        return ModeSetting(raw, "unset")
    if text in ("true", "1", "on", "yes"):
        return ModeSetting(raw, "true")
    if text in ("false", "0", "off", "no"):
        return ModeSetting(raw, "false")
    if text == "auto":
        return ModeSetting(raw, "auto", DEFAULT_AUTO_PERCENT)
    if text.startswith("auto:"):
        number = text[len("auto:"):].strip()
        if re.fullmatch(r"[+-]?\d+", number):
            return ModeSetting(raw, "auto", min(100, max(0, int(number))))
    raise ValueError(f"ENABLE_TOOL_SEARCH={raw!r} is not valid: use true, false, auto or auto:N (N from 0 to 100), or leave it unset")


@dataclass(frozen=True)
class ModeDecision:
    enabled: bool
    mode: str  # the setting's label: unset / true / false / auto:N
    reason: str
    threshold_tokens: int | None = None
    deferred_tokens: int | None = None
    context_window: int | None = None
    percent: int | None = None
    gate: str = ""  # short key of the rule that decided, for the UI and tests
    announcement_tokens: int = 0  # auto: the announcement's cost, weighed against the saving

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_first_party_base_url(base_url: str | None) -> bool:
    if not base_url:
        return True
    host = (urlparse(base_url if "://" in base_url else f"https://{base_url}").hostname or "").lower()
    return host in FIRST_PARTY_HOSTS


def compile_model_patterns(patterns: Sequence[str]) -> list[re.Pattern[str]]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as exc:
            raise ValueError(f"unsupported-model pattern {pattern!r} is not a valid regular expression: {exc}") from None
    return compiled


def decide_mode(
    setting: ModeSetting | str | None,
    *,
    deferred_tools: Sequence[dict[str, Any]],
    token_counter: TokenCounter,
    context_window: int,
    model: str = "",
    base_url: str = "",
    unsupported_model_patterns: Sequence[str] = DEFAULT_UNSUPPORTED_MODEL_PATTERNS,
    tool_search_permitted: bool = True,
    planned_as: str = NATIVE_STYLE,
    deferred_tokens: int | None = None,
    pending_mcp_servers: Sequence[str] = (),
    announcement_tokens: int = 0,
) -> ModeDecision:
    """Decide for one request. `deferred_tools` are the permitted deferred tools (API dicts, or any
    sequence of them when `deferred_tokens` already gives their token count)."""
    if not isinstance(setting, ModeSetting):
        setting = parse_mode(setting)
    label = setting.label

    def decision(enabled: bool, gate: str, reason: str, **extra: Any) -> ModeDecision:
        return ModeDecision(enabled=enabled, mode=label, reason=reason, gate=gate, context_window=context_window, percent=setting.percent, **extra)

    if setting.kind == "false":
        return decision(False, "disabled", "ENABLE_TOOL_SEARCH=false: every permitted tool is sent in full")
    if not tool_search_permitted:
        return decision(False, "tool-search-denied", "ToolSearch is denied by a permission rule, so deferred tools could never be loaded: all are sent in full")
    if planned_as == NATIVE_STYLE:
        for pattern in compile_model_patterns(unsupported_model_patterns):
            if model and pattern.search(model):
                return decision(
                    False,
                    "model-unsupported",
                    f"model {model!r} matches the no-tool_reference pattern {pattern.pattern!r}: tool search off (the client wire style would work)",
                )
        if setting.kind == "unset" and not is_first_party_base_url(base_url):
            return decision(
                False,
                "third-party-base-url",
                f"ANTHROPIC_BASE_URL={base_url!r} is not Anthropic's and ENABLE_TOOL_SEARCH is unset: off, since gateways often reject defer_loading (set it to true to force)",
            )
    if not deferred_tools and pending_mcp_servers:
        return decision(
            True,
            "pending-servers",
            f"no tool is deferred yet, but {len(pending_mcp_servers)} MCP server(s) are still connecting "
            f"({', '.join(pending_mcp_servers)}): tool search stays on so their tools can be found when they arrive",
            deferred_tokens=0,
        )
    if not deferred_tools:
        return decision(False, "nothing-deferred", "no permitted tool is deferred: nothing to search")
    # Measured whatever the mode, so the UI can show what deferral saves (counts are cached per list).
    if deferred_tokens is None:
        deferred_tokens = token_counter.count_tools(deferred_tools)
    if setting.kind in ("true", "unset"):
        why = "ENABLE_TOOL_SEARCH=true" if setting.kind == "true" else "ENABLE_TOOL_SEARCH unset (Claude Code's default)"
        return decision(True, "enabled", f"{why}: {len(deferred_tools)} deferred tools are loaded on demand", deferred_tokens=deferred_tokens)
    if setting.percent == 0:
        return decision(True, "auto-always", "auto:0 means always on", deferred_tokens=deferred_tokens)
    if setting.percent == 100:
        return decision(False, "auto-never", "auto:100 means never on", deferred_tokens=deferred_tokens)
    threshold = math.floor(context_window * setting.percent / 100)
    saving = deferred_tokens - announcement_tokens
    enabled = saving >= threshold
    comparison = "≥" if enabled else "<"
    measured = (
        f"deferred tools take {deferred_tokens} tokens ({token_counter.source})"
        if not announcement_tokens
        else f"deferring saves {saving} tokens ({deferred_tokens} of deferred tools − {announcement_tokens} announcing them; "
        f"{token_counter.source})"
    )
    return decision(
        enabled,
        "auto-threshold",
        f"{measured} {comparison} the threshold {threshold} = {setting.percent}% of a {context_window}-token context window: "
        f"tool search {'on' if enabled else 'off'}",
        threshold_tokens=threshold,
        deferred_tokens=deferred_tokens,
        announcement_tokens=announcement_tokens,
    )
