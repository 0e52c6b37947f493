"""Deadline: when an in-process plan must stop, and whether it may still begin to write."""

from __future__ import annotations

import difflib
import math
import threading
import time
from collections.abc import Callable

from oct_mcp.errors import ToolTimeoutError

__all__ = ["CheckedMatcher", "Deadline"]


class Deadline:
    """The time limit of one in-process run, shared by the plan's thread and the sandbox's timer.

    A thread cannot be interrupted, so the plan checks the deadline itself, in its loops (`check`)
    and right before its first change to the project (`begin_writing`). The timer's `expire` and
    the plan's `begin_writing` settle under one lock which came first: once expired, no write
    begins; once writing has begun, the call waits for the writes to end and answers with them.
    Either way nothing is written after a `[timeout]` answer.
    """

    __slots__ = ("_at", "_clock", "_expired", "_lock", "_writing", "seconds", "setting")

    def __init__(
        self,
        seconds: float,
        setting: str = "timeout_default_seconds",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self.setting = setting
        self._clock = clock
        self._at = clock() + seconds
        self._expired = False
        self._writing = False
        self._lock = threading.Lock()

    @classmethod
    def unlimited(cls) -> Deadline:
        """A deadline that never passes: for a plan run outside the sandbox (tests, `oct-mcp call`)."""
        return cls(math.inf)

    @property
    def expired(self) -> bool:
        """True once the timer gave up on the run (or the plan found the time was up)."""
        return self._expired

    def passed(self) -> bool:
        return self._expired or self._clock() >= self._at

    def left(self) -> float:
        """Seconds left on its clock: 0 once it has passed or was given up."""
        return 0.0 if self._expired else max(self._at - self._clock(), 0.0)

    def check(self) -> None:
        """Stop the plan once its time is up.

        Raises:
            ToolTimeoutError: The deadline has passed.
        """
        if self.passed():
            raise self.timeout_error()

    def begin_writing(self) -> None:
        """Claim the right to change the project, unless the time is up; idempotent once claimed.

        Raises:
            ToolTimeoutError: The deadline has passed or the run was given up: write nothing.
        """
        with self._lock:
            if self._writing:
                return
            if self.passed():
                self._expired = True
                raise self.timeout_error()
            self._writing = True

    def expire(self) -> bool:
        """Give up on the run: True, unless it has begun writing (then False: wait for it)."""
        with self._lock:
            if self._writing:
                return False
            self._expired = True
            return True

    def timeout_error(self) -> ToolTimeoutError:
        return ToolTimeoutError(f"the tool ran past its limit of {self.seconds:g} s ({self.setting})")


class CheckedMatcher(difflib.SequenceMatcher[str]):
    """difflib's matcher, checking a deadline at each block it looks for: a diff of a large file (or of
    two views of one) takes seconds in there, and a thread cannot be stopped from outside."""

    def __init__(self, a: list[str], b: list[str], deadline: Deadline | None) -> None:
        self._deadline = deadline
        super().__init__(None, a, b)

    def find_longest_match(
        self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None
    ) -> difflib.Match:
        if self._deadline is not None:
            self._deadline.check()
        return super().find_longest_match(alo, ahi, blo, bhi)
