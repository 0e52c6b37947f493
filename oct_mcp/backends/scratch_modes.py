"""A landlock run without writes may change the mode of its own files in its scratch folder.

Seccomp sees no path and Landlock has no right for a file's mode: a run without writes gets every
`chmod` refused, which stops ordinary work in its temporary files (multiprocessing's forkserver
makes its socket 0600, pytest its temporary folders 0700, `shutil.copy` copies a mode). Through
the supervisor the run's `chmod` and `fchmodat` (by path; `fchmod` on a descriptor stays refused)
are made for it when the path lies in the scratch folder: the path is copied out of the run once,
the file opened beneath the folder with no link anywhere on the way (openat2 RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS), checked to be the run's own (its owner, as the kernel checks for a caller
without CAP_FOWNER), and its mode changed through that descriptor. Anywhere else the call is
refused, as before. The setuid, setgid, sticky and world-write bits are refused by the filter
before the supervisor sees the call.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import TYPE_CHECKING, Final

from oct_mcp.backends.beneath import open_beneath, relative_beneath
from oct_mcp.backends.run_memory import read_path

if TYPE_CHECKING:
    from seccompy import Filter
    from seccompy.notify import Listener, Notification

__all__ = ["MODE_CALLS", "ScratchModes", "notify_scratch_modes"]

MODE_CALLS: Final = ("chmod", "fchmodat", "fchmodat2")
_MODE_AT: Final = {"chmod": 1, "fchmodat": 2, "fchmodat2": 2}
_AT_FDCWD: Final = 0xFFFFFF9C
_LOW_32: Final = 0xFFFFFFFF
_REFUSED_BITS: Final = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWOTH
"""RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH."""


def notify_scratch_modes(rules: Filter) -> None:
    """Hand the supervisor each chmod by path; the caller has already refused the bits no run sets."""
    from seccompy import syscall_nr

    for name in MODE_CALLS:
        try:
            syscall_nr(name)
        except ValueError:
            continue  # arm64 has no chmod; older tables no fchmodat2
        rules.notify(name)


class ScratchModes:
    """Answers a run's chmod calls: made for it in its scratch folder, refused elsewhere."""

    def __init__(self, scratch: str) -> None:
        self._scratch = scratch

    def answer(self, listener: Listener, notification: Notification, name: str) -> None:
        from seccompy import SeccompError

        try:
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
            os.chmod(f"/proc/self/fd/{fd}", mode)
        finally:
            os.close(fd)
        return 0


def _fsuid(pid: int) -> int:
    """The caller's file-system uid, whom the kernel would compare with the file's owner."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Uid:"):
                return int(line.split()[4])
    raise OSError(errno.ESRCH, "")
