"""The ToolSearch engine: plain Python, no Django import.

Everything that decides what a model request carries lives here: the tool model and deferral
(`tools`), ToolSearch query reading and ranking backends (`search`), the mode decision (`modes`),
token counting (`tokens`), permissions (`permissions`), history scanning (`history`), deferred-tool
announcements (`announcements`), per-turn request building (`requests`) and subagent tool
resolution (`subagents`); the ToolSearch tool itself (`toolsearch_tool`); catalog and query-set
files (`catalog_io`) and retrieval metrics (`evaluate`). The Django apps are thin adapters around
it; its command line is `playground.toolsearch` and its speed benchmarks are in `playground.bench`.
"""
