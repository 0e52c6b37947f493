"""The worker-thread run of an in-process plan, and the count of runs a call stopped waiting for."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio

from oct_mcp.deadline import Deadline
from oct_mcp.errors import BusyError

__all__ = ["AbandonedWork", "run_in_thread"]

T = TypeVar("T")


class _ThreadRun(Generic[T]):
    """One run's thread: whether it began, what it answered once it has, whether the call gave up on it."""

    __slots__ = ("abandoned", "done", "error", "given_up", "result", "started")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None
        self.started = False
        self.abandoned = False
        """The call gave up on a run that had begun: counted until its thread ends."""
        self.given_up = False
        """The call gave up before the thread began: if the thread ever comes, it runs nothing."""

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        if self.result is None:
            raise RuntimeError("an in-process run ended without a result")
        return self.result


class AbandonedWork:
    """In-process runs the sandbox stopped waiting for whose threads still run: counted, refused meanwhile.

    Such a thread holds a worker and the interpreter's lock until the plan notices its deadline (or
    its blocking read returns); starting more work beside it slows every call and piles threads up.
    Only a run whose thread has begun is counted: a call cancelled before its thread starts leaves
    nothing behind (the thread, if it still comes, runs nothing).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._idle = threading.Event()
        self._idle.set()

    @property
    def running(self) -> int:
        """How many abandoned runs have not ended yet."""
        return self._running

    def refuse_while_running(self) -> None:
        """Raises:
        BusyError: An abandoned run is still going.
        """
        running = self._running
        if running:
            raise BusyError(
                f"{running} in-process call(s) that ran past their time limit are still finishing; "
                "wait a few seconds and call again"
            )

    def wait_idle(self, timeout: float) -> bool:
        """Block until no abandoned run is left, at most `timeout` seconds (for shutdown and tests).

        Returns:
            False if runs were still going when the time ran out.
        """
        return self._idle.wait(timeout)

    def _begin(self, run: _ThreadRun[T]) -> bool:
        """Called by the run's thread before the work: False when the call gave up before it began."""
        with self._lock:
            if run.given_up:
                return False
            run.started = True
            return True

    def _abandon(self, run: _ThreadRun[T]) -> None:
        """Count `run` until its thread ends, unless it has ended already or never began."""
        with self._lock:
            if run.done.is_set():
                return
            if not run.started:
                run.given_up = True
                return
            run.abandoned = True
            self._running += 1
            self._idle.clear()

    def _finish(self, run: _ThreadRun[T]) -> None:
        """Called by the run's thread as it ends."""
        with self._lock:
            run.done.set()
            if run.abandoned:
                self._running -= 1
                if not self._running:
                    self._idle.set()


async def run_in_thread(function: Callable[[], T], deadline: Deadline, work: AbandonedWork) -> T:
    """Run `function` in a worker thread, waiting at most until `deadline`.

    The function checks the deadline itself (a thread cannot be stopped from outside) and claims it
    before it writes (`Deadline.begin_writing`). Past the deadline, or when the call is cancelled,
    a run that has not begun writing is given up on: counted in `work` until its thread ends (or,
    if its thread had not begun, never run at all). A run that has begun writing is waited for,
    since the answer must say what its writes did.

    Raises:
        ToolTimeoutError: The deadline passed first.
        BusyError: Never here; `work.refuse_while_running` is the caller's check.
    """
    run: _ThreadRun[T] = _ThreadRun()

    def in_thread() -> T | None:
        if not work._begin(run):
            return None
        try:
            run.result = function()
        except BaseException as exc:
            run.error = exc
            raise
        finally:
            work._finish(run)
        return run.result

    answered = False
    try:
        with anyio.move_on_after(deadline.seconds):
            # abandon_on_cancel: a thread cannot be interrupted, but the call must still return;
            # the plan stops at its next deadline check, and never begins a write after it.
            await anyio.to_thread.run_sync(in_thread, abandon_on_cancel=True)
            answered = True
            return run.outcome()
    except BaseException:
        answered = run.done.is_set()
        raise
    finally:
        if not answered and deadline.expire():
            work._abandon(run)
    if deadline.expired:
        raise deadline.timeout_error()
    # The time ran out while the plan was writing: its writes are bounded, and the answer must say
    # what they did.
    await anyio.to_thread.run_sync(run.done.wait)
    return run.outcome()
