"""git's patches as the model sees them: each file's two sides whole from git, their secrets masked
with the whole file as context, then cut into hunks.

A hunk alone may hold a private key's body without its BEGIN line, and the hunk header git writes
names a line above the hunk (its function context), which may be such a line too. So git is asked
for every line of each changed file (`--unified=WHOLE_FILE`: one hunk a file, both sides whole),
each side is redacted as a read of the whole file is, and the hunks with the context the call asked
for are made here, their headers from the masked lines. git reads both sides itself in the one run,
so the masks are placed on the very text it compared (no second read that a change could race).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Final

from oct_mcp.redaction import LineMasks, mask_line, redact_lines

__all__ = ["WHOLE_FILE", "masked_hunks", "masked_patch"]

WHOLE_FILE: Final = 2_147_483_647
"""The context lines git is asked for: more than any file it can print within the output cap."""
_HUNK_HEADER: Final = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# git's default function line (xdiff's def_ff): one that starts with a letter, `_` or `$`, cut at 80.
_FUNCTION_LINE: Final = re.compile(r"[A-Za-z_$]")
_FUNCTION_MAX: Final = 80


@dataclass
class _File:
    """One file's part of a whole-file patch: its header lines and its one hunk's lines."""

    header: list[str]
    lines: list[tuple[str, str]] = field(default_factory=list)
    """(tag, text): ' ' on both sides, '-' the old side only, '+' the new side only."""
    no_newline_after: set[int] = field(default_factory=set)
    """Lines git marks `\\ No newline at end of file`."""
    whole: bool = True
    """False: the hunk is not both sides whole (the output was cut inside it, or git split it)."""


def masked_patch(patch: str, context: int) -> tuple[str, bool]:
    """A whole-file patch (`git diff --unified=WHOLE_FILE`) as the patch with `context` lines, masked.

    Args:
        patch: git's patch, each changed text file in one hunk that holds both sides whole.
        context: Lines of context per hunk.

    Returns:
        The patch, every line of each hunk and each header's function context masked as the whole
        file shows them; and whether a file was left out because its sides were not whole (the
        output was cut inside it): its lines cannot be masked in context, so none are shown.
    """
    out: list[str] = []
    left_out = False
    for part in _files(patch):
        if not part.whole:
            left_out = True
            continue
        out.extend(part.header)
        out.extend(_hunks(part, context))
    return ("\n".join(out) + "\n") if out else "", left_out


def _files(patch: str) -> list[_File]:
    files: list[_File] = []
    current: _File | None = None
    lines = patch.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    position = 0
    while position < len(lines):
        line = lines[position]
        position += 1
        if line.startswith("diff --git ") or current is None:
            current = _File(header=[line])
            # Text before the first file's header is nothing git prints: left out, never shown.
            current.whole = line.startswith("diff --git ")
            files.append(current)
            continue
        if not line.startswith("@@ "):
            if current.lines or not current.whole:
                current.whole = False  # a second hunk, or text after the hunk: not one whole hunk
            else:
                current.header.append(line)
            continue
        if current.lines or not current.whole:
            current.whole = False
            continue
        position = _read_hunk(current, line, lines, position)
    return files


def _read_hunk(part: _File, header: str, lines: list[str], position: int) -> int:
    """Read the one hunk after its header into `part`; returns where its lines end."""
    found = _HUNK_HEADER.match(header)
    if found is None:
        part.whole = False
        return position
    old_start, new_start = int(found[1]), int(found[3])
    old_left = 1 if found[2] is None else int(found[2])
    new_left = 1 if found[4] is None else int(found[4])
    # Both sides whole: each starts at line 1, or is empty (line 0).
    if old_start != (1 if old_left else 0) or new_start != (1 if new_left else 0):
        part.whole = False
    while (old_left or new_left) and position < len(lines):
        line = lines[position]
        tag = line[:1]
        if tag == "\\":
            part.no_newline_after.add(len(part.lines) - 1)
        elif tag in (" ", "-", "+"):
            part.lines.append((tag, line[1:]))
            old_left -= tag != "+"
            new_left -= tag != "-"
        else:
            break
        position += 1
    if old_left or new_left:
        part.whole = False
    if position < len(lines) and lines[position].startswith("\\"):
        part.no_newline_after.add(len(part.lines) - 1)
        position += 1
    if old_left < 0 or new_left < 0:
        part.whole = False
    return position


def _hunks(part: _File, context: int) -> list[str]:
    entries = part.lines
    if not entries:
        return []
    old_lines = [text for tag, text in entries if tag != "+"]
    new_lines = [text for tag, text in entries if tag != "-"]
    old_masks = redact_lines("\n".join(old_lines)) if old_lines else []
    new_masks = redact_lines("\n".join(new_lines)) if new_lines else []
    old_before = list(itertools.accumulate((tag != "+" for tag, _ in entries), initial=0))
    new_before = list(itertools.accumulate((tag != "-" for tag, _ in entries), initial=0))

    def shown(index: int) -> str:
        tag, text = entries[index]
        masks: list[LineMasks] = []
        if tag != "+":
            masks.append(old_masks[old_before[index]])
        if tag != "-":
            masks.append(new_masks[new_before[index]])
        return mask_line(text, *masks)[0]

    changes = [index for index, (tag, _) in enumerate(entries) if tag != " "]
    groups: list[tuple[int, int]] = []
    for index in changes:
        if groups and index - groups[-1][1] - 1 <= 2 * context:
            groups[-1] = (groups[-1][0], index)
        else:
            groups.append((index, index))
    function_lines = _function_lines(old_lines, old_masks)
    out: list[str] = []
    for first, last in groups:
        low, high = max(0, first - context), min(len(entries), last + context + 1)
        old_count = old_before[high] - old_before[low]
        new_count = new_before[high] - new_before[low]
        header = f"@@ -{_range(old_before[low], old_count)} +{_range(new_before[low], new_count)} @@"
        function = function_lines[old_before[low]]
        out.append(f"{header} {function}" if function else header)
        for index in range(low, high):
            out.append(entries[index][0] + shown(index))
            if index in part.no_newline_after:
                out.append("\\ No newline at end of file")
    return out


def _range(before: int, count: int) -> str:
    """git's `start,count` of a hunk's side: the line before it when empty, no count when one."""
    start = before + 1 if count else before
    return str(start) if count == 1 else f"{start},{count}"


def _function_lines(old_lines: list[str], old_masks: list[LineMasks]) -> list[str]:
    """For each count of old lines before a hunk, git's function context: the nearest line above
    that starts as a function does, as masked (never a line's real text where it holds a secret)."""
    found = [""]
    for text, masks in zip(old_lines, old_masks, strict=True):
        view = mask_line(text, masks)[0]
        if _FUNCTION_LINE.match(view):
            found.append(view[:_FUNCTION_MAX].rstrip())
        else:
            found.append(found[-1])
    return found


def masked_hunks(hunks: list[str], old_text: str) -> list[str] | None:
    """A tool's hunks of one file (ruff's `--diff`), each line masked as the file shows it, before and after.

    The old side is the file as it is (`old_text`); the new side is the file with the hunks applied,
    made here from the hunks, which name their exact places.

    Args:
        hunks: The file's part of the diff from its first `@@` line on, one line a string, no line ends.
        old_text: The file now.

    Returns:
        The lines masked; None when the hunks are not a patch of `old_text` (the file changed since
        the tool read it), so their lines cannot be masked in context.
    """
    old_lines = old_text.split("\n")
    # (tag, or '@' for a header; the text; its old line's index; its index in new_lines), -1 for none.
    parsed: list[tuple[str, str, int, int]] = []
    new_lines: list[str] = []
    position = 0  # old lines before it are in new_lines already, or replaced
    old_at = 0
    for line in hunks:
        found = _HUNK_HEADER.match(line)
        if found is not None:
            start, count = int(found[1]), 1 if found[2] is None else int(found[2])
            first = start - 1 if count else start  # the index of the hunk's first old line
            if first < position:
                return None
            new_lines.extend(old_lines[position:first])
            position = old_at = first
            parsed.append(("@", found[0], -1, -1))
            continue
        tag, text = line[:1], line[1:]
        if not parsed:
            return None
        if tag == "\\":
            parsed.append(("\\", line, -1, -1))
            continue
        if tag in (" ", "-"):
            if old_at >= len(old_lines) or old_lines[old_at].rstrip("\r") != text.rstrip("\r"):
                return None
            old_at += 1
            position = old_at
        if tag in (" ", "+"):
            new_lines.append(text)
        elif tag != "-":
            return None
        parsed.append((tag, text, old_at - 1 if tag != "+" else -1, len(new_lines) - 1 if tag != "-" else -1))
    new_lines.extend(old_lines[position:])
    old_masks = redact_lines(old_text)
    new_masks = redact_lines("\n".join(new_lines))
    out: list[str] = []
    for tag, text, old_index, new_index in parsed:
        if tag in ("@", "\\"):
            out.append(text)
            continue
        masks = [old_masks[old_index]] if old_index >= 0 else []
        if new_index >= 0:
            masks.append(new_masks[new_index])
        out.append(tag + mask_line(text, *masks)[0])
    return out
