"""oct_git_status: git's porcelain v2 status, parsed, each entry with its kind and paths."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

from pydantic import BaseModel, Field

from oct_mcp.spec import (
    CommandPlan,
    ProjectPath,
    Risk,
    RunResult,
    StrictParams,
    ToolEnv,
    ToolSpec,
)
from oct_mcp.tools._paging.results import BudgetField, OffsetField, take_within
from oct_mcp.tools.git.runner import decoded_text, git_failed, git_plan, shown_pathspec
from oct_mcp.types import ToolResult

__all__ = [
    "GIT_STATUS",
    "STATUS_MAX_ENTRIES",
    "GitStatusParams",
    "StatusEntry",
    "StatusOutput",
    "parse_status",
]


STATUS_MAX_ENTRIES: Final = 2_000


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


def parse_status(stdout: bytes, offset: int = 0, max_entries: int = STATUS_MAX_ENTRIES) -> StatusOutput:
    """`git status --porcelain=v2 --branch --show-stash -z` as a StatusOutput, at most
    `max_entries` entries from entry `offset` on, `count` of all of them."""
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
        if count > offset and len(entries) < max_entries:
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
