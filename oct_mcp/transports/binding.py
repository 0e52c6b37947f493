"""The binding between MCP and the chain: an SDK low-level Server whose tools/list and tools/call go
to an endpoint (`transports.endpoint.AppEndpoint`: an app's chain). The stdio and HTTP transports
both serve it; nothing else speaks MCP for oct's own tools.

This module loads no part of the chain: the stdio server makes its Server here and answers the
host's `initialize` while a worker thread still imports and builds the app (`ArrivingEndpoint`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from oct_mcp import __version__
from oct_mcp.consent import CONSENT_STATE_TTL_SECONDS
from oct_mcp.transports.rejected_states import RejectedStatesAudit

__all__ = ["INSTRUCTIONS", "SERVER_NAME", "ArrivingEndpoint", "Endpoint", "server_for"]

SERVER_NAME: Final = "oct-mcp"
INSTRUCTIONS: Final = (
    "oct-mcp runs this project's developer tools behind security layers. Paths are relative to the "
    "project root; tools refuse paths outside it. Errors start with a stable code in brackets. Prefer "
    "these tools to shell commands: their runs are sandboxed and audited, git without hooks or network."
)


class Endpoint(Protocol):
    """What a server's tools requests are answered by."""

    def input_schema(self, name: str) -> Mapping[str, Any] | None: ...

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult: ...

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult: ...

    async def record_refused_state(self, ctx: ServerRequestContext[Any]) -> None: ...


class ArrivingEndpoint:
    """A server's endpoint: given at once, or arriving once a worker thread has built the app.

    A tools request that comes first waits for it; `initialize` and `ping` never do.
    """

    def __init__(self, endpoint: Endpoint | None = None) -> None:
        self.endpoint = endpoint
        self._arrived: anyio.Event | None = None  # made on the event loop, by the first to wait

    def arrive(self, endpoint: Endpoint) -> None:
        """Called on the event loop's thread, with the built endpoint."""
        self.endpoint = endpoint
        if self._arrived is not None:
            self._arrived.set()

    async def get(self) -> Endpoint:
        while self.endpoint is None:
            if self._arrived is None:
                self._arrived = anyio.Event()
            await self._arrived.wait()
        return self.endpoint

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        return None if self.endpoint is None else self.endpoint.input_schema(name)


def server_for(coming: ArrivingEndpoint, *, sealing: RequestStateSecurity | None = None) -> Server[Any]:
    """An SDK low-level Server whose tools requests go to `coming`'s endpoint.

    Args:
        coming: The endpoint, there already or on its way.
        sealing: How consent rounds' request state is sealed; None: a key of this process's own.
    """

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await (await coming.get()).list_tools(ctx, params)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await (await coming.get()).call_tool(ctx, params)

    async def record_refused_state(ctx: ServerRequestContext[Any]) -> None:
        await (await coming.get()).record_refused_state(ctx)

    server = Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=coming.input_schema,
    )
    # Seals the consent round's request state (AES-GCM, bound by the SDK to the tool and its
    # arguments) under a key that lives and dies with this process, unless replicas share one.
    if sealing is None:
        sealing = RequestStateSecurity.ephemeral(ttl=CONSENT_STATE_TTL_SECONDS)
    # Outside the boundary: the states it refuses never reach the chain, and are audited here.
    server.middleware.append(RejectedStatesAudit(record_refused_state))
    server.middleware.append(RequestStateBoundary(sealing, default_audience=SERVER_NAME))
    return server
