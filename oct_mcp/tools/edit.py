"""oct_write_file and oct_apply_patch: contained, atomic writes with a diff preview; protected paths refused.

Patches are parsed and applied here, in-process, not by `git apply`: the tool must work
in a project without git, it must see every target path to contain it and check it
against the protected paths before anything is written, and all-or-nothing needs the
old contents in hand to restore them. Hunks apply exactly (no fuzz) but may sit at
another line than their header says, as with `git apply`.

Every write goes through a descriptor on its folder, reached from the root one
component at a time without following symlinks, into a temporary file in that
folder, fsync'd, then renamed over the target: a reader sees the old file or the new
one, never half of one, and a failed write leaves the old file as it was.

The work runs in a thread under the call's deadline: the loops check it, and the first change
to the project (a folder, a temporary file) claims it, so a call answered `[timeout]` has
written nothing and never will.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import stat
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from oct_mcp.deadline import CheckedMatcher, Deadline
from oct_mcp.errors import ExecutionError, FileTooLargeError, OctError, PathRefusedError, PolicyError
from oct_mcp.preview import ABSENT, FileChange, Preview, TargetState
from oct_mcp.protected import GIT_DIRECTORY_RULE, ProtectedPaths, git_directory_made
from oct_mcp.redaction import redact
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.tools.files import split_lines
from oct_mcp.tools.masks import MaskError, carries_masks, kept_note, masked, unmask
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace, read_at_most

__all__ = [
    "APPLY_PATCH",
    "WRITE_FILE",
    "ApplyPatchOutput",
    "ApplyPatchParams",
    "PatchError",
    "WriteFileOutput",
    "WriteFileParams",
    "apply_patch",
    "parse_patch",
    "unified_diff",
    "write_file",
]

WRITE_MAX_BYTES: Final = 2 * 1_048_576
PATCH_MAX_CHARS: Final = 2 * 1_048_576
PATCH_FILES_MAX: Final = 256
# Files read to diff or to patch; a larger one is refused (a patch) or replaced without a diff.
EDIT_READ_MAX_BYTES: Final = 8 * 1_048_576
DIFF_MAX_CHARS: Final = 512 * 1_024
BINARY_SNIFF_BYTES: Final = 8_192
NO_NEWLINE: Final = "\\ No newline at end of file"
_DEV_NULL: Final = "/dev/null"
_FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_BODY_TAGS: Final = frozenset(" +-")
_SIGNATURE: Final = "-- "
_HUNK_HEADER: Final = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# A header without line numbers, as model-facing patch formats write it: `@@`, `@@ @@`, `@@ def f():`.
_BARE_HUNK_HEADER: Final = re.compile(r"^@@(?:\s*$|\s+@@|\s+[^-+\s])")
_C_ESCAPES: Final = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_REGULAR_MODES: Final = {"100644": 0o666, "100755": 0o777}
# Loop turns between two deadline checks: a check costs a clock read, a turn far less.
_CHECK_EVERY: Final = 1_024
# Lines either side of where a hunk's header puts it that are searched before the file is indexed.
_NEAR: Final = 64


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# -- reading, diffing and writing one file -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Existing:
    data: bytes
    mode: int

    @property
    def text(self) -> str | None:
        """The content as text, or None for a binary or non-UTF-8 file."""
        if b"\x00" in self.data[:BINARY_SNIFF_BYTES]:
            return None
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


def _existing(workspace: Workspace, target: Path) -> _Existing | None:
    """What is at `target` now: None for nothing; refused for a folder or anything but a file.

    Raises:
        PathRefusedError: A folder, a device, a FIFO, a socket.
        FileTooLargeError: Over the read limit.
    """
    try:
        info = target.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PathRefusedError("the path cannot be opened") from exc
    if stat.S_ISDIR(info.st_mode):
        raise PathRefusedError("the path is a folder; only files can be written")
    if not stat.S_ISREG(info.st_mode):
        raise PathRefusedError("the path is not a regular file")
    fd = workspace.open_regular_file(str(target))
    try:
        opened = os.fstat(fd)
        mode = stat.S_IMODE(opened.st_mode)
        data = read_at_most(fd, EDIT_READ_MAX_BYTES, opened.st_size)
    finally:
        os.close(fd)
    if len(data) > EDIT_READ_MAX_BYTES:
        raise FileTooLargeError(f"the file is over the edit limit of {EDIT_READ_MAX_BYTES} bytes")
    return _Existing(data, mode)


@dataclass(frozen=True, slots=True)
class _Diff:
    text: str
    added: int
    removed: int


def unified_diff(
    old: str | None, new: str | None, old_name: str, new_name: str, deadline: Deadline | None = None
) -> _Diff:
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
    lines: list[str] = []
    added = removed = 0
    produced = _unified_lines(
        split_lines(old or ""),
        split_lines(new or ""),
        _DEV_NULL if old is None else old_name,
        _DEV_NULL if new is None else new_name,
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
            f"--- {_DEV_NULL if old is None else old_name}\n",
            f"+++ {_DEV_NULL if new is None else new_name}\n",
        ]
    return _Diff("".join(lines), added, removed)


def _unified_lines(
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


def _unified_range(start: int, stop: int) -> str:
    """A hunk header's range as difflib writes it: `start,length`, the length left out when it is 1."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return str(beginning)
    return f"{beginning - 1 if not length else beginning},{length}"


