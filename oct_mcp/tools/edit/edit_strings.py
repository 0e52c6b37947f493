"""oct_edit: exact string replacements in one file, all or nothing, with the nearest match named on a miss.

The edits apply in memory, in order, each to the result of the ones before; only when every one
of them applies is the file written, once, through the same atomic write as oct_write_file. An
`old` that is not in the file, or is there more often than the edit allows, refuses the whole
call with where the nearest candidates stand, since a model that is only told "not found" retries
blind or rewrites the whole file.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Final

from pydantic import BaseModel, Field, StringConstraints, model_validator

from oct_mcp.deadline import Deadline
from oct_mcp.diff_view import readable_diff
from oct_mcp.execution.changes import PathChange, Proposal
from oct_mcp.preview import FileChange
from oct_mcp.spec import ProjectPath, Risk, StrictParams, ToolSpec
from oct_mcp.tools._text.diffs import Diff, truncate_diff, unified_diff
from oct_mcp.tools._text.masks import MaskError, kept_note, masked, unmask
from oct_mcp.tools.edit.change_kit import digest_of, named_if_other, plan_change, read_existing
from oct_mcp.tools.edit.write_file import WRITE_MAX_BYTES
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = ["EDIT", "EditError", "EditOutput", "EditParams", "StringEdit", "apply_edits", "propose_edit"]

EDITS_MAX: Final = 64
EXPECTED_COUNT_MAX: Final = 100_000
# A candidate is scored by the lines it shares with `old`; a line found this often (a blank, a
# lone brace) says nothing about where `old` was meant to be.
_COMMON_LINE: Final = 256
_CANDIDATES: Final = 3
_FUZZY_LINES_MAX: Final = 20_000
_SHOWN_CHARS: Final = 400
_KEPT_EQUAL: Final = 30
_CHECK_EVERY: Final = 1_024
_BARE_LF: Final = re.compile(r"(?<!\r)\n")


class StringEdit(StrictParams):
    old: Annotated[str, StringConstraints(min_length=1, max_length=WRITE_MAX_BYTES)] = Field(
        description="Exact current text, indentation included."
    )
    new: Annotated[str, StringConstraints(max_length=WRITE_MAX_BYTES)] = Field()
    replace_all: bool = Field(default=False)
    expected_count: Annotated[int, Field(ge=1, le=EXPECTED_COUNT_MAX)] | None = Field(
        default=None, description="Replace all; refuse unless exactly this many."
    )


class EditParams(StrictParams):
    path: ProjectPath = Field()
    edits: Annotated[list[StringEdit], Field(min_length=1, max_length=EDITS_MAX)] = Field()
    dry_run: bool | None = Field(default=None, description="Unset: the server's default.")

    @model_validator(mode="after")
    def _edits_fit(self) -> EditParams:
        total = sum(len(edit.old) + len(edit.new) for edit in self.edits)
        if total > 2 * WRITE_MAX_BYTES:
            raise ValueError(
                f"the edits' old and new texts must total at most {2 * WRITE_MAX_BYTES} characters"
            )
        return self


class EditOutput(BaseModel):
    path: str
    applied: bool
    """False for a dry run, or when the edits leave the file as it was: nothing was written."""
    replacements: list[int]
    """How many places each edit replaced, in the order given."""
    added: int
    removed: int
    diff: str
    diff_cut: bool
    masked_kept: int = 0
    """Secrets the new text keeps behind the masks the model wrote back; the diff shows the masks."""


class EditError(Exception):
    """An edit does not apply; the message says which, and where the nearest match is."""


@dataclass(frozen=True, slots=True)
class _Placed:
    old: str
    new: str
    count: int


def apply_edits(
    text: str, edits: Sequence[StringEdit], deadline: Deadline | None = None
) -> tuple[str, list[int]]:
    """`text` with each edit applied in order, as `str.replace` would; and how many places each replaced.

    An `old` given with `\\n` line ends matches a CRLF file's `\\r\\n` (its `new` then gets
    `\\r\\n` too), and the other way round; only when the text as given is not found.

    Raises:
        EditError: An `old` is not found, or found more or fewer times than the edit allows.
        ToolTimeoutError: The deadline passed.
    """
    counts: list[int] = []
    for number, edit in enumerate(edits, start=1):
        if deadline is not None:
            deadline.check()
        placed = _place(text, edit)
        where = f"edit {number} of {len(edits)}"
        if placed is None:
            raise EditError(
                f"{where}: its old text is not in the file.{_nearest_hint(text, edit.old, deadline)}"
            )
        wanted = edit.expected_count
        if wanted is not None and placed.count != wanted:
            raise EditError(
                f"{where}: its old text is in the file {placed.count} time(s), not the expected_count of "
                f"{wanted} ({_lines_listed(text, placed.old)}); fix expected_count, or widen old to select "
                "the places meant"
            )
        if wanted is None and not edit.replace_all and placed.count > 1:
            listed = _lines_listed(text, placed.old)
            raise EditError(
                f"{where}: its old text is in the file {placed.count} times ({listed}); "
                "add surrounding lines to old until it is unique, or set replace_all=true or "
                f"expected_count={placed.count} to replace them all"
            )
        text = text.replace(placed.old, placed.new)
        counts.append(placed.count)
    return text, counts


def _place(text: str, edit: StringEdit) -> _Placed | None:
    """The edit's texts as they stand in `text` (line ends adapted if need be), or None if absent."""
    count = text.count(edit.old)
    if count:
        return _Placed(edit.old, edit.new, count)
    if "\r\n" in text:
        old, new = _BARE_LF.sub("\r\n", edit.old), _BARE_LF.sub("\r\n", edit.new)
    else:
        old, new = edit.old.replace("\r\n", "\n"), edit.new.replace("\r\n", "\n")
    count = text.count(old) if old != edit.old else 0
    return _Placed(old, new, count) if count else None


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _lines_listed(text: str, old: str) -> str:
    lines: list[int] = []
    start = text.find(old)
    while start != -1 and len(lines) < 10:
        lines.append(_line_of(text, start))
        start = text.find(old, start + len(old))
    more = ", ..." if start != -1 else ""
    return f"at line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}{more}"


