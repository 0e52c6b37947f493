"""ExecutionSandbox, the terminal layer: runs a tool's plan isolated and within its limits."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Final

import anyio

from oct_mcp.backends.installs import is_inside
from oct_mcp.backends.libc import libc
from oct_mcp.backends.runner import run_prepared
from oct_mcp.backends.selection import select_backend
from oct_mcp.deadline import Deadline
from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import ProjectCodeRefusedError
from oct_mcp.execution.applier import ChangeApplier
from oct_mcp.execution.changes import ChangePlan
from oct_mcp.execution.checkpoints import CheckpointStore
from oct_mcp.execution.commands import RUN_PROCESSES, CommandRunner
from oct_mcp.execution.in_process import AbandonedWork, run_in_thread
from oct_mcp.execution.run_slots import RunSlots
from oct_mcp.preview import TargetState, verify_targets
from oct_mcp.protected import ProtectedPaths
from oct_mcp.spec import InProcessPlan, Risk, ToolEnv
from oct_mcp.types import (
    CallContext,
    CallNext,
    LayerRuntime,
    LayerSettings,
    LayerType,
    Outcome,
    ToolResult,
)
from oct_mcp.workspace import Workspace

__all__ = [
    "LAYER",
    "RUN_PROCESSES",
    "ExecutionSandbox",
    "SandboxSettings",
    "cap_output",
]

TRUNCATION_NOTE: Final = "\n[oct-mcp: output truncated at {limit} bytes (max_output_bytes)]"
_MIB: Final = 1_048_576
_MAX_TOOL_THREADS: Final = 4
_PR_SET_DUMPABLE: Final = 4

_log = get_logger(__name__)


class SandboxSettings(LayerSettings):
    allow_degraded: bool = False
    """Run where the backend lacks a guarantee the profile names (never the network one)."""
    show_secrets_to_runs: bool = False
    """Let the code a command runs read the project's files that a read shows masked, as they are.
    Off: the run reads them masked (bubblewrap) or not at all (landlock), since code can print a
    secret in a form no pattern redactor knows (reversed, encoded)."""


def cap_output(result: ToolResult, limit: int) -> ToolResult:
    """Cut the result's text to at most `limit` UTF-8 bytes, on a character boundary.

    Args:
        result: What the tool answered.
        limit: `max_output_bytes`.

    Returns:
        The result unchanged when it fits; else cut, marked `truncated`, with a note saying so.
    """
    if len(result.text) * 4 <= limit:
        return result  # no UTF-8 character takes more than 4 bytes: it fits without encoding it
    encoded = result.text.encode("utf-8")
    if len(encoded) <= limit:
        return result
    note = TRUNCATION_NOTE.format(limit=limit)
    room = max(limit - len(note.encode("utf-8")), 0)
    # errors="ignore" drops the partial character a byte cut can leave at the end.
    text = encoded[:room].decode("utf-8", errors="ignore") + note
    return replace(result, text=text, truncated=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSandbox:
    """Run the validated tool's plan: in-process ones in a thread (or inline), file changes through the
    one applier (`execution.changes`), commands through `execution.commands` under the backend.

    Reads `ctx.workspace`, `ctx.spec`, `ctx.params`, `ctx.risk`, `ctx.dry_run`, `ctx.previewing` (run the
    spec's preview plan), `ctx.approved_targets` (refuse with `TargetChangedError` unless every
    target is as approved), `ctx.withheld` (paths the plan leaves out of its output). Never calls
    `call_next`: it always answers. Raises `SandboxUnavailableError` when the backend lacks a
    guarantee the profile needs, `ToolTimeoutError` past the time limit, and what the tool raises.
    """

    commands: CommandRunner
    """Runs the plans that are commands, under the backend with the profile's limits."""
    applier: ChangeApplier
    """Checks and applies the file changes of every tool whose plan is a `ChangePlan`."""
    runs: RunSlots = field(default_factory=RunSlots)
    """How many command runs go at once, in all and for one client (`max_concurrent_runs`)."""
    abandoned: AbandonedWork = field(default_factory=AbandonedWork)
    """Shared by every call this layer serves (the one state it keeps), counted across threads."""

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        if ctx.spec is None or ctx.params is None or ctx.risk is None or ctx.workspace is None:
            # build_chain refuses a profile without the gateway and validator before this layer.
            raise RuntimeError("the sandbox layer was reached without validated params")
        commands = self.commands
        deadline = Deadline(commands.timeout_seconds)
        env = ToolEnv(
            workspace=ctx.workspace,
            max_output_bytes=commands.max_output_bytes,
            max_jobs=commands.threads,
            dry_run=ctx.dry_run or ctx.previewing,
            deadline=deadline,
            approved_targets=ctx.approved_targets,
            entry_rights=commands.backend.entry_rights,
            checkpoints=self.applier.checkpoints,
            call_id=ctx.call_id,
            withheld=ctx.withheld,
            session_grants=ctx.session_grants,
        )
        if ctx.previewing:
            if ctx.spec.preview is None:
                raise RuntimeError("a preview was asked of a tool that has none")
            plan = ctx.spec.preview(ctx.params, env)
        else:
            plan = ctx.spec.plan(ctx.params, env)
        started = time.perf_counter()
        approved = ctx.approved_targets
        if isinstance(plan, ChangePlan):
            self.abandoned.refuse_while_running()
            carry_out = partial(
                self.applier.carry_out,
                ctx.workspace,
                plan,
                tool=ctx.spec.name,
                preview=ctx.previewing,
                deadline=deadline,
                approved=approved,
                call_id=ctx.call_id,
            )
            result = await run_in_thread(carry_out, deadline, self.abandoned)
        elif isinstance(plan, InProcessPlan):
            self.abandoned.refuse_while_running()
            if approved is not None:
                # Checked in the plan's own thread, just before it reads and writes.
                plan = replace(plan, function=partial(_after_check, ctx.workspace, approved, plan.function))
            if plan.inline:
                result = plan.function()
            else:
                result = await run_in_thread(plan.function, deadline, self.abandoned)
        else:
            if approved is not None:
                await anyio.to_thread.run_sync(verify_targets, ctx.workspace, approved)
            if ctx.risk.risk is Risk.READ and is_inside(Path(plan.argv[0]), ctx.workspace.root):
                # A read tool asks no consent; a program inside the project is project code.
                raise ProjectCodeRefusedError(
                    "a read tool may not run a program that lies inside the project; nothing ran"
                )
            async with self.runs.taken(ctx.client.client_id, ctx.progress):
                result = await commands.run(plan, ctx.workspace.root, ctx.progress, ctx.withheld)
        return replace(
            cap_output(result, commands.max_output_bytes),
            duration_seconds=time.perf_counter() - started,
        )