def _open_folder(workspace: Workspace, folder: Path, created: list[Path]) -> int:
    """A descriptor on `folder`, reached from the root one component at a time, never through a symlink.

    Missing folders are made, and appended to `created`.

    Raises:
        PathRefusedError: A component is a symlink or a file.
    """
    fd = os.open(workspace.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        current = workspace.root
        for part in folder.relative_to(workspace.root).parts:
            current = current / part
            try:
                inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o777, dir_fd=fd)
                created.append(current)
                inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            except PermissionError:
                raise
            except OSError as exc:
                # ENOTDIR: a file; ELOOP: a symlink, perhaps swapped in since the path was contained.
                raise PathRefusedError("a folder on the path is a symlink or a file") from exc
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _replace_in(folder_fd: int, name: str, data: bytes, mode: int | None, new_mode: int) -> None:
    """Write `data` to a temporary file in the folder, fsync it, and rename it over `name`.

    `mode` is the replaced file's, kept exactly; for a new file, `new_mode` less the umask.
    """
    temp = f".oct-write-{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o600 if mode is not None else new_mode, dir_fd=folder_fd)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder_fd)
        raise
    # The rename itself is durable only once the folder is.
    with contextlib.suppress(OSError):
        os.fsync(folder_fd)


Undo = Callable[[], None]


def _write(
    workspace: Workspace,
    target: Path,
    data: bytes,
    old: _Existing | None,
    *,
    mode: int | None = None,
    new_mode: int = 0o666,
    deadline: Deadline | None = None,
) -> Undo:
    """Atomically put `data` at `target`; returns how to put back what was there.

    The file gets `mode` when given, else the replaced file's mode, else `new_mode` less the umask.
    `deadline` is claimed before the first change (a folder, the temporary file).

    Raises:
        ToolTimeoutError: The deadline passed before anything was written.
    """
    if deadline is not None:
        deadline.begin_writing()
    created: list[Path] = []
    exact = mode if mode is not None else (None if old is None else old.mode)
    try:
        folder_fd = _open_folder(workspace, target.parent, created)
        try:
            _replace_in(folder_fd, target.name, data, exact, new_mode)
        finally:
            os.close(folder_fd)
    except BaseException:
        _remove_folders(created)
        raise
    if old is not None:
        return lambda: _ignore(_write(workspace, target, old.data, old))

    def undo_create() -> None:
        _delete(workspace, target)
        _remove_folders(created)

    return undo_create


