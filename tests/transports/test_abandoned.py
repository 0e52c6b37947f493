"""Which request a departed client abandoned, and the cancellation the request guard sends for it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.types import Message

from oct_mcp.app import App, build_app
from oct_mcp.transports.abandoned import cancel_abandoned, in_session, request_id_of
from oct_mcp.transports.http import RequestGuard

SESSION = [(b"host", b"127.0.0.1:1"), (b"mcp-session-id", b"s1"), (b"authorization", b"Bearer t")]
CALL = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}}).encode()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"jsonrpc": "2.0", "id": 7, "method": "tools/call"}, 7),
        ({"jsonrpc": "2.0", "id": "a-7", "method": "tools/call"}, "a-7"),
        # Nothing runs for these.
        ({"jsonrpc": "2.0", "method": "notifications/progress"}, None),
        ({"jsonrpc": "2.0", "id": 7, "result": {}}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "tools/call"}, None),
        ({"jsonrpc": "2.0", "id": [7], "method": "tools/call"}, None),
        ([{"jsonrpc": "2.0", "id": 7, "method": "tools/call"}], None),
    ],
)
def test_only_a_json_rpc_request_with_an_id_is_one_to_cancel(body: Any, expected: object) -> None:
    assert request_id_of(json.dumps(body).encode()) == expected


def test_a_body_that_is_not_json_has_no_request_to_cancel() -> None:
    assert request_id_of(b'{"id": 7, "method": "tools/ca') is None


def test_only_a_request_of_a_session_outlives_its_connection() -> None:
    assert in_session({"headers": SESSION})
    assert not in_session({"headers": SESSION[:1]})


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


@pytest.fixture
def audit_app(project: Path, tmp_path: Path) -> Iterator[App]:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log")}))
    app = build_app(project, config_path=config)
    try:
        yield app
    finally:
        app.close()


async def _through_guard(
    app: App, headers: list[tuple[bytes, bytes]], chunks: list[bytes], *, answers: bool
) -> list[bytes]:
    """One POST through the guard to an SSE-like app: the bodies of every request the app got."""
    bodies: list[bytes] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if answers:
            await send({"type": "http.response.body", "body": b"data: done\n\n", "more_body": False})
        await receive()  # listening for the client to leave, as an SSE answer does

    incoming = [
        {"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
        for index, chunk in enumerate(chunks)
    ]

    async def receive() -> Message:
        # The body, then the client goes.
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        """The client's side of the wire."""

    settings = TransportSecuritySettings(allowed_hosts=["127.0.0.1:1"], allowed_origins=[])
    guard = RequestGuard(inner, TransportSecurityMiddleware(settings), app, 5.0, max_body_bytes=1_024)
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    with anyio.fail_after(10):
        await guard(scope, receive, send)
    return bodies


def _cancelled(bodies: list[bytes]) -> list[object]:
    return [json.loads(body)["params"]["requestId"] for body in bodies[1:]]


@pytest.mark.anyio
async def test_a_session_request_whose_client_leaves_before_the_answer_is_cancelled(audit_app: App) -> None:
    whole = await _through_guard(audit_app, SESSION, [CALL], answers=False)
    chunked = await _through_guard(audit_app, SESSION, [CALL[:9], CALL[9:20], CALL[20:]], answers=False)

    assert (_cancelled(whole), _cancelled(chunked)) == ([7], [7])


@pytest.mark.anyio
async def test_nothing_is_cancelled_after_the_answer_outside_a_session_or_past_the_body_bound(
    audit_app: App,
) -> None:
    answered = await _through_guard(audit_app, SESSION, [CALL], answers=True)
    modern = await _through_guard(audit_app, SESSION[:1], [CALL], answers=False)
    large = CALL[:-1] + b', "padding": "' + b"x" * 2_000 + b'"}'
    too_large = await _through_guard(audit_app, SESSION, [large[:600], large[600:]], answers=False)

    assert (_cancelled(answered), _cancelled(modern), _cancelled(too_large)) == ([], [], [])
