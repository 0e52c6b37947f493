"""A tool that runs the command it is given, through the real sandbox layer: what a run can do."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from fakes import make_context
from processes import MIB
from pydantic import BaseModel, ConfigDict

from oct_mcp.backends import Backend
from oct_mcp.backends.runner import run_prepared
from oct_mcp.execution.applier import ChangeApplier
from oct_mcp.execution.commands import CommandRunner
from oct_mcp.middleware.sandbox import ExecutionSandbox
from oct_mcp.spec import CommandPlan, Risk, RunResult, ToolEnv, ToolSpec
from oct_mcp.testing import validated
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace


class CommandParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    argv: list[str]
    writes: bool = False
    env: list[tuple[str, str]] = []


def _as_result(run: RunResult) -> ToolResult:
    return ToolResult(text=run.stdout.decode(errors="replace"), structured={"stderr": run.stderr.decode()})


def _plan(params: CommandParams, env: ToolEnv) -> CommandPlan:
    return CommandPlan(
        argv=tuple(params.argv), parse=_as_result, writes_project=params.writes, tool_env=tuple(params.env)
    )


COMMAND_TOOL = ToolSpec(
    name="test_command",
    title="Command",
    description="",
    params=CommandParams,
    output=None,
    risk=Risk.EXECUTE,
    plan=_plan,
)


def command_sandbox(
    backend: Backend, *, timeout_seconds: float = 120, threads: int = 2, allow_unconfined: bool = True
) -> ExecutionSandbox:
    """The sandbox layer running commands under `backend`: 1 MiB of output, 512 MiB of memory."""
    return ExecutionSandbox(
        commands=CommandRunner(
            backend=backend,
            runner=run_prepared,
            required=frozenset(),
            allow_degraded=False,
            max_output_bytes=MIB,
            timeout_seconds=timeout_seconds,
            test_timeout_seconds=timeout_seconds,
            memory_bytes=512 * MIB,
            threads=threads,
            allow_unconfined=allow_unconfined,
        ),
        applier=ChangeApplier(),
    )


async def run_command(
    backend: Backend,
    project: Path,
    argv: list[str],
    *,
    sandbox: ExecutionSandbox | None = None,
    **params: object,
) -> ToolResult:
    """`argv` run in `project` through the sandbox layer (`command_sandbox(backend)` unless given),
    as a tool's command runs."""
    sandbox = sandbox if sandbox is not None else command_sandbox(backend)
    ctx = validated(
        make_context("test_command", Workspace(project)), COMMAND_TOOL, CommandParams(argv=argv, **params)
    )
    with anyio.fail_after(180):
        outcome = await sandbox(ctx, lambda ctx: pytest.fail("terminal layer called next"))
    assert isinstance(outcome, ToolResult)
    return outcome
