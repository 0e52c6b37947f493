"""run_in_thread: a cancelled or timed-out run never leaves the server busy, nor writes after its answer."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import anyio
import pytest

from oct_mcp.app import CallFailure, build_app, run_call
from oct_mcp.deadline import Deadline
from oct_mcp.errors import ToolTimeoutError
from oct_mcp.execution.in_process import AbandonedWork, run_in_thread
from oct_mcp.testing import TEST_CLIENT
from oct_mcp.types import ToolResult

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def _until_idle(work: AbandonedWork) -> None:
    # Each wait in a thread is bounded: a thread left blocked would hold the interpreter at exit.
    with anyio.fail_after(30):
        while not await anyio.to_thread.run_sync(work.wait_idle, 0.2):
            pass


async def test_a_run_answers_what_its_function_returned() -> None:
    work = AbandonedWork()

    answer = await run_in_thread(lambda: "done", Deadline(30), work)

    assert answer == "done"
    assert work.running == 0


async def test_a_run_passes_its_function_s_error_on() -> None:
    def fail() -> str:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await run_in_thread(fail, Deadline(30), AbandonedWork())


async def test_a_call_cancelled_before_its_thread_starts_leaves_nothing_behind_and_runs_nothing() -> None:
    work = AbandonedWork()
    ran: list[str] = []

    with anyio.CancelScope() as scope:
        scope.cancel()
        await run_in_thread(lambda: ran.append("ran") or "late", Deadline(30), work)

    assert work.running == 0
    work.refuse_while_running()
    # A worker that might still pick the function up later runs nothing.
    await anyio.to_thread.run_sync(lambda: None)
    assert ran == []


async def test_a_call_cancelled_while_its_thread_runs_is_counted_until_the_thread_ends() -> None:
    work = AbandonedWork()
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(30)
        return "late"

    async with anyio.create_task_group() as group:
        group.start_soon(run_in_thread, slow, Deadline(30), work)
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(started.wait, 30)
        group.cancel_scope.cancel()
    counted = work.running
    release.set()
    await _until_idle(work)

    assert counted == 1
    assert work.running == 0


async def test_a_deadline_passed_before_the_thread_starts_is_a_timeout_and_leaves_nothing_behind() -> None:
    work = AbandonedWork()
    deadline = Deadline(0)

    with pytest.raises(ToolTimeoutError):
        await run_in_thread(lambda: "late", deadline, work)
    await _until_idle(work)

    assert work.running == 0


async def test_a_run_that_began_writing_is_waited_for_past_the_deadline() -> None:
    work = AbandonedWork()
    deadline = Deadline(0.05)
    release = threading.Event()

    def write() -> str:
        deadline.begin_writing()
        release.wait(30)
        return "written"

    async def let_go() -> None:
        await anyio.sleep(0.2)
        release.set()

    async with anyio.create_task_group() as group:
        group.start_soon(let_go)
        answer = await run_in_thread(write, deadline, work)

    assert answer == "written"
    assert work.running == 0


@pytest.mark.parametrize("checkpoints", range(8))
async def test_a_call_cancelled_at_any_point_never_leaves_the_work_counted(checkpoints: int) -> None:
    work = AbandonedWork()
    release = threading.Event()

    def briefly() -> str:
        release.wait(0.05)
        return "done"

    async with anyio.create_task_group() as group:
        group.start_soon(run_in_thread, briefly, Deadline(30), work)
        for _ in range(checkpoints):
            await anyio.lowlevel.checkpoint()
        group.cancel_scope.cancel()
    release.set()
    await _until_idle(work)

    assert work.running == 0
    work.refuse_while_running()


@pytest.mark.parametrize("checkpoints", range(0, 40, 3))
async def test_a_call_cancelled_at_any_point_of_the_chain_never_leaves_the_server_busy(
    tmp_path: Path, checkpoints: int
) -> None:
    project = (tmp_path / "project").resolve()
    project.mkdir()
    # Over 128 KiB, so the read runs in a worker thread, not inline on the event loop.
    (project / "big.txt").write_text("line\n" * 40_000)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"audit_log_path": str(tmp_path / "audit.log"), "rate_limit_per_minute": 10_000})
    )
    app = build_app(project, config_path=config)

    async with anyio.create_task_group() as group:
        group.start_soon(run_call, app, "oct_read_file", {"path": "big.txt"}, TEST_CLIENT)
        for _ in range(checkpoints):
            await anyio.lowlevel.checkpoint()
        group.cancel_scope.cancel()
    with anyio.fail_after(30):
        while True:
            after = await run_call(app, "oct_read_file", {"path": "big.txt", "end_line": 1}, TEST_CLIENT)
            if not (isinstance(after, CallFailure) and after.code == "busy"):
                break
            # A thread the cancel left running is counted until it ends, which it does on its own.
            await anyio.sleep(0.05)

    assert isinstance(after, ToolResult)
    assert after.text.startswith("line")
