"""An oct-mcp layer: each client session may run at most `max_writes` write calls."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

from pydantic import Field

from oct_mcp.types import (
    CallContext,
    CallNext,
    LayerRuntime,
    LayerSettings,
    LayerType,
    Outcome,
    RefusedError,
    Risk,
    Slot,
)

__all__ = ["LAYER", "REMAINING", "BudgetSettings", "WriteBudget", "WriteBudgetExhaustedError"]

SESSIONS_KEPT: Final = 4_096
"""Sessions whose counts are kept; past that the oldest is forgotten (and starts afresh)."""

REMAINING: Final = Slot("write_budget", "remaining", int)
"""Writes this session may still run after this call: for a layer further in to read."""


class WriteBudgetExhaustedError(RefusedError):
    """This client session has run all the writes its budget allows."""

    code = "write_budget_exhausted"


class BudgetSettings(LayerSettings):
    """The profile's `[settings.write_budget]` table."""

    max_writes: int = Field(default=10, ge=0, le=1_000_000)


@dataclass
class WriteBudget:
    """Refuse a session's write calls past `max_writes`.

    Reads `ctx.risk` (the call's own: `oct_run` with `writes` is a write), `ctx.client`,
    `ctx.dry_run`, `ctx.previewing`; writes the slot
    `write_budget.remaining`. Raises `WriteBudgetExhaustedError`. Never answers. Dry runs
    and previews are free; a write that raises gives its unit back.
    """

    max_writes: int
    used: OrderedDict[str, int] = field(default_factory=OrderedDict)
    """Writes run per client session: state meant to outlive a call, bounded by SESSIONS_KEPT."""

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        if ctx.risk is None or ctx.risk.risk is not Risk.WRITE or ctx.dry_run or ctx.previewing:
            return await call_next(ctx)
        session = ctx.client.client_id
        # Check and take in one step, with no await between: concurrent calls of one session
        # cannot both take the last unit.
        spent = self.used.get(session, 0)
        if spent >= self.max_writes:
            raise WriteBudgetExhaustedError(
                f"this session has run its {self.max_writes} write calls; "
                "start a new session or raise max_writes in the profile's [settings.write_budget]"
            )
        self._take(session, spent + 1)
        try:
            return await call_next(REMAINING.put(ctx, self.max_writes - spent - 1))
        except BaseException:
            self._take(session, max(self.used.get(session, 1) - 1, 0))
            raise

    def _take(self, session: str, count: int) -> None:
        self.used[session] = count
        self.used.move_to_end(session)
        while len(self.used) > SESSIONS_KEPT:
            self.used.popitem(last=False)


def _build(settings: BudgetSettings, runtime: LayerRuntime) -> WriteBudget:
    return WriteBudget(max_writes=settings.max_writes)


LAYER: Final = LayerType(
    name="write_budget",
    settings=BudgetSettings,
    build=_build,
    # After the safety gate, which decides whether the call is a dry run or a preview.
    requires=frozenset({"risk", "dry_run"}),
    slots=(REMAINING,),
)
