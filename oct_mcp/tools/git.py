"""oct_git_status, oct_git_diff and oct_git_log: git's machine-readable output, parsed, git itself defanged.

git runs in the sandbox with the project read-only, on the repository at the project
root only (`--git-dir`, `--work-tree`: no discovery upwards, no `core.worktree`
elsewhere), without hooks, fsmonitor, pager, external diff, textconv, signature
checks or optional locks, and with every filter driver the repository's own config
defines switched off: status and diff would otherwise run a repository's clean filter,
a command of its choosing, on each file whose stat data changed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from oct_mcp.context import ToolResult
from oct_mcp.errors import ExecutionError, NotFoundError
from oct_mcp.spec import CommandPlan, ProjectPath, Risk, RunResult, ToolEnv, ToolSpec
from oct_mcp.tools.programs import find_server_program
from oct_mcp.workspace import Workspace

__all__ = [
    "GIT_DIFF",
    "GIT_LOG",
    "GIT_SAFETY_OPTIONS",
    "GIT_STATUS",
    "DiffOutput",
    "LogOutput",
    "StatusOutput",
    "git_argv",
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
STATUS_MAX_ENTRIES: Final = 2_000
LOG_DEFAULT: Final = 20
LOG_MAX: Final = 200
DIFF_MAX_CHARS: Final = 512 * 1_024
DIFF_CONTEXT_MAX: Final = 100
_FILTER_NAMES_MAX: Final = 64
_CONFIG_FILE_MAX_BYTES: Final = 1_048_576
_CONFIG_FILES_MAX: Final = 32
_INCLUDE_DEPTH_MAX: Final = 8
_SECTION: Final = re.compile(r'^\[\s*([A-Za-z0-9.-]+)\s*(?:"((?:[^"\\]|\\.)*)")?\s*\](.*)$')
_UNESCAPE: Final = re.compile(r"\\(.)")
_NOT_A_REPOSITORY: Final = (
    "the project is not a git repository (no .git at the project root); git init makes one"
)


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# -- running git ---------------------------------------------------------------------------------


def _git_dir(root: Path) -> Path:
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


def _git_folders(git: Path) -> tuple[Path, Path] | None:
    """(this checkout's git folder, the repository's common one) for a `.git` folder or file.

    A `.git` file (a linked worktree, a submodule) names its folder on a `gitdir:` line; a
    worktree's folder names the common one in its `commondir` file. None: the file names nothing.
    """
    folder = git
    if git.is_file():
        first = _read_small(git).split("\n", 1)[0]
        if not first.startswith("gitdir:"):
            return None
        folder = (git.parent / first.removeprefix("gitdir:").strip()).resolve()
    common = folder
    commondir = _read_small(folder / "commondir").strip()
    if commondir:
        common = (folder / commondir).resolve()
    return folder, common


def _config_files(git: Path) -> list[Path]:
    """The repository's own config files: `config` of the common folder, `config.worktree` of this one."""
    folders = _git_folders(git)
    if folders is None:
        return []
    folder, common = folders
    return [common / "config", folder / "config.worktree"]


def worktree_git_folders(root: Path) -> tuple[Path, ...]:
    """The git folders outside the project that git must read when its `.git` is a file.

    A linked worktree's `.git` file names `<repository>/.git/worktrees/<name>`, whose `gitdir`
    file names that `.git` file back and whose `commondir` names the repository's git folder. A
    submodule's names `<superproject>/.git/modules/<name>`, whose config's `core.worktree` names
    the checkout back. Only folders that name the project back are returned, so a `.git` file
    naming any other folder gets nothing of it into the sandbox (git then finds no repository
    there). Empty for a plain repository, whose git folder is inside the project.
    """
    git = root / ".git"
    if git.is_symlink() or not git.is_file():
        return ()
    folders = _git_folders(git)
    if folders is None:
        return ()
    folder, common = folders
    if folder != common:
        # Absolute as git writes it, or relative to the folder (worktree.useRelativePaths).
        back = _read_small(folder / "gitdir").strip()
        if not back or (folder / back).resolve() != git.resolve():
            return ()
    elif _core_worktree(folder) != root:
        return ()
    if not (common / "HEAD").is_file() or not (common / "objects").is_dir():
        return ()
    outside = [path for path in dict.fromkeys((common, folder)) if not path.is_relative_to(root)]
    # A worktree's folder sits inside the common one as a rule: one bind then covers both.
    return tuple(
        path for path in outside if not any(path != other and path.is_relative_to(other) for other in outside)
    )


def _core_worktree(folder: Path) -> Path | None:
    """Where a git folder's own config says its checkout is (`core.worktree`), resolved; None if unsaid."""
    for section, subsection, key, value in _config_entries(_read_small(folder / "config")):
        if section == "core" and subsection is None and key == "worktree" and value:
            return (folder / value).resolve()
    return None


