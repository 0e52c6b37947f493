"""Gateway: safe mode, the rate limit per client over a rolling minute, and the workspace binding."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest
from fakes import RecordingNext, make_context

from oct_mcp.errors import RateLimitedError, SafeModeError, WorkspaceError
from oct_mcp.middleware.gateway import (
    Gateway,
    PageContinuations,
    SlidingWindowLimiter,
)
from oct_mcp.types import CallContext, ClientInfo, ToolResult
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.anyio


class FakeClock:
    """Time that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _gateway(
    project: Path, *, limit: int = 30, safe_mode: bool = False, clock: FakeClock | None = None
) -> Gateway:
    limiter = SlidingWindowLimiter(limit=limit, clock=clock or FakeClock())
    return Gateway(workspace=Workspace(project), safe_mode=safe_mode, limiter=limiter)


async def test_gateway_binds_the_call_to_the_workspace(project: Path) -> None:
    call_next = RecordingNext()

    await _gateway(project)(make_context(), call_next)

    assert call_next.seen[0].workspace == Workspace(project)


async def test_safe_mode_refuses_every_call_and_says_how_to_leave_it(project: Path) -> None:
    call_next = RecordingNext()

    with pytest.raises(SafeModeError) as caught:
        await _gateway(project, safe_mode=True)(make_context(), call_next)

    assert caught.value.code == "safe_mode"
    assert "OCT_MCP_SAFE_MODE" in caught.value.message
    assert call_next.seen == []


async def test_a_concurrent_burst_of_100_lets_exactly_the_limit_through(project: Path) -> None:
    gateway = _gateway(project, limit=30)
    call_next = RecordingNext()
    refusals: list[RateLimitedError] = []

    async def one_call() -> None:
        try:
            await gateway(make_context(), call_next)
        except RateLimitedError as exc:
            refusals.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            for _ in range(100):
                tasks.start_soon(one_call)

    assert len(call_next.seen) == 30
    assert len(refusals) == 70
    assert {r.retry_after_seconds for r in refusals} == {60}
    assert refusals[0].message == "rate limited: at most 30 calls per minute; retry in 60 s"


async def test_the_window_rolls_calls_leave_it_sixty_seconds_after_they_were_made(project: Path) -> None:
    clock = FakeClock()
    gateway = _gateway(project, limit=2, clock=clock)
    call_next = RecordingNext()
    await gateway(make_context(), call_next)
    clock.now += 20
    await gateway(make_context(), call_next)
    clock.now += 30

    with pytest.raises(RateLimitedError) as caught:
        await gateway(make_context(), call_next)
    assert caught.value.retry_after_seconds == 10

    clock.now += 10
    await gateway(make_context(), call_next)
    assert len(call_next.seen) == 3


async def test_no_rolling_minute_ever_holds_more_than_the_limit(project: Path) -> None:
    # A token bucket would let a full bucket through, then its refill: twice the limit in a minute.
    clock = FakeClock()
    gateway = _gateway(project, limit=10, clock=clock)
    call_next = RecordingNext()
    admitted: list[float] = []
    for _ in range(600):
        clock.now += 0.5
        try:
            await gateway(make_context(), call_next)
        except RateLimitedError:
            continue
        admitted.append(clock.now)

    assert max(sum(1 for t in admitted if start <= t < start + 60) for start in admitted) == 10
    assert len(admitted) == 50


async def test_each_client_has_its_own_limit(project: Path) -> None:
    gateway = _gateway(project, limit=1)
    call_next = RecordingNext()
    other = ClientInfo(client_id="other", transport="memory")

    await gateway(make_context(), call_next)
    await gateway(CallContext(tool="oct_read_file", arguments={}, client=other, call_id="2"), call_next)

    assert len(call_next.seen) == 2
    with pytest.raises(RateLimitedError):
        await gateway(make_context(), call_next)


async def test_idle_clients_are_forgotten_once_there_are_many(project: Path) -> None:
    clock = FakeClock()
    limiter = SlidingWindowLimiter(limit=1, clock=clock)
    for index in range(1_100):
        await limiter.admit(f"client-{index}")
    clock.now += 61

    await limiter.admit("newcomer")

    assert limiter.tracked_clients == 1


async def test_a_project_root_deleted_while_serving_is_refused(project: Path) -> None:
    gateway = _gateway(project)
    shutil.rmtree(project)
    call_next = RecordingNext()

    with pytest.raises(WorkspaceError):
        await gateway(make_context(), call_next)

    assert call_next.seen == []


class Pages:
    """The rest of the chain as a paged listing: each page offers the next, until `last`."""

    def __init__(self, size: int, last: int) -> None:
        self.size, self.last = size, last

    async def __call__(self, ctx: CallContext, /) -> ToolResult:
        offset = ctx.arguments.get("offset", 0)
        assert isinstance(offset, int)
        ahead = offset + self.size
        return ToolResult(text="page", structured={"next_offset": ahead if ahead < self.last else None})


async def test_paging_an_operation_to_its_end_counts_as_its_first_call(project: Path) -> None:
    gateway = _gateway(project, limit=2)
    pages = Pages(size=10, last=1_000)

    offset: int | None = 0
    while offset is not None:
        outcome = await gateway(make_context("oct_list_files", offset=offset, glob="*.py"), pages)
        assert isinstance(outcome, ToolResult)
        assert outcome.structured is not None
        offset = outcome.structured["next_offset"]
    await gateway(make_context("oct_list_files", glob="*.md"), pages)

    with pytest.raises(RateLimitedError):
        await gateway(make_context("oct_list_files", glob="*.txt"), pages)


@pytest.mark.parametrize(
    "continuation",
    [
        {"offset": 20, "glob": "*.py"},  # a page past the one offered
        {"offset": 10, "glob": "*.md"},  # the offered offset, another operation
        {"offset": 10, "glob": "*.py", "max_chars": 100},  # another page size: another operation
        {"cursor": "made-up", "glob": "*.py"},
    ],
)
async def test_only_the_page_the_server_offered_is_free(
    project: Path, continuation: dict[str, object]
) -> None:
    gateway = _gateway(project, limit=2)
    pages = Pages(size=10, last=1_000)
    await gateway(make_context("oct_list_files", glob="*.py"), pages)
    await gateway(make_context("oct_list_files", **continuation), pages)

    with pytest.raises(RateLimitedError):
        await gateway(make_context("oct_list_files", glob="*.rs"), pages)


async def test_an_offered_page_is_free_once_and_not_after_its_time(project: Path) -> None:
    clock = FakeClock()
    limiter = SlidingWindowLimiter(limit=3, clock=clock)
    gateway = Gateway(
        workspace=Workspace(project),
        safe_mode=False,
        limiter=limiter,
        pages=PageContinuations(seconds=30, clock=clock),
    )
    pages = Pages(size=10, last=1_000)
    await gateway(make_context("oct_search", pattern="x"), pages)  # 1 counted
    await gateway(make_context("oct_search", pattern="x", offset=10), pages)  # offered: free
    await gateway(make_context("oct_search", pattern="x", offset=10), pages)  # again: 2 counted
    clock.now += 31  # past the offer, while the counted calls stay in the window
    await gateway(make_context("oct_search", pattern="x", offset=20), pages)  # 3 counted

    with pytest.raises(RateLimitedError):
        await gateway(make_context("oct_search", pattern="y"), pages)
