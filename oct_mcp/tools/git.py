"""oct_git_status, oct_git_diff and oct_git_log: git's machine-readable output, parsed, git itself defanged.

git (the server's, never one inside the project) runs in the sandbox with the project
read-only, on the repository at the project root only (`--git-dir`, `--work-tree`,
GIT_COMMON_DIR: no discovery upwards, no `core.worktree` or `commondir` elsewhere), without
hooks, fsmonitor, pager, external diff, textconv, signature checks or optional locks, and
with every filter driver its config defines switched off: status and diff would otherwise
run a repository's clean filter, a command of its choosing, on each file whose stat data
changed. Which filters exist, git itself says: each call first lists its config's names,
in the same sandbox, and the real call switches off each filter.* name listed. A ref a call
names is resolved to a commit in the sandbox before the real call, which gets the commit id
(`git_refs`).
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from oct_mcp.diff_view import readable_diff
from oct_mcp.display import quote_name
from oct_mcp.errors import ExecutionError, GitConfigUnreadableError, GitLayoutRefusedError, NotFoundError
from oct_mcp.spec import (
    COMMAND_STEPS_MAX,
    CommandPlan,
    NextCommand,
    ProjectPath,
    Risk,
    RunResult,
    ToolEnv,
    ToolSpec,
)
from oct_mcp.tools.diffs import DIFF_MAX_CHARS
from oct_mcp.tools.git_masks import WHOLE_FILE, masked_patch
from oct_mcp.tools.git_refs import GitRef, verify_chain
from oct_mcp.tools.ignores import user_excludes_file
from oct_mcp.tools.programs import find_server_program
from oct_mcp.tools.results import BudgetField, OffsetField, cut_lines, json_size, take_within
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "CONFIG_NAMES_LISTING",
    "DIFF_CONTEXT_MAX",
    "GIT_DIFF",
    "GIT_ENVIRONMENT",
    "GIT_LOG",
    "GIT_SAFETY_OPTIONS",
    "GIT_STATUS",
    "HUNK_STARTS",
    "DiffFile",
    "DiffOutput",
    "GitLayout",
    "LogOutput",
    "StatusOutput",
    "filter_overrides",
    "git_argv",
    "git_failed",
    "git_layout",
    "git_plan",
    "listed_filter_names",
    "page_diff",
    "parse_diff",
    "pathspec",
    "shown_pathspec",
    "worktree_git_folders",
]

GIT_SAFETY_OPTIONS: Final = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.pager=cat",
    # Empty: no external diff command, ever (diff also passes --no-ext-diff).
    "-c",
    "diff.external=",
    "-c",
    "core.editor=true",
    # log.showSignature would run gpg.program, a command the repository's config may name.
    "-c",
    "log.showSignature=false",
    "-c",
    "color.ui=false",
    "--no-pager",
    "--no-optional-locks",
    # Paths are paths: no pathspec magic such as ':(top)' or globs.
    "--literal-pathspecs",
)
# Where git is given exclusions (`shown_pathspec`), every pathspec carries its own magic instead.
_MAGIC_SAFETY_OPTIONS: Final = tuple(
    option for option in GIT_SAFETY_OPTIONS if option != "--literal-pathspecs"
)
GIT_ENVIRONMENT: Final = (
    # No transport at all, whatever the repository's config says: with this set, git ignores every
    # `protocol.*` key (a repository's `protocol.file.allow=always` beats a `-c protocol.allow=never`)
    # and allows only the protocols listed, none. A fetch would run a program the config names
    # (`remote.<name>.uploadpack`, `core.sshCommand`, an `ext::` URL), and a partial clone fetches a
    # missing object on demand ("lazy fetch") from status, diff or add alike.
    ("GIT_ALLOW_PROTOCOL", ""),
    # The same lazy fetch, switched off where git knows the variable (2.45 and later).
    ("GIT_NO_LAZY_FETCH", "1"),
)
STATUS_MAX_ENTRIES: Final = 2_000
LOG_DEFAULT: Final = 20
LOG_MAX: Final = 200
DIFF_CONTEXT_MAX: Final = 100
_FILTER_NAMES_MAX: Final = 64
_LINK_FILE_MAX_BYTES: Final = 4_096
_CONFIG_READ_TIMEOUT_SECONDS: Final = 10
CONFIG_NAMES_LISTING: Final = ("config", "--list", "--includes", "--null", "--name-only")
_NOT_A_REPOSITORY: Final = (
    "the project is not a git repository (no .git at the project root); git init makes one"
)
_NOT_A_CHECKOUT_OF_IT: Final = (
    "the project's .git file names a git folder outside the project that is no linked worktree or "
    "submodule of this checkout (it must sit under worktrees/ or modules/ of a repository and name "
    "this checkout back); git was not run"
)


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# -- where the repository is ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GitLayout:
    """This checkout's repository as the server found it: git is told where it is, never left to look."""

    git_dir: Path
    """Passed as `--git-dir`: the `.git` folder, or the folder a `.git` file names."""
    common_dir: Path
    """Passed as GIT_COMMON_DIR, so git follows no `commondir` file of its own accord."""
    binds: tuple[Path, ...]
    """Git folders outside the project that the sandbox shows, read-only."""


