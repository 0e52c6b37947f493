"""oct_git_branch: make a branch at a commit, never moving one that exists."""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import AfterValidator, BaseModel, Field, StringConstraints

from oct_mcp.errors import (
    ExecutionError,
)
from oct_mcp.preview import ABSENT, FileChange, Preview, TargetState, commit_target
from oct_mcp.spec import CommandPlan, Risk, RunResult, StrictParams, ToolEnv, ToolSpec
from oct_mcp.tools.git.refs import GitRef, verified_commit, verify_arguments
from oct_mcp.tools.git.runner import (
    git_failed,
)
from oct_mcp.tools.git.write.checks import bound_commit
from oct_mcp.tools.git.write.runner import Step, dry_run_field, fixed_step, project_git, steps_plan
from oct_mcp.types import ToolResult

__all__ = [
    "BRANCH_MAX",
    "GIT_BRANCH",
    "BranchName",
    "GitBranchOutput",
    "GitBranchParams",
    "check_branch_name",
]

BRANCH_MAX: Final = 200


_BRANCH_FORBIDDEN: Final = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def check_branch_name(name: str) -> str:
    """`name` if git's `check-ref-format --branch` rules allow it as a new branch's name.

    No component starting with `.` or ending with `.lock`, no `..`, `@{`, `//`, control
    characters, space, `~^:?*[\\`, no leading `-` or `/`, no trailing `/` or `.`, not `@` or
    `HEAD`; and, stricter, no character outside printable ASCII.

    Raises:
        ValueError: It breaks a rule (the message names the rule, never the name).
    """
    if not 0 < len(name) <= BRANCH_MAX:
        raise ValueError(f"a branch name has 1 to {BRANCH_MAX} characters")
    if name.startswith("-"):
        raise ValueError("a branch name cannot start with '-'")
    if not name.isascii() or _BRANCH_FORBIDDEN.search(name):
        raise ValueError("a branch name holds printable ASCII only, without space or any of ~^:?*[\\")
    if name in ("@", "HEAD") or "@{" in name or ".." in name or "//" in name:
        raise ValueError("a branch name cannot be '@' or HEAD, nor hold '@{', '..' or '//'")
    if name.startswith("/") or name.endswith(("/", ".")):
        raise ValueError("a branch name cannot start with '/' nor end with '/' or '.'")
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        raise ValueError("no part of a branch name starts with '.' or ends with '.lock'")
    return name


BranchName = Annotated[
    str, StringConstraints(min_length=1, max_length=BRANCH_MAX), AfterValidator(check_branch_name)
]


class GitBranchParams(StrictParams):
    name: BranchName = Field()
    start: GitRef | None = Field(default=None)
    dry_run: bool | None = dry_run_field()


class GitBranchOutput(BaseModel):
    branch: str
    commit: str
    applied: bool


def _branch_file(name: str) -> str:
    return f".git/refs/heads/{name}"


def _branch_plan(params: GitBranchParams, env: ToolEnv, *, preview: bool) -> CommandPlan:
    git = project_git(env) if preview else project_git(env, folders=("refs", "logs"), write=True)
    start = params.start or "HEAD"
    resolved: dict[str, str] = {}

    def exists(run: RunResult) -> tuple[str, ...]:
        resolved["commit"] = verified_commit(run, "start")
        if not preview:
            bound_commit(
                env,
                start,
                resolved["commit"],
                "the start names another commit than the question the user approved showed, so no "
                "branch was made; call the tool again to preview the branch as it is now",
            )
        return ("rev-parse", "--verify", "--quiet", "--end-of-options", f"refs/heads/{params.name}")

    def create(run: RunResult) -> tuple[str, ...]:
        if run.exit_code == 0:
            raise ExecutionError("a branch by that name exists already; oct_git_switch switches to it")
        return ("branch", "--no-track", "--end-of-options", params.name, resolved["commit"])

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code == 0 and preview:
            raise ExecutionError("a branch by that name exists already; oct_git_switch switches to it")
        if run.exit_code != 0 and not preview:
            return git_failed(run)
        output = GitBranchOutput(branch=params.name, commit=resolved["commit"], applied=not preview)
        head = "created" if not preview else "dry run, nothing changed: would create"
        text = f"{head} branch {params.name} at {output.commit[:12]}"
        shown = None
        if preview:
            shown = Preview(
                files=(
                    FileChange(path=_branch_file(params.name), action="create branch", added=0, removed=0),
                ),
                diff=f"new branch {params.name} at {output.commit}\n",
                targets=(
                    TargetState(path=_branch_file(params.name), digest=ABSENT),
                    commit_target(start, output.commit),
                ),
            )
        return ToolResult(text=text, structured=output.model_dump(), preview=shown)

    steps: list[Step] = [fixed_step(*verify_arguments(start)), exists]
    if not preview:
        steps.append(create)
    return steps_plan(git, steps, parse)


def _preview_branch(params: GitBranchParams, env: ToolEnv) -> CommandPlan:
    return _branch_plan(params, env, preview=True)


def _plan_branch(params: GitBranchParams, env: ToolEnv) -> CommandPlan:
    return _branch_plan(params, env, preview=env.dry_run_for(params.dry_run))


GIT_BRANCH: Final = ToolSpec(
    name="oct_git_branch",
    title="Git branch (create)",
    description="Create a local branch at HEAD or start, without switching to it.",
    params=GitBranchParams,
    output=GitBranchOutput,
    risk=Risk.WRITE,
    plan=_plan_branch,
    preview=_preview_branch,
    idempotent=False,
    session_grants=False,
)
