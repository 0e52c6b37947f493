"""Refusals before authentication: counted and sampled, never one chained audit record each, and an
address refused too often answered 429 while a client with credentials is still served."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx2
import pytest
from mcp import Client
from replicas import LIST_TOOLS, MODERN_HEADERS, authorised, create_token, replica, write_config

from oct_mcp.transports.refusals import BLOCK_AFTER, RECORDS_PER_WINDOW, RefusalSampler
from oct_mcp.transports.slow_headers import HEADER_SECONDS

pytestmark = pytest.mark.e2e

FLOOD: int = 400


class Clock:
    """Time the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_one_record_per_address_and_code_a_window_carries_the_count_since_the_last() -> None:
    clock = Clock()
    sampler = RefusalSampler(clock=clock)

    first = sampler.note("203.0.113.7", "unauthenticated")
    quiet = [sampler.note("203.0.113.7", "unauthenticated") for _ in range(99)]
    other_code = sampler.note("203.0.113.7", "host_refused")
    other_address = sampler.note("198.51.100.2", "unauthenticated")
    clock.now += sampler.window_seconds
    next_window = sampler.note("203.0.113.7", "unauthenticated")

    assert first == {"count": 1}
    assert set(quiet) == {None}
    assert other_code == {"count": 1}
    assert other_address == {"count": 1}
    assert next_window == {"count": 100}


def test_many_addresses_get_at_most_the_window_s_records_in_all() -> None:
    clock = Clock()
    sampler = RefusalSampler(clock=clock)

    written = [sampler.note(f"2001:db8::{n:x}", "unauthenticated") for n in range(RECORDS_PER_WINDOW * 10)]

    assert sum(record is not None for record in written) == RECORDS_PER_WINDOW


def test_forgotten_addresses_are_counted_in_the_next_record() -> None:
    clock = Clock()
    sampler = RefusalSampler(clock=clock, sources_max=2)
    sampler.note("a", "unauthenticated")
    sampler.note("a", "unauthenticated")  # counted, not recorded
    sampler.note("b", "unauthenticated")

    record = sampler.note("c", "unauthenticated")  # forgets `a` and its pending refusal

    assert record == {"count": 1, "uncounted_elsewhere": 1}


def test_an_address_refused_too_often_is_blocked_for_the_rest_of_the_window() -> None:
    clock = Clock()
    sampler = RefusalSampler(clock=clock)
    for _ in range(BLOCK_AFTER - 1):
        sampler.note("203.0.113.7", "unauthenticated")

    assert not sampler.blocked("203.0.113.7")
    sampler.note("203.0.113.7", "unauthenticated")
    assert sampler.blocked("203.0.113.7")
    assert not sampler.blocked("198.51.100.2")
    clock.now += sampler.window_seconds
    assert not sampler.blocked("203.0.113.7")


def audit_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.anyio
async def test_a_flood_of_unauthenticated_requests_leaves_the_audit_whole_and_a_token_still_served(
    project: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit)
    token = create_token(config, "ci")
    headers = {**MODERN_HEADERS, "Mcp-Method": "tools/list"}
    with anyio.fail_after(120):
        async with replica(project, config) as url:
            async with Client(authorised(url, token)) as client:
                await client.call_tool("oct_read_file", {"path": "README.md"})
            before = audit_lines(audit)
            async with httpx2.AsyncClient(timeout=30) as http:
                statuses = [
                    (await http.post(url, json=LIST_TOOLS, headers=headers)).status_code for _ in range(FLOOD)
                ]
            async with Client(authorised(url, token)) as client:
                served = await client.call_tool("oct_read_file", {"path": "README.md"})
    after = audit_lines(audit)
    verified = subprocess.run(
        [sys.executable, "-m", "oct_mcp", "audit", "verify", str(audit)],
        capture_output=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )

    assert statuses[:BLOCK_AFTER] == [401] * BLOCK_AFTER
    assert set(statuses[BLOCK_AFTER:]) == {429}
    assert served.is_error is not True
    assert after[: len(before)] == before
    refusals = [json.loads(line) for line in after[len(before) :] if json.loads(line).get("tool") is None]
    assert [(r["code"], r["count"], r["client"]["remote"]) for r in refusals] == [
        ("unauthenticated", 1, "127.0.0.1"),
        ("too_many_refusals", 1, "127.0.0.1"),
    ]
    assert verified.returncode == 0, verified.stdout + verified.stderr


async def _closed_by_server(stream: anyio.abc.SocketStream) -> bytes:
    """What the server sends until it closes the connection (nothing, for a connection cut)."""
    received = b""
    try:
        while True:
            received += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
        return received


@pytest.mark.anyio
@pytest.mark.parametrize(
    "sent", [b"", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"], ids=["nothing", "half-headers"]
)
async def test_a_connection_whose_headers_do_not_arrive_in_time_is_closed(
    project: Path, tmp_path: Path, sent: bytes
) -> None:
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log")
    with anyio.fail_after(HEADER_SECONDS * 3 + 30):
        async with replica(project, config) as url:
            address = urlsplit(url)
            stream = await anyio.connect_tcp(address.hostname or "127.0.0.1", address.port or 0)
            async with stream:
                if sent:
                    await stream.send(sent)
                received = await _closed_by_server(stream)
            # The server still answers a client that sends its request whole.
            async with httpx2.AsyncClient(timeout=30) as http:
                answered = await http.post(
                    url, json=LIST_TOOLS, headers={**MODERN_HEADERS, "Mcp-Method": "tools/list"}
                )

    assert received == b""
    assert answered.status_code == 200


@pytest.mark.anyio
async def test_a_body_that_does_not_arrive_in_time_gets_408_from_the_real_app_and_is_audited(
    project: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit, http_body_timeout_seconds=2)
    body = json.dumps(LIST_TOOLS).encode()
    with anyio.fail_after(60):
        async with replica(project, config) as url:
            address = urlsplit(url)
            host = f"{address.hostname}:{address.port}"
            head = (
                f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                f"Mcp-Method: tools/list\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            stream = await anyio.connect_tcp(address.hostname or "127.0.0.1", address.port or 0)
            async with stream:
                # The headers and a tenth of the body; the rest never comes.
                await stream.send(head + body[: len(body) // 10])
                answer = await _closed_by_server(stream)

    assert answer.startswith(b"HTTP/1.1 408 ")
    records = [json.loads(line) for line in audit_lines(audit)]
    assert [(r["code"], r["http_status"], r["client"]["remote"]) for r in records] == [
        ("body_too_slow", 408, "127.0.0.1")
    ]
