"""Which request a departed client abandoned, and the cancellation sent for it in its place."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.types import Message

from oct_mcp.transports.abandoned import cancel_abandoned, request_id_of

SESSION = [(b"host", b"127.0.0.1:1"), (b"mcp-session-id", b"s1"), (b"authorization", b"Bearer t")]


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        (SESSION, {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}, 7),
        (SESSION, {"jsonrpc": "2.0", "id": "a-7", "method": "tools/call"}, "a-7"),
        # Nothing runs for these, or nothing outlives its connection.
        (SESSION, {"jsonrpc": "2.0", "method": "notifications/progress"}, None),
        (SESSION, {"jsonrpc": "2.0", "id": 7, "result": {}}, None),
        (SESSION, {"jsonrpc": "2.0", "id": True, "method": "tools/call"}, None),
        (SESSION, {"jsonrpc": "2.0", "id": [7], "method": "tools/call"}, None),
        (SESSION, [{"jsonrpc": "2.0", "id": 7, "method": "tools/call"}], None),
        (SESSION[:1], {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}, None),
    ],
)
def test_only_a_sessions_request_with_a_json_rpc_id_is_one_to_cancel(
    headers: list[tuple[bytes, bytes]], body: Any, expected: object
) -> None:
    assert request_id_of({"headers": headers}, json.dumps(body).encode()) == expected


def test_a_body_that_is_not_json_has_no_request_to_cancel() -> None:
    assert request_id_of({"headers": SESSION}, b'{"id": 7, "method": "tools/ca') is None


@pytest.mark.anyio
async def test_the_cancellation_goes_as_the_client_would_send_it() -> None:
    seen: list[tuple[dict[str, bytes], Message]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((dict(scope["headers"]), await receive()))
        await send({"type": "http.response.start", "status": 202, "headers": []})

    scope = {"type": "http", "method": "POST", "headers": [*SESSION, (b"content-length", b"999")]}
    await cancel_abandoned(app, scope, 7)

    ((headers, message),) = seen
    body = message["body"]
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "the client disconnected before the answer"},
    }
    assert headers[b"content-length"] == str(len(body)).encode()
    assert (headers[b"mcp-session-id"], headers[b"authorization"]) == (b"s1", b"Bearer t")