def _nearest_hint(text: str, old: str, deadline: Deadline | None) -> str:
    """Where the text most like `old` stands: line numbers, a character diff of the closest, and
    whether only whitespace or line endings differ. Empty when nothing is alike."""
    file_lines = text.splitlines(keepends=True)
    old_lines = old.splitlines(keepends=True)
    starts = _candidates(file_lines, old_lines, deadline)
    if not starts:
        return " Nothing in the file resembles it: read the file again before editing it."
    closest = _aligned("".join(file_lines[starts[0] : starts[0] + len(old_lines)]), old)
    listed = ", ".join(str(start + 1) for start in starts)
    several = len(starts) > 1
    parts = [f" The nearest candidate{'s start at lines' if several else ' starts at line'} {listed}."]
    if closest.replace("\r\n", "\n") == old.replace("\r\n", "\n"):
        parts.append("Only the line endings differ.")
    elif "".join(closest.split()) == "".join(old.split()):
        parts.append("Only whitespace differs (indentation, blanks or line breaks): copy it exactly.")
    parts.append(
        f"The closest, as the file has it ({{+file+}}) against old ({{-old-}}):\n{_char_diff(old, closest)}"
    )
    return " ".join(parts)


def _candidates(file_lines: list[str], old_lines: list[str], deadline: Deadline | None) -> list[int]:
    """The starting lines (0-based) of the places most like `old_lines`, best first."""
    places: defaultdict[str, list[int]] = defaultdict(list)
    for number, line in enumerate(file_lines):
        if deadline is not None and not number % _CHECK_EVERY:
            deadline.check()
        stripped = line.strip()
        if stripped:
            places[stripped].append(number)
    votes: Counter[int] = Counter()
    for offset, line in enumerate(old_lines):
        found = places.get(line.strip(), [])
        if len(found) <= _COMMON_LINE:
            votes.update(place - offset for place in found if place >= offset)
    if votes:
        return [start for start, _votes in sorted(votes.items(), key=lambda item: (-item[1], item[0]))][
            :_CANDIDATES
        ]
    # No line in common (a typo in a one-line old): the lines most like its first line.
    first = old_lines[0].strip() if old_lines else ""
    scored: list[tuple[float, int]] = []
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(first)
    for number, line in enumerate(file_lines[:_FUZZY_LINES_MAX]):
        if deadline is not None and not number % _CHECK_EVERY:
            deadline.check()
        matcher.set_seq1(line.strip())
        if matcher.real_quick_ratio() >= 0.5 and matcher.quick_ratio() >= 0.5:
            ratio = matcher.ratio()
            if ratio >= 0.5:
                scored.append((-ratio, number))
    return [number for _ratio, number in sorted(scored)[:_CANDIDATES]]


