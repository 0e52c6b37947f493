"""The binding between MCP and the chain: an SDK low-level Server whose tools/list and tools/call go
through an app's chain. The stdio and HTTP transports both serve it; nothing else speaks MCP for
oct's own tools."""

from __future__ import annotations

from typing import Any, Final

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from oct_mcp import __version__
from oct_mcp.app import App
from oct_mcp.consent import CONSENT_STATE_TTL_SECONDS, SessionGrants
from oct_mcp.transports.consent_adapter import call_with_consent
from oct_mcp.transports.listing import tool_listing
from oct_mcp.transports.rejected_states import RejectedStatesAudit
from oct_mcp.transports.scopes import LiveScopes

__all__ = ["INSTRUCTIONS", "SERVER_NAME", "build_server"]

SERVER_NAME: Final = "oct-mcp"
INSTRUCTIONS: Final = (
    "oct-mcp runs this project's developer tools behind security layers. Paths are relative to the "
    "project root; tools refuse paths outside it. Errors start with a stable code in brackets. Prefer "
    "these tools to shell commands: their runs are sandboxed and audited, git without hooks or network."
)


def build_server(
    app: App,
    *,
    transport: str = "stdio",
    sealing: RequestStateSecurity | None = None,
    scopes: LiveScopes | None = None,
) -> Server[Any]:
    """An SDK low-level Server whose tools/list and tools/call go through `app`'s chain.

    Args:
        app: The built application.
        transport: How clients reach this server (`stdio`, `memory`, `http`); identifies the client.
        sealing: How consent rounds' request state is sealed; None: a key of this process's own.
        scopes: The tools each token scope grants (HTTP): a client lists and calls only those.
    """
    listing = types.ListToolsResult(
        tools=[
            tool_listing(spec, takes_confirm=app.chain.takes_confirm(spec)) for spec in app.visible_tools()
        ]
    )
    # stdio and memory servers serve one client session (this process, this server object): what its
    # human allowed for the session lives and dies with it. One HTTP server serves every client, and
    # the SDK's sessions do not reach here, so nothing is offered there.
    grants = None if transport == "http" else SessionGrants()
    # What streamable HTTP checks a call's Mcp-Param headers against, looked up instead of
    # serialising the whole listing on every call (3.8 ms a call, measured).
    schemas = {tool.name: tool.input_schema for tool in listing.tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if scopes is None:
            return listing
        token = get_access_token()
        held = list(token.scopes) if token is not None else []
        granted = [tool for tool in listing.tools if scopes.allows(held, app.catalog.get(tool.name))]
        return types.ListToolsResult(tools=granted)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await call_with_consent(app, params, ctx, transport, session_grants=grants, scopes=scopes)

    server = Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=schemas.get,
    )
    # Seals the consent round's request state (AES-GCM, bound by the SDK to the tool and its
    # arguments) under a key that lives and dies with this process, unless replicas share one.
    if sealing is None:
        sealing = RequestStateSecurity.ephemeral(ttl=CONSENT_STATE_TTL_SECONDS)
    # Outside the boundary: the states it refuses never reach the chain, and are audited here.
    server.middleware.append(RejectedStatesAudit(app, transport))
    server.middleware.append(RequestStateBoundary(sealing, default_audience=SERVER_NAME))
    return server
