"""How many command runs go at once: at most so many for the whole server, and fewer for any one
client, so one client (an HTTP token, an OAuth user) cannot take every core and process slot from
the others. A run past either bound waits for a slot, saying so in a progress note; the caller's
cancellation ends the wait."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from oct_mcp.base_types import ProgressReporter

__all__ = ["RunSlots"]


@dataclass(slots=True)
class RunSlots:
    """The run slots of one server: `total` in all, `per_client` for any one client id."""

    total: int = 4
    per_client: int = 2
    _server: anyio.CapacityLimiter = field(init=False)
    _clients: dict[str, anyio.CapacityLimiter] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.total < 1 or self.per_client < 1:
            raise ValueError("a run needs at least one slot")
        self._server = anyio.CapacityLimiter(self.total)

    @asynccontextmanager
    async def taken(self, client_id: str, progress: ProgressReporter | None) -> AsyncIterator[None]:
        """Hold one of the client's slots and one of the server's while the block runs."""
        own = self._clients.get(client_id)
        if own is None:
            own = self._clients[client_id] = anyio.CapacityLimiter(self.per_client)
        try:
            await self._take(own, progress, f"this client's {self.per_client} runs at once are going")
            try:
                await self._take(self._server, progress, f"the server's {self.total} runs at once are going")
                try:
                    yield
                finally:
                    self._server.release()
            finally:
                own.release()
        finally:
            # Forgotten once idle: an HTTP server meets many clients, and keeps none it need not.
            if own.borrowed_tokens == 0 and not own.statistics().tasks_waiting:
                self._clients.pop(client_id, None)

    async def _take(
        self, limiter: anyio.CapacityLimiter, progress: ProgressReporter | None, why: str
    ) -> None:
        try:
            limiter.acquire_nowait()
        except anyio.WouldBlock:
            pass
        else:
            return
        if progress is not None:
            await progress(0, None, f"waiting for a free run slot: {why}")
        await limiter.acquire()
