"""The MCP protocol eras the playground may speak to a server (`McpServer.protocol_era`), and the one default.

Its own module (no Django, no SDK) so that the model's field, the server form, the config-file import
and the connection settings (`transports.ServerConfig`) read the same default without importing each other.
"""
from __future__ import annotations

AUTO = "auto"  # server/discover at the newest stateless version first, else the initialize handshake
LEGACY = "legacy"  # the initialize handshake only
MODERN_2026_07_28 = "2026-07-28"  # that stateless version only

# Legacy until the workbench speaks every feature in the stateless era too (roots, logging/setLevel and
# notifications are the handshake era's; docs/architecture.md). Change it here and nowhere else.
DEFAULT_PROTOCOL_ERA = LEGACY
