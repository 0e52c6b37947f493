"""oct_git_add, oct_git_commit, oct_git_branch, oct_git_switch, oct_git_restore: git writes, each shown first.

Each previews its change read-only (what would be staged, committed, switched or discarded, with
the diff) and binds the consent to the files it reads: the work-tree files it stages or discards
and the git folder's `HEAD` and `index`. The write itself runs the server's git in the sandbox with
the safety options of the read tools and more (no signing, no auto gc or maintenance, no transport
at all, so nothing fetches or pushes), and without any right on the project's git folder itself:
git works on private copies of HEAD and the index (`GitWrites`), which the sandbox installs
afterwards; only the data folders (`objects`, `refs`, `logs`) are writable. Hooks never run:
`core.hooksPath` points at nothing, and the hooks folder stays read-only. A switch or restore
that would replace a file where the sandbox's backend cannot make or remove one (landlock: at
the project root) is refused before git runs, never left half done.

Protected paths and a commit: `oct_git_add` never stages a protected path (CI pipelines, hook
managers' configs, agent configs: `protected.py`), named or inside a folder it is given. A commit
lists every staged path in its question, protected ones marked; it commits a staged protected
path only when a human approved that question (the path is one of the approved targets): with a
bare `confirm=true`, or with nobody shown the list, it is refused. Nothing pushes or fetches.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from oct_mcp.backends import EntryRights
from oct_mcp.errors import (
    ChangesWouldBeLostError,
    ExecutionError,
    GitIdentityMissingError,
    GitLayoutRefusedError,
    PolicyError,
    SandboxUnavailableError,
    TargetChangedError,
)
from oct_mcp.execution.git_state import is_real_folder
from oct_mcp.execution.protected_walk import SNAPSHOT_MAX_ENTRIES, ProjectTooLargeError, snapshot_protected
from oct_mcp.preview import ABSENT, FileChange, Preview, TargetState, commit_target, content_digest
from oct_mcp.protected import GIT_DIRECTORY_RULE, ProtectedPaths
from oct_mcp.spec import CommandPlan, GitWrites, NextCommand, ProjectPath, Risk, RunResult, ToolEnv, ToolSpec
from oct_mcp.tools.change_kit import CommandCheckpoint
from oct_mcp.tools.git import (
    CONFIG_NAMES_LISTING,
    GIT_ENVIRONMENT,
    GIT_SAFETY_OPTIONS,
    STATUS_MAX_ENTRIES,
    StatusOutput,
    filter_overrides,
    git_failed,
    git_layout,
    listed_filter_names,
    parse_diff,
    parse_status,
)
from oct_mcp.tools.git_masks import WHOLE_FILE
from oct_mcp.tools.git_refs import GitRef, verified_commit, verify_arguments
from oct_mcp.tools.programs import find_server_program
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "GIT_ADD",
    "GIT_BRANCH",
    "GIT_COMMIT",
    "GIT_RESTORE",
    "GIT_SWITCH",
    "check_branch_name",
    "check_message",
    "user_identity",
]

PATHS_MAX: Final = 100
# Context lines of a preview's hunks, as git's own default.
PREVIEW_CONTEXT: Final = 3
STAGED_FILES_MAX: Final = 1_000
MESSAGE_MAX: Final = 10_000
IDENTITY_MAX: Final = 256
_CONFIG_MAX_BYTES: Final = 1_048_576
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
_INDEX: Final = ".git/index"
_HEAD: Final = ".git/HEAD"
_BRANCH_SHOWN: Final = "refs/heads/"
_LOST_FILE: Final = re.compile(r"^\t(.+)$", re.MULTILINE)


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _dry_run_field() -> bool | None:
    return Field(default=None, description="Unset: the server's default.")


# -- the user's identity -------------------------------------------------------------------------


def user_identity(host: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """The user's `user.name` and `user.email` from their own git config files, read here as text.

    `$XDG_CONFIG_HOME/git/config` (or `~/.config/git/config`), then `~/.gitconfig`, the later
    winning, as git reads them; only the `[user]` section's plain values. Includes, conditional
    includes and every other setting are not followed: the values are passed to git with `-c`,
    and git itself never reads the global config.
    """
    source = os.environ if host is None else host
    home = source.get("HOME", "")
    if not os.path.isabs(home):
        return None
    xdg = source.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(home) / ".config"
    found: dict[str, str] = {}
    for config in (base / "git" / "config", Path(home) / ".gitconfig"):
        found.update(_user_values(config))
    name, email = found.get("name"), found.get("email")
    if not name or not email:
        return None
    return name, email


_SECTION: Final = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)\s*("[^"]*")?\s*\]\s*(?:[#;].*)?$')
_ENTRY: Final = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*=\s*(.*?)\s*$")


def _user_values(config: Path) -> dict[str, str]:
    try:
        with config.open("rb") as handle:
            text = handle.read(_CONFIG_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return {}
    section: str | None = None
    values: dict[str, str] = {}
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header is not None:
            section = header.group(1).lower() if header.group(2) is None else None
            continue
        entry = _ENTRY.match(line) if section == "user" else None
        if entry is None:
            continue
        key, value = entry.group(1).lower(), _config_value(entry.group(2))
        if key in ("name", "email") and value is not None and _plain_identity(value):
            values[key] = value
    return values


def _config_value(raw: str) -> str | None:
    """A git config value: quotes removed, `#`/`;` comments cut outside them; None for an escape."""
    out: list[str] = []
    quoted = False
    for char in raw:
        if char == '"':
            quoted = not quoted
        elif char == "\\":
            return None  # escapes and continuations are not understood: better no value than a wrong one
        elif char in "#;" and not quoted:
            break
        else:
            out.append(char)
    return None if quoted else "".join(out).strip()


def _plain_identity(value: str) -> bool:
    return 0 < len(value) <= IDENTITY_MAX and value.isprintable() and not any(c in value for c in "<>")


# -- git as the write tools run it ----------------------------------------------------------------


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


def _git(
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


def _plan(
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


def _fixed(*arguments: str) -> Step:
    return lambda _run: arguments


def _succeeded(run: RunResult, what: str) -> RunResult:
    """Raises:
    ExecutionError: A step of git failed: the call stops with what git said.
    """
    if run.exit_code != 0 or run.truncated:
        detail = run.stderr.decode(errors="replace").strip()[-2_000:]
        raise ExecutionError(
            f"git could not {what} (exit code {run.exit_code}); nothing was changed: {detail}"
        )
    return run


def _every_entry(stdout: bytes) -> StatusOutput:
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


def _protected_rule(workspace: Workspace, relative: str) -> str | None:
    rule = ProtectedPaths(root=workspace.root).rule_for(workspace.root / relative)
    return None if rule is None else rule.name


def _git_path(relative: str) -> str:
    """A path as git printed it (`-z`, relative to the root), checked to stay a plain relative path.

    A folder (a nested repository, untracked) ends with `/`.
    """
    parts = relative.removesuffix("/").split("/")
    if not relative or relative.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ExecutionError("git named a path that is no plain path in the project; nothing was changed")
    return relative


def _file_targets(workspace: Workspace, paths: Sequence[str], *extra: str) -> tuple[TargetState, ...]:
    return tuple(TargetState(path=path, digest=content_digest(workspace, path)) for path in (*paths, *extra))


# -- oct_git_add ---------------------------------------------------------------------------------


class GitAddParams(_Params):
    paths: list[ProjectPath] = Field(min_length=1, max_length=PATHS_MAX)
    dry_run: bool | None = _dry_run_field()


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
    for entry in _every_entry(stdout).entries:
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
        path = _git_path(entry.path)
        # git lists a folder it does not enter (a repository of its own) with a trailing `/`.
        rule = GIT_DIRECTORY_RULE.name if path.endswith("/") else _protected_rule(workspace, path)
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


# What a write lists and shows includes a submodule's recorded commit (a gitlink): a commit takes
# every staged gitlink, so hiding them (`all`) let one be committed unseen and past the protected
# paths. `dirty` still never looks inside a submodule's work tree, where git would run that
# repository's own configuration (its fsmonitor) to find changes; `none` would.
_SUBMODULES: Final = "--ignore-submodules=dirty"


def _status_arguments(
    paths: Sequence[str] | None = None, *, untracked: bool, branch: bool = False
) -> tuple[str, ...]:
    """`git status` as `_every_entry` reads it: porcelain v2, NUL-separated, no renames; a submodule
    whose recorded commit changed is an entry (`_SUBMODULES`)."""
    return (
        "status",
        "--porcelain=v2",
        *(["--branch"] if branch else []),
        "-z",
        f"--untracked-files={'all' if untracked else 'no'}",
        _SUBMODULES,
        "--no-renames",
        *([] if paths is None else ["--", *paths]),
    )


def _pathspecs(workspace: Workspace, paths: Sequence[str]) -> list[str]:
    specs = []
    for path in paths:
        workspace.contain(path)
        lexical = Path(os.path.normpath(workspace.root / path))
        specs.append(lexical.relative_to(workspace.root).as_posix() or ".")
    return specs


def _diff_arguments(*revisions: str, cached: bool = False, paths: Sequence[str] = ()) -> tuple[str, ...]:
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
        _SUBMODULES,
        "--src-prefix=a/",
        "--dst-prefix=b/",
        # Each file whole: the preview's hunks are masked with the whole file as context (`parse_diff`).
        f"--unified={WHOLE_FILE}",
        *revisions,
        "--",
        *paths,
    )


def _add_preview(params: GitAddParams, env: ToolEnv) -> CommandPlan:
    workspace = env.workspace
    git = _git(env)
    specs = _pathspecs(workspace, params.paths)
    found: dict[str, list[StagedFile]] = {}

    def list_then_diff(run: RunResult) -> tuple[str, ...]:
        found["files"] = _shown(env, _to_stage(_succeeded(run, "list the changes").stdout, workspace))
        tracked = [f.path for f in found["files"] if f.action != "create"]
        # Untracked files only: `git diff` has no patch for them, and without paths it diffs everything.
        return _diff_arguments(paths=tracked) if tracked else ("version",)

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
            targets=_file_targets(workspace, [f.path for f in files], _INDEX),
        )
        output = GitAddOutput(files=files, applied=False)
        return ToolResult(text=_add_text(output), structured=output.model_dump(), preview=preview)

    # The patch of the tracked files: untracked ones have none in `git diff`.
    return _plan(git, [_fixed(*_status_arguments(specs, untracked=True)), list_then_diff], parse)


def _shown(env: ToolEnv, files: list[StagedFile]) -> list[StagedFile]:
    """The files to stage less those the rules withhold from the call (`ToolEnv.withheld`): `paths`
    naming a folder never stages, shows or diffs a file the model may not see."""
    withheld = env.withheld
    return files if withheld is None else [f for f in files if not withheld.hides(f.path)]


def _no_withheld(env: ToolEnv, paths: Sequence[str], *, which: str, fix: str) -> None:
    """Refuse a commit or a switch that takes files the rules withhold from the call: its question and
    result could not show them, and a human must see every file a change takes.

    Raises:
        PolicyError: Naming how many, not which.
    """
    withheld = env.withheld
    count = 0 if withheld is None else sum(1 for path in paths if withheld.hides(path))
    if count:
        raise PolicyError(
            f"{count} {which} are paths the rules keep from this call, and the change must show every "
            f"file it takes, so nothing was done; {fix}"
        )


def _no_withheld_staged(env: ToolEnv, staged: Sequence[str]) -> None:
    _no_withheld(
        env,
        staged,
        which="staged file(s)",
        fix="unstage them in a terminal (git restore --staged PATH) or commit there",
    )


def _no_withheld_switched(env: ToolEnv, changed: Sequence[str]) -> None:
    _no_withheld(env, changed, which="file(s) the switch would change", fix="switch in a terminal")


def _add_text(output: GitAddOutput) -> str:
    head = "staged" if output.applied else "dry run, nothing changed: would stage"
    return "\n".join(
        [f"{head} {len(output.files)} file(s):", *(f"  {f.action} {f.path}" for f in output.files)]
    )


def _approved_only(paths: Sequence[str], approved: tuple[TargetState, ...] | None, refusal: str) -> None:
    """Refuse a write to a path the preview the human approved did not show; no check without one.

    Raises:
        TargetChangedError: With `refusal`, which says what was left undone.
    """
    if approved is None:
        return
    shown = {target.path for target in approved if not target.is_commit}
    if any(path not in shown for path in paths):
        raise TargetChangedError(refusal)


def _bound_commit(env: ToolEnv, ref: str, commit: str | None, refusal: str) -> None:
    """Refuse a consented write unless `ref` still names the commit the approved question showed.

    Raises:
        TargetChangedError: With `refusal`, which says what was left undone.
    """
    if env.approved_targets is not None and commit_target(ref, commit) not in env.approved_targets:
        raise TargetChangedError(refusal)


def _plan_add(params: GitAddParams, env: ToolEnv) -> CommandPlan:
    if env.dry_run_for(params.dry_run):
        return _add_preview(params, env)
    workspace = env.workspace
    git = _git(env, files=("index",), folders=("objects",), write=True)
    specs = _pathspecs(workspace, params.paths)
    found: dict[str, list[StagedFile]] = {}

    def add(run: RunResult) -> tuple[str, ...]:
        files = _shown(env, _to_stage(_succeeded(run, "list the changes").stdout, workspace))
        _approved_only(
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

    return _plan(git, [_fixed(*_status_arguments(specs, untracked=True)), add], parse)


# -- oct_git_commit ------------------------------------------------------------------------------


def check_message(value: str) -> str:
    """The message as committed: line ends made `\n`, trailing spaces and blank edges cut.

    Raises:
        ValueError: It is empty, or holds control or format characters (a tab aside).
    """
    text = "\n".join(line.rstrip() for line in value.replace("\r\n", "\n").split("\n")).strip("\n")
    if not text.strip():
        raise ValueError("the commit message is empty")
    if any(char not in "\n\t" and not char.isprintable() for char in text):
        raise ValueError("the commit message holds control or format characters")
    return text


class GitCommitParams(_Params):
    message: Annotated[str, AfterValidator(check_message)] = Field(
        min_length=1,
        max_length=MESSAGE_MAX,
    )
    dry_run: bool | None = _dry_run_field()


class GitCommitOutput(BaseModel):
    branch: str
    parent: str | None
    """The commit the new one follows; None for the first commit."""
    files: list[str]
    added: int
    """Lines the staged changes add (in a dry run; 0 once committed)."""
    removed: int
    message: str
    author: str
    commit: str | None = None
    """The new commit's id, once made."""
    applied: bool


