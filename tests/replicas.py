"""oct-mcp replicas over streamable HTTP, started as real subprocesses, and clients that reach them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import Process
from mcp.client.streamable_http import streamable_http_client

SERVING_PREFIX = b"oct-mcp: serving "
ENVELOPE: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
LIST_TOOLS: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/list",
    "params": {"_meta": ENVELOPE},
}
"""A 2026-07-28 tools/list request, as a client without a session sends it."""
MODERN_HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream"}
LEGACY_HEADERS = {"Accept": "application/json, text/event-stream"}
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
"""A handshake-era initialize request: without a session id, it opens one."""


def create_token(config: Path, name: str) -> str:
    """`oct-mcp token create NAME`: the token printed, its hash written to `config`."""
    argv = [sys.executable, "-m", "oct_mcp", "token", "create", name, "--config", str(config)]
    done = subprocess.run(argv, capture_output=True, timeout=60, check=True, stdin=subprocess.DEVNULL)
    return done.stdout.decode().strip()


def write_config(path: Path, audit_log: Path, **fields: Any) -> Path:
    """A config file with its own audit log and `fields`."""
    path.write_text(json.dumps({"audit_log_path": str(audit_log), **fields}), encoding="utf-8")
    return path


@asynccontextmanager
async def replica(
    project: Path,
    config: Path,
    *,
    host: str = "127.0.0.1",
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[str]:
    """`oct-mcp serve --transport http --port 0`; yields its /mcp URL, stops it with SIGTERM after."""
    argv = [sys.executable, "-m", "oct_mcp", "serve", "--transport", "http", "--host", host, "--port", "0"]
    argv += ["--project-root", str(project), "--config", str(config)]
    async with serving(argv, environ) as url:
        yield url


@asynccontextmanager
async def serving(argv: list[str], environ: Mapping[str, str] | None = None) -> AsyncIterator[str]:
    """A server started as `argv`; yields the URL it says it serves, stops it with SIGTERM after."""
    env = {**os.environ, **(environ or {})}
    process = await anyio.open_process(argv, env=env, stdin=subprocess.DEVNULL, stdout=None)
    try:
        async with anyio.create_task_group() as tasks:
            with anyio.fail_after(30):
                url = await _served_url(process)
            tasks.start_soon(_drain, process)
            yield url
            tasks.cancel_scope.cancel()
    finally:
        await stop(process)


async def stop(process: Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            await process.wait()


async def _served_url(process: Process) -> str:
    assert process.stderr is not None
    seen = b""
    async for chunk in process.stderr:
        seen += chunk
        for line in seen.splitlines():
            if line.startswith(SERVING_PREFIX):
                return line[len(SERVING_PREFIX) :].decode()
    raise AssertionError(f"the replica ended without serving: {seen.decode(errors='replace')}")


async def _drain(process: Process) -> None:
    assert process.stderr is not None
    async for _ in process.stderr:
        pass


@asynccontextmanager
async def authorised(
    url: str, token: str | None, headers: Mapping[str, str] | None = None
) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport to `url`, with a bearer token when given."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with (
        httpx2.AsyncClient(headers=sent, timeout=30) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams
