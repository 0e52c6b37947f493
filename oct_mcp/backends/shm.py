"""A landlock run's own POSIX shared memory and named semaphores: `/dev/shm` names in a folder of its own.

glibc makes them by a fixed path (measured, glibc 2.36): `shm_open` opens `/dev/shm/NAME` with
O_NOFOLLOW; `sem_open` opens a temporary `/dev/shm/sem.XXXXXX` with O_CREAT | O_EXCL, `link()`s it
to `sem.NAME` and unlinks it; `shm_unlink` and `sem_unlink` unlink; Python's multiprocessing heap
makes its arenas there with `mkstemp` (O_CREAT | O_EXCL | O_NOFOLLOW). A Landlock right on
`/dev/shm` reaches every other process's segments, so the run holds none, and the filter hands
the supervisor these calls: each open with O_NOFOLLOW or with O_CREAT | O_EXCL, each link and
unlink (and linkat and unlinkat from the caller's folder). The supervisor reads the path once:

- a name right in `/dev/shm` means the same name in a 0700 folder of the run's own there (made at
  its first use, removed when the run ends): the supervisor makes the call itself on its copy, in
  that folder, never following a link, and an open's descriptor is installed in the run. A
  segment made by anyone else is not in the folder: it answers as missing.
- any other path: not this module's to answer. The kernel makes the call as the run asked
  (SECCOMP_USER_NOTIF_FLAG_CONTINUE), under the run's Landlock rules, unless the run writes the
  project (`project_entries.py`). Rewriting the path after the check gains nothing: whatever the
  kernel then reads is checked by Landlock, which gives no right on `/dev/shm`.

Any other form of these calls (a descriptor of `/dev/shm` as the folder, `/dev/shm` spelt another
way) is never seen here and stays refused by Landlock.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Final

from oct_mcp.backends.run_memory import caller_umask, read_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from seccompy import Filter
    from seccompy.notify import Listener, Notification

__all__ = ["SHM_CALLS", "RunSharedMemory", "notify_shm_calls"]

SHM_CALLS: Final = ("open", "openat", "link", "linkat", "unlink", "unlinkat")
_SHM: Final = "/dev/shm/"  # noqa: S108 - the folder glibc uses, never a temporary file of ours
_AT_FDCWD: Final = 0xFFFFFF9C
"""AT_FDCWD (-100) as the low 32 bits of a register."""
_LOW_32: Final = 0xFFFFFFFF
_O_CREAT_EXCL: Final = os.O_CREAT | os.O_EXCL
_OPEN_FLAGS: Final = (
    os.O_ACCMODE | os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
)
"""What shm_open, sem_open and mkstemp ask; an open with any other flag is left to Landlock."""
_O_LARGEFILE: Final = 0o100000
"""Set by the kernel itself on 64-bit: no meaning to check."""
_AT_REMOVEDIR: Final = 0x200
_NAME_MAX: Final = 255
_PATH_ARGUMENTS: Final = {"open": (0,), "openat": (1,), "unlink": (0,), "unlinkat": (1,), "link": (0, 1)}
_PATH_ARGUMENTS_LINKAT: Final = (1, 3)
_OPEN_FLAGS_AT: Final = {"open": 1, "openat": 2}


def notify_shm_calls(rules: Filter) -> None:
    """Hand the supervisor the calls that may name `/dev/shm` as glibc and Python spell it."""
    from seccompy import ArgCmp, CmpOp, syscall_nr

    for name, flags_at in _OPEN_FLAGS_AT.items():
        if not _exists(name, syscall_nr):
            continue
        no_follow = ArgCmp(flags_at, CmpOp.MASKED_EQ, os.O_NOFOLLOW, mask=os.O_NOFOLLOW)
        rules.notify(name, args=[no_follow])
        rules.notify(name, args=[ArgCmp(flags_at, CmpOp.MASKED_EQ, _O_CREAT_EXCL, mask=_O_CREAT_EXCL)])
    for name in ("link", "unlink"):
        if _exists(name, syscall_nr):
            rules.notify(name)
    rules.notify("unlinkat", args=[ArgCmp(0, CmpOp.MASKED_EQ, _AT_FDCWD, mask=_LOW_32)])
    here = [ArgCmp(at, CmpOp.MASKED_EQ, _AT_FDCWD, mask=_LOW_32) for at in (0, 2)]
    rules.notify("linkat", args=here)


def _exists(name: str, syscall_nr: Callable[[str], int]) -> bool:
    """Whether this architecture has the call (arm64 has no open, link or unlink)."""
    try:
        syscall_nr(name)
    except ValueError:
        return False
    return True


class _ContinueError(Exception):
    """Not a `/dev/shm` name: the kernel makes the call as asked, under the run's Landlock rules."""


