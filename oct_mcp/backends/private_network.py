"""A bubblewrap run's network namespace with a second loopback address, so `localhost` resolves.

bubblewrap's `--unshare-net` gives a run a namespace with `lo` up and nothing else: 127.0.0.1 and
::1. glibc's `getaddrinfo` with AI_ADDRCONFIG (anyio's and trio's listeners ask for it, with a
family: `create_tcp_listener(local_host="localhost")`) returns an IPv4 address only where the
machine has one other than 127.0.0.1, so in that namespace `localhost` resolves to nothing
(`socket.gaierror`), where a terminal's machine, with a network card, resolves it. Measured on
anyio 4.4.0's own suite: 87 tests that pass in a terminal failed under bubblewrap for this alone.

Here the child that becomes bubblewrap makes the namespace itself, before it execs bubblewrap
(which then shares it, never the server's): a new network namespace (and, for a server that is
not root, a user namespace to own it, mapping only the server's own ids), `lo` brought up, and
127.0.0.2/8 added to it (glibc counts any IPv4 address but 127.0.0.1; see check_pf.c). Both are
loopback addresses on the only device: nothing in the namespace reaches beyond it, as before.
The child's capabilities in that user namespace end at its exec (bubblewrap's own user namespace
drops every capability of the run as before).

Where the kernel does not let the server make such a namespace (an AppArmor restriction on user
namespaces, a container without them), `private_network_works` says so once and bubblewrap
unshares the network itself, as before. A child that fails to make it at run time fails the spawn:
the run never shares the server's network.
"""

from __future__ import annotations

import ctypes
import os
import resource
import socket
import struct
import subprocess
from functools import cache
from typing import Final

from oct_mcp.backends.libc import libc

__all__ = ["make_private_network", "private_network_works"]

_CLONE_NEWUSER: Final = 0x10000000
_CLONE_NEWNET: Final = 0x40000000
_RTM_NEWLINK: Final = 16
_RTM_NEWADDR: Final = 20
_NLM_F_REQUEST: Final = 0x1
_NLM_F_ACK: Final = 0x4
_NLM_F_EXCL: Final = 0x200
_NLM_F_CREATE: Final = 0x400
_NLMSG_ERROR: Final = 2
_IFF_UP: Final = 0x1
_IFA_ADDRESS: Final = 1
_IFA_LOCAL: Final = 2
_RT_SCOPE_HOST: Final = 254
_LOOPBACK_INDEX: Final = 1
"""`lo` is the first device of every network namespace."""
_SECOND_LOOPBACK: Final = socket.inet_aton("127.0.0.2")
_NETLINK_ROUTE: Final = 0
_PR_SET_DUMPABLE: Final = 4
_LIBC: Final = libc()
"""Loaded with the module, in the server: no dynamic loader call between fork and exec."""


def make_private_network(processes: int | None = None) -> None:
    """In the child about to exec bubblewrap: a network namespace of its own, `lo` up with 127.0.0.2/8.

    Runs between fork and exec (subprocess's `preexec_fn`): system calls and the socket module
    only, nothing that takes a lock another thread of the server may hold.

    Args:
        processes: The run's RLIMIT_NPROC, set before the user namespace is made: the kernel
            counts the user's processes outside it against the limit its creator had then, so
            made under the server's own limit, the run's budget would hold inside it only.

    Raises:
        OSError: The namespace could not be made or set up; the spawn fails, nothing runs.
    """
    if processes is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        soft = processes if hard == resource.RLIM_INFINITY else min(processes, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
    if _LIBC.unshare(ctypes.c_int(flags)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    if flags & _CLONE_NEWUSER:
        # The server is not dumpable (sandbox.py), so /proc/self belongs to the machine's root and
        # the maps cannot be written: dumpable for these three writes only. A process of the
        # server's user that opens this child's /proc files meanwhile may read the server's memory
        # the child still holds (its environment) until the exec; never a run (bubblewrap's runs
        # live in a PID namespace of their own, a landlock run may not trace outside its domain).
        # No core file is written of it (the run's own limits set none either).
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        _LIBC.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        try:
            # Only the server's own ids, as bubblewrap maps them: nobody else exists in here.
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        finally:
            _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, _NETLINK_ROUTE) as route:
        route.bind((0, 0))
        link = struct.pack("=BxHiII", socket.AF_UNSPEC, 0, _LOOPBACK_INDEX, _IFF_UP, _IFF_UP)
        _request(route, _RTM_NEWLINK, _NLM_F_REQUEST | _NLM_F_ACK, link, 1)
        address = struct.pack("=BBBBI", socket.AF_INET, 8, 0, _RT_SCOPE_HOST, _LOOPBACK_INDEX)
        address += _attribute(_IFA_LOCAL, _SECOND_LOOPBACK) + _attribute(_IFA_ADDRESS, _SECOND_LOOPBACK)
        flags_new = _NLM_F_REQUEST | _NLM_F_ACK | _NLM_F_CREATE | _NLM_F_EXCL
        _request(route, _RTM_NEWADDR, flags_new, address, 2)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _attribute(kind: int, payload: bytes) -> bytes:
    size = 4 + len(payload)
    return struct.pack("=HH", size, kind) + payload + bytes(-size % 4)


def _request(route: socket.socket, kind: int, flags: int, body: bytes, sequence: int) -> None:
    """Send one netlink request and read its acknowledgement.

    Raises:
        OSError: The kernel refused it (its errno), or answered something else.
    """
    route.send(struct.pack("=IHHII", 16 + len(body), kind, flags, sequence, 0) + body)
    answer = route.recv(4096)
    if len(answer) < 20 or struct.unpack_from("=H", answer, 4)[0] != _NLMSG_ERROR:
        raise OSError(0, "netlink: no acknowledgement")
    (error,) = struct.unpack_from("=i", answer, 16)
    if error != 0:
        raise OSError(-error, os.strerror(-error))


@cache
def private_network_works() -> bool:
    """Whether a child of this server can make its own network namespace (tried once, for real)."""
    try:
        completed = subprocess.run(  # argv is a list, never a shell
            ["/bin/true"], preexec_fn=make_private_network, check=False, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return completed.returncode == 0
