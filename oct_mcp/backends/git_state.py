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
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oct_mcp.errors import ExecutionError, TargetChangedError

__all__ = ["GIT_STATE_FILES", "InstalledState", "PrivateGitFolder", "install_git_state", "is_real_folder"]

GIT_STATE_FILES: Final = frozenset({"HEAD", "index", "logs/HEAD"})
"""The per-worktree files a run may work on as copies."""
_FILE_MAX_BYTES: Final = 512 * 1_048_576
_HEAD: Final = re.compile(rb"ref: refs/heads/[^\0\n]+\n|[0-9a-f]{40}\n|[0-9a-f]{64}\n")
_INDEX_MAGIC: Final = b"DIRC"
_FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class InstalledState:
    """A copy the run changed, to be installed: the file's name in the git folder, before and after."""

    name: str
    original: bytes | None
    """What the git folder held when the copy was made; None: there was no such file."""
    content: bytes


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
        self.path.mkdir(mode=0o700)
        (self.path / "logs").mkdir(mode=0o700)
        self._originals: dict[str, bytes | None] = {}
        for name in self.files:
            content = _read_in(git_dir, name)
            self._originals[name] = content
            if content is not None:
                (self.path / name).write_bytes(content)
        # Absolute: git resolves a relative commondir against this folder.
        (self.path / "commondir").write_text(f"{git_dir}\n")
        self.folders = tuple(git_dir / name for name in sorted(set(folders)) if is_real_folder(git_dir, name))

    def environment(self) -> tuple[tuple[str, str], ...]:
        return (("GIT_DIR", str(self.path)),)

    def changed(self) -> tuple[InstalledState, ...]:
        """The copies the run changed, read without following links.

        Raises:
            ExecutionError: A copy is no regular file, too large, or holds what git never writes there.
        """
        found: list[InstalledState] = []
        for name in self.files:
            content = _read_in(self.path, name)
            original = self._originals[name]
            if content is None or content == original:
                continue
            _check_content(name, content, original)
            found.append(InstalledState(name, original, content))
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
