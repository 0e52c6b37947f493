"""A run's private git folder: HEAD and the index copied out of the project's git folder, and put back.

git makes its lock files beside the file it replaces (`index.lock`, `HEAD.lock`), so a git that may
write the index or HEAD needs the right to create and rename files in the git folder itself; under
Landlock that right would let it replace `config` or plant `hooks/pre-commit` too. Instead the run's
git works on copies in a folder of its own, which names the project's git folder as its common
folder (as a linked worktree does): objects, refs and the config come from there, HEAD and the
index from the copies. After the run the server installs each copy that changed, under git's own
lock file, and only over the content it copied.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oct_mcp.errors import ExecutionError, LinkedFileError, TargetChangedError

__all__ = [
    "GIT_STATE_FILES",
    "InstalledState",
    "PrivateGitFolder",
    "install_git_state",
    "is_real_folder",
    "refuse_linked_git_files",
]

GIT_STATE_FILES: Final = frozenset({"HEAD", "index", "logs/HEAD"})
"""The per-worktree files a run may work on as copies."""
_FILE_MAX_BYTES: Final = 512 * 1_048_576
_HEAD: Final = re.compile(rb"ref: refs/heads/[^\0\n]+\n|[0-9a-f]{40}\n|[0-9a-f]{64}\n")
_INDEX_MAGIC: Final = b"DIRC"
_FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# git appends to a reflog in place (O_APPEND), and a writable data folder lets a run's git open any
# file in it: in these, a file with another name, or a link, would carry the write to that name.
_IN_PLACE_FOLDERS: Final = frozenset({"refs", "logs"})
# git never changes an object file in place (it writes a new one and links or renames it into
# place), and a local clone hard-links them from the repository it cloned: only links that lead
# elsewhere count there.
_DATA_FOLDERS: Final = frozenset({"objects"})
LINK_CHECK_MAX_ENTRIES: Final = 500_000
"""Entries of the writable git folders the check looks at before it refuses the write."""
_FIX: Final = (
    "replace it with a copy of itself (cp F F.new && mv F.new F) or remove it if git can make it "
    "anew, then call again"
)


@dataclass(frozen=True, slots=True)
class InstalledState:
    """A copy the run changed, to be installed: the file's name in the git folder, before and after."""

    name: str
    original: bytes | None
    """What the git folder held when the copy was made; None: there was no such file."""
    content: bytes
    modified_ns: int | None = None
    """When git wrote the copy: the installed file keeps it (see `_keep_time`)."""


class PrivateGitFolder:
    """`<scratch>/git`: the copies, a `commondir` naming the project's git folder, nothing else.

    Raises (on creation):
        ExecutionError: The git folder or a file in it is a link or not what git makes.
    """

    def __init__(self, scratch: Path, git_dir: Path, files: Iterable[str], folders: Iterable[str]) -> None:
        self.git_dir = git_dir
        self.path = scratch / "git"
        self.files = tuple(sorted(set(files)))
        unknown = set(self.files) - GIT_STATE_FILES
        if unknown:
            raise ValueError(f"not a per-worktree git file: {', '.join(sorted(unknown))}")
        refuse_linked_git_files(git_dir, self.files, folders)
        self.path.mkdir(mode=0o700)
        (self.path / "logs").mkdir(mode=0o700)
        self._originals: dict[str, bytes | None] = {}
        for name in self.files:
            content = _read_in(git_dir, name)
            self._originals[name] = content
            if content is not None:
                (self.path / name).write_bytes(content)
                _keep_time(git_dir / name, self.path / name)
        # Absolute: git resolves a relative commondir against this folder.
        (self.path / "commondir").write_text(f"{git_dir}\n")
        self.folders = tuple(git_dir / name for name in sorted(set(folders)) if is_real_folder(git_dir, name))
        self._folder_names = tuple(sorted(set(folders)))

    def environment(self) -> tuple[tuple[str, str], ...]:
        return (("GIT_DIR", str(self.path)),)

    def changed(self) -> tuple[InstalledState, ...]:
        """The copies the run changed, read without following links.

        Raises:
            ExecutionError: A copy is no regular file, too large, or holds what git never writes there.
            LinkedFileError: A file in the git folder got another name or became a link during the
                run; nothing is installed.
        """
        refuse_linked_git_files(self.git_dir, self.files, self._folder_names, after=True)
        found: list[InstalledState] = []
        for name in self.files:
            content = _read_in(self.path, name)
            original = self._originals[name]
            if content is None or content == original:
                continue
            _check_content(name, content, original)
            modified = os.stat(self.path / name, follow_symlinks=False).st_mtime_ns
            found.append(InstalledState(name, original, content, modified))
        return tuple(found)