def git_layout(root: Path) -> GitLayout:
    """Where the repository of the checkout at `root` is, checked before git runs.

    A `.git` folder, or a `.git` file naming a folder inside the project, is the project's own
    repository: its `commondir`, if any, must stay inside the project. A `.git` file naming a
    folder outside the project is accepted only as a real linked worktree (a folder under
    `<common>/worktrees/` whose `gitdir` names this `.git` back and whose `commondir` names
    `<common>`) or a real submodule (its own repository under a git folder's `modules/`, whose
    `core.worktree` names this checkout).

    Raises:
        NotFoundError: No `.git` at the project root, or a symlink there.
        GitLayoutRefusedError: Any other layout: git is not run.
    """
    project = Path(os.path.realpath(root))
    git = _dot_git(root)
    folder = Path(os.path.realpath(git)) if git.is_dir() else _gitfile_target(git)
    common = _common_dir(folder)
    if folder.is_relative_to(project):
        if not common.is_relative_to(project):
            raise GitLayoutRefusedError(
                "the project's git folder names a common git folder outside the project (commondir), "
                "which would make git read another repository; git was not run"
            )
        return GitLayout(git_dir=folder, common_dir=common, binds=())
    if common != folder:
        is_worktree = folder.parent.name == "worktrees" and folder.parent.parent == common
        if not is_worktree or _named_back(folder) != project / ".git" or not _is_repository(common):
            raise GitLayoutRefusedError(_NOT_A_CHECKOUT_OF_IT)
        return GitLayout(git_dir=folder, common_dir=common, binds=(common,))
    is_submodule = any(
        parent.name == "modules" and _is_repository(parent.parent) for parent in folder.parents
    )
    if not is_submodule or not _is_repository(folder) or _core_worktree(project, folder) != project:
        raise GitLayoutRefusedError(_NOT_A_CHECKOUT_OF_IT)
    return GitLayout(git_dir=folder, common_dir=folder, binds=(folder,))


def worktree_git_folders(root: Path) -> tuple[Path, ...]:
    """The git folders outside the project that git must read: a linked worktree's or a submodule's.

    Raises:
        NotFoundError, GitLayoutRefusedError: As `git_layout`.
    """
    return git_layout(root).binds


def _dot_git(root: Path) -> Path:
    """The `.git` at the project root: a folder, or a file naming one (worktrees, submodules).

    Raises:
        NotFoundError: There is none, or it is a symlink (which could lead anywhere).
    """
    git = root / ".git"
    try:
        info = git.lstat()
    except OSError:
        raise NotFoundError(_NOT_A_REPOSITORY) from None
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        raise NotFoundError("the .git at the project root is neither a folder nor a file; git was not run")
    return git


def _gitfile_target(git: Path) -> Path:
    """The folder a `.git` file names (`gitdir: <path>`, relative to the file's folder), resolved."""
    text = _link_file(git)
    if text is None or not text.startswith("gitdir: "):
        raise GitLayoutRefusedError("the project's .git file names no git folder; git was not run")
    return Path(os.path.realpath(git.parent / text.removeprefix("gitdir: ")))


def _common_dir(folder: Path) -> Path:
    """The common git folder a git folder's `commondir` names, resolved; without one, the folder itself."""
    path = folder / "commondir"
    if not os.path.lexists(path):
        return folder
    text = _link_file(path)
    if not text:
        raise GitLayoutRefusedError("a git folder's commondir file cannot be read; git was not run")
    return Path(os.path.realpath(folder / text))


def _named_back(folder: Path) -> Path | None:
    """The `.git` file a linked worktree's folder names back (`gitdir`: absolute, or relative to it)."""
    text = _link_file(folder / "gitdir")
    return Path(os.path.realpath(folder / text)) if text else None


