"""A supervised call as the loopback supervisor takes it: its caller, its arguments copied out once.

The supervisor never acts on the run's memory twice: each argument (an address, the data, the
control data) is read once into the supervisor's own buffer, checked, and acted on as copied.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import socket
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Final

from oct_mcp.backends.libc import libc
from oct_mcp.backends.loopback_addresses import MAX_ADDRESS
from oct_mcp.backends.project_entries import ENTRY_CALLS
from oct_mcp.backends.run_memory import read_bytes
from oct_mcp.backends.scratch_metadata import METADATA_CALLS
from oct_mcp.backends.shm import SHM_CALLS

if TYPE_CHECKING:
    from seccompy.notify import Notification

__all__ = [
    "MAX_SEND",
    "CallRefusedError",
    "Caller",
    "Iovec",
    "MsgHdr",
    "checked",
    "copy_control",
    "int_argument",
    "may_block",
    "pidfd_open_thread",
    "read_address",
    "read_iov",
    "read_memory",
    "supervised_names",
]

_PIDFD_THREAD: Final = os.O_EXCL
_SCM_RIGHTS: Final = 1
_MSG_DONTWAIT: Final = 0x40
_MAX_CONTROL: Final = 4096
_MAX_IOV: Final = 1024
MAX_SEND: Final = 1 << 20
"""Bytes one supervised sendmsg copies; a stream send past it is partial, as the kernel's may be."""


class Iovec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


class MsgHdr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.c_void_p),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    )


class CallRefusedError(Exception):
    """A call the supervisor answers with `error` without making it."""

    def __init__(self, error: int) -> None:
        super().__init__(error)
        self.error = error


def checked(result: int) -> int:
    if result < 0:
        raise CallRefusedError(ctypes.get_errno())
    return result


@dataclass(slots=True)
class Caller:
    """What the supervisor needs to act for one notification: the calling thread's handles."""

    pid: int
    pidfd: int


def int_argument(value: int) -> int:
    """A register as the kernel reads an int argument: its low 32 bits, signed."""
    return ctypes.c_int(value & 0xFFFFFFFF).value


def pidfd_open_thread(tid: int) -> int:
    from seccompy import syscall_nr

    fd = libc().syscall(
        ctypes.c_long(syscall_nr("pidfd_open")), ctypes.c_long(tid), ctypes.c_long(_PIDFD_THREAD)
    )
    if fd >= 0:
        return int(fd)
    error = ctypes.get_errno()
    if error != errno.EINVAL:
        raise OSError(error, os.strerror(error))
    # Before Linux 6.9 a pidfd names a process: the thread's, whose descriptor table it shares.
    with open(f"/proc/{tid}/status") as status:
        tgid = next(int(line.split()[1]) for line in status if line.startswith("Tgid:"))
    return os.pidfd_open(tgid)


def read_memory(run: Caller, pointer: int, size: int) -> bytes:
    """`size` bytes of the run's memory, read once into the supervisor's own buffer."""
    try:
        return read_bytes(run.pid, pointer, size)
    except OSError as exc:
        raise CallRefusedError(errno.EFAULT) from exc


def read_address(run: Caller, pointer: int, length: int) -> bytes:
    length = int_argument(length)
    if not 2 <= length <= MAX_ADDRESS:
        raise CallRefusedError(errno.EINVAL)
    return read_memory(run, pointer, length)


def read_iov(run: Caller, pointer: int, count: int, *, stream: bool) -> bytes:
    if count > _MAX_IOV:
        raise CallRefusedError(errno.EMSGSIZE)
    vectors: ctypes.Array[Iovec] | list[Iovec] = (
        (Iovec * count).from_buffer_copy(read_memory(run, pointer, ctypes.sizeof(Iovec) * count))
        if count
        else []
    )
    parts: list[bytes] = []
    left = MAX_SEND
    for vector in vectors:
        size = min(vector.len, left)
        if size < vector.len and not stream:
            raise CallRefusedError(errno.EMSGSIZE)
        parts.append(read_memory(run, vector.base or 0, size))
        left -= size
        if not left:
            break
    return b"".join(parts)


def copy_control(run: Caller, pointer: int, length: int) -> tuple[bytes, list[int]]:
    """The control data with each descriptor it passes replaced by the supervisor's copy of it.

    Only SCM_RIGHTS: any other message may steer the send (IP_PKTINFO picks the interface) or
    claim credentials the supervisor's privilege would let through.
    """
    if not pointer or not length:
        return b"", []
    if length > _MAX_CONTROL:
        raise CallRefusedError(errno.EINVAL)
    control = bytearray(read_memory(run, pointer, length))
    held: list[int] = []
    offset = 0
    header = 16  # struct cmsghdr: size_t len, int level, int type
    try:
        while offset + header <= len(control):
            size = int.from_bytes(control[offset : offset + 8], "little")
            level = int.from_bytes(control[offset + 8 : offset + 12], "little", signed=True)
            kind = int.from_bytes(control[offset + 12 : offset + 16], "little", signed=True)
            if size < header or offset + size > len(control):
                raise CallRefusedError(errno.EINVAL)
            if (level, kind) != (socket.SOL_SOCKET, _SCM_RIGHTS):
                raise CallRefusedError(errno.EPERM)
            for at in range(offset + header, offset + size - 3, 4):
                wanted = int.from_bytes(control[at : at + 4], "little", signed=True)
                from seccompy.notify import pidfd_getfd

                try:
                    mine = pidfd_getfd(run.pidfd, wanted)
                except OSError as exc:
                    raise CallRefusedError(errno.EBADF) from exc
                held.append(mine)
                control[at : at + 4] = mine.to_bytes(4, "little", signed=True)
            offset += (size + 7) & ~7
    except BaseException:
        for fd in held:
            os.close(fd)
        raise
    return bytes(control), held


def may_block(fd: int, name: str, notification: Notification) -> bool:
    """Whether the call may wait (a blocking socket, a send without MSG_DONTWAIT)."""
    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK:
        return False
    flags_at = {"sendmsg": 2, "sendto": 3}.get(name)
    return flags_at is None or not int_argument(notification.args[flags_at]) & _MSG_DONTWAIT


@cache
def supervised_names() -> dict[int, str]:
    """The calls the filter hands over, by number (seccompy's own lookup costs microseconds a call)."""
    from seccompy import syscall_nr

    names = (
        "socket",
        "bind",
        "connect",
        "listen",
        "sendmsg",
        "sendto",
        "ioctl",
        *SHM_CALLS,
        *METADATA_CALLS,
        *ENTRY_CALLS,
    )
    numbers: dict[int, str] = {}
    for name in names:
        with contextlib.suppress(ValueError):  # arm64 has no open, link or unlink
            numbers[syscall_nr(name)] = name
    return numbers
