"""The HTTP transport's accepted connections send at once: TCP_NODELAY, read on the server's side."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import anyio
import pytest
from replicas import write_config

from oct_mcp.app import build_app
from oct_mcp.transports.http import serve_http

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

REQUEST = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def exchange(client: socket.socket, port: int) -> None:
    """Connect (the server may still be starting), send a request and read the first bytes back.

    An answer means the server's loop has accepted the connection and set it up.
    """
    client.settimeout(30)
    for _ in range(600):
        try:
            client.connect(("127.0.0.1", port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    client.sendall(REQUEST)
    assert client.recv(64).startswith(b"HTTP/1.1 ")


def accepted_socket_nodelay(server: tuple[str, int], client: tuple[str, int]) -> int:
    """TCP_NODELAY of this process's socket that accepted `client` on `server`.

    The server runs in this process, so its accepted connection is one of our own descriptors.
    """
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            duplicate = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        with duplicate:
            try:
                if duplicate.getsockname()[:2] != server or duplicate.getpeername()[:2] != client:
                    continue
            except OSError:
                continue
            return duplicate.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    raise AssertionError("no accepted connection found")


async def test_an_accepted_http_connection_has_tcp_nodelay_set(project: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log")
    app = build_app(project, config_path=config, environ={})
    port = free_port()
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(serve_http, app, "127.0.0.1", port)
                with socket.socket() as client:
                    await anyio.to_thread.run_sync(exchange, client, port)
                    nodelay = accepted_socket_nodelay(("127.0.0.1", port), client.getsockname()[:2])
                group.cancel_scope.cancel()
    finally:
        app.close()

    assert nodelay == 1
