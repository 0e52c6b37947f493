"""The MCP server: the only module that speaks MCP for oct's own tools (stdio, both protocol eras)."""

from __future__ import annotations

from typing import Any, Final

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from oct_mcp import __version__
from oct_mcp.app import App, CallFailure, run_call
from oct_mcp.context import ClientInfo, ConsentRequest, Outcome
from oct_mcp.spec import ToolSpec

__all__ = ["CONFIRMATION_PREFIX", "build_server", "serve_stdio"]

SERVER_NAME: Final = "oct-mcp"
CONFIRMATION_PREFIX: Final = "[oct-mcp requires_confirmation]"
INSTRUCTIONS: Final = (
    "oct-mcp runs this project's developer tools behind security layers. Paths are relative to the "
    "project root; tools refuse paths outside it. Errors start with a stable code in brackets."
)


def _tool_listing(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.params.model_json_schema(),
        output_schema=spec.output.model_json_schema() if spec.output is not None else None,
        annotations=types.ToolAnnotations.model_validate(spec.annotations),
    )


def _client_info(ctx: ServerRequestContext[Any], transport: str) -> ClientInfo:
    client_params = getattr(ctx.session, "client_params", None)
    implementation = getattr(client_params, "client_info", None)
    capabilities = getattr(client_params, "capabilities", None)
    return ClientInfo(
        # One stdio server serves exactly one client; an in-memory server, one in-process caller.
        client_id=transport,
        transport=transport,
        name=getattr(implementation, "name", None),
        version=getattr(implementation, "version", None),
        protocol_version=ctx.protocol_version,
        can_elicit=getattr(capabilities, "elicitation", None) is not None,
    )


def to_call_tool_result(outcome: Outcome | CallFailure) -> types.CallToolResult:
    """The MCP form of what the chain answered."""
    if isinstance(outcome, CallFailure):
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"[{outcome.code}] {outcome.message}")],
            is_error=True,
        )
    if isinstance(outcome, ConsentRequest):
        text = (
            f"{CONFIRMATION_PREFIX} {outcome.tool} needs your confirmation: {outcome.summary}\n"
            f"arguments digest: {outcome.digest}\n"
            "To confirm, re-submit the identical call with confirm=true."
        )
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.text)],
        # A client checks structured content against the output schema: an error result carries none.
        structured_content=None if outcome.is_error else dict(outcome.structured or {}) or None,
        is_error=outcome.is_error,
    )


def build_server(app: App, *, transport: str = "stdio") -> Server[Any]:
    """An SDK low-level Server whose tools/list and tools/call go through `app`'s chain.

    Args:
        app: The built application.
        transport: How clients reach this server (`stdio` or `memory`); identifies the client.
    """
    listing = types.ListToolsResult(tools=[_tool_listing(spec) for spec in app.visible_tools()])

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        outcome = await run_call(app, params.name, params.arguments or {}, _client_info(ctx, transport))
        return to_call_tool_result(outcome)

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(app: App) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes stdin."""
    server = build_server(app, transport="stdio")
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
