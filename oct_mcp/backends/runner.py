"""The one runner every backend shares: spawn, read both pipes within a cap, time out, kill the whole tree."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import anyio
from anyio.abc import ByteReceiveStream, Process

from oct_mcp.backends import Prepared
from oct_mcp.backends.confined import ConfinedRun, start_confined
from oct_mcp.backends.results import RunResult
from oct_mcp.errors import ToolUnavailableError

__all__ = ["DRAIN_SECONDS", "GRACE_SECONDS", "INTERRUPT_SECONDS", "run_prepared"]

CHUNK_BYTES: Final = 65_536
GRACE_SECONDS: Final = 2.0
"""Between SIGTERM and SIGKILL."""
INTERRUPT_SECONDS: Final = 10.0
"""How long a command interrupted at its time limit has to print its report (pytest's summary of
hundreds of failures takes seconds) before SIGTERM."""
DRAIN_SECONDS: Final = 1.0
"""How long the pipes are read after the process is gone: an escaped daemon can hold them open forever."""
_DESCENDANTS_MAX: Final = 4_096


@dataclass
class _Capture:
    """Both pipes' output, kept up to a shared budget; past it, `overflowed` is set."""

    budget: int
    overflowed: anyio.Event = field(default_factory=anyio.Event)
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    seen: int = 0

    def add(self, buffer: bytearray, chunk: bytes) -> None:
        room = self.budget - len(self.stdout) - len(self.stderr)
        if room > 0:
            buffer += chunk[:room]
        self.seen += len(chunk)
        if self.seen > self.budget:
            self.overflowed.set()


LineHandler = Callable[[bytes], Awaitable[None]]


