"""Protocol fuzzing over stdio: anything is answered or dropped as JSON-RPC says, and the server lives on."""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.e2e

REPLY_SECONDS = 20
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


class RawClient:
    """Bytes in, JSON lines out; every stdout line must be a JSON-RPC message."""

    def __init__(self, project: Path, config: Path) -> None:
        command = [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.ids = itertools.count(1000)
        self.outcomes: Counter[str] = Counter()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        line = self.lines.get(timeout=REPLY_SECONDS)
        message = json.loads(line)  # a traceback or any other text on stdout fails here
        assert isinstance(message, dict)
        assert message.get("jsonrpc") == "2.0"
        return message

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        ident = next(self.ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode())
        reply = self.receive()
        assert reply["id"] == ident
        return reply

    def assert_alive(self) -> None:
        reply = self.request("tools/call", {"name": "oct_read_file", "arguments": {"path": "README.md"}})
        assert reply["result"]["isError"] is False

    def record(self, reply: dict[str, Any]) -> None:
        self.outcomes["error " + str(reply["error"]["code"]) if "error" in reply else "result"] += 1

    def close(self) -> bytes:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=20) == 0
        assert self.process.stderr is not None
        stderr = self.process.stderr.read()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        return stderr


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawClient]:
    project = tmp_path_factory.mktemp("fuzz-project").resolve()
    (project / "README.md").write_text("# fuzz\n")
    config = project.parent / "fuzz-config.json"
    config.write_text(json.dumps({"rate_limit_per_minute": 10_000}))
    raw = RawClient(project, config)
    before = raw.request("tools/list")
    assert "error" in before, "a request before initialize must be refused"
    raw.record(before)
    init = raw.request(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}},
    )
    assert "result" in init
    raw.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    yield raw
    stderr = raw.close()
    assert b"Traceback" not in stderr
    print("\nfuzz outcomes:", dict(raw.outcomes), "total:", sum(raw.outcomes.values()))


FUZZ = settings(
    max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@FUZZ
@given(data=st.binary(min_size=1, max_size=300).filter(lambda b: b"\n" not in b and b.strip()))
def test_arbitrary_bytes_get_a_json_rpc_error_or_are_dropped(client: RawClient, data: bytes) -> None:
    client.send(data)
    reply = _reply_or_none(client, data)
    if reply is not None:
        assert "error" in reply
        client.record(reply)
    client.assert_alive()


def _reply_or_none(client: RawClient, data: bytes) -> dict[str, Any] | None:
    """Requests (and garbage) are answered; notifications and valid non-requests are not."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return client.receive()
    if isinstance(document, dict) and "method" in document and "id" not in document:
        return None  # a notification, however odd: never answered
    if isinstance(document, dict) and "id" not in document and ("result" in document or "error" in document):
        return None
    return client.receive()


@FUZZ
@given(value=json_values)
def test_any_json_value_as_a_message_is_answered_or_dropped(client: RawClient, value: Any) -> None:
    data = json.dumps(value).encode()
    client.send(data)
    reply = _reply_or_none(client, data)
    if reply is not None:
        client.record(reply)
        assert "error" in reply or "result" in reply
    client.assert_alive()


@FUZZ
@given(field=st.sampled_from(["name", "arguments", "_meta", "params", "id", "method"]), value=json_values)
def test_wrong_types_in_every_field_of_tools_call_are_refused(
    client: RawClient, field: str, value: Any
) -> None:
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": next(client.ids),
        "method": "tools/call",
        "params": {"name": "oct_read_file", "arguments": {"path": "README.md"}},
    }
    if field in ("name", "arguments", "_meta"):
        message["params"][field] = value
    else:
        message[field] = value
    data = json.dumps(message).encode()
    client.send(data)
    reply = _reply_or_none(client, data)
    if reply is not None:
        client.record(reply)
        if "result" in reply:
            # Only a change that left a valid call may succeed; the tool still ran inside the project.
            assert isinstance(reply["result"].get("content"), list)
    client.assert_alive()


@pytest.mark.parametrize(
    "method", ["nope", "tools/nope", "resources/read", "prompts/get", "", "sampling/createMessage"]
)
def test_unknown_methods_get_method_not_found(client: RawClient, method: str) -> None:
    reply = client.request(method, {})

    client.record(reply)
    assert reply["error"]["code"] in (-32601, -32602)
    client.assert_alive()


def test_invalid_utf8_and_a_50_mb_line_are_answered_and_survived(client: RawClient) -> None:
    for data in (b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', b"\xc3\x28" * 100, b"x" * (50 * 1_048_576)):
        client.send(data)
        reply = client.receive()
        client.record(reply)
        assert "error" in reply
        client.assert_alive()


def test_a_flood_of_cancellations_is_absorbed(client: RawClient) -> None:
    for request_id in range(2_000):
        client.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": request_id, "reason": "x"},
                }
            ).encode()
        )

    client.assert_alive()
