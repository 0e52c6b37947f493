"""Reading a supervised call's arguments out of the calling process's memory, once, into the server's.

The run may change its memory while the supervisor looks: every check and every call the
supervisor makes for it use the copy, never the run's memory again. The caller's umask is read
from its status, as the kernel would apply it to an entry the supervisor makes for it.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Final

from oct_mcp.backends.libc import libc

__all__ = ["caller_umask", "read_bytes", "read_path"]

_MAX_PATH: Final = 4096


class _Iovec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


def read_path(pid: int, pointer: int) -> bytes:
    """A NUL-ended path from the run's memory, read once; the call's own EFAULT or ENAMETOOLONG otherwise.

    Read page by page: a short path at the end of a mapping must not fail for the bytes after it.
    """
    out = b""
    page = 4096
    while len(out) < _MAX_PATH:
        size = min(page - (pointer + len(out)) % page, _MAX_PATH - len(out))
        buffer = ctypes.create_string_buffer(size)
        local = _Iovec(ctypes.addressof(buffer), size)
        remote = _Iovec(pointer + len(out), size)
        one = ctypes.c_ulong(1)
        read = libc().process_vm_readv(
            pid, ctypes.byref(local), one, ctypes.byref(remote), one, ctypes.c_ulong(0)
        )
        if read <= 0:
            raise OSError(errno.EFAULT, os.strerror(errno.EFAULT))
        chunk = buffer.raw[:read]
        if b"\0" in chunk:
            return out + chunk.split(b"\0", 1)[0]
        out += chunk
    raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))


def read_bytes(pid: int, pointer: int, size: int) -> bytes:
    """`size` bytes of the run's memory, read once; EFAULT where they are not all there."""
    if size == 0:
        return b""
    buffer = ctypes.create_string_buffer(size)
    local = _Iovec(ctypes.addressof(buffer), size)
    remote = _Iovec(pointer, size)
    one = ctypes.c_ulong(1)
    read = libc().process_vm_readv(
        pid, ctypes.byref(local), one, ctypes.byref(remote), one, ctypes.c_ulong(0)
    )
    if read != size:
        raise OSError(errno.EFAULT, os.strerror(errno.EFAULT))
    return buffer.raw


def caller_umask(pid: int) -> int:
    """The caller's umask, which the kernel would have applied to the mode of an entry it made."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o077
