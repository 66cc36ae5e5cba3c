"""Names the Protocol view shows: JSON-RPC and MCP error codes ("typed errors") and protocol eras."""
from __future__ import annotations

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

ERROR_NAMES = {
    -32700: "Parse error", -32600: "Invalid request", -32601: "Method not found", -32602: "Invalid params",
    -32603: "Internal error", -32002: "Resource not found", -32020: "Header mismatch",
    -32021: "Missing required client capability", -32022: "Unsupported protocol version",
    -32042: "URL elicitation required", -32029: "Rate limited", -32000: "Connection closed", -32001: "Request timeout",
}


def error_name(code: object) -> str:
    if isinstance(code, int) and code in ERROR_NAMES:
        return ERROR_NAMES[code]
    if isinstance(code, int) and -32099 <= code <= -32000:
        return "Server error"
    return "Application error"


def is_modern(version: str) -> bool:
    return version in MODERN_PROTOCOL_VERSIONS


def era_label(version: str) -> str:
    """"2026-07-28 stateless" or "legacy session 2025-11-25"."""
    if is_modern(version):
        return f"{version} stateless"
    return f"legacy session {version}" if version else "legacy session"
