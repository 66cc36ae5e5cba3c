"""Every benchmark of the playground, one module each (docs/benchmarks.md has the figures).

Plain Python, no database (imported by `python -m playground.toolsearch bench`, i.e. `make bench`):
- `scorer`: the indexed Claude Code scorer against its plain transcription, on catalogs grown from
  the shared toolsets (`scaled_catalog`), with keyword and natural-language queries;
- `search_speed`: the retrieval backends (bm25, semantic, hybrid) on the same catalogs and queries.

The playground's own parts, each run as `python -m playground.bench.<name>`:
- `gateway`: the MCP gateway against calling tools directly;
- `inspector`: the inspector's response time with many tools (a throwaway test database);
- `index`: the background index build and a fresh process's first search (PostgreSQL);
- `scale`: a grown catalog end to end (its first search, its pages, a conversation over it);
- `wire_styles`: one turn per wire style (plan, wire request, tokens seen), plain Python;
- `worker_cpu`: what a worker spends per conversation, profiled;
- `prompts`: open permission prompts hold no worker;
- `broadcast`: the cost of one event's group send;
- `mcp`: MCP sync and call times against the demo server.

Concurrent conversations are measured by `python -m playground.loadtest` (`make load`).
"""
