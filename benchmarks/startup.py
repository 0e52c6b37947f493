"""Start-up: process start to the first `initialize` reply, oct-mcp against a bare SDK server.

Goal: ratio <= 1.5.
"""

from __future__ import annotations

import json
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


def time_to_initialize(command: list[str]) -> float:
    """Seconds from spawning `command` to reading its reply to `initialize`."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(INITIALIZE)
    process.stdin.flush()
    reply = json.loads(process.stdout.readline())
    elapsed = time.perf_counter() - started
    if reply.get("id") != 1 or "result" not in reply:
        raise RuntimeError(f"unexpected reply to initialize: {reply}")
    process.stdin.close()
    process.wait(timeout=30)
    return elapsed


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    with tempfile.TemporaryDirectory() as project:
        (Path(project) / "README.md").write_text("# project\n")
        config = Path(project) / "no-config.json"
        oct_mcp = [sys.executable, "-m", "oct_mcp", "--project-root", project, "--config", str(config)]
        bare = [sys.executable, str(Path(__file__).with_name("bare_server.py"))]
        # One warm-up each, so the first round does not pay for cold disk caches.
        time_to_initialize(oct_mcp)
        time_to_initialize(bare)
        subject, reference = interleave(
            args.rounds, [lambda: time_to_initialize(oct_mcp), lambda: time_to_initialize(bare)]
        )
    print_table([Comparison("startup: spawn to initialize reply", subject, reference, goal=1.5)], args.rounds)


if __name__ == "__main__":
    main()
