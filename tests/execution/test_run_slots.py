"""Command runs at once: at most so many for the server and fewer for one client; the rest wait,
with a progress note. In the slots themselves, and through a real client over stdio whose eight
runs at once are seen from inside the runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from clients import oct_server
from mcp import Client

from oct_mcp.execution.run_slots import RunSlots

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


class Holders:
    """Tasks that take a slot and hold it until released, counting how many hold one at once."""

    def __init__(self, slots: RunSlots) -> None:
        self.slots = slots
        self.holding = 0
        self.most = 0
        self.by_client: dict[str, int] = {}
        self.release = anyio.Event()
        self.notes: list[str | None] = []

    async def note(self, progress: float, total: float | None, message: str | None) -> None:
        self.notes.append(message)

    async def hold(self, client: str) -> None:
        async with self.slots.taken(client, self.note):
            self.holding += 1
            self.by_client[client] = self.by_client.get(client, 0) + 1
            self.most = max(self.most, self.holding)
            await self.release.wait()
            self.holding -= 1
            self.by_client[client] -= 1


async def test_one_client_holds_at_most_its_share_and_another_client_still_gets_a_slot() -> None:
    holders = Holders(RunSlots(total=3, per_client=2))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            for _ in range(4):
                tasks.start_soon(holders.hold, "http:ci")
            tasks.start_soon(holders.hold, "http:review")
            await anyio.wait_all_tasks_blocked()
            held = dict(holders.by_client)
            holders.release.set()

    assert held == {"http:ci": 2, "http:review": 1}
    assert holders.most == 3
    assert "waiting for a free run slot: this client's 2 runs at once are going" in holders.notes


async def test_the_server_s_slots_bound_every_client_together() -> None:
    holders = Holders(RunSlots(total=2, per_client=2))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            for client in ("a", "b", "c", "d"):
                tasks.start_soon(holders.hold, client)
            await anyio.wait_all_tasks_blocked()
            held = holders.holding
            holders.release.set()

    assert held == 2
    assert "waiting for a free run slot: the server's 2 runs at once are going" in holders.notes
    # Idle clients are forgotten.
    assert holders.slots._clients == {}


async def test_a_cancelled_wait_takes_no_slot() -> None:
    slots = RunSlots(total=1, per_client=1)
    holders = Holders(slots)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(holders.hold, "a")
            await anyio.wait_all_tasks_blocked()
            with anyio.move_on_after(0.1):
                async with slots.taken("a", None):
                    pytest.fail("a second run of the client got a slot held by its first")
            holders.release.set()
        async with slots.taken("a", None):
            pass


# Each run says when it started and ended, on the machine's monotonic clock (one for all processes).
RUN = "import time; s = time.monotonic(); time.sleep(1.5); print(s, time.monotonic())"


async def test_eight_runs_at_once_of_one_stdio_client_run_two_at_a_time(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    # The project's own interpreter, as a developer has it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    config_file.write_text(
        json.dumps({"audit_log_path": str(tmp_path / "audit.log"), "rate_limit_per_minute": 100})
    )
    texts: list[str] = []

    async def run(client: Client) -> None:
        result = await client.call_tool("oct_run", {"argv": ["python", "-c", RUN]})
        assert result.is_error is False
        texts.append(result.structured_content["stdout"] if result.structured_content else "")

    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file)) as client, anyio.create_task_group() as tasks:
            for _ in range(8):
                tasks.start_soon(run, client)

    spans = [tuple(float(x) for x in text.split()) for text in texts]
    assert all(len(span) == 2 for span in spans), texts
    most = max(sum(1 for start, end in spans if start <= moment < end) for moment, _ in spans)
    assert len(spans) == 8
    assert most == 2