@dataclass
class _Head:
    branch: str | None = None
    commit: str | None = None
    staged: list[str] = field(default_factory=list)


def _head_and_staged(stdout: bytes) -> _Head:
    status = _every_entry(stdout)
    staged = [
        _git_path(e.path) for e in status.entries if e.kind != "untracked" and e.xy[:1] not in (".", "?")
    ]
    return _Head(branch=status.branch, commit=status.commit, staged=staged)


def _read_head(head: _Head, run: RunResult) -> None:
    """Fill `head` from the branch status: the branch, its commit and the staged files.

    Raises:
        ExecutionError: HEAD is detached, or nothing is staged.
    """
    found = _head_and_staged(_succeeded(run, "read the status").stdout)
    head.branch, head.commit, head.staged = found.branch, found.commit, found.staged
    if head.branch is None:
        raise ExecutionError("HEAD is detached; switch to a branch first (oct_git_switch), then commit")
    if not head.staged:
        raise ExecutionError("nothing is staged to commit; stage changes first with oct_git_add")


def _identity_or_refuse() -> tuple[str, str]:
    identity = user_identity()
    if identity is None:
        raise GitIdentityMissingError(
            "a commit needs your name and email, and your git config (~/.gitconfig) has no plain "
            "user.name and user.email; set them with git config --global user.name and user.email"
        )
    return identity


