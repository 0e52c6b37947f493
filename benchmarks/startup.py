"""Start-up: process start to the first `initialize` reply and to the first `tools/list` reply,
oct-mcp against a bare SDK server; and oct-mcp's first tool call against its second.

Goals: `initialize` within 1.2x the bare server's (issue 32: the stdio server answers it while a
worker thread imports and builds the chain); the first listing within 1.5x (it waits for that
build: importing oct-mcp's own modules, about 180 ms, is most of it); the first call adds <= 10 ms
to what the second takes (it added 85 ms while the redactor built its detectors then; a ratio of
two calls of about a millisecond says little). The first call comes as a host sends it: after
`initialize`, `notifications/initialized` and `tools/list`, once the model has read the listing
and chosen (`THINK_SECONDS`, shorter than any model's turn).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Comparison, arguments, interleave, print_table

INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "startup-bench", "version": "0"},
            },
        }
    )
    + "\n"
).encode()
INITIALIZED = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'
FIRST_CALL_GOAL_MS = 10
INITIALIZE_GOAL = 1.2
THINK_SECONDS = 0.5
"""From the listing to the first call: a model's first turn takes seconds."""


def _request(request_id: int, method: str, params: dict[str, object]) -> bytes:
    return (
        json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + "\n"
    ).encode()


def _reply(process: subprocess.Popen[bytes], request_id: int) -> dict[str, object]:
    assert process.stdout is not None
    while True:
        message = json.loads(process.stdout.readline())
        if message.get("id") == request_id:
            if "result" not in message:
                raise RuntimeError(f"unexpected reply: {message}")
            result: dict[str, object] = message["result"]
            return result


def first_and_second_call(command: list[str]) -> tuple[float, float]:
    """Seconds of the first `oct_read_file` call and of the second, in one server, as a host makes them."""
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None
    try:
        process.stdin.write(INITIALIZE)
        process.stdin.flush()
        _reply(process, 1)
        process.stdin.write(INITIALIZED + _request(2, "tools/list", {}))
        process.stdin.flush()
        _reply(process, 2)
        time.sleep(THINK_SECONDS)
        spent = []
        for request_id in (3, 4):
            started = time.perf_counter()
            process.stdin.write(
                _request(
                    request_id, "tools/call", {"name": "oct_read_file", "arguments": {"path": "README.md"}}
                )
            )
            process.stdin.flush()
            result = _reply(process, request_id)
            spent.append(time.perf_counter() - started)
            if result.get("isError"):
                raise RuntimeError(f"the call failed: {result}")
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    return spent[0], spent[1]


def start_up(command: list[str]) -> tuple[float, float]:
    """Seconds from spawning `command` to its reply to `initialize`, and to its first `tools/list`
    (asked as a host asks it: right after `notifications/initialized`)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None
    try:
        process.stdin.write(INITIALIZE)
        process.stdin.flush()
        _reply(process, 1)
        initialized = time.perf_counter() - started
        process.stdin.write(INITIALIZED + _request(2, "tools/list", {}))
        process.stdin.flush()
        tools = _reply(process, 2).get("tools")
        listed = time.perf_counter() - started
        if not tools:
            raise RuntimeError("the listing has no tools")
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    return initialized, listed


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    with tempfile.TemporaryDirectory() as project:
        (Path(project) / "README.md").write_text("# project\n")
        config = Path(project) / "no-config.json"
        oct_mcp = [sys.executable, "-m", "oct_mcp", "--project-root", project, "--config", str(config)]
        bare = [sys.executable, str(Path(__file__).with_name("bare_server.py"))]
        # One warm-up each, so the first round does not pay for cold disk caches.
        start_up(oct_mcp)
        start_up(bare)
        listed: dict[str, list[float]] = {"oct": [], "bare": []}

        def initialize(name: str, command: list[str]) -> float:
            to_initialize, to_listing = start_up(command)
            listed[name].append(to_listing)
            return to_initialize

        subject, reference = interleave(
            args.rounds, [lambda: initialize("oct", oct_mcp), lambda: initialize("bare", bare)]
        )
        calls = [first_and_second_call(oct_mcp) for _ in range(args.rounds)]
    print_table(
        [
            Comparison("startup: spawn to initialize reply", subject, reference, goal=INITIALIZE_GOAL),
            Comparison(
                "startup: spawn to the first tools/list reply", listed["oct"], listed["bare"], goal=1.5
            ),
            Comparison(
                "oct-mcp's first call / its second",
                [first for first, _ in calls],
                [second for _, second in calls],
                goal=float("inf"),
            ),
        ],
        args.rounds,
    )
    added_ms = statistics.median(first - second for first, second in calls) * 1e3
    verdict = "met" if added_ms <= FIRST_CALL_GOAL_MS else "MISSED"
    print(
        f"the first call adds {added_ms:.1f} ms to the second "
        f"(median; goal <= {FIRST_CALL_GOAL_MS} ms): {verdict}"
    )


if __name__ == "__main__":
    main()
