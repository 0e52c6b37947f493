"""Unix sockets of a supervised run: under its scratch folder only, checked by the kernel as it binds."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import socket
import stat
import struct
import threading
from typing import TYPE_CHECKING, Final

from oct_mcp.backends.beneath import open_beneath, relative_beneath
from oct_mcp.backends.libc import libc
from oct_mcp.backends.loopback_addresses import unix_path
from oct_mcp.backends.loopback_calls import Caller, CallRefusedError, checked

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["ScratchUnixSockets"]

_CLONE_FS: Final = 0x200


class ScratchUnixSockets:
    """Binds and reaches a run's unix sockets by path, under its scratch folder (HOME, TMPDIR) only."""

    def __init__(self, scratch: str) -> None:
        """`scratch`: the run's scratch folder, symlinks resolved."""
        self._scratch = scratch

    @contextlib.contextmanager
    def socket_file(self, caller: Caller, address: bytes) -> Iterator[bytes]:
        """A sockaddr naming, through /proc/self/fd, the socket file `address` names under the scratch folder.

        The file is opened beneath the scratch folder with no symlink anywhere on the way
        (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), then reached through its own descriptor:
        renaming, or swapping a folder or the file for a link after the check reaches nothing else.
        Abstract names are refused: the supervisor stands outside the run's Landlock domain, whose
        scope would keep the run from the host's (D-Bus, X11).
        """
        path = unix_path(address)
        if path is None:
            raise CallRefusedError(errno.EPERM)
        relative = self._beneath(caller, path)
        try:
            fd = open_beneath(self._scratch, relative)
        except OSError as exc:
            # Beneath the run's own folder, which it may list: a missing name is missing, as in a
            # terminal (a test expects FileNotFoundError); anything else (a link) is refused.
            raise CallRefusedError(errno.ENOENT if exc.errno == errno.ENOENT else errno.EACCES) from exc
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                raise CallRefusedError(errno.ECONNREFUSED)
            yield struct.pack("=H", socket.AF_UNIX) + f"/proc/self/fd/{fd}".encode() + b"\0"
        finally:
            os.close(fd)

    def _beneath(self, caller: Caller, path: bytes) -> str:
        """`path` (relative to the caller's folder when not absolute) relative to the scratch folder."""
        try:
            relative = relative_beneath(self._scratch, caller.pid, os.fsdecode(path))
        except OSError as exc:
            raise CallRefusedError(errno.EPERM) from exc
        if relative is None:
            raise CallRefusedError(errno.EACCES)
        return relative

    def bind(self, caller: Caller, target: int, address: bytes) -> int:
        """Bind from a throwaway thread whose Landlock domain lets it make sockets in the scratch folder only.

        The kernel then checks the path as it resolves it, when it binds: a folder swapped for a
        link after any check of ours still makes no socket file outside.
        """
        if unix_path(address) is None:
            raise CallRefusedError(errno.EPERM)  # abstract names, and autobind, which picks one
        outcome: list[int | CallRefusedError] = []

        def bind() -> None:
            from landlockpy import AccessFS, AccessNet, LandlockError, Ruleset

            try:
                # A folder of its own for this thread: the caller's, so a relative path means the same.
                if libc().unshare(_CLONE_FS) != 0:
                    raise CallRefusedError(ctypes.get_errno())
                os.chdir(f"/proc/{caller.pid}/cwd")
                with Ruleset(handled_fs=AccessFS.MAKE_SOCK, handled_net=AccessNet.NONE) as ruleset:
                    ruleset.allow_path(self._scratch, AccessFS.MAKE_SOCK)
                    ruleset.restrict(no_new_privs=True)
                    if not ruleset.enforced:
                        raise CallRefusedError(errno.EPERM)
                outcome.append(checked(libc().bind(target, address, len(address))))
            except CallRefusedError as refused:
                outcome.append(refused)
            except (OSError, LandlockError, ValueError):
                outcome.append(CallRefusedError(errno.EPERM))

        thread = threading.Thread(target=bind, name="oct-loopback-bind", daemon=True)
        thread.start()
        thread.join()
        result = outcome[0] if outcome else CallRefusedError(errno.EPERM)
        if isinstance(result, CallRefusedError):
            raise result
        return result
