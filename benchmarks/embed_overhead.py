"""Embedding: a guarded SDK server against the same server unguarded, same tool, in-memory client.

Goal: ratio <= 1.05. The guarded server runs the whole embedded profile (audit to a file,
gateway, validator, policy, safety, redactor) around the host's own tool.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _common import Comparison, arguments, print_table
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from guarded_sdk_server import TOOLS, build

from oct_mcp.embed import guard

CALLS_PER_ROUND = 200


async def _round(client: Client) -> float:
    started = time.perf_counter()
    for _ in range(CALLS_PER_ROUND):
        result = await client.call_tool("read_note", {"name": "todo"})
        if result.is_error:
            raise RuntimeError(f"the call failed: {result.content}")
    return (time.perf_counter() - started) / CALLS_PER_ROUND


async def _measure(rounds: int, project: Path, config: Path) -> tuple[list[float], list[float]]:
    bare_server = build(project, {"todo": "ship it"})
    guarded_server = build(project, {"todo": "ship it"})
    guard(guarded_server, project_root=project, config_path=config, environ={}, tools=TOOLS)
    guarded: list[float] = []
    bare: list[float] = []
    async with Client(bare_server) as bare_client, Client(guarded_server) as guarded_client:
        await _round(bare_client)  # warm-up
        await _round(guarded_client)
        for index in range(rounds):
            # Alternate which goes first, so drift on a shared machine hits both alike.
            pair = [(guarded_client, guarded), (bare_client, bare)]
            for client, samples in pair if index % 2 == 0 else reversed(pair):
                samples.append(await _round(client))
    return guarded, bare


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    with tempfile.TemporaryDirectory() as temp:
        project = Path(temp).resolve()
        config = project / "config.json"
        config.write_text(
            json.dumps({"audit_log_path": str(project / "audit.log"), "rate_limit_per_minute": 10_000})
        )
        guarded, bare = anyio.run(_measure, args.rounds, project, config)
    print_table(
        [Comparison("embedded chain per call (guarded / bare)", guarded, bare, goal=1.05)], args.rounds
    )
    extra = (statistics.median(guarded) - statistics.median(bare)) * 1e6
    print(f"the chain adds {extra:.0f} us per call")


if __name__ == "__main__":
    main()