def install_git_state(git_dir: Path, states: Iterable[InstalledState]) -> None:
    """Put each changed copy in place in the git folder, under git's lock file, if the original is unchanged.

    All or nothing as far as the file system allows: every lock is taken and written, and every
    original checked, before the first rename; HEAD is renamed last, so a rename that fails leaves
    HEAD where it was.

    Raises:
        TargetChangedError: A file changed in the git folder during the run; nothing is installed.
        ExecutionError: Another git holds a lock, or a file cannot be written; nothing is installed.
    """
    staged: list[tuple[int, str]] = []
    try:
        for state in sorted(states, key=lambda state: state.name == "HEAD"):
            folder_name, _, file_name = state.name.rpartition("/")
            try:
                folder = _open_folder(git_dir, folder_name)
            except OSError as exc:
                raise ExecutionError("the git folder cannot be opened safely; nothing was installed") from exc
            try:
                _write_lock(folder, file_name, state)
            except BaseException:
                os.close(folder)
                raise
            staged.append((folder, file_name))
        while staged:
            folder, file_name = staged[0]
            try:
                os.rename(f"{file_name}.lock", file_name, src_dir_fd=folder, dst_dir_fd=folder)
            except OSError as exc:
                raise ExecutionError(
                    f"git's {file_name} could not be put in place ({exc.strerror}), so the call's change is "
                    "only partly installed; check the state with oct_git_status"
                ) from exc
            with contextlib.suppress(OSError):
                os.fsync(folder)
            os.close(folder)
            staged.pop(0)
    finally:
        for folder, file_name in staged:
            with contextlib.suppress(OSError):
                os.unlink(f"{file_name}.lock", dir_fd=folder)
            os.close(folder)


def _write_lock(folder: int, name: str, state: InstalledState) -> None:
    """git's `<name>.lock` beside `name`, holding the new content, once the original is seen unchanged."""
    lock = f"{name}.lock"
    try:
        fd = os.open(
            lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder
        )
    except FileExistsError:
        raise ExecutionError(
            f"another git process holds the repository's {lock}; wait for it to finish (or remove the "
            "stale lock file) and call again"
        ) from None
    except OSError as exc:
        raise ExecutionError(
            f"git's {name} cannot be written ({exc.strerror}); nothing was installed"
        ) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(state.content)
            handle.flush()
            if state.modified_ns is not None:
                os.utime(handle.fileno(), ns=(state.modified_ns, state.modified_ns))
            os.fsync(handle.fileno())
        if _read_at(folder, name) != state.original:
            raise TargetChangedError(
                f"the repository's {name} changed while the call ran (another git process), so the call's "
                "changes were not installed; check the state with oct_git_status"
            )
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(lock, dir_fd=folder)
        raise


def _keep_time(original: Path, copy: Path) -> None:
    """Give `copy` the modification time of `original`.

    git trusts an index entry's cached file times only when the file is older than the index itself
    (a file changed in the index's own second, to the same size, is "racily clean" and read again).
    A copy dated now would make every such entry look clean, and a change would go unseen: the copy
    keeps the index's own time, and the index installed back keeps the one git gave it.
    """
    status = os.stat(original, follow_symlinks=False)
    os.utime(copy, ns=(status.st_atime_ns, status.st_mtime_ns), follow_symlinks=False)


def _check_content(name: str, content: bytes, original: bytes | None) -> None:
    if name == "HEAD" and _HEAD.fullmatch(content) is None:
        raise ExecutionError("git left a HEAD that names no branch or commit; nothing was installed")
    if name == "index" and not content.startswith(_INDEX_MAGIC):
        raise ExecutionError("git left an index that is no git index; nothing was installed")
    if name == "logs/HEAD" and original is not None and not content.startswith(original):
        raise ExecutionError("git rewrote HEAD's reflog instead of adding to it; nothing was installed")


def _open_folder(git_dir: Path, relative: str) -> int:
    """A descriptor on `git_dir` or a folder in it, each component opened without following links."""
    fd = os.open(git_dir, _FOLDER_FLAGS)
    for part in filter(None, relative.split("/")):
        try:
            inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = inner
    return fd


def _read_in(root: Path, name: str) -> bytes | None:
    """A file under `root` reached through no link, or None when it is not there.

    Raises:
        ExecutionError: It is a link, no regular file, or larger than git makes such a file here.
    """
    folder_name, _, file_name = name.rpartition("/")
    try:
        folder = _open_folder(root, folder_name)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ExecutionError("a git folder is a link or cannot be opened; git was not run") from exc
    try:
        return _read_at(folder, file_name)
    finally:
        os.close(folder)


def _read_at(folder: int, name: str) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ExecutionError(f"git's {name} is a link or cannot be read; git was not run") from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ExecutionError(f"git's {name} is no regular file; git was not run")
        content = handle.read(_FILE_MAX_BYTES + 1)
    if len(content) > _FILE_MAX_BYTES:
        raise ExecutionError(
            f"git's {name} is larger than {_FILE_MAX_BYTES // 1_048_576} MiB; git was not run"
        )
    return content


