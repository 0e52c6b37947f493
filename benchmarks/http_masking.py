"""HTTP error masking: microseconds per response through the ASGI layer that masks the SDK's errors.

Goals, added per response: <= 10 us on a 1 KiB tool result (an SSE event that carries no error);
<= 1,000 us on a 256 KiB one (one substring search over it: a few percent of what redacting the
same output costs the chain); <= 200 us on an error event, parsed and masked. The subject is an
ASGI app that answers one SSE response (its start and one body chunk, as the SDK sends them)
behind `MaskedErrorBodies`; the reference is the same app answering straight to the same send.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

import anyio
from _common import PerCall, arguments, interleave_async, print_table
from starlette.types import Message, Receive, Scope, Send

from oct_mcp.transports.http_masking import MaskedErrorBodies

RESPONSES_PER_ROUND: Final = 2_000
SCOPE: Final[Scope] = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
_START: Final[Message] = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
}


def sse_event(document: Any) -> bytes:
    return b"event: message\r\ndata: " + json.dumps(document, separators=(",", ":")).encode() + b"\r\n\r\n"


def tool_result(size: int) -> bytes:
    text = ("src/app/models.py:42:5: E501 line too long (121 > 110 characters)\n" * (size // 60 + 1))[:size]
    return sse_event({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": text}]}})


ERROR_EVENT: Final = sse_event(
    {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32601, "message": "Method not found", "data": "tools/AKIAQYLPMN5HHHFPZAM2"},
    }
)


class OneEvent:
    """An ASGI app that answers every request with one SSE event."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(_START)
        await send({"type": "http.response.body", "body": self.body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _receive() -> Message:
    return {"type": "http.disconnect"}


async def _send(message: Message) -> None:
    return None


async def per_response(app: Any) -> float:
    started = time.perf_counter()
    for _ in range(RESPONSES_PER_ROUND):
        await app(SCOPE, _receive, _send)
    return (time.perf_counter() - started) / RESPONSES_PER_ROUND


async def measure(rounds: int) -> list[PerCall]:
    cases = [
        ("1 KiB tool result", tool_result(1024), 10.0),
        ("256 KiB tool result", tool_result(256 * 1024), 1_000.0),
        ("error event, masked", ERROR_EVENT, 200.0),
    ]
    rows = []
    for claim, body, goal in cases:
        bare = OneEvent(body)
        masked = MaskedErrorBodies(bare)
        subject, reference = await interleave_async(
            rounds, [lambda app=masked: per_response(app), lambda app=bare: per_response(app)]
        )
        added = [s - r for s, r in zip(subject, reference, strict=True)]
        rows.append(PerCall(f"http masking: {claim}, added per response", added, reference, goal))
    return rows


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=15)
    rows = anyio.run(measure, args.rounds)
    print_table(rows, args.rounds)


if __name__ == "__main__":
    main()
