"""Stdio round trip: oct_read_file over stdio against a bare SDK server's read_file, same file, same client.

Goal: ratio <= 1.10 per call. The servers run as subprocesses reached through the SDK's `Client`
over stdio (`StdioServerParameters`, default mode): `python -m oct_mcp` (every layer of the
default profile, the audit log written to a file) and `bare_server.py` (the SDK's low-level
server, one tool that reads the file at the path it is given, in a worker thread). oct-mcp
reads stdin and writes stdout from the event loop, the SDK's transport through a worker thread;
a second row compares against the bare server with oct-mcp's transport, which leaves the chain's
own cost.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import anyio
from _common import Comparison, arguments, interleave_async, print_table
from mcp import Client, StdioServerParameters

CALLS_PER_ROUND: Final = 100
RATE_LIMIT: Final = 10_000
FILE: Final = "notes.md"
TEXT: Final = "# Notes\n\n" + "".join(
    f"- item {index}: check the build and the docs\n" for index in range(12)
)


async def _round(client: Client, tool: str, path: str, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        result = await client.call_tool(tool, {"path": path})
        if result.is_error:
            raise RuntimeError(f"the call failed: {result.content}")
    return (time.perf_counter() - started) / calls


async def _measure(rounds: int, project: Path) -> tuple[list[float], list[float], list[float]]:
    (project / FILE).write_text(TEXT)
    config = project / "config.json"
    config.write_text(
        json.dumps({"audit_log_path": str(project / "audit.log"), "rate_limit_per_minute": RATE_LIMIT})
    )
    ours = StdioServerParameters(
        command=sys.executable,
        args=["-m", "oct_mcp", "--project-root", str(project), "--config", str(config)],
    )
    bare_server = str(Path(__file__).with_name("bare_server.py"))
    bare = StdioServerParameters(command=sys.executable, args=[bare_server], cwd=str(project))
    same_writer = StdioServerParameters(
        command=sys.executable, args=[bare_server, "--oct-stdio"], cwd=str(project)
    )
    # A stdio server has one client id, and every call of the run counts against its limit:
    # the rounds share half of it, so none is refused.
    calls = min(CALLS_PER_ROUND, RATE_LIMIT // 2 // (rounds + 1))
    path = str(project / FILE)
    async with Client(ours) as ours_client, Client(bare) as bare_client, Client(same_writer) as same_client:
        await _round(ours_client, "oct_read_file", FILE, calls)  # warm-up
        await _round(bare_client, "read_file", path, calls)
        await _round(same_client, "read_file", path, calls)
        chain, reference, same = await interleave_async(
            rounds,
            [
                lambda: _round(ours_client, "oct_read_file", FILE, calls),
                lambda: _round(bare_client, "read_file", path, calls),
                lambda: _round(same_client, "read_file", path, calls),
            ],
        )
    audit = (project / "audit.log").read_text().splitlines()
    if len(audit) != (rounds + 1) * calls:
        raise RuntimeError(f"expected {(rounds + 1) * calls} audit records, found {len(audit)}")
    return chain, reference, same


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    with tempfile.TemporaryDirectory() as temp:
        chain, reference, same = anyio.run(_measure, args.rounds, Path(temp).resolve())
    print_table(
        [
            Comparison("stdio round trip per call (oct-mcp / bare SDK server)", chain, reference, 1.10, "us"),
            Comparison("the same, bare server on oct-mcp's stdio transport", chain, same, 1.10, "us"),
        ],
        args.rounds,
    )
    extra = (statistics.median(chain) - statistics.median(same)) * 1e6
    saved = (statistics.median(reference) - statistics.median(same)) * 1e6
    print(f"the chain adds {extra:.0f} us per call over stdio; oct-mcp's transport saves {saved:.0f} us")


if __name__ == "__main__":
    main()
