"""Opening a name the run gave beneath one of its folders, as the kernel resolves it, never leaving it.

The supervisor acts for a run on a path it copied out of the run's memory; the run may swap a
folder on the way for a link between the check and the act. openat2 with RESOLVE_BENEATH and
RESOLVE_NO_SYMLINKS resolves the name once, refusing any link and any way out of the folder, and
gives a descriptor the supervisor acts on: what it acts on is what was checked.
"""

from __future__ import annotations

import ctypes
import os
import struct
from typing import Final

from oct_mcp.backends.libc import libc

__all__ = ["open_beneath", "relative_beneath"]

_RESOLVE_NO_SYMLINKS_BENEATH: Final = 0x04 | 0x02 | 0x08
"""RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH."""


def open_beneath(folder: str, relative: str) -> int:
    """An O_PATH descriptor of `relative` under `folder`, no link followed, never leaving it.

    Raises:
        OSError: The kernel's own error: ENOENT for a name that is not there, ELOOP or EXDEV for a
            link or a way out on the path.
    """
    from seccompy import syscall_nr

    base = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        how = struct.pack("=QQQ", os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW, 0, _RESOLVE_NO_SYMLINKS_BENEATH)
        fd = libc().syscall(
            ctypes.c_long(syscall_nr("openat2")),
            ctypes.c_int(base),
            os.fsencode(relative),
            how,
            ctypes.c_size_t(len(how)),
        )
        if fd < 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
        return int(fd)
    finally:
        os.close(base)


def relative_beneath(folder: str, pid: int, path: str) -> str | None:
    """`path` as the run `pid` named it (from its own working folder when not absolute), relative
    to `folder`; None when it is `folder` itself or lies outside it.

    Only the spelling is judged here: `open_beneath` then resolves the name as the kernel does.

    Raises:
        OSError: The run's working folder cannot be read (it has ended).
    """
    if not path.startswith("/"):
        path = os.path.join(os.readlink(f"/proc/{pid}/cwd"), path)
    relative = os.path.relpath(os.path.normpath(path), folder)
    if relative == "." or relative.startswith(".."):
        return None
    return relative
