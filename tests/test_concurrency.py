"""200 calls in flight at once over stdio: all answered, none mixed up, memory flat, nothing left running."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from processes import processes_with

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

IN_FLIGHT = 200
VENV_BIN = Path(sys.executable).parent


def _server_rss_kib(project: Path) -> int:
    """Resident memory of the server serving `project`, found by its command line."""
    (pid,) = processes_with(str(project))
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _burst(client: Client, project: Path) -> list[tuple[str, types.CallToolResult]]:
    results: list[tuple[str, types.CallToolResult]] = []

    async def read(index: int) -> None:
        result = await client.call_tool("oct_read_file", {"path": f"files/f{index}.txt"})
        results.append((f"content of file {index}\n", result))

    async def lint() -> None:
        result = await client.call_tool("oct_lint", {"paths": ["files"]})
        results.append(("", result))

    async with anyio.create_task_group() as tasks:
        for index in range(IN_FLIGHT - 10):
            tasks.start_soon(read, index)
        for _ in range(10):
            tasks.start_soon(lint)
    return results


async def test_200_calls_in_flight_are_all_answered_unmixed_with_flat_memory(tmp_path: Path) -> None:
    project = tmp_path.resolve() / f"concurrency-{time.monotonic_ns()}"
    (project / "files").mkdir(parents=True)
    for index in range(IN_FLIGHT):
        (project / "files" / f"f{index}.txt").write_text(f"content of file {index}\n")
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "ruff").symlink_to(VENV_BIN / "ruff")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"rate_limit_per_minute": 10_000}))
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "oct_mcp", "--project-root", str(project), "--config", str(config)],
    )

    with anyio.fail_after(300):
        async with Client(server) as client:
            started = time.perf_counter()
            first = await _burst(client, project)
            first_seconds = time.perf_counter() - started
            after_first = _server_rss_kib(project)
            second = await _burst(client, project)
            after_second = _server_rss_kib(project)
        with anyio.fail_after(10):
            while _processes_working_in(project):
                await anyio.sleep(0.05)

    for results in (first, second):
        assert len(results) == IN_FLIGHT
        for expected, result in results:
            assert result.is_error is False
            if expected:
                (content,) = result.content
                assert isinstance(content, types.TextContent)
                assert content.text == expected
    # Flat: a second identical burst must not keep what the first one used (a few MiB of slack).
    assert after_second - after_first < 8 * 1024
    # Nothing the server ran is left (the wait above ended with no process working in the project).
    assert _processes_working_in(project) == []
    print(f"\n200 in flight: {first_seconds:.2f} s; server RSS {after_first} KiB, then {after_second} KiB")


def _processes_working_in(project: Path) -> list[int]:
    """Processes whose working directory is the project: the server, and whatever it ran."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(entry / "cwd").resolve().is_relative_to(project):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