def is_real_folder(git_dir: Path, name: str) -> bool:
    """`name` in `git_dir` is a folder, and neither it nor `git_dir` a link (none is followed)."""
    try:
        return stat.S_ISDIR(os.lstat(git_dir / name).st_mode) and not os.path.islink(git_dir)
    except OSError:
        return False


def refuse_linked_git_files(
    git_dir: Path, files: Iterable[str], folders: Iterable[str], *, after: bool = False
) -> None:
    """Refuse a git write where a file it may change in place is not that file alone.

    Checked: the per-worktree files the run works on as copies (`files`), and every entry of the
    writable data folders (`folders`): in `refs` and `logs` a regular file with another hard link,
    a symlink, or anything but a file or folder; in `objects` a symlink or a special file. Each
    folder is opened from its parent's descriptor, never through a link.

    Args:
        after: The check after the run, before anything is installed (the message says so).

    Raises:
        LinkedFileError: One is found; it is named, with how to fix it.
    """
    when = "git ran, but nothing it changed was installed" if after else "nothing ran"
    try:
        top = os.open(git_dir, _FOLDER_FLAGS)
    except OSError as exc:
        raise ExecutionError(
            f"the git folder is a link or cannot be opened ({exc.strerror}); {when}"
        ) from exc
    try:
        for name in sorted(set(files)):
            _check_file(top, name, git_dir.name, when)
        seen = 0
        for folder in sorted(set(folders)):
            seen = _check_folder(
                top, folder, git_dir.name, when, seen, hard_links=folder in _IN_PLACE_FOLDERS
            )
    finally:
        os.close(top)


def _check_file(top: int, name: str, shown: str, when: str) -> None:
    folder_name, _, file_name = name.rpartition("/")
    try:
        folder = _open_folder_at(top, folder_name)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LinkedFileError(
            f"the folder of git's {shown}/{name} is a link or cannot be opened ({exc.strerror}); {when}"
        ) from exc
    try:
        info = os.stat(file_name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return
    finally:
        os.close(folder)
    _refuse_entry(info, f"{shown}/{name}", when, hard_links=True)


def _check_folder(top: int, name: str, shown: str, when: str, seen: int, *, hard_links: bool) -> int:
    """Every entry below the data folder `name`; returns the entries seen so far."""
    try:
        fd = os.open(name, _FOLDER_FLAGS, dir_fd=top)
    except FileNotFoundError:
        return seen
    except OSError as exc:
        # A link: the folder is left out of the writable set (is_real_folder), so git cannot write there.
        if not os.path.islink(f"/proc/self/fd/{top}/{name}") and exc.errno != errno.ELOOP:
            raise LinkedFileError(f"git's {shown}/{name} cannot be opened ({exc.strerror}); {when}") from exc
        return seen
    stack = [(fd, f"{shown}/{name}")]
    try:
        while stack:
            folder, relative = stack.pop()
            try:
                with os.scandir(folder) as listing:
                    names = [entry.name for entry in listing]
            except OSError as exc:
                os.close(folder)
                raise LinkedFileError(f"git's {relative} cannot be listed ({exc.strerror}); {when}") from exc
            seen += len(names)
            if seen > LINK_CHECK_MAX_ENTRIES:
                os.close(folder)
                raise LinkedFileError(
                    f"the repository's writable git folders hold more than {LINK_CHECK_MAX_ENTRIES} entries, "
                    f"more than the check for linked files looks at; {when}: run `git gc` in a terminal "
                    "to pack them, then call again"
                )
            try:
                for child in names:
                    path = f"{relative}/{child}"
                    try:
                        info = os.stat(child, dir_fd=folder, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if stat.S_ISDIR(info.st_mode):
                        stack.append((os.open(child, _FOLDER_FLAGS, dir_fd=folder), path))
                        continue
                    _refuse_entry(info, path, when, hard_links=hard_links)
            finally:
                os.close(folder)
    except OSError as exc:
        raise LinkedFileError(
            f"a folder in git's {shown}/{name} cannot be read ({exc.strerror}); {when}"
        ) from exc
    finally:
        for folder, _ in stack:
            os.close(folder)
    return seen


def _refuse_entry(info: os.stat_result, shown: str, when: str, *, hard_links: bool) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise LinkedFileError(
            f"git's {shown} is a symbolic link, so a git write could change the file it leads to; "
            f"{when}: {_FIX}"
        )
    if not stat.S_ISREG(info.st_mode):
        raise LinkedFileError(f"git's {shown} is no regular file; {when}: remove it, then call again")
    if hard_links and info.st_nlink > 1:
        raise LinkedFileError(
            f"git's {shown} has another name (a hard link), so a git write that changes it in place "
            f"would change that other file too; {when}: {_FIX}"
        )


def _open_folder_at(top: int, relative: str) -> int:
    fd = os.dup(top)
    for part in filter(None, relative.split("/")):
        try:
            inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = inner
    return fd
