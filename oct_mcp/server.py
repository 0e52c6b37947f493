"""The MCP server for oct's own tools, as one import: the binding between MCP and the chain
(`transports.binding`), what it answers with once the app is built (`transports.endpoint`), its
listing (`transports.listing`) and the stdio transport (`transports.stdio`). The transports never
import this module."""

from __future__ import annotations

from oct_mcp.transports.binding import INSTRUCTIONS, SERVER_NAME
from oct_mcp.transports.endpoint import AppEndpoint, build_server
from oct_mcp.transports.listing import (
    MAX_RESULT_META_KEY,
    compact_schema,
    listed_annotations,
    listed_input_schema,
    listed_output_schema,
)
from oct_mcp.transports.stdio import MAX_MESSAGE_BYTES, serve_stdio

__all__ = [
    "INSTRUCTIONS",
    "MAX_MESSAGE_BYTES",
    "MAX_RESULT_META_KEY",
    "SERVER_NAME",
    "AppEndpoint",
    "build_server",
    "compact_schema",
    "listed_annotations",
    "listed_input_schema",
    "listed_output_schema",
    "serve_stdio",
]
