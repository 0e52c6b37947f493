"""Doors a secret could take to the client over streamable HTTP besides a tool's output.

The SDK answers some requests itself (an unknown method, a body it cannot validate, a request for
an unknown session), in JSON bodies and in SSE events. Whatever the client put in them comes back
masked: every check reads the raw bytes the client received.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from clients import only_text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from replicas import ENVELOPE, INITIALIZE, LEGACY_HEADERS, MODERN_HEADERS, replica, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

KEY_ID = "AKIAQYLPMN5HHHFPZAM2"


class RecordedStream(httpx2.AsyncByteStream):
    """A response body that keeps a copy of every byte the client reads."""

    def __init__(self, inner: httpx2.AsyncByteStream, seen: bytearray) -> None:
        self._inner = inner
        self._seen = seen

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._seen.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class RecordingTransport(httpx2.AsyncHTTPTransport):
    """The real HTTP transport, recording the raw bytes of every response body."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = bytearray()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = RecordedStream(response.stream, self.seen)
        return response


class UnknownRequest(types.Request[dict[str, Any] | None, str]):
    """A request for a method no server offers; the SDK answers it itself."""


def fragments_of_the_secret(body: bytes) -> list[bytes]:
    """Every run of 8 characters of the secret found in `body` (a cut repr can carry half of it)."""
    secret = KEY_ID.encode()
    runs = {secret[start : start + 8] for start in range(len(secret) - 7)}
    return sorted(run for run in runs if run in body)


def sse_messages(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body's `data:` lines (priming events carry none)."""
    found = []
    for line in body.decode().splitlines():
        if line.startswith("data:") and line[5:].strip():
            found.append(json.loads(line[5:]))
    return found


async def test_the_sdks_own_errors_over_http_never_echo_a_secret(project: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log")
    unknown_method = {"jsonrpc": "2.0", "id": 2, "method": f"tools/{KEY_ID}", "params": {"_meta": ENVELOPE}}
    # An id of the wrong type: the SDK's validation error quotes the body it could not read.
    # Params of the wrong type: the SDK's validation error quotes the body, cut mid-secret.
    unreadable = {"jsonrpc": "2.0", "id": 3, "method": KEY_ID, "params": 5}
    with anyio.fail_after(60):
        async with replica(project, config) as url, httpx2.AsyncClient(timeout=30) as http:
            modern = await http.post(
                url, json=unknown_method, headers={**MODERN_HEADERS, "Mcp-Method": unknown_method["method"]}
            )
            opened = await http.post(url, json=INITIALIZE, headers=LEGACY_HEADERS)
            session = {
                **LEGACY_HEADERS,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "MCP-Protocol-Version": "2025-11-25",
            }
            await http.post(
                url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
            )
            legacy = await http.post(url, json={**unknown_method, "params": {}}, headers=session)
            invalid = await http.post(url, json=unreadable, headers=session)

    answers = {"modern": modern, "legacy": legacy, "invalid": invalid}
    leaked = {name: fragments_of_the_secret(answer.content) for name, answer in answers.items()}
    assert leaked == {"modern": [], "legacy": [], "invalid": []}
    assert modern.json()["error"]["code"] == -32601
    assert [m["error"]["code"] for m in sse_messages(legacy.content)] == [-32601]
    assert invalid.status_code == 400
    assert invalid.json()["error"]["code"] == -32602
    assert "input_value=<hidden>" in invalid.json()["error"]["message"]
    assert invalid.headers["content-length"] == str(len(invalid.content))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_sdk_client_over_http_gets_masked_errors_and_real_results(
    project: Path, tmp_path: Path, mode: Any
) -> None:
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log")
    recording = RecordingTransport()
    with anyio.fail_after(60):
        async with (
            replica(project, config) as url,
            httpx2.AsyncClient(transport=recording, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            read = await client.call_tool("oct_read_file", {"path": "src/pkg/core.py"})
            unknown = await client.call_tool(f"oct_read_{KEY_ID}", {})
            mistyped = await client.call_tool("oct_read_file", {"path": [KEY_ID]})
            with pytest.raises(MCPError) as refused:
                await client.session.send_request(
                    UnknownRequest(method=f"tools/{KEY_ID}", params=None), types.EmptyResult
                )

    assert only_text(read) == "def answer() -> int:\n    return 42\n"
    assert (unknown.is_error, mistyped.is_error) == (True, True)
    assert refused.value.error.code == -32601
    assert fragments_of_the_secret(bytes(recording.seen)) == []
    assert b"def answer() -> int:" in bytes(recording.seen)
