"""oct_git_diff: the work tree's or the index's changes as git's patch, masked and paged by hunk."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

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
from oct_mcp.tools._paging.results import BudgetField, cut_lines, json_size, take_within
from oct_mcp.tools._text.diffs import DIFF_MAX_CHARS
from oct_mcp.tools.git.masks import WHOLE_FILE, masked_patch
from oct_mcp.tools.git.refs import GitRef
from oct_mcp.tools.git.runner import decoded_text, git_failed, git_plan, shown_pathspec
from oct_mcp.types import ToolResult

__all__ = [
    "DIFF_CONTEXT_MAX",
    "GIT_DIFF",
    "HUNK_STARTS",
    "DiffFile",
    "DiffOutput",
    "GitDiffParams",
    "PagedDiff",
    "diff_page_cut",
    "diff_page_lines",
    "page_diff",
    "parse_diff",
]


DIFF_CONTEXT_MAX: Final = 100


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


# Where a diff page may end: before a file's header or a hunk's.
HUNK_STARTS: Final = ("diff --git ", "@@ ")


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
