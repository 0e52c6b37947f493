"""What a server answers for oct's own tools once its app is built: the tool listing, each tools/call
through the chain (with the consent round the client's era allows), and each consent state the SDK
refused, audited."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateSecurity

from oct_mcp.app import App
from oct_mcp.consent import SessionGrants
from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import ConsentStateRefusedError
from oct_mcp.transports.binding import ArrivingEndpoint, server_for
from oct_mcp.transports.consent_adapter import audit_refusal, call_with_consent, client_info
from oct_mcp.transports.listing import tool_listing
from oct_mcp.transports.scopes import LiveScopes

__all__ = ["AppEndpoint", "build_server"]

_log = get_logger(__name__)
_REFUSED_STATE: Final = (
    "the consent round's state did not verify (forged, changed, expired, or for other "
    "arguments), so nothing ran; call the tool again to be asked afresh"
)


class AppEndpoint:
    """An app's tools as an MCP server serves them (`transports.binding.Endpoint`)."""

    def __init__(self, app: App, *, transport: str = "stdio", scopes: LiveScopes | None = None) -> None:
        """
        Args:
            app: The built application.
            transport: How clients reach this server (`stdio`, `memory`, `http`); identifies the client.
            scopes: The tools each token scope grants (HTTP): a client lists and calls only those.
        """
        self.app = app
        self._transport = transport
        self._scopes = scopes
        self._listing = types.ListToolsResult(
            tools=[
                tool_listing(spec, takes_confirm=app.chain.takes_confirm(spec))
                for spec in app.visible_tools()
            ]
        )
        # stdio and memory servers serve one client session (this process, this server object): what
        # its human allowed for the session lives and dies with it. One HTTP server serves every
        # client, and the SDK's sessions do not reach here, so nothing is offered there.
        self._grants = None if transport == "http" else SessionGrants()
        # What streamable HTTP checks a call's Mcp-Param headers against, looked up instead of
        # serialising the whole listing on every call (3.8 ms a call, measured).
        self._schemas = {tool.name: tool.input_schema for tool in self._listing.tools}

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        return self._schemas.get(name)

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if self._scopes is None:
            return self._listing
        token = get_access_token()
        held = list(token.scopes) if token is not None else []
        return types.ListToolsResult(
            tools=[
                tool
                for tool in self._listing.tools
                if self._scopes.allows(held, self.app.catalog.get(tool.name))
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await call_with_consent(
            self.app, params, ctx, self._transport, session_grants=self._grants, scopes=self._scopes
        )

    async def record_refused_state(self, ctx: ServerRequestContext[Any]) -> None:
        """Audit a tools/call whose consent state the SDK refused, as a refusal before the chain."""
        params: Mapping[str, Any] = ctx.params if isinstance(ctx.params, Mapping) else {}
        name = params.get("name")
        arguments = params.get("arguments")
        _log.warning("consent_state_refused", tool=name)
        await audit_refusal(
            self.app,
            client_info(ctx, self._transport),
            name if isinstance(name, str) else "",
            ConsentStateRefusedError(_REFUSED_STATE),
            arguments if isinstance(arguments, Mapping) else {},
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
    endpoint = AppEndpoint(app, transport=transport, scopes=scopes)
    return server_for(ArrivingEndpoint(endpoint), sealing=sealing)