async def _pump(
    stream: ByteReceiveStream,
    capture: _Capture,
    buffer: bytearray,
    done: anyio.Event,
    on_line: LineHandler | None = None,
) -> None:
    pending = b""
    try:
        while True:
            try:
                chunk = await stream.receive(CHUNK_BYTES)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            capture.add(buffer, chunk)
            if on_line is not None:
                # Bounded: a line longer than a chunk is cut, never accumulated without end.
                *lines, pending = (pending + chunk).split(b"\n")
                pending = pending[-CHUNK_BYTES:]
                for line in lines:
                    await on_line(line)
    finally:
        done.set()


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    # ProcessLookupError: the group is gone. PermissionError: only zombies remain (macOS says EPERM).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _descendants(pid: int) -> list[int]:
    """The processes below `pid`, from /proc (a bubblewrap run's command sits two levels down, in a
    session of its own, where the leader's group signal does not reach)."""
    found: list[int] = []
    pending = [pid]
    while pending and len(found) < _DESCENDANTS_MAX:
        parent = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as handle:
                    children = [int(child) for child in handle.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(children)
            pending.extend(children)
    return found


def _group_and_session(pid: int) -> tuple[int, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
        return int(fields[2]), int(fields[3])
    except (OSError, ValueError, IndexError):
        return None


def _interrupt(process: Process) -> None:
    """SIGINT to the command's process groups, as Ctrl-C at a terminal sends it. A command that sits
    in a session of its own below the leader (bubblewrap's) gets it there: bubblewrap itself would
    die of it and take the command down before it printed anything."""
    leader = _group_and_session(process.pid)
    groups = set()
    for pid in _descendants(process.pid):
        found = _group_and_session(pid)
        if found is not None and leader is not None and found[1] != leader[1]:
            groups.add(found[0])
    for group in groups or {process.pid}:
        _signal_group(group, signal.SIGINT)


async def _kill_tree(process: Process, grace: float) -> None:
    """SIGTERM to the command's whole process group, a grace period, then SIGKILL."""
    _signal_group(process.pid, signal.SIGTERM)
    with anyio.move_on_after(grace):
        await process.wait()
        return
    _signal_group(process.pid, signal.SIGKILL)
    await process.wait()


async def _wait_for_exit_or_overflow(process: Process, capture: _Capture) -> None:
    async with anyio.create_task_group() as race:

        async def exited() -> None:
            await process.wait()
            race.cancel_scope.cancel()

        async def overflowed() -> None:
            await capture.overflowed.wait()
            race.cancel_scope.cancel()

        race.start_soon(exited)
        race.start_soon(overflowed)


async def run_prepared(
    prepared: Prepared,
    *,
    backend: str,
    time_limit: float,
    max_output: int,
    grace: float = GRACE_SECONDS,
    drain: float = DRAIN_SECONDS,
    on_stdout_line: LineHandler | None = None,
    interrupt_first: bool = False,
    interrupt_seconds: float = INTERRUPT_SECONDS,
) -> RunResult:
    """Run a prepared command to its end, its timeout, or its output cap.

    The command gets its own session and process group. Past `time_limit` or on overflow
    the group gets SIGTERM, then SIGKILL after `grace`; after the leader exits the
    group is swept with SIGKILL again; the pipes are read for at most `drain` more. With
    `interrupt_first`, a command past its time limit gets SIGINT first and `interrupt_seconds` to
    print its report and exit.
    The server's memory stays flat: at most `max_output` bytes are kept.

    Raises:
        ToolUnavailableError: The program could not be started.
    """
    started = time.perf_counter()
    try:
        process = await _spawn(prepared)
    except OSError as exc:
        raise ToolUnavailableError(
            f"the tool could not be started ({type(exc).__name__}); `oct-mcp doctor` shows what is missing"
        ) from exc
    capture = _Capture(budget=max_output)
    timed_out = False
    try:
        async with anyio.create_task_group() as pumps:
            stdout_done, stderr_done = anyio.Event(), anyio.Event()
            assert process.stdout is not None  # noqa: S101 - opened with PIPE above
            assert process.stderr is not None  # noqa: S101 - opened with PIPE above
            pumps.start_soon(_pump, process.stdout, capture, capture.stdout, stdout_done, on_stdout_line)
            pumps.start_soon(_pump, process.stderr, capture, capture.stderr, stderr_done)
            with anyio.move_on_after(time_limit) as deadline:
                await _wait_for_exit_or_overflow(process, capture)
            timed_out = deadline.cancelled_caught
            if timed_out and interrupt_first and process.returncode is None:
                _interrupt(process)
                with anyio.move_on_after(interrupt_seconds):
                    await _wait_for_exit_or_overflow(process, capture)
            if process.returncode is None:
                await _kill_tree(process, grace)
            # The leader is gone; anything it left in its group goes too, and in its domain.
            _signal_group(process.pid, signal.SIGKILL)
            if isinstance(process, ConfinedRun):
                await process.end_domain()
            with anyio.move_on_after(drain):
                await stdout_done.wait()
                await stderr_done.wait()
            pumps.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            # Cancelled from outside (the client gave up): the tree must still die.
            with anyio.CancelScope(shield=True):
                await _kill_tree(process, grace)
                _signal_group(process.pid, signal.SIGKILL)
        await _close(process)
    return RunResult(
        exit_code=process.returncode,
        stdout=bytes(capture.stdout),
        stderr=bytes(capture.stderr),
        output_bytes=capture.seen,
        truncated=capture.overflowed.is_set(),
        timed_out=timed_out,
        duration_seconds=time.perf_counter() - started,
        backend=backend,
    )


async def _spawn(prepared: Prepared) -> Process:
    if prepared.confinement is not None:
        return await start_confined(prepared.confinement, prepared.argv, prepared.env, prepared.cwd)
    return await anyio.open_process(
        list(prepared.argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=prepared.cwd,
        env=dict(prepared.env),
        start_new_session=True,
    )


async def _close(process: Process) -> None:
    with anyio.CancelScope(shield=True):
        # Closes our ends of the pipes, even where an escaped daemon still holds the others.
        await process.aclose()
