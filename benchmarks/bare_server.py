"""The reference: a bare MCP SDK server with one tool over stdio, nothing else.

With `--oct-stdio` it reads stdin and writes stdout as oct-mcp's server does (from the event
loop, where the SDK's own transport hands each read and write to a worker thread), so that a
comparison against it isolates the chain.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    text = anyio.Path(str((params.arguments or {})["path"]))
    return types.CallToolResult(content=[types.TextContent(type="text", text=await text.read_text())])


async def main() -> None:
    server = Server("bare", version="0", on_list_tools=list_tools, on_call_tool=call_tool)
    if "--oct-stdio" not in sys.argv[1:]:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    # oct-mcp's own reader and writer (private to its server module; a benchmark may borrow them).
    from oct_mcp.transports.stdio import _cancellable_stdin, _claimed_stdout

    with _claimed_stdout() as stdout:
        stdin = _cancellable_stdin()
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
            await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
