"""Embedding: oct-mcp's chain around the tools of any MCP server, in one line.

    from oct_mcp.embed import guard
    guard(server)                # an SDK MCPServer or low-level Server

One SDK middleware runs the chain around every `tools/call` of the host's own tools (the
host's handler is the chain's endpoint) and filters `tools/list` by the policy and the pinned
tool definitions (`oct_mcp.embed.pins`). Other requests (resources, prompts, ...) pass untouched.
"""

from __future__ import annotations

from oct_mcp.embed._host import (
    BINARY_DROPPED_NOTE,
    EMBEDDED_PROFILE,
    PINS_DEFAULT,
    ForeignTool,
    host_arguments,
    host_result,
    pins_for,
    session_client_id,
)
from oct_mcp.embed.sdk import OctGuard, guard

__all__ = [
    "BINARY_DROPPED_NOTE",
    "EMBEDDED_PROFILE",
    "PINS_DEFAULT",
    "ForeignTool",
    "OctGuard",
    "guard",
    "host_arguments",
    "host_result",
    "pins_for",
    "session_client_id",
]
