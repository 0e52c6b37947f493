"""A clock a test controls, for time limits that must not depend on the machine's load."""

from __future__ import annotations


class TickingClock:
    """Moves on by `step` each time it is read: a limit of `seconds` passes at its `seconds / step`th
    reading, however long the work between readings takes."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        self.now += self.step
        return self.now
