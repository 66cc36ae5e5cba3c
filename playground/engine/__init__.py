"""The ToolSearch engine: plain Python, no Django import.

Everything that decides what a model request carries lives here: the tool model and deferral
(`tools`), ToolSearch query reading and ranking backends (`search`), the mode decision (`modes`),
token counting (`tokens`), permissions (`permissions`), history scanning (`history`), deferred-tool
announcements (`announcements`), per-turn request building (`requests`) and subagent tool
resolution (`subagents`); the ToolSearch tool itself (`toolsearch_tool`); catalog and query-set
files (`catalog_io`); retrieval metrics (`evaluate`), the speed benchmark (`benchmark`) and the
command line behind `python -m playground.toolsearch` (`cli`). The Django apps are thin adapters
around it.
"""
