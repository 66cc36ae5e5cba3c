"""Where the demo data set's files are (README.md here describes them); `load_demo_data` loads them."""
from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent
CATALOGS = [DEMO_DIR / "catalog.jsonl"]
# Claude Code's core tool names as catalog-only stand-ins (the executor marks their results as
# simulated): they show an always-loaded tool, an "ask" rule, a deferred built-in and the agent tool
# that subagents never get.
CORE_TOOLS = DEMO_DIR / "builtin.jsonl"
