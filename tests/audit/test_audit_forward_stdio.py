"""Audit records sent off the machine as they are written: each line the stdio server writes reaches
a syslog receiver on loopback (UDP and TCP) as one message, byte for byte, so the copy verifies as
a chain on its own; a bad address stops the server from starting."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from clients import oct_server
from mcp import Client

from oct_mcp.audit.records import GENESIS, line_digest
from oct_mcp.audit.verify import lines_of

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CALLS = 3


def _messages_from_udp(receiver: socket.socket) -> list[bytes]:
    receiver.settimeout(5)
    messages = []
    try:
        while True:
            messages.append(receiver.recv(65_536))
    except TimeoutError:
        return messages


def _messages_from_tcp(stream: bytes) -> list[bytes]:
    """Octet-counted frames (RFC 6587): `LENGTH SP MESSAGE`..."""
    messages = []
    while stream:
        length, rest = stream.split(b" ", 1)
        messages.append(rest[: int(length)])
        stream = rest[int(length) :]
    return messages


def _record_of(message: bytes) -> bytes:
    """The audit line a syslog message carries: after the RFC 5424 header and its `-` for no data."""
    header, line = message.split(b" - ", 1)
    assert header.startswith(b"<37>1 ")  # facility auth, severity notice, version 1
    assert b" oct-mcp " in header
    assert b" audit" in header
    return line


async def _calls(project: Path, config_file: Path) -> None:
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            for _ in range(CALLS):
                assert (await client.call_tool("oct_read_file", {"path": "README.md"})).is_error is not True


def _chained(lines: list[bytes]) -> bool:
    prev = GENESIS
    for line in lines:
        if json.loads(line)["prev"] != prev:
            return False
        prev = line_digest(line)
    return True


async def test_each_line_reaches_a_udp_receiver_as_written(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    log = tmp_path / "audit.log"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        address = f"udp://127.0.0.1:{receiver.getsockname()[1]}"
        config_file.write_text(json.dumps({"audit_log_path": str(log), "audit_syslog_address": address}))
        await _calls(project, config_file)
        received = [_record_of(m) for m in _messages_from_udp(receiver)]

    assert received == lines_of(log.read_bytes())
    assert len(received) == CALLS
    assert _chained(received)


async def test_each_line_reaches_a_tcp_receiver_framed_by_its_length(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    log = tmp_path / "audit.log"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        config_file.write_text(json.dumps({"audit_log_path": str(log), "audit_syslog_address": address}))
        stream = bytearray()

        def accept() -> None:
            connection, _ = listener.accept()
            with connection:
                while chunk := connection.recv(65_536):
                    stream.extend(chunk)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(anyio.to_thread.run_sync, accept)
            await _calls(project, config_file)
        received = [_record_of(m) for m in _messages_from_tcp(bytes(stream))]

    assert received == lines_of(log.read_bytes())
    assert _chained(received)


@pytest.mark.parametrize(
    "address", ["syslog.example.com", "udp://host", "http://host:514", "unix://host/dev/log"]
)
def test_a_bad_syslog_address_stops_the_server_with_its_rule(
    project: Path, config_file: Path, tmp_path: Path, address: str
) -> None:
    config_file.write_text(
        json.dumps({"audit_log_path": str(tmp_path / "audit.log"), "audit_syslog_address": address})
    )
    started = subprocess.run(
        [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config_file)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode == 2
    assert "audit_syslog_address" in started.stderr
    assert "udp://HOST:PORT" in started.stderr
