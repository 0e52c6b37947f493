"""oct_git_show and oct_git_blame: a commit, and who last changed each line, as git records them.

git runs as the other git tools run it (`git_plan`: the server's git, sandboxed, read-only, every
safety option and filter override), each ref resolved to a commit first; show and blame also pass
`--no-ext-diff` and `--no-textconv`, so no command a repository's config or attributes name runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Final

from pydantic import BaseModel, Field, model_validator

from oct_mcp.errors import ExecutionError, FileTooLargeError, LineRangeError, NotFoundError
from oct_mcp.redaction import mask_line, redact_lines
from oct_mcp.spec import CommandPlan, ProjectPath, Risk, RunResult, StrictParams, ToolEnv, ToolSpec
from oct_mcp.tools._paging.results import BudgetField, json_size, take_within
from oct_mcp.tools.files import LINE_RANGE_SCAN_LIMIT
from oct_mcp.tools.git.diff import (
    DIFF_CONTEXT_MAX,
    DiffFile,
    diff_page_cut,
    diff_page_lines,
    page_diff,
    parse_diff,
)
from oct_mcp.tools.git.masks import WHOLE_FILE
from oct_mcp.tools.git.refs import GitRef
from oct_mcp.tools.git.runner import git_failed, git_plan, pathspec, shown_pathspec
from oct_mcp.types import ToolResult
from oct_mcp.workspace import read_at_most

__all__ = [
    "BLAME_MAX_LINES",
    "GIT_BLAME",
    "GIT_SHOW",
    "BlameLine",
    "BlameOutput",
    "ShowOutput",
    "parse_blame",
    "parse_show",
]

MESSAGE_MAX_CHARS: Final = 8_000
BLAME_DEFAULT_LINES: Final = 100
BLAME_MAX_LINES: Final = 1_000
LINE_MAX: Final = 10_000_000
_SHOW_FIELDS: Final = ("commit", "parents", "author", "email", "date", "committer", "committer_email")
# The header: one NUL-separated field each, the message last (it may hold anything but NUL).
_SHOW_FORMAT: Final = "--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
_ZONE: Final = re.compile(r"[+-][0-9]{4}")
_FILE_HAS_ONLY: Final = re.compile(rb"has only (\d+) lines?")


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


# -- oct_git_show --------------------------------------------------------------------------------


class GitShowParams(StrictParams):
    commit: GitRef = Field(default="HEAD")
    path: ProjectPath | None = Field(default=None)
    context_lines: int = Field(default=3, ge=0, le=DIFF_CONTEXT_MAX)
    stat: bool = Field(default=False)
    offset: int = Field(default=0, ge=0, le=10_000_000, description="A cut result's next_offset.")
    max_chars: int = BudgetField()


class ShowOutput(BaseModel):
    commit: str
    parents: list[str]
    """Parent commit ids; a merge's diff is against the first."""
    author: str
    email: str
    date: str
    """Author date, strict ISO 8601."""
    committer: str
    committer_email: str
    committer_date: str
    subject: str
    message: str
    """The whole message, subject first, cut at 8,000 characters."""
    message_cut: bool = False
    files: list[DiffFile]
    added: int
    removed: int
    diff: str
    """The unified diff (this page of it) against the first parent; empty with stat."""
    diff_cut: bool
    next_offset: int | None = None
    """The offset that shows the patch lines after these."""
    files_omitted: int = 0
    """Changed files past the budget, not listed: narrow with path."""


