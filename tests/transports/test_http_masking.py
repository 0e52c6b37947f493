"""The ASGI masking layer alone: SSE events cut anywhere, bodies in pieces, bounds, unchanged passes."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from oct_mcp.transports.http_masking import MAX_HELD_BYTES, MaskedErrorBodies

pytestmark = pytest.mark.anyio

KEY_ID = "AKIAQYLPMN5HHHFPZAM2"
SCOPE: Scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
ERROR = {
    "jsonrpc": "2.0",
    "id": 2,
    "error": {"code": -32601, "message": "Method not found", "data": f"tools/{KEY_ID}"},
}
MASKED = {**ERROR, "error": {**ERROR["error"], "data": "tools/[REDACTED:aws_access_key_id]"}}


class Replay:
    """An ASGI app that answers with the start and body chunks it was given."""

    def __init__(self, content_type: bytes, chunks: list[bytes], status: int = 200) -> None:
        self.start: Message = {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(sum(map(len, chunks))).encode()),
            ],
        }
        self.chunks = chunks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(self.start)
        for index, chunk in enumerate(self.chunks):
            await send(
                {"type": "http.response.body", "body": chunk, "more_body": index < len(self.chunks) - 1}
            )


async def answered(app: Any, max_held_bytes: int = MAX_HELD_BYTES) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    with anyio.fail_after(10):
        await MaskedErrorBodies(app, max_held_bytes)(SCOPE, receive, send)
    return sent


def body_of(sent: list[Message]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def event(document: Any) -> bytes:
    return b"event: message\r\ndata: " + json.dumps(document, separators=(",", ":")).encode() + b"\r\n\r\n"


async def test_an_error_event_cut_across_chunks_is_masked_whole_and_its_neighbours_kept() -> None:
    result = event({"jsonrpc": "2.0", "id": 1, "result": {"text": 'say "error": no'}})
    stream = b": ping\r\n\r\n" + result + event(ERROR) + result
    cut = stream.index(KEY_ID.encode()) + 5
    chunks = [stream[:7], stream[7:cut], stream[cut:]]

    sent = await answered(Replay(b"text/event-stream", chunks))

    assert body_of(sent) == b": ping\r\n\r\n" + result + event(MASKED) + result
    assert sent[-1]["more_body"] is False


async def test_a_stream_without_errors_passes_chunk_for_chunk() -> None:
    chunks = [event({"jsonrpc": "2.0", "id": n, "result": {}}) for n in range(3)]

    sent = await answered(Replay(b"text/event-stream", chunks))

    assert [m["body"] for m in sent[1:]] == chunks


async def test_a_json_error_body_in_pieces_is_masked_and_its_length_follows() -> None:
    body = json.dumps(ERROR).encode()

    sent = await answered(Replay(b"application/json", [body[:10], body[10:]], status=404))

    masked = body_of(sent)
    assert json.loads(masked) == MASKED
    assert dict(sent[0]["headers"])[b"content-length"] == str(len(masked)).encode()


async def test_a_plain_text_error_body_is_redacted_as_text() -> None:
    sent = await answered(Replay(b"text/plain", [f"no such session {KEY_ID}".encode()], status=400))

    assert body_of(sent) == b"no such session [REDACTED:aws_access_key_id]"


async def test_an_sse_event_past_the_bound_ends_the_stream_unsent() -> None:
    endless = b"data: " + json.dumps(ERROR).encode() + b" " * 100

    sent = await answered(
        Replay(b"text/event-stream", [endless, b"\r\n\r\n", event(ERROR)]), max_held_bytes=64
    )

    assert body_of(sent) == b""
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_a_json_body_past_the_bound_becomes_a_500_without_it() -> None:
    body = json.dumps(ERROR).encode() + b" " * 100

    sent = await answered(Replay(b"application/json", [body[:80], body[80:]]), max_held_bytes=64)

    assert sent[0]["status"] == 500
    assert json.loads(body_of(sent))["error"]["message"] == "Response too large"
    assert KEY_ID.encode() not in body_of(sent)


async def test_an_oauth_style_error_body_is_masked_too() -> None:
    body = json.dumps({"error": "invalid_token", "error_description": f"token {KEY_ID} unknown"}).encode()

    sent = await answered(Replay(b"application/json", [body], status=401))

    assert json.loads(body_of(sent)) == {
        "error": "invalid_token",
        "error_description": "token [REDACTED:aws_access_key_id] unknown",
    }
