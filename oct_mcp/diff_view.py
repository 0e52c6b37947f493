"""A diff as a human is shown it: its lines as the change splits them, every hidden character visible.

Every consent question, whatever asks it (the sentinel text, an elicitation form, an
InputRequired question), shows a change through `shown_diff`, so what a person reads and what
is applied cannot part ways. The diffs oct-mcp and git write end a line at `\\n` and nowhere
else (a form feed, a `\\r`, U+2028 are characters inside a line, and a compiler reads them so), so
the diff is cut at `\\n` only, read by its hunks' counts (a content line is never taken for a
header, and its first character says what it is), and every character that is not shown as
itself is escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal

from oct_mcp.display import is_hidden_character

__all__ = [
    "DIFF_SHOWN_LINES",
    "LINE_SHOWN_CHARS",
    "DiffFile",
    "diff_counts",
    "diff_files",
    "readable_diff",
    "shown_diff",
    "visible_text",
]

DIFF_SHOWN_LINES: Final = 200
"""The most diff lines a question shows: what a consent dialog can hold."""
LINE_SHOWN_CHARS: Final = 300
"""The most characters of one line a question shows (escapes counted as shown)."""
_CUT_FILES_NAMED: Final = 10

_HUNK: Final = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_DEV_NULL: Final = "/dev/null"
# ASCII a reader cannot see: controls but a tab, a newline and a carriage return that ends a line
# (CRLF), and DEL.
_ASCII_HIDDEN: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")

_Kind = Literal["file", "hunk", "added", "removed", "context", "mark", "text"]
_PREFIX: Final[dict[str, str]] = {"added": "+", "removed": "-", "context": " "}


@dataclass(slots=True)
class _Section:
    """One file of a diff: its name as shown, and whether all its content lines end in CRLF."""

    name: str
    new_name: str
    """The new side's name as the `+++` line gives it (`/dev/null` for a deletion)."""
    start: int
    """The index of its `---` line among the diff's lines."""
    added: int = 0
    removed: int = 0
    ended: int = 0
    """Content lines that end in `\n` (all but one the diff marks `\\ No newline at end of file`)."""
    ended_cr: int = 0
    """Of those, the lines whose text ends in `\r`."""

    @property
    def crlf(self) -> bool:
        return self.ended > 0 and self.ended_cr == self.ended


@dataclass(slots=True)
class _Line:
    kind: _Kind
    text: str
    """The content line without its one-character prefix; any other line whole."""
    section: int = -1
    """The index of its file's section; -1 before the first file header."""
    unterminated: bool = False
    """A content line the diff marks `\\ No newline at end of file`: a `\\r` at its end is its own."""


@dataclass(slots=True)
class _Parsed:
    lines: list[_Line] = field(default_factory=list)
    sections: list[_Section] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    """The diff's lines, cut at `\n`, without it."""


@dataclass(frozen=True, slots=True)
class DiffFile:
    """One file of a unified diff, found by its headers where no hunk's line can be taken for one."""

    name: str
    """The new side's name as its `+++` line gives it (`/dev/null` for a deletion)."""
    text: str
    """Its part of the diff, from its `---` line to the next file's."""
    added: int
    removed: int


def visible_text(text: str) -> str:
    """`text` with every character a reader cannot see (but a tab) escaped as `\\uXXXX`.

    Controls (a form feed, `\\r`, ESC of an ANSI sequence, NEL), bidi and zero-width characters,
    line and paragraph separators, spaces other than the plain one, and letters drawn blank.
    """
    if text.isascii() and text.isprintable():
        return text
    out = []
    for char in text:
        if char != "\t" and is_hidden_character(char):
            point = ord(char)
            out.append(f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}")
        else:
            out.append(char)
    return "".join(out)