def parse_show(stdout: bytes, *, truncated: bool, context: int | None = None) -> ShowOutput:
    """`git show -z --numstat --patch` with `_SHOW_FORMAT`: the header's fields, then the counts and patch.

    Raises:
        ValueError: The output holds no whole header (git printed something else).
    """
    fields = stdout.split(b"\0", len(_SHOW_FIELDS) + 1)
    if len(fields) < len(_SHOW_FIELDS) + 2:
        raise ValueError("git show printed no commit header")
    header = [_decode(field) for field in fields[:-2]]
    # The message ends at the NUL git puts after the format, then a line break before the counts.
    message_raw, _, changes = fields[-1].partition(b"\0")
    message = _decode(message_raw).rstrip("\n")
    diff = parse_diff(changes.removeprefix(b"\n"), staged=False, truncated=truncated, context=context)
    commit, parents, author, email, date, committer, committer_email = header
    return ShowOutput(
        commit=commit,
        parents=parents.split(),
        author=author,
        email=email,
        date=date,
        committer=committer,
        committer_email=committer_email,
        committer_date=_decode(fields[-2]),
        subject=message.partition("\n")[0],
        message=message[:MESSAGE_MAX_CHARS],
        message_cut=len(message) > MESSAGE_MAX_CHARS,
        files=diff.files,
        added=diff.added,
        removed=diff.removed,
        diff=diff.diff,
        diff_cut=diff.diff_cut,
    )


def _show_text(output: ShowOutput) -> str:
    lines = [f"commit {output.commit}"]
    if len(output.parents) > 1:
        lines.append(f"Merge: {' '.join(output.parents)} (the diff is against the first parent)")
    lines.append(f"Author: {output.author} <{output.email}>")
    lines.append(f"Date:   {output.date}")
    if (output.committer, output.committer_email) != (output.author, output.email):
        lines.append(f"Commit: {output.committer} <{output.committer_email}> {output.committer_date}")
    lines.append("")
    lines.extend(f"    {line}" for line in output.message.splitlines())
    if output.message_cut:
        lines.append(f"    [oct-mcp: the message goes on past {MESSAGE_MAX_CHARS} characters]")
    lines.append("")
    lines.append(f"{len(output.files)} file(s) changed, +{output.added} -{output.removed}:")
    lines.extend(diff_page_lines(output))
    return "\n".join(lines)


def _show_parser(params: GitShowParams) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        whole = parse_show(
            run.stdout, truncated=run.truncated, context=None if params.stat else params.context_lines
        )
        header = whole.model_dump(exclude={"files", "diff"})
        page = page_diff(
            whole.files,
            whole.diff,
            offset=params.offset,
            max_chars=params.max_chars,
            stat=params.stat,
            spent=json_size(header),
        )
        paged = whole.model_copy(update=page)
        return ToolResult(
            text=_show_text(paged), structured=paged.model_dump(), truncated=diff_page_cut(paged)
        )

    return parse


def _plan_show(params: GitShowParams, env: ToolEnv) -> CommandPlan:
    paths, magic = shown_pathspec(env, params.path)
    paths = paths or ["--"]

    def arguments(commits: Mapping[str, str]) -> tuple[str, ...]:
        return (
            "show",
            "-z",
            _SHOW_FORMAT,
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--no-relative",
            "--no-show-signature",
            "--numstat",
            "--patch",
            "--find-renames",
            "--diff-merges=first-parent",
            "--submodule=short",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            # Each file whole, to be masked with the whole file as context and cut to hunks here.
            f"--unified={0 if params.stat else WHOLE_FILE}",
            "--end-of-options",
            commits["commit"],
            *paths,
        )

    return git_plan(env, arguments, _show_parser(params), refs=(("commit", params.commit),), magic=magic)


# -- oct_git_blame -------------------------------------------------------------------------------


class GitBlameParams(StrictParams):
    path: ProjectPath = Field()
    start_line: int = Field(default=1, ge=1, le=LINE_MAX)
    end_line: int | None = Field(
        default=None,
        ge=1,
        le=LINE_MAX,
    )
    commit: GitRef | None = Field(
        default=None,
    )
    max_chars: int = BudgetField()

    @model_validator(mode="after")
    def _range_is_bounded(self) -> GitBlameParams:
        if self.end_line is not None and self.end_line < self.start_line:
            raise ValueError("end_line comes before start_line")
        if self.end_line is not None and self.end_line - self.start_line >= BLAME_MAX_LINES:
            raise ValueError(f"a blame covers at most {BLAME_MAX_LINES} lines: narrow start_line..end_line")
        return self

    @property
    def last_line(self) -> int:
        return self.end_line if self.end_line is not None else self.start_line + BLAME_DEFAULT_LINES - 1


