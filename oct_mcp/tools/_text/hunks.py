"""Placing a patch's hunks in a file's text: exactly, at the nearest offset, in the file's line ends."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Final

from oct_mcp.deadline import Deadline
from oct_mcp.tools._text.lines import split_lines
from oct_mcp.tools._text.patch_parse import Hunk, PatchError

__all__ = ["apply_hunks"]

# Loop turns between two deadline checks: a check costs a clock read, a turn far less.
_CHECK_EVERY: Final = 1_024
# Lines either side of where a hunk's header puts it that are searched before the file is indexed.
_NEAR: Final = 64


def apply_hunks(text: str, hunks: tuple[Hunk, ...], where: str, deadline: Deadline | None = None) -> str:
    """`text` with each hunk applied in order: its lines exactly, at its line or the nearest offset.

    A hunk whose lines end otherwise than the file's (LF lines for a CRLF file, or the other way
    round) is applied with the file's line ends, where it does not apply as written. A hunk with
    a bare `@@` header is placed at its first match after the hunk before it.

    Raises:
        PatchError: A hunk's removed and context lines are not in the text; the message names the
            first line that differs at the hunk's nearest place, and what the file has there.
        ToolTimeoutError: The deadline passed.
    """
    lines = split_lines(text)
    finder = _HunkFinder(lines, deadline)
    crlf = _mostly_crlf(lines)
    result: list[str] = []
    cursor = offset = 0
    for number, hunk in enumerate(hunks, start=1):
        if deadline is not None:
            deadline.check()
        expected = [line for tag, line in hunk.lines if tag != "+"]
        replacement = [line for tag, line in hunk.lines if tag != "-"]
        if not hunk.numbered:
            if not expected and lines:
                raise PatchError(
                    f"{where}, hunk {number}: a bare '@@' hunk that only adds lines cannot be placed; "
                    "give it a context line or two, or line numbers (@@ -start,count +start,count @@)"
                )
            base = cursor
        else:
            # A hunk that removes nothing inserts after line old_start; one that does, starts at it.
            base = (hunk.old_start if not expected else hunk.old_start - 1) + offset
        at = finder.find(expected, base, cursor)
        if at is None:
            adapted = [_line_end(line, crlf) for line in expected]
            if adapted != expected:
                at = finder.find(adapted, base, cursor)
                if at is not None:
                    expected, replacement = adapted, [_line_end(line, crlf) for line in replacement]
        if at is None:
            shown = f"at line {hunk.old_start}" if hunk.numbered else "no line numbers"
            raise PatchError(
                f"{where}, hunk {number} ({shown}): its context and removed lines are not in the file as the "
                f"hunk shows them. {_mismatch(lines, expected, base, cursor, deadline)}"
            )
        result += lines[cursor:at]
        result += replacement
        cursor = at + len(expected)
        if hunk.numbered:
            offset = at - (hunk.old_start if not expected else hunk.old_start - 1)
    result += lines[cursor:]
    return "".join(result)


def _mostly_crlf(lines: list[str]) -> bool:
    ended = [line for line in lines if line.endswith("\n")]
    return sum(line.endswith("\r\n") for line in ended) * 2 > len(ended)


def _line_end(line: str, crlf: bool) -> str:
    """`line` with the file's line end: CRLF for a CRLF file, LF otherwise; a last line without one kept."""
    if not line.endswith("\n"):
        return line
    bare = line.removesuffix("\n").removesuffix("\r")
    return f"{bare}\r\n" if crlf else f"{bare}\n"


# A line found this often in the file (a blank, a lone brace) says little about where a hunk goes.
_COMMON_LINE: Final = 256
_SHOWN_LINE_CHARS: Final = 120


def _mismatch(lines: list[str], expected: list[str], hint: int, low: int, deadline: Deadline | None) -> str:
    """Where the hunk comes nearest to the file, the first of its lines that differs there, and
    the file's line in its place."""
    if not expected:
        return "It has no context or removed line to place it by."
    places: defaultdict[str, list[int]] = defaultdict(list)
    for number, line in enumerate(lines):
        if deadline is not None and not number % _CHECK_EVERY:
            deadline.check()
        places[line.strip()].append(number)
    votes: Counter[int] = Counter()
    for row, line in enumerate(expected):
        found = places.get(line.strip(), [])
        if len(found) <= _COMMON_LINE:
            votes.update(place - row for place in found if place - row >= low)
    if votes:
        start = min(votes, key=lambda at: (-votes[at], abs(at - hint), at))
        alike = f"{votes[start]} of its {len(expected)} lines are alike there"
        place = f"Its nearest place is at line {start + 1} ({alike})"
    else:
        start = max(low, min(hint, len(lines) - 1))
        place = f"None of its lines is in the file; where its header puts it, at line {start + 1}"
    for row, line in enumerate(expected):
        at = start + row
        if at >= len(lines):
            return (
                f"{place}, its line {row + 1} ({_shown(line)}) would be line {at + 1}, past the file's end "
                f"(line {len(lines)})."
            )
        if lines[at] != line:
            if lines[at].rstrip("\r\n") == line.rstrip("\r\n"):
                why = " Only the line end differs."
            elif lines[at].split() == line.split():
                why = " Only whitespace differs: copy the line exactly, indentation included."
            else:
                why = ""
            return (
                f"{place}; its line {row + 1} ({_shown(line)}) differs from the file's line {at + 1}, which "
                f"reads {_shown(lines[at])}.{why}"
            )
    return f"{place}."


def _shown(line: str) -> str:
    text = repr(line.removesuffix("\n").removesuffix("\r"))
    return text if len(text) <= _SHOWN_LINE_CHARS else text[:_SHOWN_LINE_CHARS] + "..."


class _HunkFinder:
    """Where a hunk's old lines stand in the file: the match nearest its header's line, lowest first.

    Near the hint first; past that, the candidates are the places of the hunk's rarest line (an
    index of the file's lines, built once per file when first needed), each compared in place:
    no slice is copied, and a file of many equal lines does not make every offset a candidate.
    """

    def __init__(self, lines: list[str], deadline: Deadline | None) -> None:
        self._lines = lines
        self._deadline = deadline
        self._places: dict[str, list[int]] | None = None

    def find(self, expected: list[str], hint: int, low: int) -> int | None:
        lines = self._lines
        high = len(lines) - len(expected)
        if high < low:
            return None
        hint = min(max(hint, low), high)
        if not expected:
            return hint
        # Near the hint first, where a hunk after the first almost always is: no index to build.
        for distance in range(_NEAR + 1):
            for at in (hint - distance, hint + distance) if distance else (hint,):
                if low <= at <= high and lines[at] == expected[0] and self._matches(expected, at):
                    return at
        places = self._index()
        rarest = min(range(len(expected)), key=lambda i: len(places.get(expected[i], ())))
        starts = [p - rarest for p in places.get(expected[rarest], ()) if low <= p - rarest <= high]
        starts.sort(key=lambda at: (abs(at - hint), at))
        deadline = self._deadline
        for turn, at in enumerate(starts):
            if deadline is not None and not turn % _CHECK_EVERY:
                deadline.check()
            if self._matches(expected, at):
                return at
        return None

    def _matches(self, expected: list[str], at: int) -> bool:
        lines = self._lines
        return all(lines[at + i] == line for i, line in enumerate(expected))

    def _index(self) -> dict[str, list[int]]:
        if self._places is None:
            places: defaultdict[str, list[int]] = defaultdict(list)
            for number, line in enumerate(self._lines):
                places[line].append(number)
            self._places = places
        return self._places
