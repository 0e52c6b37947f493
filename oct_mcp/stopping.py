"""Stopping on a signal: the work in flight is cancelled, so each run ends its process tree on the way out."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import anyio

__all__ = ["STOP_SIGNALS", "until_stopped"]

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""What a host, a terminal or a closed terminal sends a process it wants gone."""

T = TypeVar("T")


async def until_stopped(work: Callable[[], Awaitable[T]]) -> T | signal.Signals:
    """Run `work` to its end, or until a stop signal arrives.

    Without this a signal's default action ends the process at once, and the runs in flight,
    each in a session of its own, live on. Cancelled, a run kills its tree before it returns.

    Returns:
        What `work` returned, or the signal that stopped it.
    """
    outcome: list[T | signal.Signals] = []
    async with anyio.create_task_group() as tasks:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async for signum in signals:
                    outcome.append(signal.Signals(signum))
                    tasks.cancel_scope.cancel()
                    return

        async def run() -> None:
            outcome.append(await work())
            tasks.cancel_scope.cancel()

        tasks.start_soon(stop_on_signal)
        tasks.start_soon(run)
    return outcome[0]