class BlameLine(BaseModel):
    line: int
    """The line's number in the file as blamed."""
    commit: str
    """The commit that last changed the line; all zeros for a change not committed yet."""
    author: str
    email: str
    date: str
    """Author date, strict ISO 8601 in the author's zone (empty if git recorded none it could read)."""
    summary: str
    """The commit's subject."""
    original_line: int
    """The line's number in that commit."""
    original_path: str
    """The file's path in that commit (differs across a rename)."""
    text: str


class BlameOutput(BaseModel):
    path: str
    commit: str | None
    """The commit ref as given; None: the work tree."""
    lines: list[BlameLine]
    next_start_line: int | None = None
    """The start_line that shows the lines after these (the budget or the range's bound was reached)."""


def _iso_date(seconds: str, zone: str) -> str:
    """git's `author-time` and `author-tz` ('1700000000', '+0100') as ISO 8601, as `%aI` writes it."""
    if not seconds.isdigit() or _ZONE.fullmatch(zone) is None:
        return ""
    offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5])) * (-1 if zone[0] == "-" else 1)
    try:
        return datetime.fromtimestamp(int(seconds), timezone(offset)).isoformat()
    except (OverflowError, OSError, ValueError):
        return ""


def parse_blame(stdout: bytes) -> list[BlameLine]:
    """`git blame --porcelain`: each line's commit, and that commit's details the first time it appears."""
    details: dict[str, dict[str, str]] = {}
    lines: list[BlameLine] = []
    current: dict[str, str] = {}
    commit, original, final = "", 0, 0
    for raw in stdout.split(b"\n"):
        if raw.startswith(b"\t"):
            known = details.setdefault(commit, current)
            lines.append(
                BlameLine(
                    line=final,
                    commit=commit,
                    author=known.get("author", ""),
                    email=known.get("author-mail", "").removeprefix("<").removesuffix(">"),
                    date=_iso_date(known.get("author-time", ""), known.get("author-tz", "")),
                    summary=known.get("summary", ""),
                    original_line=original,
                    original_path=known.get("filename", ""),
                    text=_decode(raw[1:]),
                )
            )
            commit = ""
            continue
        key, _, value = _decode(raw).partition(" ")
        if not commit:
            numbers = value.split(" ")
            if len(key) in (40, 64) and len(numbers) >= 2 and all(n.isdigit() for n in numbers):
                commit, original, final = key, int(numbers[0]), int(numbers[1])
                current = details.get(commit, {})
            continue
        current[key] = value
    return lines


def _masked_blame(lines: list[BlameLine], whole: bytes) -> list[BlameLine]:
    """The blamed lines with their secrets masked as the whole file (`whole`, as blamed) shows them.

    Raises:
        ExecutionError: A line is not the file's line of that number: the file changed between
            the two reads, so the masks would be placed on another text.
    """
    text = _decode(whole)
    masks = redact_lines(text)
    file_lines = text.split("\n")
    masked: list[BlameLine] = []
    for line in lines:
        if not 0 < line.line <= len(file_lines) or file_lines[line.line - 1] != line.text:
            raise ExecutionError(
                "the file changed while it was blamed, so its secrets could not be masked in context; "
                "call again (blame a commit to see a version that does not change)"
            )
        shown, _ = mask_line(line.text, masks[line.line - 1])
        masked.append(line if shown == line.text else line.model_copy(update={"text": shown}))
    return masked