def _aligned(window: str, old: str) -> str:
    """The part of `window` that lines up with `old`: a one-line old is most often part of a line."""
    blocks = [
        block
        for block in difflib.SequenceMatcher(None, window, old, autojunk=False).get_matching_blocks()
        if block.size
    ]
    if not blocks:
        return window
    first, last = blocks[0], blocks[-1]
    start = max(0, first.a - first.b)
    end = min(len(window), last.a + last.size + (len(old) - last.b - last.size))
    return window[start:end]


def _char_diff(old: str, found: str) -> str:
    """`found` against `old`, character by character: `{-old-}{+file+}`, long equal runs shortened."""
    pieces: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, found, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            same = old[i1:i2]
            if len(same) > 2 * _KEPT_EQUAL:
                same = f"{same[:_KEPT_EQUAL]}…{same[-_KEPT_EQUAL:]}"
            pieces.append(same)
            continue
        if i2 > i1:
            pieces.append(f"{{-{_visible(old[i1:i2])}-}}")
        if j2 > j1:
            pieces.append(f"{{+{_visible(found[j1:j2])}+}}")
    shown = "".join(pieces)
    return shown if len(shown) <= _SHOWN_CHARS else shown[:_SHOWN_CHARS] + "…"


def _visible(changed: str) -> str:
    return changed.replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")


def propose_edit(
    workspace: Workspace, params: EditParams, deadline: Deadline | None = None
) -> Proposal | ToolResult:
    """The edits applied to the file in memory: the one write they make, and its diff.

    An edit that does not apply is an error result.

    Raises:
        PathRefusedError: Outside the project, a folder, not a regular file.
        ToolTimeoutError: The deadline passed.
    """
    target = workspace.contain(params.path)
    old = read_existing(workspace, target)
    if old is None:
        return _refused("the file does not exist; create it with oct_write_file")
    text = old.text
    if text is None:
        return _refused("the file is binary or not UTF-8; only text files are edited")
    # The edits apply to the file as the model read it, secrets masked; the masks kept go back
    # to the secrets they stand for, and the diff shows the masks.
    seen = masked(text)
    try:
        new_view, counts = apply_edits(seen.view, params.edits, deadline)
        new_text, kept = unmask(seen, new_view, deadline)
    except (EditError, MaskError) as exc:
        return _refused(str(exc))
    relative = workspace.relative(target)
    diff: Diff = unified_diff(seen.view, new_view, f"a/{relative}", f"b/{relative}", deadline)
    changed = new_text != text
    shown, cut = truncate_diff(diff.text)

    def answer(applied: bool) -> ToolResult:
        output = EditOutput(
            path=relative,
            applied=applied and changed,
            replacements=counts,
            added=diff.added,
            removed=diff.removed,
            diff=shown,
            diff_cut=cut,
            masked_kept=kept,
        )
        counted = f"at {sum(counts)} place(s) (+{diff.added} -{diff.removed})"
        if not changed:
            head = f"the edits leave {relative} as it is; nothing written"
        elif not applied:
            head = f"dry run, nothing changed: would edit {relative} {counted}"
        else:
            head = f"edited {relative} {counted}"
        text = f"{head}{kept_note(kept)}\n{readable_diff(shown)}".rstrip("\n")
        return ToolResult(text=text, structured=output.model_dump())

    if not changed:
        return Proposal(changes=(), files=(), diff=diff.text, answer=answer)
    change = PathChange(
        action="write",
        path=relative,
        read=digest_of(old),
        named=named_if_other(workspace, params.path, relative),
        data=new_text.encode("utf-8"),
    )
    summary = FileChange(
        path=relative, action="modify", added=diff.added, removed=diff.removed, masked_kept=kept
    )
    return Proposal(changes=(change,), files=(summary,), diff=diff.text, answer=answer)


def _refused(reason: str) -> ToolResult:
    return ToolResult(text=f"the edit does not apply; nothing was changed.\n{reason}", is_error=True)


EDIT: Final = ToolSpec(
    name="oct_edit",
    title="Edit a file",
    description=(
        "Replace exact text in one existing file: each old must occur once (or replace_all, "
        "expected_count); edits apply in order, all or nothing; a miss names the nearest lines. A "
        "[REDACTED:kind] mask may stay in place. Whole files: oct_write_file; diffs: oct_apply_patch."
    ),
    params=EditParams,
    output=EditOutput,
    risk=Risk.WRITE,
    plan=partial(plan_change, propose_edit),
    preview=partial(plan_change, propose_edit),
    idempotent=False,
    names_only_its_paths=True,
)
