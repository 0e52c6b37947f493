"""Refusals before authentication, counted and sampled: anyone can send them, so none may cost the
audit a record each, nor the server more than a dictionary entry.

One chained record per source address and refusal code per window carries how many were refused
since the last; at most `RECORDS_PER_WINDOW` such records a window in all, so many addresses (an
IPv6 prefix holds billions) cannot flood the log either. An address refused `BLOCK_AFTER` times in
a window is answered 429 for the rest of it, before authentication, unless its request carries
credentials (a team behind one proxy shares its address: a stranger's flood must not lock them out).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

__all__ = ["BLOCK_AFTER", "RECORDS_PER_WINDOW", "SOURCES_MAX", "WINDOW_SECONDS", "RefusalSampler"]

WINDOW_SECONDS: Final = 60.0
RECORDS_PER_WINDOW: Final = 120
"""Audit records of refusals a window in all: two a second at most, whatever the sources."""
BLOCK_AFTER: Final = 60
"""Refusals of one address in a window past which its requests without credentials get 429."""
SOURCES_MAX: Final = 4_096
"""Addresses remembered at once: the least recently refused is forgotten first (its count is kept)."""


@dataclass(slots=True)
class _Source:
    window_start: float
    refused: int = 0
    """Refusals of the address in its current window."""
    recorded_at: dict[str, float] = field(default_factory=dict)
    """When each code of the address was last recorded."""
    pending: dict[str, int] = field(default_factory=dict)
    """Refusals of each code counted since its last record."""


@dataclass(slots=True)
class RefusalSampler:
    """What to record of each refusal before authentication, and which addresses to answer 429.

    Not thread-safe: it lives on one event loop, as the ASGI app that uses it does.
    """

    window_seconds: float = WINDOW_SECONDS
    records_per_window: int = RECORDS_PER_WINDOW
    block_after: int = BLOCK_AFTER
    sources_max: int = SOURCES_MAX
    clock: Callable[[], float] = time.monotonic
    _sources: OrderedDict[str, _Source] = field(default_factory=OrderedDict)
    _window_start: float = float("-inf")
    _records: int = 0
    _forgotten: int = 0
    """Refusals counted for addresses forgotten before their next record: told in the next record."""

    def blocked(self, source: str) -> bool:
        """Whether the address was refused so often this window that it is answered 429 now."""
        known = self._sources.get(source)
        if known is None or self.clock() - known.window_start >= self.window_seconds:
            return False
        return known.refused >= self.block_after

    def note(self, source: str, code: str) -> dict[str, int] | None:
        """Count a refusal of `source`; what its audit record carries, or None to write none now.

        The record, when one is due, carries `count` (the refusals of this address and code since
        its last record, this one included) and, where addresses were forgotten, `uncounted_elsewhere`.
        """
        now = self.clock()
        if now - self._window_start >= self.window_seconds:
            self._window_start, self._records = now, 0
        known = self._remember(source, now)
        if now - known.window_start >= self.window_seconds:
            known.window_start, known.refused = now, 0
        known.refused += 1
        last = known.recorded_at.get(code)
        due = last is None or now - last >= self.window_seconds
        if not due or self._records >= self.records_per_window:
            known.pending[code] = known.pending.get(code, 0) + 1
            return None
        self._records += 1
        known.recorded_at[code] = now
        carried = {"count": known.pending.pop(code, 0) + 1}
        if self._forgotten:
            carried["uncounted_elsewhere"], self._forgotten = self._forgotten, 0
        return carried

    def _remember(self, source: str, now: float) -> _Source:
        known = self._sources.get(source)
        if known is not None:
            self._sources.move_to_end(source)
            return known
        while len(self._sources) >= self.sources_max:
            _, oldest = self._sources.popitem(last=False)
            self._forgotten += sum(oldest.pending.values())
        known = self._sources[source] = _Source(window_start=now)
        return known
