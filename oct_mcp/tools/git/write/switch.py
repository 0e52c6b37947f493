"""oct_git_switch: move the checkout to a branch, refused where it would lose local changes."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Final

from pydantic import BaseModel, Field

from oct_mcp.errors import (
    ChangesWouldBeLostError,
    PolicyError,
)
from oct_mcp.preview import FileChange, Preview, commit_target
from oct_mcp.spec import CommandPlan, Risk, RunResult, StrictParams, ToolEnv, ToolSpec
from oct_mcp.tools.edit.change_kit import CommandCheckpoint
from oct_mcp.tools.git.diff import parse_diff
from oct_mcp.tools.git.refs import verified_commit, verify_arguments
from oct_mcp.tools.git.runner import (
    git_failed,
)
from oct_mcp.tools.git.write.branch import BranchName
from oct_mcp.tools.git.write.checks import (
    approved_only,
    bound_commit,
    no_withheld_switched,
    refuse_fixed_entries,
    refuse_unreplaceable,
)
from oct_mcp.tools.git.write.runner import (
    HEAD_FILE,
    INDEX_FILE,
    PREVIEW_CONTEXT,
    SUBMODULES_OPTION,
    Step,
    diff_arguments,
    dry_run_field,
    every_entry,
    file_targets,
    fixed_step,
    git_path,
    project_git,
    protected_rule,
    status_arguments,
    steps_plan,
    succeeded,
)
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = ["GIT_SWITCH", "GitSwitchOutput", "GitSwitchParams"]

_LOST_FILE: Final = re.compile(r"^\t(.+)$", re.MULTILINE)


class GitSwitchParams(StrictParams):
    branch: BranchName = Field()
    dry_run: bool | None = dry_run_field()


class GitSwitchOutput(BaseModel):
    branch: str
    commit: str
    files: list[str]
    """The files the switch changes in the work tree."""
    applied: bool


def _lost_files(stderr: bytes) -> list[str]:
    return _LOST_FILE.findall(stderr.decode(errors="replace"))


def _would_lose(local: list[str]) -> ChangesWouldBeLostError:
    shown = ", ".join(local[:20]) + (f" and {len(local) - 20} more" if len(local) > 20 else "")
    return ChangesWouldBeLostError(
        f"switching would overwrite uncommitted changes to {len(local)} file(s): {shown}; commit them "
        "(oct_git_add, oct_git_commit), or discard them (oct_git_restore), then switch"
    )


def _switch_preview(params: GitSwitchParams, env: ToolEnv) -> CommandPlan:
    workspace = env.workspace
    git = project_git(env)
    found: dict[str, str] = {}
    local: list[str] = []

    def local_changes(run: RunResult) -> tuple[str, ...]:
        found["commit"] = verified_commit(run, "branch")
        return status_arguments(untracked=True)

    def switched_files(run: RunResult) -> tuple[str, ...]:
        status = every_entry(succeeded(run, "read the status").stdout)
        local.extend(git_path(e.path) for e in status.entries)
        return diff_arguments("HEAD", found["commit"])

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        diff = parse_diff(run.stdout, staged=False, truncated=run.truncated, context=PREVIEW_CONTEXT)
        changed = [git_path(f.path) for f in diff.files]
        no_withheld_switched(env, changed)
        lost = sorted(set(changed) & set(local))
        if lost:
            raise _would_lose(lost)
        _refuse_protected_switch(workspace, changed)
        refuse_fixed_entries(env, changed, "switched")
        commit = found["commit"]
        output = GitSwitchOutput(branch=params.branch, commit=commit, files=changed, applied=False)
        preview = Preview(
            files=tuple(
                FileChange(path=f.path, action="switch", added=f.added or 0, removed=f.removed or 0)
                for f in diff.files
            ),
            diff=f"switch to {params.branch} at {commit}\n\n{diff.diff}",
            targets=(
                *file_targets(workspace, changed, HEAD_FILE, INDEX_FILE),
                commit_target(f"refs/heads/{params.branch}", commit),
            ),
        )
        text = (
            f"dry run, nothing changed: would switch to {params.branch} ({commit[:12]}), "
            f"{len(changed)} file(s) change"
        )
        return ToolResult(text=text, structured=output.model_dump(), preview=preview)

    steps: list[Step] = [
        fixed_step(*verify_arguments(f"refs/heads/{params.branch}")),
        local_changes,
        switched_files,
    ]
    return steps_plan(git, steps, parse)


def _plan_switch(params: GitSwitchParams, env: ToolEnv) -> CommandPlan:
    if env.dry_run_for(params.dry_run):
        return _switch_preview(params, env)
    workspace = env.workspace
    git = project_git(env, files=("index", "logs/HEAD"), write=True)
    found: dict[str, str] = {}

    def changed_files(run: RunResult) -> tuple[str, ...]:
        found["commit"] = verified_commit(run, "branch")
        bound_commit(
            env,
            f"refs/heads/{params.branch}",
            found["commit"],
            "the branch points at another commit than the question the user approved showed, so "
            "nothing was switched; call the tool again to preview the switch as it is now",
        )
        return (
            "diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--name-only", "-z",
            SUBMODULES_OPTION, "HEAD", found["commit"], "--",
        )  # fmt: skip

    def switch(run: RunResult) -> tuple[str, ...]:
        changed = [git_path(os.fsdecode(raw)) for raw in succeeded(run, "compare").stdout.split(b"\0") if raw]
        no_withheld_switched(env, changed)
        _refuse_protected_switch(workspace, changed)
        refuse_fixed_entries(env, changed, "switched")
        approved_only(
            changed,
            env.approved_targets,
            "the branch changed after the preview the user approved, so nothing was switched; "
            "call the tool again to preview the switch as it is now",
        )
        checkpoint.before(changed)
        return ("switch", "--no-guess", "--no-recurse-submodules", "--quiet", params.branch)

    def parse(run: RunResult) -> ToolResult:
        checkpoint.settle()
        if run.exit_code != 0:
            lost = _lost_files(run.stderr)
            if lost:
                raise _would_lose(lost)
        # Also after exit 0: git warns of a file it could not replace and moves HEAD all the same.
        refuse_unreplaceable(run, "switched")
        if run.exit_code != 0:
            return git_failed(run)
        output = GitSwitchOutput(branch=params.branch, commit=found["commit"], files=[], applied=True)
        return checkpoint.noted(
            ToolResult(
                text=f"switched to {params.branch} ({found['commit'][:12]})", structured=output.model_dump()
            )
        )

    checkpoint = CommandCheckpoint(env, "oct_git_switch")
    steps: list[Step] = [fixed_step(*verify_arguments(f"refs/heads/{params.branch}")), changed_files, switch]
    return steps_plan(git, steps, parse, writes_project=True, after_failure=checkpoint.after_failure)


def _refuse_protected_switch(workspace: Workspace, changed: Sequence[str]) -> None:
    """Raises:
    PolicyError: The switch would change a protected path in the work tree.
    """
    for path in changed:
        rule = protected_rule(workspace, path)
        if rule is not None:
            raise PolicyError(
                "switching would change a protected path in the work tree "
                f"(protected path rule: {rule}); switch in a terminal"
            )


GIT_SWITCH: Final = ToolSpec(
    name="oct_git_switch",
    title="Git switch",
    description=(
        "Switch to a local branch; refuses, naming the files, when uncommitted changes would be overwritten."
    ),
    params=GitSwitchParams,
    output=GitSwitchOutput,
    risk=Risk.WRITE,
    plan=_plan_switch,
    preview=_switch_preview,
    idempotent=False,
    session_grants=False,
)