def _read_small(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(_CONFIG_FILE_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def filter_driver_names(git: Path) -> set[str]:
    """Names of the filter drivers the repository's config (and what it includes) defines.

    With no system or global config (the sandbox's environment), this config is the only
    place a filter driver can come from. `~/` includes are skipped: inside the sandbox
    `~` is an empty scratch home, so git does not find them either.
    """
    names: set[str] = set()
    pending = [(path, 0) for path in _config_files(git)]
    seen: set[Path] = set()
    while pending and len(seen) < _CONFIG_FILES_MAX:
        path, depth = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        for section, subsection, key, value in _config_entries(_read_small(path)):
            if section == "filter" and subsection is not None:
                names.add(subsection)
            is_include = section in ("include", "includeif") and key == "path"
            if is_include and value and not value.startswith("~") and depth < _INCLUDE_DEPTH_MAX:
                pending.append(((path.parent / value).resolve(), depth + 1))
    return names


def _config_entries(text: str) -> Iterator[tuple[str, str | None, str | None, str | None]]:
    """(section, subsection, key, value) for each section header and each `key = value` line."""
    section, subsection = "", None
    for raw in text.split("\n"):
        line = raw.strip()
        if line.startswith("["):
            found = _SECTION.match(line)
            if found is None:
                continue
            name, quoted, line = found.group(1), found.group(2), found.group(3).strip()
            if quoted is not None:
                section, subsection = name.lower(), _UNESCAPE.sub(r"\1", quoted)
            elif "." in name:
                # The old `[section.subsection]` form: git lower-cases the subsection.
                head, _, tail = name.partition(".")
                section, subsection = head.lower(), tail.lower()
            else:
                section, subsection = name.lower(), None
            yield section, subsection, None, None
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        yield section, subsection, key.strip().lower(), _config_value(value)


def _config_value(value: str) -> str:
    value = value.strip()
    if value.startswith('"'):
        end = value.find('"', 1)
        return value[1:end] if end > 0 else value[1:]
    return re.split(r"\s[#;]", value, maxsplit=1)[0].strip()


def _filter_overrides(names: set[str]) -> list[str]:
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


def git_argv(root: Path, *arguments: str) -> tuple[str, ...]:
    """git's argv for the repository at `root`, with every safety option before the subcommand.

    Raises:
        NotFoundError: The project root is not a git repository.
        ToolUnavailableError: git is not installed.
        ExecutionError: The repository's filter drivers cannot be switched off.
    """
    git_dir = _git_dir(root)
    program = find_server_program(root, "git")
    return (
        str(program),
        *GIT_SAFETY_OPTIONS,
        *_filter_overrides(filter_driver_names(git_dir)),
        f"--git-dir={git_dir}",
        f"--work-tree={root}",
        *arguments,
    )


def _pathspec(workspace: Workspace, path: str | None) -> list[str]:
    """The path after `--`, as git names it: relative, lexical (a symlink is the link, as in git)."""
    if path is None:
        return []
    workspace.contain(path)
    lexical = Path(os.path.normpath(workspace.root / path))
    return ["--", lexical.relative_to(workspace.root).as_posix() or "."]


def _git_failed(run: RunResult) -> ToolResult:
    detail = run.stderr.decode(errors="replace").strip()
    if "not a git repository" in detail:
        raise NotFoundError(_NOT_A_REPOSITORY)
    return ToolResult(text=f"git failed (exit code {run.exit_code}):\n{detail[-4_000:]}", is_error=True)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


# -- oct_git_status ------------------------------------------------------------------------------


class GitStatusParams(_Params):
    path: ProjectPath | None = Field(default=None, description="Only changes under this file or folder.")


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
    truncated: bool
    clean: bool


def parse_status(stdout: bytes) -> StatusOutput:
    """`git status --porcelain=v2 --branch --show-stash -z` as a StatusOutput."""
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
        if len(entries) < STATUS_MAX_ENTRIES:
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
        truncated=count > len(entries),
        clean=count == 0,
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
    if output.truncated:
        lines.append(
            f"[oct-mcp: {output.count} entries, the first {len(output.entries)} shown; narrow with path]"
        )
    if output.stashes:
        lines.append(f"{output.stashes} stash(es)")
    return "\n".join(lines)


def _parse_status_run(run: RunResult) -> ToolResult:
    if run.exit_code != 0:
        return _git_failed(run)
    output = parse_status(run.stdout)
    return ToolResult(text=_status_text(output), structured=output.model_dump(), truncated=output.truncated)


def _plan_status(params: GitStatusParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    argv = git_argv(
        root,
        "status",
        "--porcelain=v2",
        "--branch",
        "--show-stash",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=dirty",
        *_pathspec(env.workspace, params.path),
    )
    return CommandPlan(argv=argv, parse=_parse_status_run, read_only_paths=worktree_git_folders(root))


# -- oct_git_diff --------------------------------------------------------------------------------


class GitDiffParams(_Params):
    staged: bool = Field(
        default=False, description="True: what is staged for the next commit. False: unstaged changes."
    )
    path: ProjectPath | None = Field(default=None, description="Only changes under this file or folder.")
    context_lines: int = Field(default=3, ge=0, le=DIFF_CONTEXT_MAX, description="Lines of context per hunk.")


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
    files: list[DiffFile]
    added: int
    removed: int
    diff: str
    """The unified diff, cut at 512 KiB."""
    diff_cut: bool


def parse_diff(stdout: bytes, *, staged: bool, truncated: bool) -> DiffOutput:
    """`git diff --numstat -p -z` as a DiffOutput: the NUL-separated counts first, then the patch."""
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
    cut = truncated or len(patch) > DIFF_MAX_CHARS
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


def _diff_text(output: DiffOutput) -> str:
    which = "staged" if output.staged else "unstaged"
    if not output.files:
        return f"no {which} changes"
    lines = [f"{len(output.files)} file(s) with {which} changes, +{output.added} -{output.removed}:"]
    for f in output.files:
        counts = "binary" if f.binary else f"+{f.added} -{f.removed}"
        moved = f"{f.original_path} -> " if f.original_path is not None else ""
        lines.append(f"  {moved}{f.path} ({counts})")
    lines.append("")
    lines.append(output.diff)
    if output.diff_cut:
        lines.append("[oct-mcp: the diff was cut; narrow it with path]")
    return "\n".join(lines)


def _diff_parser(staged: bool) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return _git_failed(run)
        output = parse_diff(run.stdout, staged=staged, truncated=run.truncated)
        return ToolResult(text=_diff_text(output), structured=output.model_dump(), truncated=output.diff_cut)

    return parse


def _plan_diff(params: GitDiffParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    argv = git_argv(
        root,
        "diff",
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
        f"--unified={params.context_lines}",
        *_pathspec(env.workspace, params.path),
    )
    return CommandPlan(
        argv=argv, parse=_diff_parser(params.staged), read_only_paths=worktree_git_folders(root)
    )


# -- oct_git_log ---------------------------------------------------------------------------------


class GitLogParams(_Params):
    max_count: int = Field(default=LOG_DEFAULT, ge=1, le=LOG_MAX, description="Most commits, newest first.")
    path: ProjectPath | None = Field(default=None, description="Only commits that touch this file or folder.")


class Commit(BaseModel):
    sha: str
    author: str
    email: str
    date: str
    """Author date, strict ISO 8601."""
    subject: str


class LogOutput(BaseModel):
    commits: list[Commit]
    count: int


_LOG_FIELDS: Final = 5


def parse_log(stdout: bytes) -> LogOutput:
    """`git log -z --format=%H%x00%an%x00%ae%x00%aI%x00%s`: five NUL-separated fields per commit."""
    tokens = [_decode(token) for token in stdout.split(b"\0")]
    commits = [
        Commit(sha=sha, author=author, email=email, date=date, subject=subject)
        for sha, author, email, date, subject in zip(*[iter(tokens)] * _LOG_FIELDS, strict=False)
    ]
    return LogOutput(commits=commits, count=len(commits))


def _parse_log_run(run: RunResult) -> ToolResult:
    if run.exit_code != 0:
        if b"does not have any commits yet" in run.stderr:
            empty = LogOutput(commits=[], count=0)
            return ToolResult(text="no commits yet", structured=empty.model_dump())
        return _git_failed(run)
    output = parse_log(run.stdout)
    lines = [f"{c.sha[:12]} {c.date} {c.author}: {c.subject}" for c in output.commits]
    return ToolResult(text="\n".join(lines) or "no commits", structured=output.model_dump())


def _plan_log(params: GitLogParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    argv = git_argv(
        root,
        "log",
        "-z",
        f"--max-count={params.max_count}",
        "--format=%H%x00%an%x00%ae%x00%aI%x00%s",
        "--no-show-signature",
        "--no-color",
        *_pathspec(env.workspace, params.path),
    )
    return CommandPlan(argv=argv, parse=_parse_log_run, read_only_paths=worktree_git_folders(root))


_DEFANGED: Final = (
    "Runs the server's own git (from its PATH, never a program inside the project), sandboxed, "
    "read-only, without hooks, pager, external diff or filters."
)

GIT_STATUS: Final = ToolSpec(
    name="oct_git_status",
    title="Git status",
    description=(
        "Show the git status of the project: branch, commit, upstream with ahead/behind counts, stashes, "
        "and each changed, staged, renamed, unmerged or untracked file with git's two-letter XY code "
        "(index, work tree; '.' unchanged, '??' untracked). Optionally only under a path. Prefer it to "
        f"`git status` in a shell: structured, no approval needed. {_DEFANGED}"
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
        "Show uncommitted changes as a unified diff: the work tree against the index, or with staged=true "
        "what is staged for the next commit. Returns each file's added and removed line counts (renames "
        "and binary files marked) and the diff text (cut at 512 KiB). Optionally only under a path; "
        f"context_lines sets the context. Prefer it to `git diff` in a shell. {_DEFANGED}"
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
        "List the latest commits of the current branch, newest first: sha, author, email, ISO 8601 date "
        "and subject; at most max_count (default 20, up to 200); optionally only commits touching a "
        f"path. Prefer it to `git log` in a shell. {_DEFANGED}"
    ),
    params=GitLogParams,
    output=LogOutput,
    risk=Risk.READ,
    plan=_plan_log,
)
