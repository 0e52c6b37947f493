"""ExecutionSandbox: runs the plan, caps the output, times out, and never calls next."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from fakes import RecordingNext, make_context
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from oct_mcp.backends.fake import FakeBackend, ScriptedRunner
from oct_mcp.errors import BusyError, NotFoundError, ToolTimeoutError
from oct_mcp.execution.applier import ChangeApplier
from oct_mcp.execution.commands import CommandRunner
from oct_mcp.middleware.sandbox import ExecutionSandbox, cap_output
from oct_mcp.spec import (
    COMMAND_STEPS_MAX,
    CommandPlan,
    InProcessPlan,
    NextCommand,
    Risk,
    RunResult,
    Then,
    ToolEnv,
    ToolSpec,
)
from oct_mcp.tools import default_catalog
from oct_mcp.tools.edit.apply_patch import ApplyPatchParams
from oct_mcp.tools.files import ReadFileParams
from oct_mcp.types import CallContext, ToolResult
from oct_mcp.workspace import Workspace

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _sandbox(*, max_output_bytes: int = 1_048_576, timeout: float = 60) -> ExecutionSandbox:
    return ExecutionSandbox(
        commands=CommandRunner(
            backend=FakeBackend(),
            runner=ScriptedRunner(lambda prepared: pytest.fail("an in-process tool must not spawn")),
            required=frozenset(),
            allow_degraded=False,
            max_output_bytes=max_output_bytes,
            timeout_seconds=timeout,
            test_timeout_seconds=timeout * 5,
            memory_bytes=None,
            threads=2,
        ),
        applier=ChangeApplier(),
    )


def _validated(project: Path, path: str, start_line: int | None = None) -> CallContext:
    spec = default_catalog()["oct_read_file"]
    params = ReadFileParams(path=path, start_line=start_line)
    return replace(
        make_context("oct_read_file", Workspace(project), path=path),
        spec=spec,
        risk=spec.own_risk,
        params=params,
    )


async def test_sandbox_runs_the_plan_and_never_calls_next(project: Path) -> None:
    call_next = RecordingNext()

    outcome = await _sandbox()(_validated(project, "README.md"), call_next)

    assert isinstance(outcome, ToolResult)
    assert outcome.text == "# Demo\n\nline 3\nline 4\n"
    assert outcome.duration_seconds is not None
    assert call_next.seen == []


async def test_sandbox_cuts_output_at_max_output_bytes(project: Path) -> None:
    (project / "big.txt").write_text("x" * 5000)
    # A line range lets read_file return more than the limit, so the sandbox's cap is what cuts it.
    big_read = _validated(project, "big.txt", start_line=1)

    outcome = await _sandbox(max_output_bytes=2048)(big_read, RecordingNext())

    assert isinstance(outcome, ToolResult)
    assert outcome.truncated is True
    assert len(outcome.text.encode()) <= 2048


async def test_sandbox_lets_a_tool_error_through(project: Path) -> None:
    with pytest.raises(NotFoundError):
        await _sandbox()(_validated(project, "missing.txt"), RecordingNext())


async def test_sandbox_refuses_a_context_the_validator_did_not_fill(project: Path) -> None:
    with pytest.raises(RuntimeError):
        await _sandbox()(make_context("oct_read_file", path="README.md"), RecordingNext())


async def test_sandbox_times_out_a_plan_that_runs_too_long(project: Path) -> None:
    release = threading.Event()

    def stuck() -> ToolResult:
        release.wait(30)
        return ToolResult(text="late")

    spec = replace(default_catalog()["oct_read_file"], plan=lambda params, env: InProcessPlan(stuck))
    ctx = replace(
        make_context("oct_read_file", Workspace(project)),
        spec=spec,
        risk=spec.own_risk,
        params=ReadFileParams(path="README.md"),
    )
    try:
        with pytest.raises(ToolTimeoutError) as caught:
            await _sandbox(timeout=0.05)(ctx, RecordingNext())
    finally:
        release.set()

    assert caught.value.code == "timeout"


def _slow_patch(project: Path) -> ApplyPatchParams:
    """A patch of many hunks, each far from the line its header says, to a file of 100,000 lines."""
    (project / "big.txt").write_text("".join(f"line {number}\n" for number in range(100_000)))
    hunks = "".join(f"@@ -1,1 +1,1 @@\n-line {n}\n+LINE {n}\n" for n in range(500, 100_000, 500))
    return ApplyPatchParams(patch=f"--- a/big.txt\n+++ b/big.txt\n{hunks}", dry_run=False)


async def _wait_until_idle(sandbox: ExecutionSandbox) -> None:
    # Each wait in a thread is bounded: a thread left blocked would hold the interpreter at exit.
    with anyio.fail_after(60):
        while not await anyio.to_thread.run_sync(sandbox.abandoned.wait_idle, 0.5):
            pass


def _in_process_context(project: Path, function: Callable[[], ToolResult]) -> CallContext:
    spec = replace(default_catalog()["oct_read_file"], plan=lambda params, env: InProcessPlan(function))
    return replace(
        make_context("oct_read_file", Workspace(project)),
        spec=spec,
        risk=spec.own_risk,
        params=ReadFileParams(path="README.md"),
    )


async def test_a_patch_answered_timeout_leaves_the_file_untouched_once_its_thread_ends(
    project: Path,
) -> None:
    params = _slow_patch(project)
    before = (project / "big.txt").read_bytes()
    ctx = replace(
        make_context("oct_apply_patch", Workspace(project)),
        spec=default_catalog()["oct_apply_patch"],
        params=params,
        risk=default_catalog()["oct_apply_patch"].own_risk,
    )
    sandbox = _sandbox(timeout=0.01)

    with pytest.raises(ToolTimeoutError) as caught:
        await sandbox(ctx, RecordingNext())
    await _wait_until_idle(sandbox)

    assert caught.value.code == "timeout"
    assert (project / "big.txt").read_bytes() == before
    assert sorted(p.name for p in project.iterdir() if p.name.startswith(".oct-write-")) == []


async def test_new_in_process_calls_are_refused_while_an_abandoned_one_still_runs(project: Path) -> None:
    release = threading.Event()

    def stuck() -> ToolResult:
        release.wait(30)
        return ToolResult(text="late")

    sandbox = _sandbox(timeout=0.05)
    try:
        with pytest.raises(ToolTimeoutError):
            await sandbox(_in_process_context(project, stuck), RecordingNext())
        with pytest.raises(BusyError) as refused:
            await sandbox(_validated(project, "README.md"), RecordingNext())
        running = sandbox.abandoned.running
    finally:
        release.set()
    await _wait_until_idle(sandbox)
    after = await sandbox(_validated(project, "README.md"), RecordingNext())

    assert refused.value.code == "busy"
    assert running == 1
    assert sandbox.abandoned.running == 0
    assert isinstance(after, ToolResult)
    assert after.text == "# Demo\n\nline 3\nline 4\n"


@pytest.mark.parametrize(("inline", "on_the_loop"), [(True, True), (False, False)])
async def test_an_inline_plan_runs_on_the_event_loop_and_others_in_a_thread(
    project: Path, inline: bool, on_the_loop: bool
) -> None:
    loop_thread = threading.get_ident()
    ran_on: list[int] = []

    def answer() -> ToolResult:
        ran_on.append(threading.get_ident())
        return ToolResult(text="answered")

    spec = replace(
        default_catalog()["oct_read_file"], plan=lambda params, env: InProcessPlan(answer, inline=inline)
    )
    ctx = replace(
        make_context("oct_read_file", Workspace(project)),
        spec=spec,
        risk=spec.own_risk,
        params=ReadFileParams(path="README.md"),
    )

    outcome = await _sandbox()(ctx, RecordingNext())

    assert isinstance(outcome, ToolResult)
    assert outcome.text == "answered"
    assert (ran_on == [loop_thread]) is on_the_loop


@given(text=st.text(), limit=st.integers(min_value=64, max_value=4096))
def test_cap_output_never_exceeds_the_limit_and_keeps_short_text(text: str, limit: int) -> None:
    capped = cap_output(ToolResult(text=text), limit)

    assert len(capped.text.encode("utf-8")) <= limit
    if len(text.encode("utf-8")) <= limit:
        assert capped == ToolResult(text=text)
    else:
        assert capped.truncated is True
        assert text.startswith(capped.text.split("\n[oct-mcp: output truncated")[0])


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _stepped_call(project: Path, then: Then) -> CallContext:
    """A command tool whose plan runs `/bin/step 1`, then what `then` decides from each output."""

    def plan(params: BaseModel, env: ToolEnv) -> CommandPlan:
        return CommandPlan(
            argv=("/bin/step", "1"),
            then=then,
            parse=lambda run: ToolResult(text=run.stdout.decode()),
        )

    spec = ToolSpec(
        name="oct_steps",
        title="Steps",
        description="d",
        params=_NoParams,
        output=None,
        risk=Risk.READ,
        plan=plan,
    )
    return replace(
        make_context("oct_steps", Workspace(project)), spec=spec, risk=spec.own_risk, params=_NoParams()
    )


def _echo_runner() -> ScriptedRunner:
    """Each run prints its own argv after the program: what the next step is decided from."""
    return ScriptedRunner(
        lambda prepared: RunResult(
            exit_code=0,
            stdout=" ".join(prepared.argv[1:]).encode(),
            stderr=b"",
            output_bytes=0,
            truncated=False,
            timed_out=False,
            duration_seconds=0.0,
            backend="fake",
        )
    )


def _command_sandbox(runner: ScriptedRunner) -> ExecutionSandbox:
    sandbox = _sandbox()
    return replace(sandbox, commands=replace(sandbox.commands, runner=runner, allow_unconfined=True))


async def test_each_step_of_a_plan_is_decided_by_what_the_one_before_printed(project: Path) -> None:
    runner = _echo_runner()

    def second(run: RunResult) -> NextCommand:
        return NextCommand(("/bin/step", run.stdout.decode() + "-2"), then=third)

    def third(run: RunResult) -> tuple[str, ...]:
        return ("/bin/step", run.stdout.decode() + "-3")

    outcome = await _command_sandbox(runner)(_stepped_call(project, second), RecordingNext())

    assert isinstance(outcome, ToolResult)
    assert outcome.text == "1-2-3"
    assert [seen[0].argv for seen in runner.seen] == [
        ("/bin/step", "1"),
        ("/bin/step", "1-2"),
        ("/bin/step", "1-2-3"),
    ]


async def test_a_step_that_refuses_stops_the_plan_before_the_next_command(project: Path) -> None:
    runner = _echo_runner()

    def refuse(run: RunResult) -> tuple[str, ...]:
        raise NotFoundError("the ref names no commit")

    with pytest.raises(NotFoundError):
        await _command_sandbox(runner)(_stepped_call(project, refuse), RecordingNext())

    assert [seen[0].argv for seen in runner.seen] == [("/bin/step", "1")]


async def test_a_plan_may_not_switch_programs_or_run_past_its_step_limit(project: Path) -> None:
    def other_program(run: RunResult) -> tuple[str, ...]:
        return ("/bin/other", "x")

    def forever(run: RunResult) -> NextCommand:
        return NextCommand(("/bin/step", "again"), then=forever)

    for then in (other_program, forever):
        runner = _echo_runner()
        with pytest.raises(RuntimeError, match="later commands must run"):
            await _command_sandbox(runner)(_stepped_call(project, then), RecordingNext())
        assert len(runner.seen) <= COMMAND_STEPS_MAX


def _command_call(project: Path, plan: Callable[[BaseModel, ToolEnv], CommandPlan]) -> CallContext:
    spec = ToolSpec(
        name="oct_steps",
        title="Steps",
        description="d",
        params=_NoParams,
        output=None,
        risk=Risk.WRITE,
        plan=plan,
    )
    return replace(
        make_context("oct_steps", Workspace(project)), spec=spec, risk=spec.own_risk, params=_NoParams()
    )


async def test_only_the_last_command_of_a_writing_plan_may_write_the_project(project: Path) -> None:
    backend = FakeBackend()

    def second(run: RunResult) -> NextCommand:
        return NextCommand(("/bin/step", "2"), then=lambda run: ("/bin/step", "3"))

    def plan(params: BaseModel, env: ToolEnv) -> CommandPlan:
        return CommandPlan(
            argv=("/bin/step", "1"),
            then=second,
            parse=lambda run: ToolResult(text=run.stdout.decode()),
            writes_project=True,
        )

    echoing = _command_sandbox(_echo_runner())
    sandbox = replace(echoing, commands=replace(echoing.commands, backend=backend))
    outcome = await sandbox(_command_call(project, plan), RecordingNext())

    assert isinstance(outcome, ToolResult)
    assert outcome.text == "3"
    # The first request is prepared only to learn the backend's guarantees for the writing run.
    assert [(request.argv[1], request.writable) for request in backend.requests[1:]] == [
        ("1", False),
        ("2", False),
        ("3", True),
    ]


@pytest.mark.parametrize("where", ["before_run", "step", "parse"])
async def test_a_command_plan_s_reads_of_the_project_hold_up_no_other_call(project: Path, where: str) -> None:
    """A plan that reads a large project (a writing run's baseline, ruff's checkpoint, the files a run
    changed) is parked here on an event only another call's answer sets: on the event loop, that
    other call could never answer while it waits."""
    answered = threading.Event()
    parked = threading.Event()

    def read_the_project() -> None:
        parked.set()
        # Bounded: on the event loop this would hold every other call, and the test would fail, not hang.
        answered.wait(10)

    def step(run: RunResult) -> tuple[str, ...]:
        read_the_project()
        return ("/bin/step", "2")

    def parse(run: RunResult) -> ToolResult:
        if where == "parse":
            read_the_project()
        return ToolResult(text=f"answered first: {answered.is_set()}")

    def plan(params: BaseModel, env: ToolEnv) -> CommandPlan:
        return CommandPlan(
            argv=("/bin/step", "1"),
            before_run=read_the_project if where == "before_run" else None,
            then=step if where == "step" else None,
            parse=parse,
            writes_project=True,
        )

    sandbox = _command_sandbox(_echo_runner())
    outcomes: list[object] = []

    async def reading() -> None:
        outcomes.append(await sandbox(_command_call(project, plan), RecordingNext()))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(reading)
            await anyio.to_thread.run_sync(parked.wait, 10)
            other = await sandbox(_validated(project, "README.md"), RecordingNext())
            answered.set()

    assert isinstance(other, ToolResult)
    assert other.text == "# Demo\n\nline 3\nline 4\n"
    (outcome,) = outcomes
    assert isinstance(outcome, ToolResult)
    assert outcome.text == "answered first: True"


async def test_a_writing_command_cut_short_by_a_cancel_still_records_what_it_changed(project: Path) -> None:
    started = anyio.Event()
    kept: list[str] = []

    async def hanging(prepared: object, **options: object) -> RunResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("not reached")

    def plan(params: BaseModel, env: ToolEnv) -> CommandPlan:
        return CommandPlan(
            argv=("/bin/step", "1"),
            parse=lambda run: pytest.fail("a cancelled run is not parsed"),
            writes_project=True,
            after_failure=lambda: kept.append("recorded") or "checkpoint 1",
        )

    echoing = _command_sandbox(_echo_runner())
    sandbox = replace(echoing, commands=replace(echoing.commands, runner=hanging))
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(sandbox, _command_call(project, plan), RecordingNext())
            await started.wait()
            group.cancel_scope.cancel()

    assert kept == ["recorded"]
