"""A landlock run without writes may change the mode and times of its own files in its scratch folder.

Seccomp sees no path and Landlock has no right for a file's mode or times: a run without writes gets
every `chmod` and `utimensat` refused, which stops ordinary work in its temporary files
(multiprocessing's forkserver makes its socket 0600, pytest its temporary folders 0700,
`shutil.copy2` copies a mode and times, `Path.touch` of a file that exists sets its times).
Through the supervisor the run's `chmod`, `fchmodat` and `utimensat` by path (on a descriptor they
stay refused) are made for it when the path lies in the scratch folder: the path and the times are
copied out of the run once, the file opened beneath the folder with no link anywhere on the way
(openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), checked to be the run's own (its owner, as the
kernel checks for a caller without CAP_FOWNER), and changed through that descriptor. Anywhere else
the call is refused, as before: a time set on a project file could make a build tool take a stale
output for a fresh one. The setuid, setgid, sticky and world-write bits are refused by the filter
before the supervisor sees the call.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from oct_mcp.backends.beneath import open_beneath, relative_beneath
from oct_mcp.backends.run_memory import read_bytes, read_path

if TYPE_CHECKING:
    from seccompy import Filter
    from seccompy.notify import Listener, Notification

__all__ = ["METADATA_CALLS", "MODE_CALLS", "TIME_CALLS", "ScratchMetadata", "notify_scratch_metadata"]

MODE_CALLS: Final = ("chmod", "fchmodat", "fchmodat2")
# glibc's utime, utimes and futimes(at) call utimensat; the older syscalls stay refused.
TIME_CALLS: Final = ("utimensat",)
METADATA_CALLS: Final = (*MODE_CALLS, *TIME_CALLS)
_AT_SYMLINK_NOFOLLOW: Final = 0x100
_TIMESPECS: Final = struct.Struct("=qqqq")
"""Two `struct timespec` of x86-64 and arm64: seconds and nanoseconds, each 64 bits."""
_UTIME_NOW: Final = (1 << 30) - 1
_UTIME_OMIT: Final = (1 << 30) - 2
_NANOSECONDS: Final = 1_000_000_000
_MODE_AT: Final = {"chmod": 1, "fchmodat": 2, "fchmodat2": 2}
_AT_FDCWD: Final = 0xFFFFFF9C
_LOW_32: Final = 0xFFFFFFFF
_REFUSED_BITS: Final = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWOTH
"""RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH."""


def notify_scratch_metadata(rules: Filter) -> None:
    """Hand the supervisor each chmod and utimensat; the caller has already refused the bits no run sets."""
    from seccompy import syscall_nr

    for name in METADATA_CALLS:
        try:
            syscall_nr(name)
        except ValueError:
            continue  # arm64 has no chmod; older tables no fchmodat2
        rules.notify(name)


class ScratchMetadata:
    """Answers a run's chmod and utimensat calls: made for it in its scratch folder, refused elsewhere."""

    def __init__(self, scratch: str) -> None:
        self._scratch = scratch

    def answer(self, listener: Listener, notification: Notification, name: str) -> None:
        from seccompy import SeccompError

        try:
            if name in TIME_CALLS:
                error = self._set_times(listener, notification)
            else:
                error = self._change(listener, notification, name)
        except OSError as exc:
            error = exc.errno or errno.EPERM
        if error is None:
            return  # the caller is gone
        with contextlib.suppress(SeccompError, RuntimeError):
            listener.respond(notification.id, error=error)

    def _change(self, listener: Listener, notification: Notification, name: str) -> int | None:
        args = notification.args
        mode = args[_MODE_AT[name]] & _LOW_32
        path = os.fsdecode(read_path(notification.pid, args[0 if name == "chmod" else 1]))
        if name != "chmod" and not path.startswith("/") and args[0] & _LOW_32 != _AT_FDCWD:
            return errno.EPERM  # relative to a descriptor: not a path the supervisor can place
        if (name == "fchmodat2" and args[3] & _LOW_32) or mode & _REFUSED_BITS or mode & ~0o7777:
            return errno.EPERM
        return self._on_own_file(
            listener, notification, path, lambda fd: os.chmod(f"/proc/self/fd/{fd}", mode)
        )

    def _set_times(self, listener: Listener, notification: Notification) -> int | None:
        args = notification.args
        if not args[1]:
            return errno.EPERM  # futimens: a descriptor, not a path the supervisor can place
        path = os.fsdecode(read_path(notification.pid, args[1]))
        if not path.startswith("/") and args[0] & _LOW_32 != _AT_FDCWD:
            return errno.EPERM
        if args[3] & _LOW_32 & ~_AT_SYMLINK_NOFOLLOW:
            return errno.EINVAL
        times = _times(read_bytes(notification.pid, args[2], _TIMESPECS.size) if args[2] else None)
        if times is None:
            return errno.EINVAL
        return self._on_own_file(listener, notification, path, lambda fd: _utime(fd, times))

    def _on_own_file(
        self, listener: Listener, notification: Notification, path: str, change: Callable[[int], None]
    ) -> int | None:
        """Make `change` on `path` if it is beneath the scratch folder, through no link, and the run's."""
        # The folder itself stays as the server made it (0700): only what the run made in it.
        relative = relative_beneath(self._scratch, notification.pid, path)
        if relative is None:
            return errno.EPERM
        try:
            fd = open_beneath(self._scratch, relative)
        except OSError as exc:
            # A link on the way (ELOOP, EXDEV) reads as a file the run may not change.
            raise OSError(
                exc.errno if exc.errno in (errno.ENOENT, errno.ENOTDIR) else errno.EPERM, ""
            ) from exc
        try:
            # Read from the caller itself, not a process that took its pid after it died.
            if not listener.valid(notification.id):
                return None
            found = os.fstat(fd)
            if stat.S_ISLNK(found.st_mode) or found.st_uid != _fsuid(notification.pid):
                return errno.EPERM
            change(fd)
        finally:
            os.close(fd)
        return 0


_Times = tuple[int | None, int | None]
"""Access and modification times in nanoseconds; None: left as they are (UTIME_OMIT)."""


def _times(raw: bytes | None) -> _Times | None:
    """The two times a utimensat asks for, as `os.utime` takes them; None: not valid ones."""
    now = time.time_ns()
    if raw is None:
        return now, now
    seconds_a, nanos_a, seconds_m, nanos_m = _TIMESPECS.unpack(raw)
    found: list[int | None] = []
    for seconds, nanos in ((seconds_a, nanos_a), (seconds_m, nanos_m)):
        if nanos == _UTIME_NOW:
            found.append(now)
        elif nanos == _UTIME_OMIT:
            found.append(None)
        elif 0 <= nanos < _NANOSECONDS:
            found.append(seconds * _NANOSECONDS + nanos)
        else:
            return None
    return found[0], found[1]


def _utime(fd: int, times: _Times) -> None:
    """Set the times of the file open at `fd` (an O_PATH descriptor), one of them left where None."""
    access, modified = times
    if access is None or modified is None:
        current = os.fstat(fd)
        access = current.st_atime_ns if access is None else access
        modified = current.st_mtime_ns if modified is None else modified
    os.utime(f"/proc/self/fd/{fd}", ns=(access, modified))


def _fsuid(pid: int) -> int:
    """The caller's file-system uid, whom the kernel would compare with the file's owner."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Uid:"):
                return int(line.split()[4])
    raise OSError(errno.ESRCH, "")
