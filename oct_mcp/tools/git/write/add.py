"""oct_git_add: stage the named paths' changes, none of them a protected path, shown first."""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, Field

from oct_mcp.errors import (
    ExecutionError,
    PolicyError,
)
from oct_mcp.preview import FileChange, Preview
from oct_mcp.protected import GIT_DIRECTORY_RULE
from oct_mcp.spec import CommandPlan, ProjectPath, Risk, RunResult, StrictParams, ToolEnv, ToolSpec
from oct_mcp.tools.git.diff import parse_diff
from oct_mcp.tools.git.runner import (
    git_failed,
)
from oct_mcp.tools.git.write.checks import approved_only
from oct_mcp.tools.git.write.runner import (
    INDEX_FILE,
    PATHS_MAX,
    PREVIEW_CONTEXT,
    STAGED_FILES_MAX,
    diff_arguments,
    dry_run_field,
    every_entry,
    file_targets,
    fixed_step,
    git_path,
    pathspecs,
    project_git,
    protected_rule,
    status_arguments,
    steps_plan,
    succeeded,
)
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = ["GIT_ADD", "GitAddOutput", "GitAddParams", "StagedFile"]


class GitAddParams(StrictParams):
    paths: list[ProjectPath] = Field(min_length=1, max_length=PATHS_MAX)
    dry_run: bool | None = dry_run_field()


class StagedFile(BaseModel):
    path: str
    action: str
    """`modify`, `create` (untracked), `delete`, `resolve` (a conflict marked resolved)."""


class GitAddOutput(BaseModel):
    files: list[StagedFile]
    applied: bool


def _to_stage(stdout: bytes, workspace: Workspace) -> list[StagedFile]:
    """What `git add` stages of `git status --porcelain=v2 -z`: each entry with a work-tree change.

    Raises:
        PolicyError: An entry is a protected path.
        ExecutionError: No entry, or too many, to stage.
    """
    staged: list[StagedFile] = []
    for entry in every_entry(stdout).entries:
        worktree = entry.xy[1:]
        if entry.kind == "untracked":
            action = "create"
        elif entry.kind == "unmerged":
            action = "resolve"
        elif worktree == "D":
            action = "delete"
        elif worktree != ".":
            action = "modify"
        else:
            continue
        path = git_path(entry.path)
        # git lists a folder it does not enter (a repository of its own) with a trailing `/`.
        rule = GIT_DIRECTORY_RULE.name if path.endswith("/") else protected_rule(workspace, path)
        if rule is not None:
            raise PolicyError(
                f"oct_git_add would stage a protected path (protected path rule: {rule}); name the other "
                "paths, or stage it yourself in a terminal"
            )
        staged.append(StagedFile(path=path, action=action))
    if len(staged) > STAGED_FILES_MAX:
        raise ExecutionError(f"more than {STAGED_FILES_MAX} files would be staged; stage fewer paths at once")
    if not staged:
        raise ExecutionError("nothing to stage: the paths have no changes git would add")
    return staged


def _add_preview(params: GitAddParams, env: ToolEnv) -> CommandPlan:
    workspace = env.workspace
    git = project_git(env)
    specs = pathspecs(workspace, params.paths)
    found: dict[str, list[StagedFile]] = {}

    def list_then_diff(run: RunResult) -> tuple[str, ...]:
        found["files"] = _shown(env, _to_stage(succeeded(run, "list the changes").stdout, workspace))
        tracked = [f.path for f in found["files"] if f.action != "create"]
        # Untracked files only: `git diff` has no patch for them, and without paths it diffs everything.
        return diff_arguments(paths=tracked) if tracked else ("version",)

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        files = found["files"]
        tracked = any(f.action != "create" for f in files)
        diff = (
            parse_diff(run.stdout, staged=False, truncated=run.truncated, context=PREVIEW_CONTEXT)
            if tracked
            else None
        )
        counts = {f.path: (f.added or 0, f.removed or 0) for f in (diff.files if diff else [])}
        changes = tuple(
            FileChange(path=f.path, action=f"stage ({f.action})", added=counts.get(f.path, (0, 0))[0],
                       removed=counts.get(f.path, (0, 0))[1])
            for f in files
        )  # fmt: skip
        text = (diff.diff if diff else "") + "".join(
            f"new file {f.path} (untracked; staged whole)\n" for f in files if f.action == "create"
        )
        preview = Preview(
            files=changes,
            diff=text,
            targets=file_targets(workspace, [f.path for f in files], INDEX_FILE),
        )
        output = GitAddOutput(files=files, applied=False)
        return ToolResult(text=_add_text(output), structured=output.model_dump(), preview=preview)

    # The patch of the tracked files: untracked ones have none in `git diff`.
    return steps_plan(git, [fixed_step(*status_arguments(specs, untracked=True)), list_then_diff], parse)


def _shown(env: ToolEnv, files: list[StagedFile]) -> list[StagedFile]:
    """The files to stage less those the rules withhold from the call (`ToolEnv.withheld`): `paths`
    naming a folder never stages, shows or diffs a file the model may not see."""
    withheld = env.withheld
    return files if withheld is None else [f for f in files if not withheld.hides(f.path)]


def _add_text(output: GitAddOutput) -> str:
    head = "staged" if output.applied else "dry run, nothing changed: would stage"
    return "\n".join(
        [f"{head} {len(output.files)} file(s):", *(f"  {f.action} {f.path}" for f in output.files)]
    )


def _plan_add(params: GitAddParams, env: ToolEnv) -> CommandPlan:
    if env.dry_run_for(params.dry_run):
        return _add_preview(params, env)
    workspace = env.workspace
    git = project_git(env, files=("index",), folders=("objects",), write=True)
    specs = pathspecs(workspace, params.paths)
    found: dict[str, list[StagedFile]] = {}

    def add(run: RunResult) -> tuple[str, ...]:
        files = _shown(env, _to_stage(succeeded(run, "list the changes").stdout, workspace))
        approved_only(
            [f.path for f in files],
            env.approved_targets,
            "files changed under the paths after the preview the user approved, so nothing was staged; "
            "call the tool again to preview the change as the files are now",
        )
        found["files"] = files
        # Exactly the files listed (and shown), never the folders they were found in.
        return ("add", "--", *(f.path for f in files))

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        output = GitAddOutput(files=found["files"], applied=True)
        return ToolResult(text=_add_text(output), structured=output.model_dump())

    return steps_plan(git, [fixed_step(*status_arguments(specs, untracked=True)), add], parse)


GIT_ADD: Final = ToolSpec(
    name="oct_git_add",
    title="Git add",
    description="Stage the changes (modified, new, deleted) under files or folders; never a protected path.",
    params=GitAddParams,
    output=GitAddOutput,
    risk=Risk.WRITE,
    plan=_plan_add,
    preview=_add_preview,
    idempotent=False,
    session_grants=False,
)
