"""The applier's acts on the project: each write through a descriptor on its folder (reached from the
root a component at a time, no symlink followed) into a temporary file, fsync'd and renamed over
the target; moves, deletions and new folders; each act with what undoes it."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oct_mcp.errors import ExecutionError, OctError, PathRefusedError
from oct_mcp.execution.changes import PathChange, Undo
from oct_mcp.preview import ABSENT
from oct_mcp.workspace import Workspace

__all__ = ["apply_changes"]


_FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


_CHUNK: Final = 1_048_576


def apply_changes(workspace: Workspace, changes: tuple[PathChange, ...]) -> None:
    """Make every change, or none: on a failure, undo what was done, newest first.

    The deadline is claimed already: once claimed, every change follows whatever the time.

    Raises:
        ExecutionError: A step failed; the message says whether everything was put back.
    """
    undo: list[Undo] = []
    try:
        for change in changes:
            undo.extend(_make(workspace, change))
    except (OSError, OctError) as exc:
        problems = 0
        for step in reversed(undo):
            try:
                step()
            except (OSError, OctError):
                problems += 1
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        if isinstance(exc, OSError) and exc.errno == errno.EXDEV:
            reason = "the two paths are on different file systems"
        if isinstance(exc, OctError):
            reason = exc.message
        state = (
            "nothing was changed"
            if not problems
            else f"{problems} change(s) could not be undone; check the files with oct_git_status"
        )
        raise ExecutionError(f"the change could not be made ({reason}); {state}") from exc


def _make(workspace: Workspace, change: PathChange) -> list[Undo]:
    """Make one change; returns how to undo it."""
    root = workspace.root
    target = root / change.path
    if change.action == "write":
        if change.data is None:
            raise RuntimeError("a planned write without content")
        old = _existing(workspace, change)
        return [
            _write_atomically(workspace, target, change.data, old, mode=change.mode, new_mode=change.new_mode)
        ]
    if change.action in ("link", "folder"):
        return [_make_entry(workspace, target, None if change.data is None else os.fsdecode(change.data))]
    if change.action == "delete":
        if change.tree is not None:
            # A folder's removal is not undone within the call: it is the call's one change.
            _remove_entry(workspace, target, tree=True)
            return []
        old = _existing(workspace, change)
        _remove_entry(workspace, target)
        return [] if old is None else [lambda: _put_back(workspace, target, old)]
    if change.source is None:
        raise RuntimeError("a move without its source")
    source = root / change.source
    replaced = None if change.replaces == ABSENT else _read_file(target)
    _rename(workspace, source, target, replace=change.replaces != ABSENT)

    def move_back() -> None:
        _rename(workspace, target, source, replace=False)
        if replaced is not None:
            _put_back(workspace, target, replaced)

    return [move_back]


@dataclass(frozen=True, slots=True)
class _Old:
    data: bytes
    mode: int


def _existing(workspace: Workspace, change: PathChange) -> _Old | None:
    return None if change.read == ABSENT else _read_file(workspace.root / change.path)


def _read_file(path: Path) -> _Old:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        chunks = []
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return _Old(b"".join(chunks), mode)


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


def _write_atomically(
    workspace: Workspace,
    target: Path,
    data: bytes,
    old: _Old | None,
    *,
    mode: int | None = None,
    new_mode: int = 0o666,
) -> Undo:
    """Atomically put `data` at `target`; returns how to put back what was there.

    The file gets `mode` when given, else the replaced file's mode, else `new_mode` less the umask.
    """
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
        return lambda: _put_back(workspace, target, old)

    def undo_create() -> None:
        _remove_entry(workspace, target)
        _remove_folders(created)

    return undo_create


def _put_back(workspace: Workspace, target: Path, old: _Old) -> None:
    """Write `old` back at `target` with its mode: an undo, which itself is never undone."""
    _write_atomically(workspace, target, old.data, None, mode=old.mode)


def _remove_entry(workspace: Workspace, target: Path, *, tree: bool = False) -> None:
    """Remove the file at `target` (with `tree`, the folder and all in it) through its folder's descriptor."""
    folder_fd = _open_folder(workspace, target.parent, [])
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


def _remove_folders(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _rename(workspace: Workspace, source: Path, destination: Path, *, replace: bool) -> None:
    """Rename through descriptors on both folders, the destination's made if missing."""
    created: list[Path] = []
    try:
        source_fd = _open_folder(workspace, source.parent, [])
        try:
            target_fd = _open_folder(workspace, destination.parent, created)
            try:
                # Checked again on the descriptors, just before the rename: the target still free.
                if not replace and _present(destination.name, target_fd):
                    raise ExecutionError("something appeared at the destination")
                os.rename(source.name, destination.name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
                for fd in (source_fd, target_fd):
                    with contextlib.suppress(OSError):
                        os.fsync(fd)
            finally:
                os.close(target_fd)
        finally:
            os.close(source_fd)
    except BaseException:
        _remove_folders(created)
        raise


def _make_entry(workspace: Workspace, target: Path, link: str | None) -> Undo:
    """Make the link to `link` (or with None the empty folder) at `target`; returns how to remove it."""
    created: list[Path] = []
    folder_fd = _open_folder(workspace, target.parent, created)
    try:
        if link is None:
            os.mkdir(target.name, 0o777, dir_fd=folder_fd)
        else:
            os.symlink(link, target.name, dir_fd=folder_fd)
        with contextlib.suppress(OSError):
            os.fsync(folder_fd)
    except BaseException:
        _remove_folders(created)
        raise
    finally:
        os.close(folder_fd)

    def remove() -> None:
        remove_fd = _open_folder(workspace, target.parent, [])
        try:
            os.rmdir(target.name, dir_fd=remove_fd) if link is None else os.unlink(
                target.name, dir_fd=remove_fd
            )
        finally:
            os.close(remove_fd)
        _remove_folders(created)

    return remove


def _present(name: str, folder_fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=folder_fd)
    except FileNotFoundError:
        return False
    return True
