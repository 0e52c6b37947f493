"""git as the write tools run it: on private copies of HEAD and the index, in steps, each
checked, with the options that keep a write from starting anything of its own."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import Field

from oct_mcp.errors import (
    ExecutionError,
    GitLayoutRefusedError,
)
from oct_mcp.execution.git_state import is_real_folder
from oct_mcp.preview import TargetState, content_digest
from oct_mcp.protected import ProtectedPaths
from oct_mcp.spec import CommandPlan, GitWrites, NextCommand, RunResult, ToolEnv
from oct_mcp.tools._project.programs import find_server_program
from oct_mcp.tools.git.layout import git_layout
from oct_mcp.tools.git.masks import WHOLE_FILE
from oct_mcp.tools.git.runner import (
    CONFIG_NAMES_LISTING,
    GIT_ENVIRONMENT,
    GIT_SAFETY_OPTIONS,
    filter_overrides,
    listed_filter_names,
)
from oct_mcp.tools.git.status import STATUS_MAX_ENTRIES, StatusOutput, parse_status
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "HEAD_FILE",
    "INDEX_FILE",
    "PATHS_MAX",
    "PREVIEW_CONTEXT",
    "STAGED_FILES_MAX",
    "SUBMODULES_OPTION",
    "Step",
    "diff_arguments",
    "dry_run_field",
    "every_entry",
    "file_targets",
    "fixed_step",
    "git_path",
    "pathspecs",
    "project_git",
    "protected_rule",
    "status_arguments",
    "steps_plan",
    "succeeded",
]

PATHS_MAX: Final = 100


# Context lines of a preview's hunks, as git's own default.
PREVIEW_CONTEXT: Final = 3


STAGED_FILES_MAX: Final = 1_000


# Beyond the read tools' options: what a write could otherwise start on its own.
_WRITE_OPTIONS: Final = (
    "-c",
    "commit.gpgSign=false",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    # No transport of any kind: a lazy fetch of a partial clone would run remote.*.uploadpack.
    "-c",
    "protocol.allow=never",
    "-c",
    "submodule.recurse=false",
    "-c",
    "branch.autoSetupMerge=false",
    "-c",
    "core.splitIndex=false",
    "-c",
    "advice.detachedHead=false",
)


INDEX_FILE: Final = ".git/index"


HEAD_FILE: Final = ".git/HEAD"


def dry_run_field() -> bool | None:
    return Field(default=None, description="Unset: the server's default.")


@dataclass(frozen=True, slots=True)
class _Git:
    """The server's git for this project: read-only on the git folder, or on private copies (`writes`)."""

    program: str
    root: Path
    git_dir: Path
    writes: GitWrites | None = None
    identity: tuple[str, ...] = ()

    def argv(self, names: frozenset[str], *arguments: str) -> tuple[str, ...]:
        # With writes, the sandbox sets GIT_DIR to the private copies: --git-dir would override it.
        where = () if self.writes is not None else (f"--git-dir={self.git_dir}",)
        return (
            self.program,
            *GIT_SAFETY_OPTIONS,
            *_WRITE_OPTIONS,
            *self.identity,
            *filter_overrides(names),
            *where,
            f"--work-tree={self.root}",
            *arguments,
        )


def project_git(
    env: ToolEnv,
    *,
    files: tuple[str, ...] = (),
    folders: tuple[str, ...] = (),
    identity: tuple[str, str] | None = None,
    write: bool = False,
) -> _Git:
    """git for the project's own git folder (a linked worktree or a submodule is refused for writes).

    Raises:
        NotFoundError, GitLayoutRefusedError: As `git_layout`; a git folder outside the project.
    """
    root = env.workspace.root
    layout = git_layout(root)
    if layout.binds or layout.common_dir != layout.git_dir:
        raise GitLayoutRefusedError(
            "the git write tools work on a checkout whose git folder is its own .git folder; a linked "
            "worktree or a submodule is not supported: run git in a terminal there"
        )
    _refuse_unfinished(layout.git_dir)
    writes = None
    if write:
        # HEAD always: git takes a folder as a git folder only with a HEAD in it.
        writes = GitWrites(git_dir=layout.git_dir, files=tuple(sorted({"HEAD", *files})), folders=folders)
    options: tuple[str, ...] = ()
    if identity is not None:
        name, email = identity
        options = ("-c", f"user.name={name}", "-c", f"user.email={email}")
    writes_logs = "logs" in folders or any(name.startswith("logs/") for name in files)
    if write and writes_logs and not is_real_folder(layout.git_dir, "logs"):
        # The logs folder cannot be made in the read-only git folder, and a reflog git wrote without
        # one could not be installed: no new reflog, as git allows.
        options += ("-c", "core.logAllRefUpdates=false")
    return _Git(str(find_server_program(root, "git")), root, layout.git_dir, writes, options)


# Per-worktree state the private copies would leave behind: a commit would drop a merge's second
# parent, a switch would ignore the sparse patterns.
_UNFINISHED: Final = (
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "BISECT_LOG",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
    "info/sparse-checkout",
)