def _commit_preview(params: GitCommitParams, env: ToolEnv) -> CommandPlan:
    workspace = env.workspace
    identity = _identity_or_refuse()
    git = _git(env)
    head = _Head()

    def diff(run: RunResult) -> tuple[str, ...]:
        _read_head(head, run)
        _no_withheld_staged(env, head.staged)
        return _diff_arguments(cached=True)

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        staged = parse_diff(run.stdout, staged=True, truncated=run.truncated, context=PREVIEW_CONTEXT)
        changes = []
        for f in staged.files:
            rule = _protected_rule(workspace, f.path)
            action = "commit" if rule is None else f"commit a protected path (rule {rule})"
            changes.append(FileChange(path=f.path, action=action, added=f.added or 0, removed=f.removed or 0))
        message = params.message
        shown = f"commit on {head.branch} after {head.commit or '(the first commit)'}\n" + "".join(
            f"  {line}\n" for line in message.split("\n")
        )
        preview = Preview(
            files=tuple(changes),
            diff=f"{shown}\n{staged.diff}",
            targets=(
                *_file_targets(workspace, [c.path for c in changes], _HEAD, _INDEX),
                commit_target("HEAD", head.commit),
            ),
        )
        output = GitCommitOutput(
            branch=head.branch or "",
            parent=head.commit,
            files=[c.path for c in changes],
            added=staged.added,
            removed=staged.removed,
            message=message,
            author=f"{identity[0]} <{identity[1]}>",
            applied=False,
        )
        return ToolResult(text=_commit_text(output), structured=output.model_dump(), preview=preview)

    return _plan(git, [_fixed(*_status_arguments(untracked=False, branch=True)), diff], parse)


