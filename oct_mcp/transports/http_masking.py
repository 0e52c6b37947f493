"""Streamable HTTP's answers with every JSON-RPC error masked, in JSON bodies and in SSE events.

Over HTTP the SDK builds errors in several places that share no write stream: each session's
transport (a body it cannot validate, an unknown session), the 2026-07-28 entry (an unknown
method, with its name as `data`), the session loop (in SSE events). So the masking sits where
they all pass: the ASGI send. A response that carries no `"error"` passes unchanged, after one
substring search per body chunk; SSE events are held only until their blank line, never the stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oct_mcp.diagnostics import get_logger
from oct_mcp.redaction import redact, redact_value
from oct_mcp.transports.error_masking import masked_error_fields

__all__ = ["MAX_HELD_BYTES", "MaskedErrorBodies", "masked_json"]

MAX_HELD_BYTES: Final = 64 * 1_048_576
"""The most of one response body, or of one SSE event, held back to be masked whole."""
_ERROR_KEY: Final = b'"error"'
_SSE: Final = b"text/event-stream"
_EVENT_ENDS: Final = (b"\r\n\r\n", b"\n\n", b"\r\r")
_TOO_LARGE: Final = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Response too large"}}'
_log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class MaskedErrorBodies:
    """ASGI middleware: JSON-RPC errors in JSON bodies and SSE `data:` events leave masked.

    A plain-text error body (4xx, 5xx) is redacted as text. Content-Length follows the masked body.
    """

    app: ASGIApp
    max_held_bytes: int = MAX_HELD_BYTES
    """The most of one response body, or of one SSE event, held back to be masked whole."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _MaskedResponse(send, self.max_held_bytes).send)