def _after_check(
    workspace: Workspace, approved: tuple[TargetState, ...], function: Callable[[], ToolResult]
) -> ToolResult:
    verify_targets(workspace, approved)
    return function()


def _make_server_undumpable() -> None:
    """A child running as the same user must not read the server's environment through /proc."""
    if sys.platform.startswith("linux"):
        libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _build(settings: SandboxSettings, runtime: LayerRuntime) -> ExecutionSandbox:
    config = runtime.config
    backend, _ = select_backend(config.sandbox_backend)
    _make_server_undumpable()
    if config.allow_unconfined_project_code:
        _log.warning(
            "unconfined_project_code_allowed",
            backend=backend.name,
            problem="command tools run project code with the server user's rights where nothing confines it",
        )
    return ExecutionSandbox(
        commands=CommandRunner(
            backend=backend,
            runner=run_prepared,
            required=runtime.guarantees,
            allow_degraded=settings.allow_degraded,
            max_output_bytes=config.max_output_bytes,
            timeout_seconds=config.timeout_default_seconds,
            test_timeout_seconds=config.timeout_test_seconds,
            memory_bytes=config.memory_limit_mb * _MIB if config.memory_limit_mb else None,
            threads=max(1, min(os.cpu_count() or 1, config.max_jobs, _MAX_TOOL_THREADS)),
            allow_unconfined=config.allow_unconfined_project_code,
            show_secrets_to_runs=settings.show_secrets_to_runs,
        ),
        applier=ChangeApplier(
            ProtectedPaths.for_config(
                runtime.config, runtime.workspace.root, runtime.server_files
            ).server_files,
            checkpoints=CheckpointStore.for_config(runtime.config, runtime.workspace.root),
        ),
        runs=RunSlots(config.max_concurrent_runs, config.max_concurrent_runs_per_client),
    )


LAYER: Final = LayerType(
    name="sandbox",
    settings=SandboxSettings,
    build=_build,
    requires=frozenset({"workspace", "spec", "params", "risk"}),
    terminal=True,
)
