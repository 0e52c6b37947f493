"""The write budget, driven with oct-mcp's testing kit: no chain, no server."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oct_write_budget import REMAINING, WriteBudget, WriteBudgetExhaustedError

from oct_mcp.errors import ToolTimeoutError
from oct_mcp.spec import CallRisk, Risk, ToolSpec
from oct_mcp.testing import RecordingNext, make_context, validated
from oct_mcp.testing.strategies import client_infos, tool_specs
from oct_mcp.tools import default_catalog
from oct_mcp.types import CallContext, ClientInfo

pytestmark = pytest.mark.anyio

WRITE = default_catalog()["oct_write_file"]
READ = default_catalog()["oct_read_file"]


def _write_call(session: str = "one") -> CallContext:
    ctx = make_context("oct_write_file", path="a.txt", content="x")
    ctx = validated(ctx, WRITE, WRITE.params.model_validate(ctx.arguments))
    return replace(ctx, client=replace(ctx.client, client_id=session))


async def test_writes_past_the_budget_are_refused_without_calling_next() -> None:
    layer = WriteBudget(max_writes=2)
    call_next = RecordingNext()

    await layer(_write_call(), call_next)
    await layer(_write_call(), call_next)
    with pytest.raises(WriteBudgetExhaustedError) as refused:
        await layer(_write_call(), call_next)

    assert refused.value.code == "write_budget_exhausted"
    assert [REMAINING.get(ctx) for ctx in call_next.seen] == [1, 0]


async def test_each_session_has_its_own_budget() -> None:
    layer = WriteBudget(max_writes=1)
    call_next = RecordingNext()

    await layer(_write_call("one"), call_next)
    await layer(_write_call("two"), call_next)

    assert len(call_next.seen) == 2


async def test_dry_runs_previews_and_reads_are_free() -> None:
    layer = WriteBudget(max_writes=0)
    call_next = RecordingNext()
    write = _write_call()

    await layer(replace(write, dry_run=True), call_next)
    await layer(replace(write, previewing=True), call_next)
    await layer(replace(write, spec=READ, risk=READ.own_risk, tool=READ.name), call_next)

    assert len(call_next.seen) == 3


async def test_a_write_that_raises_gives_its_unit_back() -> None:
    layer = WriteBudget(max_writes=1)

    with pytest.raises(ToolTimeoutError):
        await layer(_write_call(), RecordingNext(error=ToolTimeoutError("too slow")))
    await layer(_write_call(), RecordingNext())

    assert layer.used == {"one": 1}


async def test_concurrent_writes_of_one_session_never_pass_the_budget() -> None:
    layer = WriteBudget(max_writes=3)
    passed: list[int] = []

    async def one() -> None:
        with contextlib.suppress(WriteBudgetExhaustedError):
            await layer(_write_call(), RecordingNext())
            passed.append(1)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            for _ in range(10):
                tasks.start_soon(one)

    assert len(passed) == 3


@given(spec=tool_specs(), client=client_infos(), budget=st.integers(0, 3))
def test_only_write_tools_spend_the_budget(spec: ToolSpec, client: ClientInfo, budget: int) -> None:
    layer = WriteBudget(max_writes=budget)
    # The call's risk as the validator works it out; here each call has its tool's.
    ctx = replace(make_context(spec.name), spec=spec, risk=CallRisk(risk=spec.risk), client=client)
    call_next = RecordingNext()

    async def calls() -> None:
        for _ in range(budget + 1):
            with contextlib.suppress(WriteBudgetExhaustedError):
                await layer(ctx, call_next)

    anyio.run(calls)

    expected = budget if spec.risk is Risk.WRITE else budget + 1
    assert len(call_next.seen) == expected