def _blame_parser(params: GitBlameParams, whole: Callable[[], bytes]) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            past = _FILE_HAS_ONLY.search(run.stderr)
            if past is not None:
                raise LineRangeError(f"start_line is past the end: the file has {int(past[1])} lines")
            return git_failed(run)
        # One line past the range was asked for when end_line was not given: it tells whether more follow.
        # A range alone may hold a private key's body without its BEGIN line: the masks are placed
        # as the whole file shows them, as a read of a range places them.
        every = _masked_blame(parse_blame(run.stdout), whole())
        wanted = every[: params.last_line - params.start_line + 1]
        lines, cut = take_within(wanted, params.max_chars)
        more = cut or len(every) > len(wanted)
        output = BlameOutput(
            path=params.path,
            commit=params.commit,
            lines=lines,
            next_start_line=params.start_line + len(lines) if more and lines else None,
        )
        text = [f"{b.commit[:12]} {b.line:>6} {b.author} {b.summary[:50]!r}: {b.text}" for b in output.lines]
        if output.next_start_line is not None:
            text.append(f"[oct-mcp: more lines follow: start_line={output.next_start_line}]")
        return ToolResult(
            text="\n".join(text) or "no lines",
            structured=output.model_dump(),
            truncated=output.next_start_line is not None,
        )

    return parse


def _plan_blame(params: GitBlameParams, env: ToolEnv) -> CommandPlan:
    paths = pathspec(env.workspace, params.path)

    def arguments(commits: Mapping[str, str]) -> tuple[str, ...]:
        # git blame reads no --end-of-options; the revision is a verified commit id, never an option.
        revision = [commits["commit"]] if "commit" in commits else []
        return (
            "blame",
            "--porcelain",
            "--no-textconv",
            f"-L{params.start_line},{params.last_line + (params.end_line is None)}",
            *revision,
            *paths,
        )

    if params.commit is None:
        # The work tree's file, as a read takes it; a change since the blame is caught line by line.
        return git_plan(env, arguments, _blame_parser(params, partial(_work_tree_file, env, params.path)))
    blob: list[bytes] = []

    def read_blob(commits: Mapping[str, str]) -> tuple[str, ...]:
        # The file as of the commit, whole, from git in the same sandbox: the blame shows its lines.
        return ("cat-file", "blob", f"{commits['commit']}:{paths[-1]}")

    def take_blob(run: RunResult) -> None:
        if run.exit_code != 0:
            raise NotFoundError("the file is not in that commit; oct_git_log with path lists its commits")
        if run.truncated:
            raise FileTooLargeError(
                "the file is larger than the output limit, so its secrets cannot be masked in context; "
                "it was not blamed (max_output_bytes raises the limit)"
            )
        blob.append(run.stdout)

    return git_plan(
        env,
        arguments,
        _blame_parser(params, lambda: blob[0]),
        refs=(("commit", params.commit),),
        before=(read_blob, take_blob),
    )


def _work_tree_file(env: ToolEnv, path: str) -> bytes:
    """The work tree's file, read as oct_read_file reads it (contained, regular, bounded).

    Raises:
        FileTooLargeError: Over the limit a read of a range scans.
    """
    fd, _resolved = env.workspace.open_contained_file(path)
    try:
        size = os.fstat(fd).st_size
        data = read_at_most(fd, LINE_RANGE_SCAN_LIMIT, size)
    finally:
        os.close(fd)
    if len(data) > LINE_RANGE_SCAN_LIMIT:
        raise FileTooLargeError(
            f"the file is over {LINE_RANGE_SCAN_LIMIT} bytes, so its secrets cannot be masked in context; "
            "it was not blamed"
        )
    return data


GIT_SHOW: Final = ToolSpec(
    name="oct_git_show",
    title="Git show",
    description=(
        "One commit (default HEAD): ids, author, committer, dates, message, per-file counts and the diff "
        "against its first parent (stat=true: counts only), paged."
    ),
    params=GitShowParams,
    output=ShowOutput,
    risk=Risk.READ,
    plan=_plan_show,
)

GIT_BLAME: Final = ToolSpec(
    name="oct_git_blame",
    title="Git blame",
    description=(
        f"Who last changed each line of a file, start_line..end_line (at most {BLAME_MAX_LINES}, default "
        f"{BLAME_DEFAULT_LINES}): commit, author, date, subject, text; of the work tree or a commit."
    ),
    params=GitBlameParams,
    output=BlameOutput,
    risk=Risk.READ,
    plan=_plan_blame,
)
