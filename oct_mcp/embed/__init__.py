"""Embedding: oct-mcp's chain around the tools of any MCP server, in one line.

    from oct_mcp.embed import guard
    guard(server)                # an SDK MCPServer or low-level Server

One SDK middleware runs the chain around every `tools/call` of the host's own tools (the
host's handler is the chain's endpoint) and filters `tools/list` by the policy and the pinned
tool definitions (`oct_mcp.embed.pins`). Other requests (resources, prompts, ...) pass untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oct_mcp.lazy_names import lazy_names

if TYPE_CHECKING:
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

# Loaded on first use: `oct-mcp`'s own server and its `pins` command import `oct_mcp.embed.pins`,
# which runs this package first, and the SDK's MCPServer that `guard` wraps costs its start-up
# about 60 ms it never uses (measured with `python -X importtime`).
_WHERE: dict[str, str] = {
    "BINARY_DROPPED_NOTE": "_host",
    "EMBEDDED_PROFILE": "_host",
    "PINS_DEFAULT": "_host",
    "ForeignTool": "_host",
    "host_arguments": "_host",
    "host_result": "_host",
    "pins_for": "_host",
    "session_client_id": "_host",
    "OctGuard": "sdk",
    "guard": "sdk",
}


__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals())


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