def _refuse_unfinished(git_dir: Path) -> None:
    """Raises:
    GitLayoutRefusedError: A merge, rebase, cherry-pick, revert or bisect is under way, or the
        checkout is sparse: the git write tools do not handle those; a terminal does.
    """
    if any(os.path.lexists(git_dir / name) for name in _UNFINISHED):
        raise GitLayoutRefusedError(
            "a merge, rebase, cherry-pick, revert or bisect is under way in this repository, or its "
            "checkout is sparse; the git write tools handle neither: finish it with git in a terminal"
        )


Step = Callable[[RunResult], tuple[str, ...]]
"""Given the output of the command before it, a step's git arguments."""


def steps_plan(
    git: _Git,
    steps: Sequence[Step],
    parse: Callable[[RunResult], ToolResult],
    *,
    writes_project: bool = False,
    after_failure: Callable[[], str | None] | None = None,
) -> CommandPlan:
    """git's config names listed first (each filter driver is switched off), then each step in turn."""
    listed: dict[str, frozenset[str]] = {}

    def step_at(index: int) -> Callable[[RunResult], tuple[str, ...] | NextCommand]:
        def then(run: RunResult) -> tuple[str, ...] | NextCommand:
            if index == 0:
                listed["names"] = listed_filter_names(run)
            argv = git.argv(listed["names"], *steps[index](run))
            return argv if index + 1 == len(steps) else NextCommand(argv=argv, then=step_at(index + 1))

        return then

    return CommandPlan(
        argv=git.argv(frozenset(), *CONFIG_NAMES_LISTING),
        then=step_at(0),
        parse=parse,
        writes_project=writes_project,
        after_failure=after_failure,
        tool_env=(("GIT_COMMON_DIR", str(git.git_dir)), *GIT_ENVIRONMENT),
        git_writes=git.writes,
        # git, not project code, with fixed arguments: a commit of a masked copy would commit the masks.
        masks_secret_files=False,
        resolves_localhost=False,
    )


def fixed_step(*arguments: str) -> Step:
    return lambda _run: arguments


def succeeded(run: RunResult, what: str) -> RunResult:
    """Raises:
    ExecutionError: A step of git failed: the call stops with what git said.
    """
    if run.exit_code != 0 or run.truncated:
        detail = run.stderr.decode(errors="replace").strip()[-2_000:]
        raise ExecutionError(
            f"git could not {what} (exit code {run.exit_code}); nothing was changed: {detail}"
        )
    return run


def every_entry(stdout: bytes) -> StatusOutput:
    """`git status --porcelain=v2 -z` parsed whole.

    Raises:
        ExecutionError: It lists more entries than are parsed: a write must not act on part of them.
    """
    status = parse_status(stdout, 0)
    if status.truncated:
        raise ExecutionError(
            f"git lists more than {STATUS_MAX_ENTRIES} changed files; name fewer paths, or use a terminal"
        )
    return status


def protected_rule(workspace: Workspace, relative: str) -> str | None:
    rule = ProtectedPaths(root=workspace.root).rule_for(workspace.root / relative)
    return None if rule is None else rule.name


def git_path(relative: str) -> str:
    """A path as git printed it (`-z`, relative to the root), checked to stay a plain relative path.

    A folder (a nested repository, untracked) ends with `/`.
    """
    parts = relative.removesuffix("/").split("/")
    if not relative or relative.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ExecutionError("git named a path that is no plain path in the project; nothing was changed")
    return relative


def file_targets(workspace: Workspace, paths: Sequence[str], *extra: str) -> tuple[TargetState, ...]:
    return tuple(TargetState(path=path, digest=content_digest(workspace, path)) for path in (*paths, *extra))


# What a write lists and shows includes a submodule's recorded commit (a gitlink): a commit takes
# every staged gitlink, so hiding them (`all`) let one be committed unseen and past the protected
# paths. `dirty` still never looks inside a submodule's work tree, where git would run that
# repository's own configuration (its fsmonitor) to find changes; `none` would.
SUBMODULES_OPTION: Final = "--ignore-submodules=dirty"


def status_arguments(
    paths: Sequence[str] | None = None, *, untracked: bool, branch: bool = False
) -> tuple[str, ...]:
    """`git status` as `every_entry` reads it: porcelain v2, NUL-separated, no renames; a submodule
    whose recorded commit changed is an entry (`SUBMODULES_OPTION`)."""
    return (
        "status",
        "--porcelain=v2",
        *(["--branch"] if branch else []),
        "-z",
        f"--untracked-files={'all' if untracked else 'no'}",
        SUBMODULES_OPTION,
        "--no-renames",
        *([] if paths is None else ["--", *paths]),
    )


def pathspecs(workspace: Workspace, paths: Sequence[str]) -> list[str]:
    specs = []
    for path in paths:
        workspace.contain(path)
        lexical = Path(os.path.normpath(workspace.root / path))
        specs.append(lexical.relative_to(workspace.root).as_posix() or ".")
    return specs


def diff_arguments(*revisions: str, cached: bool = False, paths: Sequence[str] = ()) -> tuple[str, ...]:
    return (
        "diff",
        *(["--cached"] if cached else []),
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--no-relative",
        "--no-renames",
        "--numstat",
        "--patch",
        "-z",
        "--submodule=short",
        SUBMODULES_OPTION,
        "--src-prefix=a/",
        "--dst-prefix=b/",
        # Each file whole: the preview's hunks are masked with the whole file as context (`parse_diff`).
        f"--unified={WHOLE_FILE}",
        *revisions,
        "--",
        *paths,
    )