class _MaskedResponse:
    """One response's send: SSE events masked one by one, any other body masked whole."""

    __slots__ = ("_closed", "_held", "_max_held", "_outer", "_sse", "_start", "_status")

    def __init__(self, outer: Send, max_held_bytes: int) -> None:
        self._outer = outer
        self._max_held = max_held_bytes
        self._start: Message | None = None
        self._status = 200
        self._sse = False
        self._held = bytearray()
        self._closed = False

    async def send(self, message: Message) -> None:
        if self._closed:
            return
        kind = message["type"]
        if kind == "http.response.start":
            self._status = int(message["status"])
            self._sse = _header(message, b"content-type").startswith(_SSE)
            if self._sse:
                await self._outer(message)
            else:
                self._start = message
            return
        if kind != "http.response.body":
            await self._outer(message)
            return
        body: bytes = message.get("body", b"")
        more: bool = message.get("more_body", False)
        if self._sse:
            await self._send_events(body, more)
        else:
            await self._send_whole(body, more)

    async def _send_events(self, body: bytes, more: bool) -> None:
        if not self._held and _ERROR_KEY not in body and (not more or body.endswith(_EVENT_ENDS)):
            await self._outer({"type": "http.response.body", "body": body, "more_body": more})
            return
        self._held += body
        end = len(self._held) if not more else _last_event_end(self._held)
        complete = bytes(self._held[:end])
        del self._held[:end]
        if len(self._held) > self._max_held:
            # An event that never ends cannot be masked whole: the stream ends here instead.
            _log.warning("sse_event_too_large", held=len(self._held))
            self._closed = True
            self._held.clear()
            await self._outer({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if _ERROR_KEY in complete:
            complete = _masked_events(complete)
        if complete or not more:
            await self._outer({"type": "http.response.body", "body": complete, "more_body": more})

    async def _send_whole(self, body: bytes, more: bool) -> None:
        start = self._start
        if start is None:  # a body after the start went: nothing left to hold it for
            await self._outer({"type": "http.response.body", "body": body, "more_body": more})
            return
        if more or self._held:
            self._held += body
            if len(self._held) > self._max_held:
                _log.warning("response_too_large", held=len(self._held))
                self._closed = True
                self._held.clear()
                await self._send_start(_with_length({**start, "status": 500}, len(_TOO_LARGE)))
                await self._outer({"type": "http.response.body", "body": _TOO_LARGE, "more_body": False})
                return
            if more:
                return
            body = bytes(self._held)
            self._held.clear()
        masked = self._masked(body)
        if masked is not None:
            start = _with_length(start, len(masked))
            body = masked
        await self._send_start(start)
        await self._outer({"type": "http.response.body", "body": body, "more_body": False})

    def _masked(self, body: bytes) -> bytes | None:
        if _ERROR_KEY in body:
            return masked_json(body)
        if self._status >= 400 and body:
            return _masked_text(body)
        return None

    async def _send_start(self, start: Message) -> None:
        self._start = None
        await self._outer(start)


def masked_json(body: bytes) -> bytes | None:
    """The body with each JSON-RPC error in it masked; None when nothing changed.

    A body that is not JSON is redacted as text.
    """
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return _masked_text(body)
    masked = _masked_document(document)
    if masked is document:
        return None
    return json.dumps(masked, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _masked_document(document: Any) -> Any:
    """The document with its errors masked, or the very same object when none changed."""
    if isinstance(document, list):
        items = [_masked_document(item) for item in document]
        return items if any(a is not b for a, b in zip(items, document, strict=True)) else document
    if not isinstance(document, dict):
        return document
    error = document.get("error")
    if error is None:
        return document
    if not isinstance(error, dict):  # an OAuth-style `{"error": "...", "error_description": ...}`
        masked_document, count = redact_value(document)
        return masked_document if count else document
    message = error.get("message")
    text, data = masked_error_fields(message if isinstance(message, str) else "", error.get("data"))
    masked = dict(error)
    if isinstance(message, str):
        masked["message"] = text
    if "data" in error:
        masked["data"] = data
    return document if masked == error else {**document, "error": masked}


def _masked_text(body: bytes) -> bytes | None:
    text = body.decode("utf-8", "replace")
    masked = redact(text)[0]
    return None if masked == text else masked.encode("utf-8")


def _masked_events(stream: bytes) -> bytes:
    """Complete SSE events with the JSON-RPC errors in their `data:` lines masked."""
    parts = _split_events(stream)
    out = bytearray()
    for event, end in parts:
        out += _masked_event(event, end) if _ERROR_KEY in event else event
        out += end
    return bytes(out)


def _split_events(stream: bytes) -> list[tuple[bytes, bytes]]:
    parts: list[tuple[bytes, bytes]] = []
    position = 0
    while position < len(stream):
        found = [(stream.find(end, position), end) for end in _EVENT_ENDS]
        hits = [(at, end) for at, end in found if at >= 0]
        if not hits:
            parts.append((stream[position:], b""))
            break
        at, end = min(hits, key=lambda hit: (hit[0], -len(hit[1])))
        parts.append((stream[position:at], end))
        position = at + len(end)
    return parts


def _masked_event(event: bytes, end: bytes) -> bytes:
    newline = b"\r\n" if end == b"\r\n\r\n" else end[:1] or b"\n"
    lines = event.splitlines()
    data = [line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:")]
    masked = masked_json(b"\n".join(data))
    if masked is None:
        return event
    kept = [line for line in lines if not line.startswith(b"data:")]
    kept += [b"data: " + line for line in masked.splitlines()]
    return newline.join(kept)


def _last_event_end(held: bytearray) -> int:
    """Where the last complete SSE event in `held` ends (0 when none has)."""
    return max((at + len(end) for end in _EVENT_ENDS if (at := held.rfind(end)) >= 0), default=0)


def _header(message: Message, name: bytes) -> bytes:
    for key, value in message.get("headers", ()):
        if key.lower() == name:
            return bytes(value).lower()
    return b""


def _with_length(start: Message, length: int) -> Message:
    headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
    headers.append((b"content-length", str(length).encode("ascii")))
    return {**start, "headers": headers}