def _link_file(path: Path) -> str | None:
    """A one-path file as git reads it (trailing CR and LF cut); None if unreadable or not one clean path."""
    try:
        # Non-blocking, regular files only: a FIFO or a link to /dev/stdin must not hang the server.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        raw = os.read(descriptor, _LINK_FILE_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    text = os.fsdecode(raw.rstrip(b"\r\n"))
    if len(raw) > _LINK_FILE_MAX_BYTES or any(char in text for char in "\0\n\r"):
        return None
    return text


def _is_repository(folder: Path) -> bool:
    return (folder / "HEAD").is_file() and (folder / "objects").is_dir()


def _core_worktree(project: Path, folder: Path) -> Path | None:
    """Where a submodule's git folder says its checkout is (`core.worktree`), as git itself reads it."""
    try:
        completed = subprocess.run(  # fixed argv, no shell; a config file outside the project, no includes
            [
                str(find_server_program(project, "git")),
                "config",
                "--file",
                str(folder / "config"),
                "--get",
                "core.worktree",
            ],
            env={"PATH": os.defpath, "HOME": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"},
            cwd="/",
            capture_output=True,
            timeout=_CONFIG_READ_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = os.fsdecode(completed.stdout.rstrip(b"\n"))
    if completed.returncode != 0 or not value:
        return None
    return Path(os.path.realpath(folder / value))


# -- running git -----------------------------------------------------------------------------------


def listed_filter_names(run: RunResult) -> frozenset[str]:
    """The filter driver names in `git config --list --includes --null --name-only`, as git read them.

    Raises:
        GitConfigUnreadableError: git could not list its config, or the list was cut.
    """
    if run.exit_code != 0 or run.truncated or run.timed_out:
        raise GitConfigUnreadableError(
            "git could not list the repository's config, so its filter drivers cannot be switched off; "
            "git was not run (git config --list shows what is wrong)"
        )
    names = set()
    for raw in run.stdout.split(b"\0"):
        key = os.fsdecode(raw)
        if key[:7].lower() == "filter." and key.count(".") >= 2:
            names.add(key[7 : key.rindex(".")])
    return frozenset(names)


def filter_overrides(names: frozenset[str]) -> list[str]:
    """`-c filter.<name>.clean=` and its siblings for each name: an empty command is no command.

    Raises:
        ExecutionError: A name `-c` cannot address (it holds `=`), or too many names.
    """
    if len(names) > _FILTER_NAMES_MAX or any("=" in name for name in names):
        raise ExecutionError(
            "the repository's git config defines filter drivers that cannot be switched off "
            "(over 64, or a name with '='); git was not run"
        )
    options: list[str] = []
    for name in sorted(names):
        for key, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")):
            options += ["-c", f"filter.{name}.{key}={value}"]
    return options


def git_argv(root: Path, *arguments: str, filter_names: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """git's argv for the repository at `root`, every safety option and filter override before the subcommand.

    Raises:
        NotFoundError: The project root is not a git repository.
        GitLayoutRefusedError: Its `.git` names git folders that are not its own.
        ToolUnavailableError: git is not on the server's PATH.
        ExecutionError: The filter drivers cannot be switched off.
    """
    return _argv(find_server_program(root, "git"), git_layout(root), root, filter_names, arguments)


def _argv(
    program: Path,
    layout: GitLayout,
    root: Path,
    filter_names: frozenset[str],
    arguments: tuple[str, ...],
    *,
    magic: bool = False,
) -> tuple[str, ...]:
    return (
        str(program),
        *(_MAGIC_SAFETY_OPTIONS if magic else GIT_SAFETY_OPTIONS),
        *filter_overrides(filter_names),
        f"--git-dir={layout.git_dir}",
        f"--work-tree={root}",
        *arguments,
    )


def git_plan(
    env: ToolEnv,
    arguments: tuple[str, ...] | Callable[[Mapping[str, str]], tuple[str, ...]],
    parse: Callable[[RunResult], ToolResult],
    *,
    user_excludes: bool = False,
    refs: Sequence[tuple[str, str]] = (),
    before: tuple[Callable[[Mapping[str, str]], tuple[str, ...]], Callable[[RunResult], None]] | None = None,
    magic: bool = False,
) -> CommandPlan:
    """git run in steps in the same sandbox: it lists its config's names, resolves each ref, then runs
    with each filter off.

    The same binary, environment, git folders and working directory read the config each time,
    so the list names every filter driver the real call would see (includes, any spelling).
    With `user_excludes`, the user's global excludes file is named with `-c core.excludesFile` and
    bound read-only: git never loads the global config, so it would not find the file itself.
    With `refs` ((argument name, ref) pairs, checked as `GitRef`), each ref is resolved to the
    commit it names before the real call (`verify_chain`), and `arguments` is given the verified
    commit ids by argument name: the real call never sees a ref's text.
    With `before` (arguments given the commit ids, and what takes its output), one more git command
    runs just before the real call, in the same sandbox: what the real call shows, read whole.
    With `magic`, git reads pathspec magic (`shown_pathspec` spells every pathspec with its own);
    without, every path is literal.
    """
    if len(refs) > COMMAND_STEPS_MAX - 2 - (before is not None):
        raise ValueError(f"a git plan runs at most {COMMAND_STEPS_MAX} commands, its config listing included")
    root = env.workspace.root
    layout = git_layout(root)
    program = find_server_program(root, "git")
    excludes = user_excludes_file() if user_excludes else None
    options = () if excludes is None else ("-c", f"core.excludesFile={excludes}")
    real = arguments if callable(arguments) else lambda _: arguments

    def after_config(run: RunResult) -> tuple[str, ...] | NextCommand:
        names = listed_filter_names(run)

        def git(step: tuple[str, ...]) -> tuple[str, ...]:
            return _argv(program, layout, root, names, step, magic=magic)

        def real_argv(commits: Mapping[str, str]) -> tuple[str, ...]:
            return git((*options, *real(commits)))

        if before is None:
            return verify_chain(refs, git, lambda commits: (*options, *real(commits)))
        prelude, take = before

        def first_before(commits: Mapping[str, str]) -> NextCommand:
            def then(prelude_run: RunResult) -> tuple[str, ...]:
                take(prelude_run)
                return real_argv(commits)

            return NextCommand(argv=git(prelude(commits)), then=then)

        return verify_chain(refs, git, lambda commits: (*options, *real(commits)), finish=first_before)

    return CommandPlan(
        argv=_argv(program, layout, root, frozenset(), CONFIG_NAMES_LISTING),
        then=after_config,
        parse=parse,
        read_only_paths=(*layout.binds, *(() if excludes is None else (excludes,))),
        tool_env=(("GIT_COMMON_DIR", str(layout.common_dir)), *GIT_ENVIRONMENT),
        # git, not project code, with fixed arguments: it compares and diffs the real files.
        masks_secret_files=False,
        resolves_localhost=False,
    )


def pathspec(workspace: Workspace, path: str | None) -> list[str]:
    """The path after `--`, as git names it: relative, lexical (a symlink is the link, as in git)."""
    if path is None:
        return []
    workspace.contain(path)
    lexical = Path(os.path.normpath(workspace.root / path))
    return ["--", lexical.relative_to(workspace.root).as_posix() or "."]


def shown_pathspec(env: ToolEnv, path: str | None) -> tuple[list[str], bool]:
    """`pathspec`, and after it git's exclusions of the paths the rules deny the call (`ToolEnv.withheld`),
    so a status, a diff or a commit shown leaves them out, a rename's old name included; and whether
    git must read pathspec magic for them (`git_plan`'s `magic`), the path then spelt `:(literal)`."""
    named = pathspec(env.workspace, path)
    exclusions = env.withheld.git_exclusions() if env.withheld is not None else ()
    if not exclusions:
        return named, False
    return ["--", *(f":(literal){given}" for given in named[1:]), *exclusions], True


def git_failed(run: RunResult) -> ToolResult:
    detail = run.stderr.decode(errors="replace").strip()
    if "not a git repository" in detail:
        raise NotFoundError(_NOT_A_REPOSITORY)
    return ToolResult(
        text=f"[tool_failed] git failed (exit code {run.exit_code}); the end of its stderr says why, and "
        f"`git status` in a terminal in the project shows the same:\n{detail[-4_000:]}",
        is_error=True,
    )


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


# -- oct_git_status ------------------------------------------------------------------------------


class GitStatusParams(_Params):
    path: ProjectPath | None = Field(default=None)
    offset: int = OffsetField()
    max_chars: int = BudgetField()


class StatusEntry(BaseModel):
    path: str
    original_path: str | None = None
    """Where a renamed or copied file came from."""
    xy: str
    """git's two status letters, index then work tree, '.' for unchanged: '.M', 'A.', 'R.', '??', 'UU'."""
    kind: Literal["changed", "renamed", "copied", "unmerged", "untracked"]


class StatusOutput(BaseModel):
    branch: str | None
    """None when HEAD is detached."""
    commit: str | None
    """None before the first commit."""
    upstream: str | None
    ahead: int | None
    behind: int | None
    stashes: int
    entries: list[StatusEntry]
    count: int
    """Entries in all, on every page."""
    truncated: bool
    clean: bool
    next_offset: int | None = None
    """The offset that shows the entries after these."""


def parse_status(stdout: bytes, offset: int = 0) -> StatusOutput:
    """`git status --porcelain=v2 --branch --show-stash -z` as a StatusOutput, at most
    STATUS_MAX_ENTRIES entries from entry `offset` on, `count` of all of them."""
    tokens = stdout.split(b"\0")
    branch: str | None = None
    commit: str | None = None
    upstream: str | None = None
    ahead: int | None = None
    behind: int | None = None
    stashes = 0
    entries: list[StatusEntry] = []
    count = 0
    index = 0
    while index < len(tokens):
        record = _decode(tokens[index])
        index += 1
        kind, _, rest = record.partition(" ")
        if kind == "#":
            name, _, value = rest.partition(" ")
            if name == "branch.oid":
                commit = None if value == "(initial)" else value
            elif name == "branch.head":
                branch = None if value == "(detached)" else value
            elif name == "branch.upstream":
                upstream = value
            elif name == "branch.ab":
                plus, _, minus = value.partition(" ")
                ahead, behind = int(plus.lstrip("+")), int(minus.lstrip("-"))
            elif name == "stash":
                stashes = int(value)
            continue
        entry: StatusEntry | None = None
        if kind == "1":
            fields = rest.split(" ", 7)
            entry = StatusEntry(path=fields[-1], xy=fields[0], kind="changed")
        elif kind == "2":
            fields = rest.split(" ", 8)
            original = _decode(tokens[index]) if index < len(tokens) else None
            index += 1
            renamed = fields[7].startswith("R")
            entry = StatusEntry(
                path=fields[-1], original_path=original, xy=fields[0], kind="renamed" if renamed else "copied"
            )
        elif kind == "u":
            fields = rest.split(" ", 9)
            entry = StatusEntry(path=fields[-1], xy=fields[0], kind="unmerged")
        elif kind == "?":
            entry = StatusEntry(path=rest, xy="??", kind="untracked")
        if entry is None:
            continue
        count += 1
        if count > offset and len(entries) < STATUS_MAX_ENTRIES:
            entries.append(entry)
    return StatusOutput(
        branch=branch,
        commit=commit,
        upstream=upstream,
        ahead=ahead,
        behind=behind,
        stashes=stashes,
        entries=entries,
        count=count,
        truncated=count > offset + len(entries),
        clean=count == 0,
        next_offset=offset + len(entries) if count > offset + len(entries) else None,
    )


def _status_text(output: StatusOutput) -> str:
    head = f"## {output.branch or 'HEAD (detached)'}"
    if output.commit is None:
        head += " (no commits yet)"
    if output.upstream:
        head += f"...{output.upstream}"
        if output.ahead or output.behind:
            head += f" [ahead {output.ahead}, behind {output.behind}]"
    lines = [head]
    for entry in output.entries:
        moved = f"{entry.original_path} -> " if entry.original_path is not None else ""
        lines.append(f"{entry.xy.replace('.', ' ')} {moved}{entry.path}")
    if output.clean:
        lines.append("nothing to commit, working tree clean")
    if output.next_offset is not None:
        lines.append(
            f"[oct-mcp: {output.count} entries, {len(output.entries)} shown; "
            f"the rest with offset={output.next_offset}, or narrow with path]"
        )
    elif not output.entries and output.count:
        lines.append(f"[oct-mcp: {output.count} entries, none past this offset]")
    if output.stashes:
        lines.append(f"{output.stashes} stash(es)")
    return "\n".join(lines)


def _status_parser(params: GitStatusParams) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        output = parse_status(run.stdout, params.offset)
        entries, cut = take_within(output.entries, params.max_chars)
        if cut:
            output = output.model_copy(
                update={"entries": entries, "next_offset": params.offset + len(entries), "truncated": True}
            )
        return ToolResult(
            text=_status_text(output), structured=output.model_dump(), truncated=output.truncated
        )

    return parse


def _plan_status(params: GitStatusParams, env: ToolEnv) -> CommandPlan:
    paths, magic = shown_pathspec(env, params.path)
    arguments = (
        "status",
        "--porcelain=v2",
        "--branch",
        "--show-stash",
        "-z",
        # As a terminal's `git status` shows them: an untracked folder is one entry, not its every file.
        "--untracked-files=normal",
        "--ignore-submodules=dirty",
        *paths,
    )
    return git_plan(env, arguments, _status_parser(params), user_excludes=True, magic=magic)


# -- oct_git_diff --------------------------------------------------------------------------------


class GitDiffParams(_Params):
    base: GitRef | None = Field(
        default=None,
        description="A commit: branch, tag, id, HEAD~1.",
    )
    target: GitRef | None = Field(default=None)
    merge_base: bool = Field(
        default=False,
    )
    staged: bool = Field(default=False)
    path: ProjectPath | None = Field(default=None)
    context_lines: int = Field(default=3, ge=0, le=DIFF_CONTEXT_MAX)
    stat: bool = Field(default=False)
    offset: int = Field(default=0, ge=0, le=10_000_000, description="A cut result's next_offset.")
    max_chars: int = BudgetField()

    @model_validator(mode="after")
    def _sides_make_sense(self) -> GitDiffParams:
        if self.base is None and (self.target is not None or self.merge_base):
            raise ValueError("target and merge_base compare with base: give base too")
        if self.staged and (self.target is not None or self.merge_base):
            raise ValueError("staged compares the index; with target or merge_base both sides are commits")
        return self

    def refs(self) -> tuple[tuple[str, str], ...]:
        """(argument, ref) for each ref given; merge_base without a target compares with HEAD."""
        target = "HEAD" if self.merge_base and self.target is None else self.target
        given = (("base", self.base), ("target", target))
        return tuple((name, ref) for name, ref in given if ref is not None)


class DiffFile(BaseModel):
    path: str
    original_path: str | None = None
    """Where a renamed file came from."""
    added: int | None
    """Lines added; None for a binary file."""
    removed: int | None
    binary: bool


class DiffOutput(BaseModel):
    staged: bool
    base: str | None = None
    """The base ref as given: the diff is against it."""
    target: str | None = None
    """The target ref as given (HEAD when merge_base had none): the diff is between two commits."""
    merge_base: bool = False
    """The diff starts at the merge base of base and target (`base...target`)."""
    files: list[DiffFile]
    added: int
    removed: int
    diff: str
    """The unified diff (this page of it), cut at 512 KiB; empty with stat."""
    diff_cut: bool
    next_offset: int | None = None
    """The offset that shows the patch lines after these."""
    files_omitted: int = 0
    """Changed files past the budget, not listed: narrow with path."""


def parse_diff(stdout: bytes, *, staged: bool, truncated: bool, context: int | None = None) -> DiffOutput:
    """`git diff --numstat -p -z` as a DiffOutput: the NUL-separated counts first, then the patch.

    With `context`, the patch is a whole-file one (`--unified=WHOLE_FILE`), masked and cut to
    hunks of that many context lines here (`masked_patch`); a file it had to leave out cuts the diff.
    """
    files: list[DiffFile] = []
    position = 0
    while position < len(stdout):
        if stdout[position] == 0:
            # An empty record ends the counts; the patch follows.
            position += 1
            break
        end = stdout.find(b"\0", position)
        if end == -1:
            position = len(stdout)
            break
        added, removed, path = [*_decode(stdout[position:end]).split("\t", 2), "", ""][:3]
        position = end + 1
        original: str | None = None
        if not path:
            # A rename: the old and the new path follow as records of their own.
            names = stdout[position:].split(b"\0", 2)
            original, path = _decode(names[0]), _decode(names[1]) if len(names) > 1 else ""
            position += sum(len(name) + 1 for name in names[:2])
        binary = added == "-"
        files.append(
            DiffFile(
                path=path,
                original_path=original,
                added=None if binary else _int(added),
                removed=None if binary else _int(removed),
                binary=binary,
            )
        )
    patch = _decode(stdout[position:])
    left_out = False
    if context is not None:
        patch, left_out = masked_patch(patch, context)
    cut = truncated or left_out or len(patch) > DIFF_MAX_CHARS
    return DiffOutput(
        staged=staged,
        files=files,
        added=sum(f.added or 0 for f in files),
        removed=sum(f.removed or 0 for f in files),
        diff=patch[:DIFF_MAX_CHARS],
        diff_cut=cut,
    )


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _compared(output: DiffOutput) -> str:
    """What the changes are, as the text says: 'unstaged changes', 'changes from main to HEAD'."""
    if output.base is None:
        return "staged changes" if output.staged else "unstaged changes"
    if output.target is None:
        return f"{'staged ' if output.staged else ''}changes against {output.base}"
    if output.merge_base:
        return f"changes on {output.target} since its merge base with {output.base}"
    return f"changes from {output.base} to {output.target}"


def _diff_text(output: DiffOutput) -> str:
    which = _compared(output)
    if not output.files:
        return f"no {which}"
    header = f"{len(output.files)} file(s) with {which}, +{output.added} -{output.removed}:"
    return "\n".join([header, *diff_page_lines(output)])


class PagedDiff(Protocol):
    """An output that carries one page of a diff: a working tree's, or a commit's."""

    files: list[DiffFile]
    files_omitted: int
    diff: str
    diff_cut: bool
    next_offset: int | None


def diff_page_lines(page: PagedDiff) -> list[str]:
    """The text of a diff's page under its header: each file's counts, the patch, and how to go on."""
    lines: list[str] = []
    for f in page.files:
        counts = "binary" if f.binary else f"+{f.added} -{f.removed}"
        moved = f"{quote_name(f.original_path)} -> " if f.original_path is not None else ""
        lines.append(f"  {moved}{quote_name(f.path)} ({counts})")
    if page.files_omitted:
        lines.append(f"  [oct-mcp: {page.files_omitted} more file(s); narrow with path]")
    if page.diff:
        lines.append("")
        # People read the text: a form feed or a bidi control in a line is written out there; the
        # structured content keeps the patch byte for byte.
        lines.append(readable_diff(page.diff))
    if page.next_offset is not None:
        lines.append(f"[oct-mcp: the diff goes on; the rest with offset={page.next_offset}]")
    elif page.diff_cut:
        lines.append("[oct-mcp: the diff was cut; narrow it with path]")
    return lines


def diff_page_cut(page: PagedDiff) -> bool:
    """Whether the page leaves part of the diff out: cut at the cap, going on, or files not listed."""
    return page.diff_cut or page.next_offset is not None or page.files_omitted > 0


def page_diff(
    files: list[DiffFile], diff: str, *, offset: int, max_chars: int, stat: bool, spent: int = 0
) -> dict[str, Any]:
    """One page of a diff: the files within half the budget, the patch from line `offset` in the rest.

    Args:
        files: Every changed file, as `parse_diff` read them.
        diff: The whole patch.
        offset: Patch lines to skip.
        max_chars: The budget of the result.
        stat: Leave the patch out.
        spent: Characters of the budget the result's other fields take (a commit's header).

    Returns:
        The page's `files`, `files_omitted`, `diff` and `next_offset`, to update an output with.
    """
    budget = max_chars - spent
    kept, cut = take_within(files, budget // 2)
    room = budget - json_size([f.model_dump() for f in kept])
    patch, next_offset = ("", None) if stat else cut_lines(diff, offset, room, HUNK_STARTS)
    return {
        "files": kept,
        "files_omitted": len(files) - len(kept) if cut else 0,
        "diff": patch,
        "next_offset": next_offset,
    }


def _diff_parser(params: GitDiffParams) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        output = parse_diff(
            run.stdout,
            staged=params.staged,
            truncated=run.truncated,
            context=None if params.stat else params.context_lines,
        )
        refs = dict(params.refs())
        output = output.model_copy(
            update={"base": refs.get("base"), "target": refs.get("target"), "merge_base": params.merge_base}
        )
        output = output.model_copy(
            update=page_diff(
                output.files, output.diff, offset=params.offset, max_chars=params.max_chars, stat=params.stat
            )
        )
        return ToolResult(
            text=_diff_text(output), structured=output.model_dump(), truncated=diff_page_cut(output)
        )

    return parse


def _plan_diff(params: GitDiffParams, env: ToolEnv) -> CommandPlan:
    options = (
        *(["--cached"] if params.staged else []),
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--no-relative",
        "--numstat",
        "--patch",
        "-z",
        "--find-renames",
        "--submodule=short",
        "--ignore-submodules=dirty",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        # Each file whole, to be masked with the whole file as context and cut to hunks here.
        f"--unified={0 if params.stat else WHOLE_FILE}",
    )
    paths, magic = shown_pathspec(env, params.path)
    paths = paths or ["--"]

    def arguments(commits: Mapping[str, str]) -> tuple[str, ...]:
        sides = [commits[name] for name in ("base", "target") if name in commits]
        revisions = ["...".join(sides)] if params.merge_base else sides
        return ("diff", *options, "--end-of-options", *revisions, *paths)

    return git_plan(env, arguments, _diff_parser(params), refs=params.refs(), magic=magic)


# -- oct_git_log ---------------------------------------------------------------------------------


class GitLogParams(_Params):
    max_count: int = Field(default=LOG_DEFAULT, ge=1, le=LOG_MAX)
    path: ProjectPath | None = Field(default=None)
    base: GitRef | None = Field(
        default=None,
    )
    target: GitRef | None = Field(default=None)
    offset: int = OffsetField()
    max_chars: int = BudgetField()

    def refs(self) -> tuple[tuple[str, str], ...]:
        """(argument, ref) for each ref given."""
        given = (("base", self.base), ("target", self.target))
        return tuple((name, ref) for name, ref in given if ref is not None)


class Commit(BaseModel):
    sha: str
    author: str
    email: str
    date: str
    """Author date, strict ISO 8601."""
    subject: str


class LogOutput(BaseModel):
    commits: list[Commit]
    next_offset: int | None = None
    """The offset that shows the older commits after these (max_count or the budget was reached)."""


_LOG_FIELDS: Final = 5
# Where a diff page may end: before a file's header or a hunk's.
HUNK_STARTS: Final = ("diff --git ", "@@ ")


def parse_log(stdout: bytes) -> LogOutput:
    """`git log -z --format=%H%x00%an%x00%ae%x00%aI%x00%s`: five NUL-separated fields per commit."""
    tokens = [_decode(token) for token in stdout.split(b"\0")]
    commits = [
        Commit(sha=sha, author=author, email=email, date=date, subject=subject)
        for sha, author, email, date, subject in zip(*[iter(tokens)] * _LOG_FIELDS, strict=False)
    ]
    return LogOutput(commits=commits)


def _log_parser(params: GitLogParams) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            if b"does not have any commits yet" in run.stderr:
                return ToolResult(
                    text="no commits yet", structured=LogOutput(commits=[]).model_dump(exclude_none=True)
                )
            return git_failed(run)
        # One commit past max_count was asked for: it tells whether more follow.
        every = parse_log(run.stdout).commits
        commits, cut = take_within(every[: params.max_count], params.max_chars)
        more = cut or len(every) > params.max_count
        output = LogOutput(commits=commits, next_offset=params.offset + len(commits) if more else None)
        lines = [f"{c.sha[:12]} {c.date} {c.author}: {c.subject}" for c in output.commits]
        if output.next_offset is not None:
            lines.append(f"[oct-mcp: older commits follow: offset={output.next_offset}]")
        return ToolResult(
            text="\n".join(lines) or "no commits", structured=output.model_dump(exclude_none=True)
        )

    return parse


def _plan_log(params: GitLogParams, env: ToolEnv) -> CommandPlan:
    options = (
        "log",
        "-z",
        f"--max-count={params.max_count + 1}",
        f"--skip={params.offset}",
        "--format=%H%x00%an%x00%ae%x00%aI%x00%s",
        "--no-show-signature",
        "--no-color",
    )
    paths = pathspec(env.workspace, params.path) or ["--"]

    def arguments(commits: Mapping[str, str]) -> tuple[str, ...]:
        # base..target, as git spells it: what target reaches and base does not.
        revisions = [f"^{commits['base']}"] if "base" in commits else []
        if revisions or "target" in commits:
            revisions.append(commits.get("target", "HEAD"))
        return (*options, "--end-of-options", *revisions, *paths)

    return git_plan(env, arguments, _log_parser(params), refs=params.refs())


GIT_STATUS: Final = ToolSpec(
    name="oct_git_status",
    title="Git status",
    description=(
        "Git status: branch, upstream ahead/behind, stashes, and each changed, staged, untracked or "
        "unmerged file with its XY code. Paged by next_offset."
    ),
    params=GitStatusParams,
    output=StatusOutput,
    risk=Risk.READ,
    plan=_plan_status,
)

GIT_DIFF: Final = ToolSpec(
    name="oct_git_diff",
    title="Git diff",
    description=(
        "Git diff: work tree against index; staged=true: index against HEAD; base: against a commit; base "
        "and target: between two; merge_base=true: as base...target. Per-file counts and the patch "
        "(stat=true: counts only), paged."
    ),
    params=GitDiffParams,
    output=DiffOutput,
    risk=Risk.READ,
    plan=_plan_diff,
)

GIT_LOG: Final = ToolSpec(
    name="oct_git_log",
    title="Git log",
    description=(
        "Commits newest first (sha, author, date, subject) of HEAD or target; with base only base..target; "
        "path: only commits touching it. Paged by next_offset."
    ),
    params=GitLogParams,
    output=LogOutput,
    risk=Risk.READ,
    plan=_plan_log,
)
