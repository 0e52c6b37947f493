"""A landlock run's own ptys: the terminal side of a pty the run holds, opened for it by the server.

glibc's `openpty` (and so `os.openpty`, `os.forkpty`, `pty.fork`, pexpect) opens `/dev/ptmx`,
then the terminal side with `ioctl(master, TIOCGPTPEER)`, and the kernel checks that open as one
of `/dev/pts/N` against the run's Landlock rules (measured). A rule on `/dev/pts` would open every
terminal of the user to the run, by name. So the run gets `/dev/ptmx` only, and its TIOCGPTPEER is
answered through seccomp user notification by the server, which Landlock does not confine: it
takes the run's own master (`pidfd_getfd`), opens its terminal side and installs that in the run.
The run holds no right on `/dev/pts`: it reaches the terminal of a pty it opened, never another.

These are the parts; the run's supervisor (the one seccomp listener a run can have) calls them:
`notify_pty_peer` adds the rule to the run's filter, `allow_pty_master` the Landlock rights, and
`answer_pty_peer` answers each notification of that rule.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from landlockpy import Ruleset
    from seccompy import Filter
    from seccompy.notify import Listener, Notification

__all__ = ["TIOCGPTPEER", "allow_pty_master", "answer_pty_peer", "notify_pty_peer"]

TIOCGPTPEER: Final = 0x5441
_LOW_32: Final = 0xFFFFFFFF
_PTMX: Final = os.makedev(5, 2)
"""/dev/ptmx, and the ptmx of every devpts instance: a master is a file of this device."""
_PEER_FLAGS: Final = os.O_WRONLY | os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC
_MASTER_DEVICES: Final = ("/dev/ptmx", "/dev/tty")
"""/dev/tty is the opener's own controlling terminal (the pty a child made its own), never another's."""


def notify_pty_peer(rules: Filter) -> None:
    """Hand each TIOCGPTPEER of the run to the supervisor; in a filter without a listener the
    kernel answers ENOSYS, and glibc's fallback, the open by name, stays refused by Landlock."""
    from seccompy import ArgCmp, CmpOp

    rules.notify("ioctl", args=[ArgCmp(1, CmpOp.MASKED_EQ, TIOCGPTPEER, mask=_LOW_32)])


def allow_pty_master(ruleset: Ruleset) -> None:
    """Open, read, write and ioctl `/dev/ptmx` and `/dev/tty`: a new pty, or the run's own terminal."""
    from landlockpy import AccessFS

    rights = AccessFS.READ_FILE | AccessFS.WRITE_FILE | AccessFS.IOCTL_DEV
    for device in _MASTER_DEVICES:
        if os.path.exists(device):
            ruleset.allow_path(device, rights)


def answer_pty_peer(listener: Listener, notification: Notification) -> None:
    """Answer one TIOCGPTPEER of a run: the terminal side of its own master as the call's result,
    or the error the call would have had (EBADF: no such fd; ENOTTY: not a pty master).

    The master is the run's file, taken by number: whatever the run puts there, it can only get
    the terminal of a pty it holds. The flags are a plain value, read once.
    """
    from seccompy import SeccompError
    from seccompy.notify import AddFdFlag, pidfd_getfd, pidfd_open

    master = pidfd = -1
    try:
        pidfd = pidfd_open(notification.pid)
        master = pidfd_getfd(pidfd, notification.args[0] & _LOW_32)
        # The thread is still waiting: the pid was not reused for another process in between.
        if not listener.valid(notification.id):
            return
        if os.fstat(master).st_rdev != _PTMX:
            listener.respond(notification.id, error=errno.ENOTTY)
            return
        flags = notification.args[2] & _PEER_FLAGS
        terminal = _open_peer(master, flags & ~os.O_CLOEXEC)
        try:
            listener.addfd(notification.id, terminal, flags=AddFdFlag.SEND, newfd_flags=flags & os.O_CLOEXEC)
        finally:
            os.close(terminal)
    except (SeccompError, OSError) as exc:
        # Gone (ENOENT) or refused: the run's call fails with the reason, if it still waits.
        with contextlib.suppress(SeccompError, OSError):
            listener.respond(notification.id, error=exc.errno or errno.EIO)
    finally:
        for fd in (master, pidfd):
            if fd >= 0:
                os.close(fd)


def _open_peer(master: int, flags: int) -> int:
    import fcntl

    return fcntl.ioctl(master, TIOCGPTPEER, flags)
