"""A file-writing tool's plan carried out as the sandbox layer does, without the chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oct_mcp.deadline import Deadline
from oct_mcp.execution.applier import ChangeApplier
from oct_mcp.execution.changes import ChangePlan
from oct_mcp.preview import TargetState
from oct_mcp.spec import ToolEnv, ToolSpec
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace


def carried_out(
    workspace: Workspace,
    spec: ToolSpec,
    params: Any,
    *,
    dry_run: bool = False,
    preview: bool = False,
    deadline: Deadline | None = None,
    approved: tuple[TargetState, ...] | None = None,
    server_files: frozenset[Path] = frozenset(),
) -> ToolResult:
    """The tool's plan for `params` proposed, checked and (unless a dry run or a preview) applied."""
    env = ToolEnv(
        workspace=workspace,
        max_output_bytes=1_048_576,
        dry_run=dry_run or preview,
        deadline=deadline or Deadline.unlimited(),
        approved_targets=approved,
    )
    plan = spec.preview(params, env) if preview and spec.preview is not None else spec.plan(params, env)
    assert isinstance(plan, ChangePlan)
    applier = ChangeApplier(server_files)
    return applier.carry_out(
        workspace, plan, tool=spec.name, preview=preview, deadline=env.deadline, approved=approved
    )
