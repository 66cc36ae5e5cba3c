"""List changes for 2026-07-28 clients: `subscriptions/listen` streams, per token and client name.

A stateless client has no session to be told on, and the request whose search found a tool is
often served by another web process than the client's listen stream. So a search that adds tools
to a client's list sends a message to that client's channel-layer group (Redis, every process
hears it), and each open listen stream of that token and client name, wherever it is served, turns
it into `notifications/tools/list_changed`. Legacy sessions are told on the search's own response
stream as before (server.py); their finds are announced here too, since a stateless client of the
same token and name lists what they found (service.remembered_tools).
"""
from __future__ import annotations

import hashlib
import logging

from playground.realtime import send_to_group

logger = logging.getLogger(__name__)

LISTEN_MESSAGE_TYPE = "gateway.listen"


def client_group(token_id: int | None, client_name: str) -> str:
    """The group of one token's client name (hashed: a name is any text, a group name is not)."""
    digest = hashlib.sha256(client_name.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"gateway-listen-{token_id or 0}-{digest}"


def announce_tools_changed(token_id: int | None, client_name: str) -> None:
    """Called after the commit that added tools. A failed send is logged, never raised: the tools
    are saved, and the client's next tools/list shows them."""
    try:
        send_to_group(client_group(token_id, client_name), {"type": LISTEN_MESSAGE_TYPE, "kind": "tools"})
    except Exception:
        logger.exception("MCP gateway: telling listen streams of token #%s that its tools changed failed", token_id)
