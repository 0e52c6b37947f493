"""Parsing a unified diff (plain, or git's with its extended headers) into its files and hunks.

Hunk counts are taken from the body, not the header; a bare `@@` header is accepted, as
model-facing patch formats write it; quoted paths are unquoted as git quotes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal

from oct_mcp.tools._text.diffs import DEV_NULL, NO_NEWLINE

__all__ = ["PATCH_FILES_MAX", "Hunk", "ParsedFile", "PatchError", "parse_patch"]

PATCH_FILES_MAX: Final = 256
_BODY_TAGS: Final = frozenset(" +-")
_SIGNATURE: Final = "-- "
_HUNK_HEADER: Final = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# A header without line numbers, as model-facing patch formats write it: `@@`, `@@ @@`, `@@ def f():`.
_BARE_HUNK_HEADER: Final = re.compile(r"^@@(?:\s*$|\s+@@|\s+[^-+\s])")
_C_ESCAPES: Final = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_REGULAR_MODES: Final = {"100644": 0o666, "100755": 0o777}


class PatchError(Exception):
    """The patch is malformed or does not apply; the message says where (file number, path, hunk)."""


@dataclass
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    lines: list[tuple[str, str]] = field(default_factory=list)
    """(tag, text): tag ' ', '-' or '+'; text with its line break, unless the file ends without one."""
    numbered: bool = True
    """False for a bare `@@` header: the hunk is placed by its lines alone, after the one before it."""


@dataclass
class _FilePatch:
    number: int
    git: bool = False
    git_names: tuple[str, str] | None = None
    old_header: str | None = None
    new_header: str | None = None
    has_headers: bool = False
    rename_from: str | None = None
    rename_to: str | None = None
    copy: bool = False
    created: bool = False
    deleted: bool = False
    new_mode: str | None = None
    unsupported: str | None = None
    hunks: list[Hunk] = field(default_factory=list)

    def describe(self, path: str | None = None) -> str:
        shown = path or self.new_header or self.old_header or "?"
        return f"file {self.number} of the patch ({shown})"


@dataclass(frozen=True, slots=True)
class ParsedFile:
    """One file of a patch: which path it reads, which it writes, and the hunks."""

    number: int
    old_path: str | None
    """None: the file is created."""
    new_path: str | None
    """None: the file is deleted."""
    action: Literal["create", "modify", "delete", "rename", "copy"]
    hunks: tuple[Hunk, ...]
    executable: bool | None
    """True or False when the patch sets the mode; None when it leaves it."""


def parse_patch(text: str) -> list[ParsedFile]:
    """The files of a unified diff (plain, or git's with its extended headers).

    Raises:
        PatchError: Malformed, binary, symlink or submodule changes, or no file at all.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if any(line.startswith("@@") and line.endswith("\r") for line in lines):
        # The whole patch went through CRLF (a Windows editor, a clipboard): git writes a hunk's
        # header with a bare LF, whatever the file's own line ends. Which the file has, the hunk
        # is adapted to when it is applied.
        lines = [line.removesuffix("\r") for line in lines]
    files: list[_FilePatch] = []
    current: _FilePatch | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("diff --git "):
            current = _FilePatch(number=len(files) + 1, git=True, git_names=_git_names(line[11:]))
            files.append(current)
            index += 1
            while index < len(lines) and not lines[index].startswith(("diff --git ", "--- ", "@@ ")):
                _extended_header(current, lines[index])
                index += 1
        elif line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            if current is None or current.has_headers or current.hunks:
                current = _FilePatch(number=len(files) + 1)
                files.append(current)
            current.old_header = _header_path(line[4:], current)
            current.new_header = _header_path(lines[index + 1][4:], current)
            current.has_headers = True
            index += 2
        elif line.startswith("@@"):
            if current is None:
                raise PatchError("a hunk comes before any file header (--- and +++ lines)")
            hunk, index = _parse_hunk(lines, index, current)
            current.hunks.append(hunk)
        else:
            # Text around the diff (a commit message, `Index:` lines) is not part of it.
            index += 1
    if not files:
        raise PatchError("the patch has no file in it: expected '--- a/path', '+++ b/path' and '@@' hunks")
    if len(files) > PATCH_FILES_MAX:
        raise PatchError(f"the patch changes more than {PATCH_FILES_MAX} files")
    return [_resolve_names(patch) for patch in files]


def _extended_header(patch: _FilePatch, line: str) -> None:
    word, _, value = line.partition(" ")
    if line.startswith("new file mode "):
        patch.created, patch.new_mode = True, line[14:].strip()
    elif line.startswith("deleted file mode "):
        patch.deleted = True
        _check_mode(patch, line[18:].strip())
    elif line.startswith("new mode "):
        patch.new_mode = line[9:].strip()
    elif line.startswith("old mode "):
        _check_mode(patch, line[9:].strip())
    elif line.startswith(("rename from ", "copy from ")):
        patch.copy = word == "copy"
        patch.rename_from = _unquote(value.partition(" ")[2], patch)
    elif line.startswith(("rename to ", "copy to ")):
        patch.rename_to = _unquote(value.partition(" ")[2], patch)
    elif line.startswith(("GIT binary patch", "Binary files ")):
        patch.unsupported = "binary changes are not supported; write the file with oct_write_file"
    if patch.new_mode is not None:
        _check_mode(patch, patch.new_mode)


def _check_mode(patch: _FilePatch, mode: str) -> None:
    if mode not in _REGULAR_MODES:
        patch.unsupported = "only regular files can be patched (no symlinks, no submodules)"


def _git_names(rest: str) -> tuple[str, str] | None:
    """The two names of `diff --git a/x b/x`, for a file with no ---/+++ lines (empty, mode only)."""
    if rest.startswith('"'):
        return None
    for found in re.finditer(" b/", rest):
        old, new = rest[: found.start()], rest[found.end() :]
        if old.startswith("a/") and old[2:] == new:
            return old, "b/" + new
    return None


def _header_path(raw: str, patch: _FilePatch) -> str | None:
    """The path of a ---/+++ line: unquoted, without a timestamp; None for /dev/null."""
    path = _unquote(raw, patch) if raw.startswith('"') else raw.split("\t", 1)[0].rstrip()
    return None if path == DEV_NULL else path


def _unquote(raw: str, patch: _FilePatch) -> str:
    """A path as git quotes it ("a/caf\\303\\251"), or as it is when not quoted."""
    if not raw.startswith('"'):
        return raw
    out = bytearray()
    index = 1
    while index < len(raw) and raw[index] != '"':
        char = raw[index]
        if char != "\\":
            out += char.encode("utf-8")
            index += 1
            continue
        following = raw[index + 1 : index + 4]
        if following[:1] in _C_ESCAPES:
            out.append(_C_ESCAPES[following[:1]])
            index += 2
        elif len(following) == 3 and all(c in "01234567" for c in following):
            out.append(int(following, 8) & 0xFF)
            index += 4
        else:
            raise PatchError(f"{patch.describe()}: a quoted path has a bad escape")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise PatchError(f"{patch.describe()}: a quoted path is not UTF-8") from None


def _parse_hunk(lines: list[str], index: int, patch: _FilePatch) -> tuple[Hunk, int]:
    """One hunk: its header, then its body, counted from the body itself.

    The header's counts decide nothing on their own: a model's patch often counts one line too
    few or too many, and a parser that stopped at the count would drop the body's last added
    lines and report success. The body runs to the next hunk or file, or to the first line that
    is no hunk line; blank lines past the header's count at its end are the patch's, not the file's.
    """
    where = f"{patch.describe()}, hunk {len(patch.hunks) + 1}"
    found = _HUNK_HEADER.match(lines[index])
    if found is not None:
        old_count = int(found.group(2)) if found.group(2) is not None else 1
        new_count = int(found.group(4)) if found.group(4) is not None else 1
        hunk = Hunk(old_start=int(found.group(1)), old_count=old_count, new_start=int(found.group(3)))
    elif _BARE_HUNK_HEADER.match(lines[index]):
        old_count = new_count = 0
        hunk = Hunk(old_start=0, old_count=0, new_start=0, numbered=False)
    else:
        raise PatchError(
            f"{where}: the hunk header is not '@@ -start,count +start,count @@' (or a bare '@@')"
        )
    index += 1
    old_seen = new_seen = 0
    # How many body lines the header's counts cover, once the body has reached them.
    counted: int | None = 0 if old_count == new_count == 0 else None
    blank: list[bool] = []
    while index < len(lines) and not _starts_a_part(lines, index):
        line = lines[index]
        if line == _SIGNATURE and counted is not None:
            break  # git format-patch's `-- ` before its version line, after the last hunk
        tag, text = (line[:1], line[1:]) if line else (" ", "")  # an empty context line lost its space
        if tag == "\\":
            _no_newline(hunk, where)
            index += 1
            continue
        if tag not in _BODY_TAGS:
            break
        old_seen += tag != "+"
        new_seen += tag != "-"
        hunk.lines.append((tag, text + "\n"))
        blank.append(not line)
        if counted is None and old_seen >= old_count and new_seen >= new_count:
            counted = len(hunk.lines)
        index += 1
    keep = len(hunk.lines)
    while keep > (counted or 0) and blank[keep - 1]:
        keep -= 1
    del hunk.lines[keep:]
    if not hunk.lines:
        raise PatchError(f"{where}: the hunk has no lines")
    return hunk, index


def _starts_a_part(lines: list[str], index: int) -> bool:
    """Whether the line begins another hunk or another file of the patch."""
    line = lines[index]
    if line.startswith(("@@", "diff --git ")):
        return True
    return line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ ")


def _no_newline(hunk: Hunk, where: str) -> None:
    if not hunk.lines:
        raise PatchError(f"{where}: '{NO_NEWLINE}' must follow a line")
    tag, text = hunk.lines[-1]
    hunk.lines[-1] = (tag, text.removesuffix("\n"))


def _resolve_names(patch: _FilePatch) -> ParsedFile:
    if patch.unsupported is not None:
        raise PatchError(f"{patch.describe()}: {patch.unsupported}")
    old, new = patch.old_header, patch.new_header
    if not patch.has_headers:
        if patch.git_names is None and patch.rename_from is None:
            raise PatchError(f"{patch.describe()}: no --- and +++ lines name the file")
        old, new = patch.git_names or (None, None)
        old = None if patch.created else old
        new = None if patch.deleted else new
    old, new = _strip_prefixes(old, new)
    if patch.rename_from is not None and patch.rename_to is not None:
        old, new = patch.rename_from, patch.rename_to
    if old is None and new is None:
        raise PatchError(f"{patch.describe()}: both sides are /dev/null")
    executable = None if patch.new_mode is None else patch.new_mode == "100755"
    if old is None:
        action: Literal["create", "modify", "delete", "rename", "copy"] = "create"
    elif new is None:
        action = "delete"
    elif patch.rename_from is not None:
        action = "copy" if patch.copy else "rename"
    else:
        action = "modify"
    return ParsedFile(
        number=patch.number,
        old_path=old,
        new_path=new,
        action=action,
        hunks=tuple(patch.hunks),
        executable=executable,
    )


def _strip_prefixes(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    """Drop git's `a/` and `b/` when every named side has its own (`-p1` as git diff writes it)."""
    if (old is None or old.startswith("a/")) and (new is None or new.startswith("b/")):
        return (None if old is None else old[2:]), (None if new is None else new[2:])
    return old, new
