"""Consent states the SDK refuses are audited: a forged, tampered, expired or re-bound round leaves a record.

The SDK's `RequestStateBoundary` verifies a consent round's sealed `requestState` before any handler
runs, and answers a state that fails with a fixed JSON-RPC error: the chain never sees the call, so
its audit layer never records it, and an attacker's probing of the seal would leave no trace. This
server middleware, placed just outside the boundary, records each such refusal as the audit layer
records a refusal before the chain (`consent_state_refused`, the tool, its arguments, the client),
then lets the SDK's error go to the client unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

__all__ = ["RejectedStatesAudit"]

_REJECTED: Final = "invalid_request_state"
"""The reason the SDK gives, in the error's data, for a state that did not verify."""


class RejectedStatesAudit:
    """Server middleware: records each tools/call whose consent state the SDK refused."""

    def __init__(self, record: Callable[[ServerRequestContext[Any]], Awaitable[None]]) -> None:
        """`record` audits one such call (`AppEndpoint.record_refused_state`); the SDK's error follows."""
        self._record = record

    async def __call__(
        self, ctx: ServerRequestContext[Any], call_next: Callable[[ServerRequestContext[Any]], Awaitable[Any]]
    ) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        try:
            return await call_next(ctx)
        except MCPError as exc:
            data = exc.data if isinstance(exc.data, Mapping) else {}
            if data.get("reason") == _REJECTED:
                await self._record(ctx)
            raise
