"""oct_git_restore: discard the named paths' uncommitted changes, shown as the diff they lose."""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, Field

from oct_mcp.errors import (
    ExecutionError,
    PolicyError,
)
from oct_mcp.preview import FileChange, Preview
from oct_mcp.spec import CommandPlan, ProjectPath, Risk, RunResult, StrictParams, ToolEnv, ToolSpec
from oct_mcp.tools.edit.change_kit import CommandCheckpoint
from oct_mcp.tools.git.diff import parse_diff
from oct_mcp.tools.git.runner import (
    git_failed,
)
from oct_mcp.tools.git.write.checks import approved_only, refuse_fixed_entries, refuse_unreplaceable
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

__all__ = ["GIT_RESTORE", "GitRestoreOutput", "GitRestoreParams"]


class GitRestoreParams(StrictParams):
    paths: list[ProjectPath] = Field(min_length=1, max_length=PATHS_MAX)
    dry_run: bool | None = dry_run_field()


class GitRestoreOutput(BaseModel):
    files: list[str]
    applied: bool


def _restored(stdout: bytes, env: ToolEnv) -> list[str]:
    """What `git checkout-index` puts back of `git status --porcelain=v2 -z`: each tracked file changed,
    less those the rules withhold from the call (never shown, never discarded).

    Raises:
        PolicyError: A file is a protected path.
        ExecutionError: No file, or too many, to restore.
    """
    workspace, withheld = env.workspace, env.withheld
    files = []
    for entry in every_entry(stdout).entries:
        if entry.kind in ("untracked", "unmerged") or entry.xy[1:] == ".":
            continue
        path = git_path(entry.path)
        if withheld is not None and withheld.hides(path):
            continue
        rule = protected_rule(workspace, path)
        if rule is not None:
            raise PolicyError(f"oct_git_restore would change a protected path (protected path rule: {rule})")
        files.append(path)
    if len(files) > STAGED_FILES_MAX:
        raise ExecutionError(f"more than {STAGED_FILES_MAX} files would be restored; name fewer paths")
    if not files:
        raise ExecutionError("nothing to restore: the paths have no unstaged changes")
    return files


def _restore_preview(params: GitRestoreParams, env: ToolEnv) -> CommandPlan:
    workspace = env.workspace
    git = project_git(env)
    specs = pathspecs(workspace, params.paths)
    found: dict[str, list[str]] = {}

    def diff(run: RunResult) -> tuple[str, ...]:
        found["files"] = _restored(succeeded(run, "read the status").stdout, env)
        refuse_fixed_entries(env, found["files"], "restored")
        return diff_arguments(paths=found["files"])

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        lost = parse_diff(run.stdout, staged=False, truncated=run.truncated, context=PREVIEW_CONTEXT)
        files = found["files"]
        counts = {f.path: f for f in lost.files}
        changes = tuple(
            FileChange(
                path=path,
                action="discard changes",
                added=counts[path].removed or 0 if path in counts else 0,
                removed=counts[path].added or 0 if path in counts else 0,
            )
            for path in files
        )
        preview = Preview(
            files=changes,
            diff="The changes that would be lost:\n" + lost.diff,
            targets=file_targets(workspace, files, INDEX_FILE),
        )
        output = GitRestoreOutput(files=files, applied=False)
        text = f"dry run, nothing changed: would discard the changes to {len(files)} file(s):\n{lost.diff}"
        return ToolResult(text=text, structured=output.model_dump(), preview=preview)

    return steps_plan(git, [fixed_step(*status_arguments(specs, untracked=False)), diff], parse)


def _plan_restore(params: GitRestoreParams, env: ToolEnv) -> CommandPlan:
    if env.dry_run_for(params.dry_run):
        return _restore_preview(params, env)
    workspace = env.workspace
    git = project_git(env, files=("index",), write=True)
    specs = pathspecs(workspace, params.paths)
    found: dict[str, list[str]] = {}

    def restore(run: RunResult) -> tuple[str, ...]:
        files = _restored(succeeded(run, "read the status").stdout, env)
        approved_only(
            files,
            env.approved_targets,
            "files changed under the paths after the preview the user approved, so nothing was "
            "discarded; call the tool again to preview the change as the files are now",
        )
        refuse_fixed_entries(env, files, "restored")
        found["files"] = files
        checkpoint.before(files)
        return ("checkout-index", "--force", "--", *files)

    def parse(run: RunResult) -> ToolResult:
        checkpoint.settle()
        refuse_unreplaceable(run, "restored")
        if run.exit_code != 0:
            return git_failed(run)
        output = GitRestoreOutput(files=found["files"], applied=True)
        return checkpoint.noted(
            ToolResult(
                text=f"discarded the changes to {len(output.files)} file(s)", structured=output.model_dump()
            )
        )

    checkpoint = CommandCheckpoint(env, "oct_git_restore")

    return steps_plan(
        git,
        [fixed_step(*status_arguments(specs, untracked=False)), restore],
        parse,
        writes_project=True,
        after_failure=checkpoint.after_failure,
    )


GIT_RESTORE: Final = ToolSpec(
    name="oct_git_restore",
    title="Git restore (discard changes)",
    description="Discard the unstaged changes of files or folders; untracked files are kept.",
    params=GitRestoreParams,
    output=GitRestoreOutput,
    risk=Risk.WRITE,
    plan=_plan_restore,
    preview=_restore_preview,
    idempotent=False,
    session_grants=False,
)