class RunSharedMemory:
    """The `/dev/shm` of one run: a private folder made at first use, and the answers to its calls."""

    def __init__(self) -> None:
        self._folder: str | None = None
        self._fd = -1

    def answer(self, listener: Listener, notification: Notification, name: str) -> bool:
        """Answer one notification of `SHM_CALLS` that names `/dev/shm`; the caller gone, nothing to answer.

        Returns:
            False when the call names no `/dev/shm` path: nothing was answered, the caller decides.
        """
        from seccompy import SeccompError
        from seccompy.notify import RespFlag

        try:
            paths = self._names(notification, name)
            if paths is None:
                return False
            # Read from the caller itself, not a process that took its pid after it died.
            if not listener.valid(notification.id):
                return True
            result = self._act(listener, notification, name, paths)
        except _ContinueError:
            with contextlib.suppress(SeccompError, RuntimeError):
                listener.respond(notification.id, flags=RespFlag.CONTINUE)
            return True
        except (OSError, SeccompError) as exc:
            result = -(exc.errno or errno.EACCES)
        if result is None:
            return True  # answered with the descriptor itself
        with contextlib.suppress(SeccompError, RuntimeError):
            if result < 0:
                listener.respond(notification.id, error=-result)
            else:
                listener.respond(notification.id, val=result)
        return True

    def close(self) -> None:
        """Remove the run's folder and every segment left in it (the run has ended)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def _names(self, notification: Notification, name: str) -> list[str | None] | None:
        """The `/dev/shm` name (or None) of each path the call takes; None when it names none."""
        if name in _OPEN_FLAGS_AT:
            flags = notification.args[_OPEN_FLAGS_AT[name]]
            if not flags & os.O_NOFOLLOW and flags & _O_CREAT_EXCL != _O_CREAT_EXCL:
                # Not an open glibc makes in /dev/shm: handed over for a writable run's project.
                return None
        at = _PATH_ARGUMENTS_LINKAT if name == "linkat" else _PATH_ARGUMENTS[name]
        names = [_shm_name(read_path(notification.pid, notification.args[index])) for index in at]
        if all(found is None for found in names):
            return None
        return names

    def _act(
        self, listener: Listener, notification: Notification, name: str, names: list[str | None]
    ) -> int | None:
        args = notification.args
        if name in ("link", "linkat"):
            if None in names or (name == "linkat" and args[4] & _LOW_32):
                # One end outside /dev/shm: another file system, as it would be.
                return -errno.EXDEV
            old, new = (found for found in names if found is not None)
            folder = self._folder_fd()
            os.link(old, new, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            return 0
        (found,) = names
        assert found is not None  # noqa: S101 - _names returns None when no path names /dev/shm
        if name in ("unlink", "unlinkat"):
            if name == "unlinkat" and args[2] & _AT_REMOVEDIR:
                os.rmdir(found, dir_fd=self._folder_fd())
            else:
                os.unlink(found, dir_fd=self._folder_fd())
            return 0
        flags_at, mode_at = (2, 3) if name == "openat" else (1, 2)
        flags = args[flags_at] & _LOW_32 & ~_O_LARGEFILE
        if flags & ~_OPEN_FLAGS:
            raise _ContinueError
        mode = args[mode_at] & 0o777 & ~caller_umask(notification.pid)
        fd = os.open(found, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self._folder_fd())
        try:
            from seccompy import SeccompError
            from seccompy.notify import AddFdFlag

            with contextlib.suppress(SeccompError, RuntimeError):
                listener.addfd(notification.id, fd, flags=AddFdFlag.SEND, newfd_flags=flags & os.O_CLOEXEC)
        finally:
            os.close(fd)
        return None

    def _folder_fd(self) -> int:
        if self._fd < 0:
            # 0700, named at random: only the server's user may look in (it owns the host's segments).
            self._folder = tempfile.mkdtemp(prefix="oct-run-", dir=_SHM)
            self._fd = os.open(self._folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        return self._fd


def _shm_name(path: bytes) -> str | None:
    """The name of `/dev/shm/NAME` spelt as glibc spells it; None for any other path."""
    text = os.fsdecode(path)
    if not text.startswith(_SHM):
        return None
    name = text[len(_SHM) :]
    if not name or "/" in name or name in (".", "..") or len(name) > _NAME_MAX:
        return None
    return name
