"""Serve an agent profile as an MCP endpoint: the profile's loaded tools, a ToolSearch with the
engine's semantics, and the tools a search discovers, to any MCP client over streamable HTTP."""