def _commit_text(output: GitCommitOutput) -> str:
    head = (
        f"committed {output.commit[:12]} on {output.branch}"
        if output.applied and output.commit
        else f"dry run, nothing changed: would commit on {output.branch}"
    )
    counts = "" if output.applied else f", +{output.added} -{output.removed}"
    lines = [
        f"{head}, {len(output.files)} file(s){counts}, as {output.author}:",
        *(f"  {path}" for path in output.files),
        "",
        output.message,
    ]
    return "\n".join(lines)


def _plan_commit(params: GitCommitParams, env: ToolEnv) -> CommandPlan:
    if env.dry_run_for(params.dry_run):
        return _commit_preview(params, env)
    workspace = env.workspace
    identity = _identity_or_refuse()
    git = _git(
        env, files=("index", "logs/HEAD"), folders=("objects", "refs", "logs"), identity=identity, write=True
    )
    message = params.message
    head = _Head()

    def commit(run: RunResult) -> tuple[str, ...]:
        _read_head(head, run)
        _no_withheld_staged(env, head.staged)
        _bound_commit(
            env,
            "HEAD",
            head.commit,
            "the branch moved to another commit after the question the user approved, so nothing was "
            "committed; call the tool again to preview the commit as it is now",
        )
        shown = {t.path for t in env.approved_targets} if env.approved_targets is not None else set()
        for path in head.staged:
            rule = _protected_rule(workspace, path)
            if rule is not None and path not in shown:
                raise PolicyError(
                    f"a protected path is staged (protected path rule: {rule}), and no human approved a "
                    "question that listed it; commit it yourself, or through a client that can ask you"
                )
        return (
            "commit",
            "--no-verify",
            "--no-gpg-sign",
            "--no-edit",
            "--cleanup=whitespace",
            "--quiet",
            f"--message={message}",
        )

    def made(run: RunResult) -> tuple[str, ...]:
        _succeeded(run, "commit")
        return ("rev-parse", "--verify", "--quiet", "HEAD")

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        output = GitCommitOutput(
            branch=head.branch or "",
            parent=head.commit,
            files=head.staged,
            added=0,
            removed=0,
            message=message,
            author=f"{identity[0]} <{identity[1]}>",
            commit=run.stdout.decode("ascii", errors="replace").strip(),
            applied=True,
        )
        return ToolResult(text=_commit_text(output), structured=output.model_dump())

    return _plan(git, [_fixed(*_status_arguments(untracked=False, branch=True)), commit, made], parse)


