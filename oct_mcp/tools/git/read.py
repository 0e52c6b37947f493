"""oct_git_status, oct_git_diff and oct_git_log: git's machine-readable output, parsed.

git runs as `runner` runs it; a ref a call names is resolved to a commit in the sandbox before
the real call, which gets the commit id (`refs`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, Protocol

from pydantic import BaseModel, Field, model_validator

from oct_mcp.diff_view import readable_diff
from oct_mcp.display import quote_name
from oct_mcp.spec import (
    CommandPlan,
    ProjectPath,
    Risk,
    RunResult,
    StrictParams,
    ToolEnv,
    ToolSpec,
)
from oct_mcp.tools._paging.results import BudgetField, OffsetField, cut_lines, json_size, take_within
from oct_mcp.tools._text.diffs import DIFF_MAX_CHARS
from oct_mcp.tools.git.masks import WHOLE_FILE, masked_patch
from oct_mcp.tools.git.refs import GitRef
from oct_mcp.tools.git.runner import decoded_text, git_failed, git_plan, pathspec, shown_pathspec
from oct_mcp.types import ToolResult

__all__ = [
    "DIFF_CONTEXT_MAX",
    "GIT_DIFF",
    "GIT_LOG",
    "GIT_STATUS",
    "HUNK_STARTS",
    "LOG_DEFAULT",
    "LOG_MAX",
    "STATUS_MAX_ENTRIES",
    "Commit",
    "DiffFile",
    "DiffOutput",
    "GitDiffParams",
    "GitLogParams",
    "GitStatusParams",
    "LogOutput",
    "PagedDiff",
    "StatusEntry",
    "StatusOutput",
    "diff_page_cut",
    "diff_page_lines",
    "page_diff",
    "parse_diff",
    "parse_log",
    "parse_status",
]

STATUS_MAX_ENTRIES: Final = 2_000


LOG_DEFAULT: Final = 20


LOG_MAX: Final = 200


DIFF_CONTEXT_MAX: Final = 100


class GitStatusParams(StrictParams):
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
        record = decoded_text(tokens[index])
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
            original = decoded_text(tokens[index]) if index < len(tokens) else None
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


class GitDiffParams(StrictParams):
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
        added, removed, path = [*decoded_text(stdout[position:end]).split("\t", 2), "", ""][:3]
        position = end + 1
        original: str | None = None
        if not path:
            # A rename: the old and the new path follow as records of their own.
            names = stdout[position:].split(b"\0", 2)
            original, path = decoded_text(names[0]), decoded_text(names[1]) if len(names) > 1 else ""
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
    patch = decoded_text(stdout[position:])
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


class GitLogParams(StrictParams):
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
    tokens = [decoded_text(token) for token in stdout.split(b"\0")]
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