def diff_counts(diff: str) -> tuple[int, int]:
    """(+lines, -lines) of a unified diff: the content lines of its hunks, cut at `\\n` only."""
    parsed = _parse(diff)
    return (
        sum(line.kind == "added" for line in parsed.lines),
        sum(line.kind == "removed" for line in parsed.lines),
    )


def readable_diff(diff: str) -> str:
    """A diff for a result's text, which hosts show people: its own lines, as they are, but every
    hidden character escaped as the question escapes it (a tab, and the `\r` that ends a CRLF line,
    kept). The result's structured content keeps the diff byte for byte, for the model.
    """
    if diff.isascii() and _ASCII_HIDDEN.search(diff) is None:
        return diff
    lines = diff.split("\n")
    return "\n".join(
        f"{visible_text(line[:-1])}\r" if line.endswith("\r") else visible_text(line) for line in lines
    )


def diff_files(diff: str) -> list[DiffFile]:
    """Each file of a unified diff (as git, ruff or oct-mcp write them), read as `shown_diff` reads it.

    A tool that lists a diff's files from its text lists these: a line of content that looks like
    a header, or holds a form feed, never starts a file of its own.
    """
    parsed = _parse(diff)
    files = []
    for number, section in enumerate(parsed.sections):
        end = parsed.sections[number + 1].start if number + 1 < len(parsed.sections) else len(parsed.raw)
        text = "".join(f"{line}\n" for line in parsed.raw[section.start : end])
        if end == len(parsed.raw) and not diff.endswith("\n"):
            text = text[:-1]
        files.append(DiffFile(section.new_name, text, section.added, section.removed))
    return files


def shown_diff(diff: str, max_lines: int = DIFF_SHOWN_LINES) -> list[str]:
    """A diff as a question shows it, one string per line.

    A file's `---`/`+++` header pair is one `File: ...` line (no content line can start so); a
    file whose every content line ends in CRLF says so once and drops the `\\r` it would repeat,
    any other `\\r` is escaped; each line is cut at `LINE_SHOWN_CHARS` saying how much was left
    out, and the diff at `max_lines`, saying how many lines and which files' added and removed
    lines were not shown.
    """
    parsed = _parse(diff)
    if not parsed.lines:
        return ["(no line of text changes)"]
    raws = [_raw(line, parsed.sections) for line in parsed.lines[:max_lines]]
    rendered = [visible_text(raw) for raw in raws]
    # Said once, first: a reader who meets `\u000c` knows it is a character of the file.
    legend = [_LEGEND] if any(shown != raw for shown, raw in zip(rendered, raws, strict=True)) else []
    shown = [*legend, *(_cut(line) for line in rendered)]
    if len(parsed.lines) > max_lines:
        shown.append(_cut_note(parsed, max_lines))
    return shown


_LEGEND: Final = (
    "(A character that does not show itself is written \\uXXXX, its code point: \\u000c is a form "
    "feed, \\u202e reverses the text after it.)"
)


def _parse(diff: str) -> _Parsed:
    parsed = _Parsed()
    raw = parsed.raw = diff.split("\n")
    if raw[-1] == "":
        raw.pop()
    old_left = new_left = 0
    index = 0
    while index < len(raw):
        line = raw[index]
        section = len(parsed.sections) - 1
        if old_left > 0 or new_left > 0:
            tag, body = line[:1], line[1:]
            kind: _Kind | None = None
            if tag in (" ", "") and old_left > 0 and new_left > 0:
                kind, old_left, new_left = "context", old_left - 1, new_left - 1
            elif tag == "-" and old_left > 0:
                kind, old_left = "removed", old_left - 1
            elif tag == "+" and new_left > 0:
                kind, new_left = "added", new_left - 1
            elif tag == "\\":
                kind = "mark"
            if kind is not None:
                _content(parsed, kind, line if kind == "mark" else body, section)
                index += 1
                continue
            # A hunk shorter than its header says: what follows is read afresh, never as content.
            old_left = new_left = 0
        following = raw[index + 1] if index + 1 < len(raw) else ""
        if line.startswith("--- ") and following.startswith("+++ "):
            parsed.sections.append(_Section(_file_name(line[4:], following[4:]), following[4:], index))
            parsed.lines.append(_Line("file", "", len(parsed.sections) - 1))
            index += 2
            continue
        hunk = _HUNK.match(line) if section >= 0 else None
        if hunk is not None:
            old_left = 1 if hunk.group(1) is None else int(hunk.group(1))
            new_left = 1 if hunk.group(2) is None else int(hunk.group(2))
            parsed.lines.append(_Line("hunk", line, section))
        elif line.startswith("\\") and parsed.lines and parsed.lines[-1].kind in _PREFIX:
            _content(parsed, "mark", line, section)
        else:
            parsed.lines.append(_Line("text", line, section))
        index += 1
    return parsed


