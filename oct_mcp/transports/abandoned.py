"""A handshake-era request whose client left before its answer: cancelled, as if the client had said so.

In the 2025-era protocol a request runs in its session, not in the HTTP request that carried it:
the SDK keeps it going when the POST's response stream closes (a client may come back for the
answer with `Last-Event-ID` where the server keeps events; this one keeps none). So a client that
was killed mid-call left its `oct_test` running to its end, holding a run slot and the machine
(measured: the run's three processes still there after the client was gone). In the 2026-07-28
era the request is the HTTP request, and the SDK cancels it with its connection.

Here the request guard, having seen the body and then the client's disconnect before the answer's
end, sends the session what the client would have: `notifications/cancelled` for that request id,
as one more POST through the same app, with the same headers. It carries the authentication its
request was given (`CARRIED_AUTH`, a key of the server's own ASGI scope, which no client can set),
so it reaches the same session owner even when the token expired or was revoked during the call:
authenticating it again would answer 401 and leave the run going to its time limit. The server
cancels the call's task as for any cancellation, and the run's tree is killed
(`backends/runner.py`).
"""

from __future__ import annotations

from typing import Final

import orjson
from starlette.types import ASGIApp, Message, Scope

__all__ = ["CARRIED_AUTH", "cancel_abandoned", "in_session", "request_id_of"]

CARRIED_AUTH: Final = "oct.abandoned_request_auth"
"""The scope key of a cancel's carried authentication: the (auth, user) pair of its request."""
_SESSION_HEADER: Final = b"mcp-session-id"
_BODY_HEADERS: Final = frozenset({b"content-length", b"transfer-encoding"})


def in_session(scope: Scope) -> bool:
    """Whether a request belongs to a handshake-era session (the 2026-07-28 era has none)."""
    return any(name == _SESSION_HEADER for name, _value in scope.get("headers", ()))


def request_id_of(body: bytes) -> str | int | None:
    """The JSON-RPC id of the request in a session's POST `body`, else None.

    None for a notification or a response (nothing runs for it) and for a body that is not one
    JSON-RPC request.
    """
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    found = message.get("id")
    # JSON-RPC ids are strings or integers (a bool is an int to Python, never an id).
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


async def cancel_abandoned(app: ASGIApp, scope: Scope, request_id: str | int) -> None:
    """Send `app` the session's `notifications/cancelled` for `request_id`, as its client would."""
    notice = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the client disconnected before the answer"},
        }
    )
    headers = [(name, value) for name, value in scope["headers"] if name not in _BODY_HEADERS]
    headers.append((b"content-length", str(len(notice)).encode()))
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if delivered:
            return {"type": "http.disconnect"}
        delivered = True
        return {"type": "http.request", "body": notice, "more_body": False}

    async def discard(message: Message) -> None:
        """The answer (202) goes to no one: the client is gone."""

    cancel_scope = {**scope, "headers": headers}
    if "user" in scope:
        # Authenticated once, when the request came: that identity owns the session still.
        cancel_scope[CARRIED_AUTH] = (scope.get("auth"), scope["user"])
    await app(cancel_scope, receive, discard)