# -- oct_git_branch ------------------------------------------------------------------------------

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


class GitBranchParams(_Params):
    name: BranchName = Field()
    start: GitRef | None = Field(default=None)
    dry_run: bool | None = _dry_run_field()


class GitBranchOutput(BaseModel):
    branch: str
    commit: str
    applied: bool


def _branch_file(name: str) -> str:
    return f".git/refs/heads/{name}"


def _branch_plan(params: GitBranchParams, env: ToolEnv, *, preview: bool) -> CommandPlan:
    git = _git(env) if preview else _git(env, folders=("refs", "logs"), write=True)
    start = params.start or "HEAD"
    resolved: dict[str, str] = {}

    def exists(run: RunResult) -> tuple[str, ...]:
        resolved["commit"] = verified_commit(run, "start")
        if not preview:
            _bound_commit(
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

    steps: list[Step] = [_fixed(*verify_arguments(start)), exists]
    if not preview:
        steps.append(create)
    return _plan(git, steps, parse)


def _preview_branch(params: GitBranchParams, env: ToolEnv) -> CommandPlan:
    return _branch_plan(params, env, preview=True)


def _plan_branch(params: GitBranchParams, env: ToolEnv) -> CommandPlan:
    return _branch_plan(params, env, preview=env.dry_run_for(params.dry_run))


# -- oct_git_switch ------------------------------------------------------------------------------


class GitSwitchParams(_Params):
    branch: BranchName = Field()
    dry_run: bool | None = _dry_run_field()


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
    git = _git(env)
    found: dict[str, str] = {}
    local: list[str] = []

    def local_changes(run: RunResult) -> tuple[str, ...]:
        found["commit"] = verified_commit(run, "branch")
        return _status_arguments(untracked=True)

    def switched_files(run: RunResult) -> tuple[str, ...]:
        status = _every_entry(_succeeded(run, "read the status").stdout)
        local.extend(_git_path(e.path) for e in status.entries)
        return _diff_arguments("HEAD", found["commit"])

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        diff = parse_diff(run.stdout, staged=False, truncated=run.truncated, context=PREVIEW_CONTEXT)
        changed = [_git_path(f.path) for f in diff.files]
        _no_withheld_switched(env, changed)
        lost = sorted(set(changed) & set(local))
        if lost:
            raise _would_lose(lost)
        _refuse_protected_switch(workspace, changed)
        _refuse_fixed_entries(env, changed, "switched")
        commit = found["commit"]
        output = GitSwitchOutput(branch=params.branch, commit=commit, files=changed, applied=False)
        preview = Preview(
            files=tuple(
                FileChange(path=f.path, action="switch", added=f.added or 0, removed=f.removed or 0)
                for f in diff.files
            ),
            diff=f"switch to {params.branch} at {commit}\n\n{diff.diff}",
            targets=(
                *_file_targets(workspace, changed, _HEAD, _INDEX),
                commit_target(f"refs/heads/{params.branch}", commit),
            ),
        )
        text = (
            f"dry run, nothing changed: would switch to {params.branch} ({commit[:12]}), "
            f"{len(changed)} file(s) change"
        )
        return ToolResult(text=text, structured=output.model_dump(), preview=preview)

    steps: list[Step] = [
        _fixed(*verify_arguments(f"refs/heads/{params.branch}")),
        local_changes,
        switched_files,
    ]
    return _plan(git, steps, parse)


def _plan_switch(params: GitSwitchParams, env: ToolEnv) -> CommandPlan:
    if env.dry_run_for(params.dry_run):
        return _switch_preview(params, env)
    workspace = env.workspace
    git = _git(env, files=("index", "logs/HEAD"), write=True)
    found: dict[str, str] = {}

    def changed_files(run: RunResult) -> tuple[str, ...]:
        found["commit"] = verified_commit(run, "branch")
        _bound_commit(
            env,
            f"refs/heads/{params.branch}",
            found["commit"],
            "the branch points at another commit than the question the user approved showed, so "
            "nothing was switched; call the tool again to preview the switch as it is now",
        )
        return (
            "diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--name-only", "-z",
            _SUBMODULES, "HEAD", found["commit"], "--",
        )  # fmt: skip

    def switch(run: RunResult) -> tuple[str, ...]:
        changed = [
            _git_path(os.fsdecode(raw)) for raw in _succeeded(run, "compare").stdout.split(b"\0") if raw
        ]
        _no_withheld_switched(env, changed)
        _refuse_protected_switch(workspace, changed)
        _refuse_fixed_entries(env, changed, "switched")
        _approved_only(
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
        _refuse_unreplaceable(run, "switched")
        if run.exit_code != 0:
            return git_failed(run)
        output = GitSwitchOutput(branch=params.branch, commit=found["commit"], files=[], applied=True)
        return checkpoint.noted(
            ToolResult(
                text=f"switched to {params.branch} ({found['commit'][:12]})", structured=output.model_dump()
            )
        )

    checkpoint = CommandCheckpoint(env, "oct_git_switch")
    steps: list[Step] = [_fixed(*verify_arguments(f"refs/heads/{params.branch}")), changed_files, switch]
    return _plan(git, steps, parse, writes_project=True, after_failure=checkpoint.after_failure)


# A switch or restore whose git would make or remove an entry where the backend allows none is
# refused before git runs. git does not stop there: it warns, carries on with the other files and,
# for a switch, exits 0 and moves HEAD, leaving the files it could not replace as they were (a
# work tree neither of the old branch nor of the new). Repairing afterwards would need the very
# rights the run lacked, or writes by the server outside the sandbox, and git's exit code does not
# even say when; a right on the folder itself would, under Landlock's rules on a folder's whole
# contents, be one on every entry of the root, `.git` included, which the check of protected paths
# after the run only notices once it is done. So the backend says where it can make entries
# (`ToolEnv.entry_rights`), and the plan keeps to that.
def _refuse_fixed_entries(env: ToolEnv, changed: Sequence[str], done: str) -> None:
    """Raises:
    SandboxUnavailableError: Changing one of the files needs an entry made or removed in a folder
        where the sandbox's backend lets a run only write into files; nothing has run yet.
    """
    root = env.workspace.root
    rights = env.entry_rights
    # Without CLEAR_FOLDERS only the protected paths themselves are fixed, refused by rule before this.
    protected = () if rights is EntryRights.WRITABLE_FOLDERS else _protected_paths(root)
    stuck = [
        path
        for path in changed
        if any(rights.fixed(folder, root, protected) for folder in _entry_folders(root, path))
    ]
    if stuck:
        shown = ", ".join(stuck[:20]) + (f" and {len(stuck) - 20} more" if len(stuck) > 20 else "")
        raise SandboxUnavailableError(
            f"this sandbox backend cannot replace {len(stuck)} of the files the change touches: {shown}; "
            "it makes and removes files only in folders below the project root that hold no protected "
            f"path, so nothing was {done}: use git in a terminal, or a sandbox backend that binds the "
            "project whole (bubblewrap)"
        )


def _entry_folders(root: Path, relative: str) -> list[Path]:
    """The folders git makes or removes an entry in to replace, make or delete `relative`: the one
    it lies in, and each above that git must make first (missing from the work tree, or no folder).

    A folder a deletion leaves empty is removed too, but git leaves it, unsaid, where it cannot:
    an empty folder, which git does not track, and no file half-changed.
    """
    folders: list[Path] = []
    folder = (root / relative.removesuffix("/")).parent
    while True:
        folders.append(folder)
        if folder == root or (folder.is_dir() and not folder.is_symlink()):
            return folders
        folder = folder.parent


def _protected_paths(root: Path) -> tuple[Path, ...]:
    """The protected paths the sandbox keeps read-only, as it finds them before a writable run.

    Raises:
        SandboxUnavailableError: The project is too large to walk for them, as the sandbox would say.
    """
    try:
        return snapshot_protected(root).bind_paths(root)
    except ProjectTooLargeError:
        raise SandboxUnavailableError(
            f"the project holds more than {SNAPSHOT_MAX_ENTRIES} files and folders, more than the check "
            "of protected paths around a writable run walks; use git in a terminal"
        ) from None


# What git says of a work-tree file it could not replace (entry.c, unpack-trees.c); a switch then
# still exits 0, since checkout takes only unpack_trees' -1 for a failure, and its -2 for this not.
_UNREPLACED: Final = (b"unable to unlink", b"unable to create file", b"cannot create directory")


def _refuse_unreplaceable(run: RunResult, done: str) -> None:
    """Raises:
    ExecutionError: git said it could not replace a work-tree file, which `_refuse_fixed_entries`
        should have foreseen; whatever git's exit code, the call says the change is incomplete.
    """
    if any(said in run.stderr for said in _UNREPLACED):
        raise ExecutionError(
            f"git could not replace a file the sandbox keeps, so the work tree is only partly {done}: "
            "oct_git_status shows what is left, and git in a terminal finishes it"
        )


def _refuse_protected_switch(workspace: Workspace, changed: Sequence[str]) -> None:
    """Raises:
    PolicyError: The switch would change a protected path in the work tree.
    """
    for path in changed:
        rule = _protected_rule(workspace, path)
        if rule is not None:
            raise PolicyError(
                "switching would change a protected path in the work tree "
                f"(protected path rule: {rule}); switch in a terminal"
            )


# -- oct_git_restore -----------------------------------------------------------------------------


class GitRestoreParams(_Params):
    paths: list[ProjectPath] = Field(min_length=1, max_length=PATHS_MAX)
    dry_run: bool | None = _dry_run_field()


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
    for entry in _every_entry(stdout).entries:
        if entry.kind in ("untracked", "unmerged") or entry.xy[1:] == ".":
            continue
        path = _git_path(entry.path)
        if withheld is not None and withheld.hides(path):
            continue
        rule = _protected_rule(workspace, path)
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
    git = _git(env)
    specs = _pathspecs(workspace, params.paths)
    found: dict[str, list[str]] = {}

    def diff(run: RunResult) -> tuple[str, ...]:
        found["files"] = _restored(_succeeded(run, "read the status").stdout, env)
        _refuse_fixed_entries(env, found["files"], "restored")
        return _diff_arguments(paths=found["files"])

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
            targets=_file_targets(workspace, files, _INDEX),
        )
        output = GitRestoreOutput(files=files, applied=False)
        text = f"dry run, nothing changed: would discard the changes to {len(files)} file(s):\n{lost.diff}"
        return ToolResult(text=text, structured=output.model_dump(), preview=preview)

    return _plan(git, [_fixed(*_status_arguments(specs, untracked=False)), diff], parse)


def _plan_restore(params: GitRestoreParams, env: ToolEnv) -> CommandPlan:
    if env.dry_run_for(params.dry_run):
        return _restore_preview(params, env)
    workspace = env.workspace
    git = _git(env, files=("index",), write=True)
    specs = _pathspecs(workspace, params.paths)
    found: dict[str, list[str]] = {}

    def restore(run: RunResult) -> tuple[str, ...]:
        files = _restored(_succeeded(run, "read the status").stdout, env)
        _approved_only(
            files,
            env.approved_targets,
            "files changed under the paths after the preview the user approved, so nothing was "
            "discarded; call the tool again to preview the change as the files are now",
        )
        _refuse_fixed_entries(env, files, "restored")
        found["files"] = files
        checkpoint.before(files)
        return ("checkout-index", "--force", "--", *files)

    def parse(run: RunResult) -> ToolResult:
        checkpoint.settle()
        _refuse_unreplaceable(run, "restored")
        if run.exit_code != 0:
            return git_failed(run)
        output = GitRestoreOutput(files=found["files"], applied=True)
        return checkpoint.noted(
            ToolResult(
                text=f"discarded the changes to {len(output.files)} file(s)", structured=output.model_dump()
            )
        )

    checkpoint = CommandCheckpoint(env, "oct_git_restore")

    return _plan(
        git,
        [_fixed(*_status_arguments(specs, untracked=False)), restore],
        parse,
        writes_project=True,
        after_failure=checkpoint.after_failure,
    )


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

GIT_COMMIT: Final = ToolSpec(
    name="oct_git_commit",
    title="Git commit",
    description="Commit what is staged with a message, as the user's git identity; no hooks, never pushes.",
    params=GitCommitParams,
    output=GitCommitOutput,
    risk=Risk.WRITE,
    plan=_plan_commit,
    preview=_commit_preview,
    idempotent=False,
    session_grants=False,
)

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