def _delete(
    workspace: Workspace, target: Path, old: _Existing | None = None, deadline: Deadline | None = None
) -> Undo:
    """Remove the file at `target`; returns how to put `old` back. `deadline` is claimed first."""
    if deadline is not None:
        deadline.begin_writing()
    folder_fd = _open_folder(workspace, target.parent, [])
    try:
        os.unlink(target.name, dir_fd=folder_fd)
        with contextlib.suppress(OSError):
            os.fsync(folder_fd)
    finally:
        os.close(folder_fd)
    if old is None:
        return lambda: None
    return lambda: _ignore(_write(workspace, target, old.data, None, mode=old.mode))


def _ignore(undo: Undo) -> None:
    """An undo's own undo is never needed."""


def _remove_folders(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _refuse_protected(workspace: Workspace, requested: str, resolved: Path, where: str) -> None:
    """Refuse a write to a protected path, by its name as given or by where it leads.

    The policy layer refuses protected paths too; this is the tool's own check, and the
    only one for paths inside a patch, which no layer sees.
    """
    lexical = Path(os.path.normpath(workspace.root / requested))
    protected = ProtectedPaths(root=workspace.root)
    rule = protected.rule_for(resolved) or protected.rule_for(lexical)
    if rule is not None:
        raise PolicyError(f"{where} may not write to {rule.why} (protected path rule: {rule.name})")


def _refuse_git_directory(workspace: Workspace, written: list[Path], where: str) -> None:
    """Refuse a call whose files, with what is on disk, would make a folder a git directory.

    Git opens such a folder as a repository and runs what its config names (core.fsmonitor) at
    the user's next `git status` there; `.git` is protected by name, this by shape.
    """
    if git_directory_made(workspace.root, written) is not None:
        rule = GIT_DIRECTORY_RULE
        raise PolicyError(f"{where} may not make a folder {rule.why} (protected path rule: {rule.name})")


def _cut(diff: str) -> tuple[str, bool]:
    return (diff, False) if len(diff) <= DIFF_MAX_CHARS else (diff[:DIFF_MAX_CHARS], True)


def _failed_write(exc: OSError) -> ExecutionError:
    reason = exc.strerror or type(exc).__name__
    return ExecutionError(f"the write failed ({reason}); nothing was changed")


# -- oct_write_file ------------------------------------------------------------------------------


class WriteFileParams(_Params):
    path: ProjectPath = Field(description="File to create or replace, relative to the project root.")
    content: Annotated[str, StringConstraints(max_length=WRITE_MAX_BYTES)] = Field(
        description="The whole new content, UTF-8 text (at most 2 MiB); written as given, except that a "
        "[REDACTED:...] mask left where the file has that secret keeps the secret."
    )
    dry_run: bool | None = Field(
        default=None, description="True: only return the diff. Unset: the server's default (a dry run)."
    )
    confirm: bool = Field(default=False, description="Re-submit with true when the server asks for it.")

    @model_validator(mode="after")
    def _content_fits(self) -> WriteFileParams:
        if len(self.content.encode("utf-8", errors="surrogatepass")) > WRITE_MAX_BYTES:
            raise ValueError(f"content must be at most {WRITE_MAX_BYTES} bytes as UTF-8")
        return self


class WriteFileOutput(BaseModel):
    path: str
    action: Literal["create", "replace", "unchanged"]
    applied: bool
    """False for a dry run: nothing was written."""
    size_bytes: int
    added: int
    removed: int
    diff: str
    diff_cut: bool
    masked_kept: int = 0
    """Secrets the content keeps behind the masks the model wrote back; the diff shows the masks."""


def write_file(
    workspace: Workspace,
    params: WriteFileParams,
    *,
    dry_run: bool,
    deadline: Deadline | None = None,
    preview: bool = False,
) -> ToolResult:
    """Create or replace a project file with `params.content`, atomically; or only diff it.

    Raises:
        ToolTimeoutError: The deadline passed; nothing was written.
        PathRefusedError: Outside the project, through a symlink leading out, a folder, not a file.
        PolicyError: A protected path.
        ExecutionError: The write failed; the old file is untouched.
    """
    dry_run = dry_run or preview
    target = workspace.contain(params.path)
    _refuse_protected(workspace, params.path, target, "oct_write_file")
    _refuse_git_directory(workspace, [target], "oct_write_file")
    old = _existing(workspace, target)
    relative = workspace.relative(target)
    old_text = None if old is None else old.text
    # The content is what the model wrote from the file as it read it: a mask it kept stands for
    # the secret at that place, which stays; the diff shows masks on both sides, never a secret.
    seen = masked(old_text or "")
    try:
        content, kept = unmask(seen, params.content, deadline)
    except MaskError as exc:
        return ToolResult(text=f"the write does not apply; nothing was changed.\n{exc}", is_error=True)
    new = content.encode("utf-8")
    if old is None:
        action: Literal["create", "replace", "unchanged"] = "create"
    else:
        action = "unchanged" if old.data == new else "replace"
    if old is not None and old_text is None:
        diff = _Diff(f"Binary or non-UTF-8 file {relative} replaced ({len(old.data)} bytes)\n", 0, 0)
    else:
        shown_new = params.content if kept or not seen.has_secrets else redact(content)[0]
        shown_old = None if old_text is None else seen.view
        diff = unified_diff(shown_old, shown_new, f"a/{relative}", f"b/{relative}", deadline)
    if not dry_run and action != "unchanged":
        try:
            _write(workspace, target, new, old, deadline=deadline)
        except OSError as exc:
            raise _failed_write(exc) from exc
    text, cut = _cut(diff.text)
    output = WriteFileOutput(
        path=relative,
        action=action,
        applied=not dry_run and action != "unchanged",
        size_bytes=len(new),
        added=diff.added,
        removed=diff.removed,
        diff=text,
        diff_cut=cut,
        masked_kept=kept,
    )
    verb = {"create": "create", "replace": "replace", "unchanged": "leave unchanged"}[action]
    shown = None
    if preview:
        changes = (
            ()
            if action == "unchanged"
            else (
                FileChange(
                    path=relative, action=action, added=diff.added, removed=diff.removed, masked_kept=kept
                ),
            )
        )
        shown = Preview(
            files=changes, diff=diff.text, targets=(TargetState(path=relative, digest=_digest_of(old)),)
        )
    if dry_run:
        head = f"dry run, nothing changed: would {verb} {relative} (+{diff.added} -{diff.removed})"
    elif action == "unchanged":
        head = f"{relative} already has this content; nothing written"
    else:
        done = "created" if action == "create" else "replaced"
        head = f"{done} {relative} ({len(new)} bytes, +{diff.added} -{diff.removed})"
    return ToolResult(
        text=f"{head}{kept_note(kept)}\n{text}".rstrip("\n"), structured=output.model_dump(), preview=shown
    )


def _digest_of(existing: _Existing | None) -> str:
    return ABSENT if existing is None else "sha256:" + hashlib.sha256(existing.data).hexdigest()


def _plan_write_file(params: WriteFileParams, env: ToolEnv) -> InProcessPlan:
    # Its own dry_run field when given, else the safety gate's decision.
    dry_run = params.dry_run if params.dry_run is not None else env.dry_run
    return InProcessPlan(partial(write_file, env.workspace, params, dry_run=dry_run, deadline=env.deadline))


def _preview_write_file(params: WriteFileParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(
        partial(write_file, env.workspace, params, dry_run=True, deadline=env.deadline, preview=True)
    )


# -- parsing a unified diff ----------------------------------------------------------------------


class PatchError(Exception):
    """The patch is malformed or does not apply; the message says where (file number, path, hunk)."""


@dataclass
class _Hunk:
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
    hunks: list[_Hunk] = field(default_factory=list)

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
    hunks: tuple[_Hunk, ...]
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
    return None if path == _DEV_NULL else path


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


def _parse_hunk(lines: list[str], index: int, patch: _FilePatch) -> tuple[_Hunk, int]:
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
        hunk = _Hunk(old_start=int(found.group(1)), old_count=old_count, new_start=int(found.group(3)))
    elif _BARE_HUNK_HEADER.match(lines[index]):
        old_count = new_count = 0
        hunk = _Hunk(old_start=0, old_count=0, new_start=0, numbered=False)
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


def _no_newline(hunk: _Hunk, where: str) -> None:
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


# -- applying it ---------------------------------------------------------------------------------


def apply_hunks(text: str, hunks: tuple[_Hunk, ...], where: str, deadline: Deadline | None = None) -> str:
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


class PatchedFile(BaseModel):
    path: str
    original_path: str | None = None
    """The file a rename or copy starts from."""
    action: Literal["create", "modify", "delete", "rename", "copy"]
    hunks: int
    added: int
    removed: int
    masked_kept: int = 0
    """Secrets kept behind the masks the patch's lines carry; the diff shows the masks."""


class ApplyPatchOutput(BaseModel):
    applied: bool
    """False for a dry run: nothing was written."""
    files: list[PatchedFile]
    added: int
    removed: int
    diff: str
    """The changes as they apply (at the lines where each hunk was found)."""
    diff_cut: bool


@dataclass(frozen=True, slots=True)
class _Planned:
    parsed: ParsedFile
    target: Path
    """Written, or deleted for a delete."""
    source: Path | None
    """Read by a rename or copy; deleted by a rename."""
    old: _Existing | None
    """What is at `target` now (at the source, for a rename or copy)."""
    new: bytes | None
    diff: _Diff
    kept: int = 0
    """Secrets kept behind masks the patch carried."""


class ApplyPatchParams(_Params):
    patch: Annotated[str, StringConstraints(min_length=1, max_length=PATCH_MAX_CHARS)] = Field(
        description="A unified diff (git diff's format or plain diff -u), paths relative to the project "
        "root with or without a/ and b/ prefixes; /dev/null creates or deletes a file."
    )
    dry_run: bool | None = Field(
        default=None, description="True: only check and show what would change. Unset: the server's default."
    )
    confirm: bool = Field(default=False, description="Re-submit with true when the server asks for it.")


def _contained(workspace: Workspace, path: str, parsed: ParsedFile) -> Path:
    where = f"file {parsed.number} of the patch"
    try:
        resolved = workspace.contain(path)
    except PathRefusedError as exc:
        raise PathRefusedError(f"{where}: {exc.message}") from None
    _refuse_protected(workspace, path, resolved, f"oct_apply_patch ({where})")
    return resolved


def _text_of(existing: _Existing, parsed: ParsedFile, path: str) -> str:
    text = existing.text
    if text is None:
        raise PatchError(
            f"file {parsed.number} of the patch ({path}): binary or not UTF-8; only text is patched"
        )
    return text


def _plan_file(workspace: Workspace, parsed: ParsedFile, deadline: Deadline | None) -> _Planned:
    old_path, new_path = parsed.old_path, parsed.new_path
    where = f"file {parsed.number} of the patch ({new_path or old_path})"
    source = None
    if old_path is None:
        if new_path is None:
            raise PatchError(f"{where}: both sides are /dev/null")
        target = _contained(workspace, new_path, parsed)
        if _existing(workspace, target) is not None:
            raise PatchError(f"{where}: the patch creates it, but it already exists")
        text = apply_hunks("", parsed.hunks, where, deadline)
        try:
            unmask(masked(""), text, deadline)
        except MaskError as exc:
            raise PatchError(f"{where}: {exc}") from None
        diff = unified_diff(None, text, "", f"b/{workspace.relative(target)}", deadline=deadline)
        return _Planned(parsed, target, None, None, text.encode("utf-8"), diff)
    old_target = _contained(workspace, old_path, parsed)
    if parsed.action in ("rename", "copy") and new_path is not None:
        source, target = old_target, _contained(workspace, new_path, parsed)
        if _existing(workspace, target) is not None:
            raise PatchError(f"{where}: the patch {parsed.action}s onto a file that already exists")
    elif parsed.action == "modify" and new_path is not None and new_path != old_path:
        # Plain diff: `--- name.orig` / `+++ name`; patch the side that exists, the new one first.
        new_target = _contained(workspace, new_path, parsed)
        target = new_target if new_target.is_file() else old_target
    else:
        target = old_target
    existing = _existing(workspace, source or target)
    if existing is None:
        raise PatchError(f"{where}: the file does not exist")
    old_text = _text_of(existing, parsed, old_path)
    seen = masked(old_text)
    if any(carries_masks(line) for hunk in parsed.hunks for _tag, line in hunk.lines):
        # Written from the file as the model read it: applied to that view, the masks kept put back.
        new_view = apply_hunks(seen.view, parsed.hunks, where, deadline)
        try:
            new_text, kept = unmask(seen, new_view, deadline)
        except MaskError as exc:
            raise PatchError(f"{where}: {exc}") from None
    else:
        kept = 0
        try:
            new_text = apply_hunks(old_text, parsed.hunks, where, deadline)
        except PatchError:
            if seen.has_secrets:
                # Said from the view, which names the file's lines as the model read them: no secret.
                apply_hunks(seen.view, parsed.hunks, where, deadline)
            raise
        new_view = redact(new_text)[0] if seen.has_secrets else new_text
    old_name = f"a/{workspace.relative(source or target)}"
    if parsed.action == "delete":
        if new_text:
            raise PatchError(f"{where}: the patch deletes the file, but its hunks do not remove every line")
        deleted = unified_diff(seen.view, None, old_name, "", deadline)
        return _Planned(parsed, target, None, existing, None, deleted)
    diff = unified_diff(seen.view, new_view, old_name, f"b/{workspace.relative(target)}", deadline)
    return _Planned(parsed, target, source, existing, new_text.encode("utf-8"), diff, kept)


def _modes(old_mode: int | None, executable: bool | None) -> tuple[int | None, int]:
    """(the exact mode, or None for a new file; a new file's mode before the umask) under a mode change."""
    if old_mode is None:
        return None, 0o777 if executable else 0o666
    if executable is None:
        return old_mode, 0o666
    return (old_mode | ((old_mode & 0o444) >> 2) if executable else old_mode & ~0o111), 0o666


def _apply(workspace: Workspace, planned: list[_Planned], deadline: Deadline | None) -> None:
    """Make every planned change, or none: on a failure, undo what was done, newest first.

    The first change claims `deadline`; once claimed, the rest follow whatever the time.

    Raises:
        ExecutionError: A write failed; the message says whether everything was put back.
        ToolTimeoutError: The deadline passed before the first change; nothing was written.
    """
    if deadline is not None:
        deadline.begin_writing()
    undo: list[Undo] = []
    try:
        for change in planned:
            action = change.parsed.action
            if action == "delete":
                undo.append(_delete(workspace, change.target, change.old))
                continue
            if change.new is None:
                raise RuntimeError("a planned write without content")
            old_mode = None if change.old is None else change.old.mode
            mode, new_mode = _modes(old_mode, change.parsed.executable)
            # A rename or copy writes a new file: undone by deleting it, whatever the source was.
            replaced = change.old if action == "modify" else None
            undo.append(_write(workspace, change.target, change.new, replaced, mode=mode, new_mode=new_mode))
            if action == "rename" and change.source is not None:
                undo.append(_delete(workspace, change.source, change.old))
    except (OSError, OctError) as exc:
        problems = 0
        for step in reversed(undo):
            try:
                step()
            except (OSError, OctError):
                problems += 1
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        if isinstance(exc, OctError):
            reason = exc.message
        state = (
            "every file was put back as it was"
            if not problems
            else f"{problems} change(s) could not be undone; check the files with oct_git_status"
        )
        raise ExecutionError(f"the patch could not be written ({reason}); {state}") from exc


def _refuse_repeats(workspace: Workspace, parsed: list[ParsedFile]) -> None:
    """Every path in the patch contained and not protected, and no file named twice.

    Raises:
        PathRefusedError, PolicyError: A path outside the project, or protected.
        PatchError: A file named twice (its second change would apply to the first one's result).
    """
    seen: set[Path] = set()
    for item in parsed:
        for path in {item.old_path, item.new_path} - {None}:
            resolved = _contained(workspace, str(path), item)
            if resolved in seen:
                raise PatchError(
                    f"file {item.number} of the patch ({path}): the patch names this file more than once; "
                    "give each file's changes in one place"
                )
            seen.add(resolved)


def apply_patch(
    workspace: Workspace,
    params: ApplyPatchParams,
    *,
    dry_run: bool,
    deadline: Deadline | None = None,
    preview: bool = False,
) -> ToolResult:
    """Check that every hunk of the patch applies, then apply them all, or show what would change.

    A patch that does not apply is an error result and changes nothing.

    Raises:
        PathRefusedError: A path in the patch leaves the project.
        PolicyError: A path in the patch is protected.
        ExecutionError: A write failed; what was written was put back.
        ToolTimeoutError: The deadline passed; nothing was written.
    """
    try:
        parsed = parse_patch(params.patch)
        _refuse_repeats(workspace, parsed)
        planned = [_plan_file(workspace, item, deadline) for item in parsed]
    except PatchError as exc:
        return ToolResult(text=f"the patch does not apply; nothing was changed.\n{exc}", is_error=True)
    written = [change.target for change in planned if change.parsed.action != "delete"]
    _refuse_git_directory(workspace, written, "oct_apply_patch")
    dry_run = dry_run or preview
    if not dry_run:
        _apply(workspace, planned, deadline)
    files = [
        PatchedFile(
            path=workspace.relative(change.target),
            original_path=None if change.source is None else workspace.relative(change.source),
            action=change.parsed.action,
            hunks=len(change.parsed.hunks),
            added=change.diff.added,
            removed=change.diff.removed,
            masked_kept=change.kept,
        )
        for change in planned
    ]
    diff, cut = _cut("".join(change.diff.text for change in planned))
    output = ApplyPatchOutput(
        applied=not dry_run,
        files=files,
        added=sum(f.added for f in files),
        removed=sum(f.removed for f in files),
        diff=diff,
        diff_cut=cut,
    )
    listing = "\n".join(
        f"  {f.action} {f.original_path + ' -> ' if f.original_path else ''}{f.path} "
        f"({f.hunks} hunk(s), +{f.added} -{f.removed}{kept_note(f.masked_kept)})"
        for f in files
    )
    head = (
        f"dry run, nothing changed; the patch applies cleanly to {len(files)} file(s):"
        if dry_run
        else f"applied the patch to {len(files)} file(s):"
    )
    shown = _patch_preview(workspace, planned, files) if preview else None
    return ToolResult(
        text=f"{head}\n{listing}\n\n{diff}".rstrip("\n"), structured=output.model_dump(), preview=shown
    )


def _patch_preview(workspace: Workspace, planned: list[_Planned], files: list[PatchedFile]) -> Preview:
    targets: list[TargetState] = []
    for change in planned:
        source_digest = _digest_of(change.old)
        if change.source is not None:
            # A rename or copy reads its source (whose content `old` holds) and creates its target.
            targets.append(TargetState(path=workspace.relative(change.source), digest=source_digest))
            targets.append(TargetState(path=workspace.relative(change.target), digest=ABSENT))
        else:
            targets.append(TargetState(path=workspace.relative(change.target), digest=source_digest))
    changes = tuple(
        FileChange(
            path=f.path,
            action=f.action,
            added=f.added,
            removed=f.removed,
            original_path=f.original_path,
            masked_kept=f.masked_kept,
        )
        for f in files
    )
    return Preview(
        files=changes, diff="".join(change.diff.text for change in planned), targets=tuple(targets)
    )


def _patch_targets(arguments: Mapping[str, Any]) -> list[str]:
    """The files a patch names, each side of a rename or copy included, for the consent question."""
    patch = arguments.get("patch")
    if not isinstance(patch, str):
        return []
    try:
        parsed = parse_patch(patch)
    except PatchError:
        return []  # the tool refuses it before anything is written
    names: list[str] = []
    for file in parsed:
        for side in (file.old_path, file.new_path):
            if side is not None and side not in names:
                names.append(side)
    return names


def _plan_apply_patch(params: ApplyPatchParams, env: ToolEnv) -> InProcessPlan:
    dry_run = params.dry_run if params.dry_run is not None else env.dry_run
    return InProcessPlan(partial(apply_patch, env.workspace, params, dry_run=dry_run, deadline=env.deadline))


def _preview_apply_patch(params: ApplyPatchParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(
        partial(apply_patch, env.workspace, params, dry_run=True, deadline=env.deadline, preview=True)
    )


WRITE_FILE: Final = ToolSpec(
    name="oct_write_file",
    title="Write a file",
    description=(
        "Create or replace one project file with the given UTF-8 content (at most 2 MiB), creating missing "
        "folders. dry_run=true (the server's default when unset) writes nothing and returns the unified diff "
        "the write would make; dry_run=false writes atomically (temporary file, fsync, rename; the file's "
        "mode is kept) and returns the diff it made. Refuses paths outside the project, protected paths "
        "(.git, CI and agent configs), folders and symlinks leading out. For a change to part of a file "
        "prefer oct_edit (exact text) or oct_apply_patch (a diff). A [REDACTED:kind] mask left where the "
        "file has that secret keeps the real value; one moved or added is refused. Needs the user's "
        "confirmation."
    ),
    params=WriteFileParams,
    output=WriteFileOutput,
    risk=Risk.WRITE,
    plan=_plan_write_file,
    preview=_preview_write_file,
    idempotent=True,
)

APPLY_PATCH: Final = ToolSpec(
    name="oct_apply_patch",
    title="Apply a patch",
    description=(
        "Apply a unified diff (as git diff or diff -u write it) to project files: modify, create and delete "
        "(/dev/null sides), rename and copy (git headers). Every hunk is checked before anything is written, "
        "exactly (no fuzz) though a hunk may sit at another line than its header says; all or nothing. Hunk "
        "counts are taken from the body, a bare '@@' is placed by its lines after the hunk before it, and "
        "LF or CRLF lines fit the file's own line ends. "
        "dry_run=true (the server's default when unset) returns the files, hunk counts and the diff as it "
        "applies; dry_run=false applies it. A patch that does not apply says which file and hunk, its "
        "nearest place, the first line that differs and what the file has there, and changes nothing. "
        "Text files only; refuses paths outside the project and protected paths. Use it for a diff you "
        "have or changes to several files at once; oct_edit for replacing exact text in one file. Needs the "
        "user's confirmation."
    ),
    params=ApplyPatchParams,
    output=ApplyPatchOutput,
    risk=Risk.WRITE,
    plan=_plan_apply_patch,
    preview=_preview_apply_patch,
    targets=_patch_targets,
    idempotent=False,
)
