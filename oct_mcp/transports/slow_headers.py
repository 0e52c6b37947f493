"""uvicorn's HTTP/1.1 protocol with a deadline on each request's headers.

uvicorn closes an idle keep-alive connection, but any byte that arrives stops that timer, and a new
connection has none: a client that sends its headers a byte at a time, or nothing, holds a
connection for ever (2,000 of them were still open after 60 s). Here each request's line and
headers must be in within `HEADER_SECONDS` of the connection or of the last response, or the
connection is closed. The body has its own deadline (`RequestGuard`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_SECONDS", "HeaderDeadlineProtocol"]

HEADER_SECONDS: Final = 10.0


class HeaderDeadlineProtocol(H11Protocol):
    """`H11Protocol`, closing a connection whose request headers do not arrive in time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            # The request line and headers are in: the rest is the body's, or the response's.
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(HEADER_SECONDS, self._headers_late)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()
