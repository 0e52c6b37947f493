"""Contained, atomic writes of one project file, each with its undo; protected paths refused.

Every write goes through a descriptor on its folder, reached from the root one
component at a time without following symlinks, into a temporary file in that
folder, fsync'd, then renamed over the target: a reader sees the old file or the new
one, never half of one, and a failed write leaves the old file as it was.

The write tools run in a thread under the call's deadline: their loops check it, and the first
change to the project (a folder, a temporary file) claims it, so a call answered `[timeout]` has
written nothing and never will.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final, Protocol

from pydantic import BaseModel, ConfigDict

from oct_mcp.deadline import Deadline
from oct_mcp.errors import ExecutionError, FileTooLargeError, PathRefusedError, PolicyError
from oct_mcp.file_screen import BINARY_SNIFF_BYTES
from oct_mcp.preview import ABSENT
from oct_mcp.protected import GIT_DIRECTORY_RULE, ProtectedPaths, git_directory_made
from oct_mcp.spec import InProcessPlan, ToolEnv
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace, read_at_most

__all__ = [
    "EDIT_READ_MAX_BYTES",
    "ExistingFile",
    "StrictParams",
    "Undo",
    "delete_file",
    "digest_of",
    "failed_write",
    "open_folder",
    "plan_write",
    "preview_write",
    "read_existing",
    "refuse_git_directory",
    "refuse_protected",
    "remove_entry",
    "write_atomically",
]

# Files read to diff or to patch; a larger one is refused (a patch) or replaced without a diff.
EDIT_READ_MAX_BYTES: Final = 8 * 1_048_576
_FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WriteTool(Protocol):
    """A write tool's function: it changes the project, or with dry_run only says what it would."""

    def __call__(
        self,
        workspace: Workspace,
        params: Any,
        /,
        *,
        dry_run: bool,
        deadline: Deadline | None = ...,
        preview: bool = ...,
    ) -> ToolResult: ...


class DryRunParams(Protocol):
    @property
    def dry_run(self) -> bool | None: ...


def plan_write(write: WriteTool, params: DryRunParams, env: ToolEnv) -> InProcessPlan:
    """Run the write tool in a thread: its own dry_run field when given, else the safety gate's decision."""
    dry_run = env.dry_run_for(params.dry_run)
    return InProcessPlan(partial(write, env.workspace, params, dry_run=dry_run, deadline=env.deadline))


def preview_write(write: WriteTool, params: DryRunParams, env: ToolEnv) -> InProcessPlan:
    """The write tool as a dry run that also returns the Preview the consent question shows."""
    return InProcessPlan(
        partial(write, env.workspace, params, dry_run=True, deadline=env.deadline, preview=True)
    )


class StrictParams(BaseModel):
    """The arguments of a tool that writes: exact types, no unknown field, frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


@dataclass(frozen=True, slots=True)
class ExistingFile:
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


def read_existing(workspace: Workspace, target: Path) -> ExistingFile | None:
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
    return ExistingFile(data, mode)


def open_folder(workspace: Workspace, folder: Path, created: list[Path]) -> int:
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


def write_atomically(
    workspace: Workspace,
    target: Path,
    data: bytes,
    old: ExistingFile | None,
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
        folder_fd = open_folder(workspace, target.parent, created)
        try:
            _replace_in(folder_fd, target.name, data, exact, new_mode)
        finally:
            os.close(folder_fd)
    except BaseException:
        _remove_folders(created)
        raise
    if old is not None:
        return partial(_put_back, workspace, target, old, old.mode)

    def undo_create() -> None:
        delete_file(workspace, target)
        _remove_folders(created)

    return undo_create


def remove_entry(
    workspace: Workspace, target: Path, *, tree: bool = False, deadline: Deadline | None = None
) -> None:
    """Remove the file at `target` (with `tree`, the folder and all in it) through its folder's descriptor.

    `deadline` is claimed first.
    """
    if deadline is not None:
        deadline.begin_writing()
    folder_fd = open_folder(workspace, target.parent, [])
    try:
        if tree:
            # On descriptors, never following a link inside (shutil's safe variant on Linux).
            shutil.rmtree(target.name, dir_fd=folder_fd)
        else:
            os.unlink(target.name, dir_fd=folder_fd)
        with contextlib.suppress(OSError):
            os.fsync(folder_fd)
    finally:
        os.close(folder_fd)


def delete_file(
    workspace: Workspace, target: Path, old: ExistingFile | None = None, deadline: Deadline | None = None
) -> Undo:
    """Remove the file at `target`; returns how to put `old` back. `deadline` is claimed first."""
    remove_entry(workspace, target, deadline=deadline)
    if old is None:
        return lambda: None
    return partial(_put_back, workspace, target, old, old.mode)


def _put_back(workspace: Workspace, target: Path, old: ExistingFile, mode: int) -> None:
    """Write `old` back at `target` with its mode: an undo, which itself is never undone."""
    write_atomically(workspace, target, old.data, None, mode=mode)


def _remove_folders(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def refuse_protected(workspace: Workspace, requested: str, resolved: Path, where: str) -> None:
    """Refuse a write to a protected path, by its name as given or by where it leads.

    The policy layer refuses protected paths too; this is the tool's own check, and the
    only one for paths inside a patch, which no layer sees.
    """
    lexical = Path(os.path.normpath(workspace.root / requested))
    protected = ProtectedPaths(root=workspace.root)
    rule = protected.rule_for(resolved) or protected.rule_for(lexical)
    if rule is not None:
        raise PolicyError(f"{where} may not write to {rule.why} (protected path rule: {rule.name})")


def refuse_git_directory(workspace: Workspace, written: list[Path], where: str) -> None:
    """Refuse a call whose files, with what is on disk, would make a folder a git directory.

    Git opens such a folder as a repository and runs what its config names (core.fsmonitor) at
    the user's next `git status` there; `.git` is protected by name, this by shape.
    """
    if git_directory_made(workspace.root, written) is not None:
        rule = GIT_DIRECTORY_RULE
        raise PolicyError(f"{where} may not make a folder {rule.why} (protected path rule: {rule.name})")


def failed_write(exc: OSError) -> ExecutionError:
    """The error for a write that failed before its rename: the old file is as it was."""
    reason = exc.strerror or type(exc).__name__
    return ExecutionError(f"the write failed ({reason}); nothing was changed")


def digest_of(existing: ExistingFile | None) -> str:
    """What a preview pins a target to: its content's sha256, or ABSENT for no file."""
    return ABSENT if existing is None else "sha256:" + hashlib.sha256(existing.data).hexdigest()
