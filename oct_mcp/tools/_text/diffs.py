"""Unified diffs of one file's old and new text, as git writes them, cut to a budget for a result."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from oct_mcp.deadline import CheckedMatcher, Deadline
from oct_mcp.display import has_hidden_characters, quote_name
from oct_mcp.tools._text.lines import split_lines

__all__ = [
    "DEV_NULL",
    "DIFF_MAX_CHARS",
    "NO_NEWLINE",
    "Diff",
    "truncate_diff",
    "unified_diff",
    "unified_lines",
]

DIFF_MAX_CHARS: Final = 512 * 1_024
NO_NEWLINE: Final = "\\ No newline at end of file"
DEV_NULL: Final = "/dev/null"
# Loop turns between two deadline checks: a check costs a clock read, a turn far less.
_CHECK_EVERY: Final = 1_024


@dataclass(frozen=True, slots=True)
class Diff:
    text: str
    added: int
    removed: int


def unified_diff(
    old: str | None, new: str | None, old_name: str, new_name: str, deadline: Deadline | None = None
) -> Diff:
    """A unified diff git and oct_apply_patch can apply, with `\\ No newline at end of file` marks.

    Args:
        old: The old text; None when the file is created.
        new: The new text; None when the file is deleted.
        old_name: The old side's name (`a/path`); `/dev/null` is used when `old` is None.
        new_name: The new side's name (`b/path`); `/dev/null` is used when `new` is None.
        deadline: Checked as the diff is produced.

    Raises:
        ToolTimeoutError: The deadline passed.
    """
    # A name with a character that breaks or hides a line (a file on disk may hold `\n` in its
    # name) is quoted as git quotes such names: it cannot forge the diff's own header lines.
    old_name, new_name = _header_name(old_name), _header_name(new_name)
    lines: list[str] = []
    added = removed = 0
    produced = unified_lines(
        split_lines(old or ""),
        split_lines(new or ""),
        DEV_NULL if old is None else old_name,
        DEV_NULL if new is None else new_name,
        deadline,
    )
    for number, line in enumerate(produced):
        if deadline is not None and not number % _CHECK_EVERY:
            deadline.check()
        if number >= 2:
            added += line.startswith("+")
            removed += line.startswith("-")
        lines.append(line if line.endswith("\n") else f"{line}\n{NO_NEWLINE}\n")
    if not lines and (old is None or new is None):
        # An empty file created or deleted: headers only, as git writes them.
        lines = [
            f"--- {DEV_NULL if old is None else old_name}\n",
            f"+++ {DEV_NULL if new is None else new_name}\n",
        ]
    return Diff("".join(lines), added, removed)


def unified_lines(
    a: list[str], b: list[str], fromfile: str, tofile: str, deadline: Deadline | None
) -> Iterator[str]:
    """The lines `difflib.unified_diff(a, b, fromfile, tofile)` yields, through `CheckedMatcher`."""
    started = False
    for group in CheckedMatcher(a, b, deadline).get_grouped_opcodes(3):
        if not started:
            started = True
            yield f"--- {fromfile}\n"
            yield f"+++ {tofile}\n"
        first, last = group[0], group[-1]
        yield f"@@ -{_unified_range(first[1], last[2])} +{_unified_range(first[3], last[4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from ("-" + line for line in a[i1:i2])
            if tag in ("replace", "insert"):
                yield from ("+" + line for line in b[j1:j2])


def _header_name(name: str) -> str:
    return quote_name(name) if has_hidden_characters(name) else name


def _unified_range(start: int, stop: int) -> str:
    """A hunk header's range as difflib writes it: `start,length`, the length left out when it is 1."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return str(beginning)
    return f"{beginning - 1 if not length else beginning},{length}"


def truncate_diff(diff: str) -> tuple[str, bool]:
    """`diff` cut to DIFF_MAX_CHARS for a result, and whether it was cut."""
    return (diff, False) if len(diff) <= DIFF_MAX_CHARS else (diff[:DIFF_MAX_CHARS], True)