def _content(parsed: _Parsed, kind: _Kind, text: str, section: int) -> None:
    counts = parsed.sections[section] if section >= 0 else None
    if kind == "mark":
        before = parsed.lines[-1] if parsed.lines else None
        if before is not None and before.kind in _PREFIX and not before.unterminated:
            before.unterminated = True
            if counts is not None:
                counts.ended -= 1
                counts.ended_cr -= before.text.endswith("\r")
    elif counts is not None:
        counts.added += kind == "added"
        counts.removed += kind == "removed"
        counts.ended += 1
        counts.ended_cr += text.endswith("\r")
    parsed.lines.append(_Line(kind, text, section))


def _file_name(old: str, new: str) -> str:
    old_side = old.startswith("a/") or old == _DEV_NULL
    new_side = new.startswith("b/") or new == _DEV_NULL
    if old_side and new_side:
        old, new = old.removeprefix("a/"), new.removeprefix("b/")
    if old == _DEV_NULL:
        return f"{new} (created)"
    if new == _DEV_NULL:
        return f"{old} (deleted)"
    if old == new:
        return new
    return f"{old} -> {new}"


def _raw(line: _Line, sections: list[_Section]) -> str:
    """A line's text before escaping: a CRLF file's `\r` before `\n` left out, said once instead."""
    section = sections[line.section] if line.section >= 0 else None
    if line.kind == "file":
        name = section.name if section is not None else ""
        endings = " (its lines end in CRLF, not marked on each line)" if section and section.crlf else ""
        return f"File: {name}{endings}"
    if line.kind in _PREFIX:
        body = line.text
        if section is not None and section.crlf and not line.unterminated:
            body = body[:-1]
        return _PREFIX[line.kind] + body
    return line.text


def _cut(shown: str) -> str:
    if len(shown) <= LINE_SHOWN_CHARS:
        return shown
    return f"{shown[:LINE_SHOWN_CHARS]}... ({len(shown) - LINE_SHOWN_CHARS} more characters)"


def _cut_note(parsed: _Parsed, max_lines: int) -> str:
    """What the cut left out: how many lines, and each file's added and removed lines among them."""
    left = len(parsed.lines) - max_lines
    # Added and removed lines sit in hunks, and hunks in a file's section: each counted there.
    per_file = {n: [section.added, section.removed] for n, section in enumerate(parsed.sections)}
    for line in parsed.lines[:max_lines]:
        if line.kind in ("added", "removed"):
            per_file[line.section][line.kind == "removed"] -= 1
    named = [
        f"+{added} -{removed} in {visible_text(parsed.sections[number].name)}"
        for number, (added, removed) in per_file.items()
        if added or removed
    ]
    if len(named) > _CUT_FILES_NAMED:
        named = [*named[:_CUT_FILES_NAMED], f"and {len(named) - _CUT_FILES_NAMED} more file(s)"]
    which = f": {'; '.join(named)}" if named else ", none of them an added or removed line"
    total = len(parsed.lines)
    return f"... the diff is cut here: {left} more of its {total} lines are not shown{which}."
