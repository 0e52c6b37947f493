"""The runs' seccomp filter: what neither Landlock nor bind mounts can refuse.

Landlock has no right for a file's metadata (mode, owner, times, extended attributes, inode
flags), and bind mounts cover only what is bound: a run could chmod `~/.ssh/id_rsa`, make a
`.git/hooks` file executable, or, with a root server, make a root-owned file setuid. seccomp
sees no path, only a syscall's number and its plain arguments, so the rules are on those:

- metadata of any file: on landlock none without writes (bubblewrap's mounts already hold
  those runs to their own private files); with writes, modes without setuid, setgid, sticky
  or world-write bits, and times (tools set them on what they build); never an owner, an
  extended attribute (ACLs are one) or an inode flag;
- no file is made setuid, setgid or sticky at creation, whatever the run may write;
- sockets (landlock only; bubblewrap has its own network namespace): no unix `socket()`, and
  without network either TCP, UDP and unix sockets through the loopback supervisor
  (`loopback.py`), or where the kernel cannot supervise, only TCP sockets, which Landlock keeps
  from binding or connecting, and no `listen()`, which would bind one to every address on its own;
- no keystrokes typed into a terminal (TIOCSTI, TIOCLINUX);
- calls no tool needs that reach past the others: io_uring, ptrace, bpf, keyrings, the x32 ABI.

A syscall argument is compared on the bits the kernel reads: an `int` or `mode_t` argument is
cut to 32 bits before the kernel uses it, so a rule must not let high bits hide a value.
"""

from __future__ import annotations

import ctypes
import errno
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from seccompy import ArgCmp, Filter

from oct_mcp.backends.libc import libc
from oct_mcp.backends.project_entries import notify_entry_calls
from oct_mcp.backends.ptys import notify_pty_peer
from oct_mcp.backends.scratch_metadata import MODE_CALLS, TIME_CALLS, notify_scratch_metadata
from oct_mcp.backends.shm import notify_shm_calls

__all__ = ["RunFilter", "filter_program", "load_filter", "seccomp_loads"]

_PR_SET_NO_NEW_PRIVS: Final = 38
_PR_SET_SECCOMP: Final = 22
_SECCOMP_MODE_FILTER: Final = 2
_BPF_INSTRUCTION_BYTES: Final = 8
_LOW_32: Final = 0xFFFFFFFF

_AF_UNIX: Final = 1
_AF_INET: Final = 2
_AF_INET6: Final = 10
_SOCK_STREAM: Final = 1
_SOCK_DGRAM: Final = 2
_SOCK_SEQPACKET: Final = 5
_SOCK_TYPE_MASK: Final = 0xF
_IPPROTO_TCP: Final = 6
_IPPROTO_UDP: Final = 17

_S_ISUID: Final = 0o4000
_S_ISGID: Final = 0o2000
_S_ISVTX: Final = 0o1000
_S_IWOTH: Final = 0o0002
_CREATED_BITS: Final = (_S_ISUID, _S_ISGID, _S_ISVTX)
"""Never at creation. World-write is left to the umask: tools ask for 0666 and 0777 by design."""
_CHANGED_BITS: Final = (*_CREATED_BITS, _S_IWOTH)
"""Never by a chmod of a writable run."""
_O_CREAT: Final = 0o100
_O_TMPFILE: Final = 0o20000000
"""__O_TMPFILE, without O_DIRECTORY: with O_DIRECTORY it is O_TMPFILE, without it the call fails."""

# (syscall, index of its mode argument): each changes a file's permission bits.
_CHMODS: Final = (("fchmod", 1), ("fchmodat", 2), ("fchmodat2", 2), ("chmod", 1))
# (syscall, index of its flags argument or None where it always creates, index of its mode).
_CREATES: Final = (
    ("openat", 2, 3),
    ("open", 1, 2),
    ("creat", None, 1),
    ("mkdirat", None, 2),
    ("mkdir", None, 1),
    ("mknodat", None, 2),
    ("mknod", None, 1),
)
_CHOWNS: Final = ("fchownat", "fchown", "lchown", "chown")
_TIMES: Final = ("utimensat", "utimes", "utime", "futimesat")
# An ACL is an extended attribute (system.posix_acl_access): a chmod in all but name.
_XATTR_WRITES: Final = (
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "setxattrat",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "removexattrat",
)
# Inode flags (chattr: append-only, no-dump, no-CoW; fs-verity makes a file read-only for good):
# an owner may set them on a file opened only for reading, which Landlock allows.
_FLAG_IOCTLS: Final = (
    0x40086602,  # FS_IOC_SETFLAGS
    0x40046602,  # FS_IOC32_SETFLAGS
    0x401C5820,  # FS_IOC_FSSETXATTR
    0x40087602,  # FS_IOC_SETVERSION
    0x40047602,  # FS_IOC32_SETVERSION
    0x40806685,  # FS_IOC_ENABLE_VERITY
    0x800C6613,  # FS_IOC_SET_ENCRYPTION_POLICY
)
# A terminal's input: TIOCSTI pushes a byte into it as if typed (dev.tty.legacy_tiocsti is on in most
# kernels), TIOCLINUX pastes the console's selection. A run writes to a terminal, never types into one.
_TERMINAL_INPUT_IOCTLS: Final = (
    0x5412,  # TIOCSTI
    0x541C,  # TIOCLINUX
)
_FLAG_SYSCALLS: Final = ("file_setattr",)
"""The syscall form of FS_IOC_FSSETXATTR (Linux 6.17)."""
# io_uring performs socket() and connect() without those syscalls, so a filter on them needs it gone.
_DENIED: Final = (
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
)
# open_how is a pointer seccomp cannot read: its mode could make a setuid file. Callers fall back
# to openat on ENOSYS, as on kernels before 5.6.
_UNREADABLE_OPENS: Final = ("openat2",)
_NO_NETWORK_DENIED: Final = ("listen", "accept", "accept4")
"""listen() on an unbound TCP socket binds it to 0.0.0.0 and a free port: no bind(), no Landlock check."""
_MSG_FASTOPEN: Final = 0x20000000
# (syscall, index of its flags): MSG_FASTOPEN connects from a send, past the connect() hook.
_SENDS: Final = (("sendto", 3), ("sendmsg", 2), ("sendmmsg", 3))
# x86-64 also takes x32 syscalls: the same table with bit 30 set. No tool here is built for x32;
# every call in it is refused, so no rule can be skipped through its twin there.
_X32_BIT: Final = 0x40000000


@dataclass(frozen=True, slots=True)
class RunFilter:
    """The filter of a bubblewrap run, as a confinement of the thread that spawns it.

    bubblewrap applies no filter of its own: the thread loads this one, and bubblewrap and the
    command inherit it across exec. Its mounts already keep every run from changing a file it
    may not write (read-only binds answer EROFS, the rest is not there), so modes and times stay
    open to all its runs, as to a landlock run with writes: the filter adds what mounts miss,
    the bits (setuid, setgid, sticky, world-write), owners, attributes and inode flags.
    """

    child_setup: Callable[[], None] | None = None
    """Run in the child between fork and exec of bubblewrap (`private_network.py`); None: nothing."""

    def restrict_current_thread(self) -> None:
        load_filter(filter_program(sockets=False, network=True, writes=True))

    def end_domain(self, leader: int) -> None:
        """Nothing to sweep: bubblewrap's PID namespace ends with its leader."""


@cache
def seccomp_loads() -> bool:
    """Whether this kernel loads seccomp filters (Linux, with the seccompy package)."""
    try:
        import seccompy
    except ImportError:
        return False
    return seccompy.supported()


@cache
def filter_program(*, sockets: bool, network: bool, writes: bool, supervised: bool = False) -> bytes:
    """The filter for one kind of run, compiled once per kind.

    Args:
        sockets: Whether to filter sockets (landlock); bubblewrap isolates the network itself.
        network: Whether the run may use the network.
        writes: Whether the run may write the project.
        supervised: Whether the filter has a supervisor (`loopback.py`, to load with its
            listener): it answers the run's TIOCGPTPEER (`ptys.py`), its calls that may name
            /dev/shm (`shm.py`), without writes its chmod and utimensat in its scratch
            folder (`scratch_metadata.py`), with writes the entries it makes or removes in the
            folders Landlock closes (`project_entries.py`), and without network its TCP, UDP and
            unix sockets, which are otherwise refused.

    Returns:
        The BPF program, x32 calls refused ahead of seccompy's own (which checks the arch).
    """
    from seccompy import ArgCmp, CmpOp, Filter, syscalls

    rules = Filter()
    # First the calls a run makes most (the kernel walks the rules in order for a call with any).
    for name, flags_at, mode_at in _CREATES:
        for bit in _CREATED_BITS:
            mode = ArgCmp(mode_at, CmpOp.MASKED_EQ, bit, mask=bit)
            if flags_at is None:
                _deny(rules, name, errno.EPERM, [mode])
                continue
            for flag in (_O_CREAT, _O_TMPFILE):
                _deny(rules, name, errno.EPERM, [ArgCmp(flags_at, CmpOp.MASKED_EQ, flag, mask=flag), mode])
    for request in _FLAG_IOCTLS:
        _deny(rules, "ioctl", errno.EPERM, [ArgCmp(1, CmpOp.MASKED_EQ, request, mask=_LOW_32)])
    _terminal_rules(rules)
    for name, mode_at in _CHMODS:
        if not writes and not (supervised and name in MODE_CALLS):
            _deny(rules, name, errno.EPERM)
            continue
        for bit in _CHANGED_BITS:
            _deny(rules, name, errno.EPERM, [ArgCmp(mode_at, CmpOp.MASKED_EQ, bit, mask=bit)])
    if not writes:
        for name in _TIMES:
            if not (supervised and name in TIME_CALLS):
                _deny(rules, name, errno.EPERM)
    for name in (*_CHOWNS, *_FLAG_SYSCALLS, *_DENIED):
        _deny(rules, name, errno.EPERM)
    # "Not supported here": tools that copy attributes (cp -a, shutil.copystat) go on without them.
    for name in _XATTR_WRITES:
        _deny(rules, name, errno.EOPNOTSUPP)
    for name in _UNREADABLE_OPENS:
        _deny(rules, name, errno.ENOSYS)
    if sockets and supervised and not network:
        _supervised_socket_rules(rules)
    elif sockets:
        _socket_rules(rules, network=network)
    if supervised:
        notify_pty_peer(rules)
        notify_shm_calls(rules)
        # After the rules above, which refuse the bits no run sets.
        if writes:
            notify_entry_calls(rules)
        else:
            notify_scratch_metadata(rules)
    program = rules.program
    if syscalls.arch() == "x86_64":
        return _refuse_x32() + program
    return program


def _terminal_rules(rules: Filter) -> None:
    """No keystrokes pushed into a terminal, the run's own pty's included."""
    from seccompy import ArgCmp, CmpOp

    for request in _TERMINAL_INPUT_IOCTLS:
        _deny(rules, "ioctl", errno.EPERM, [ArgCmp(1, CmpOp.MASKED_EQ, request, mask=_LOW_32)])


def _socket_rules(rules: Filter, *, network: bool) -> None:
    """No unix socket() (pathname or abstract; socketpair stays), and without network only TCP
    sockets, which Landlock keeps from binding or connecting, that cannot listen either."""
    from seccompy import ArgCmp, CmpOp

    if network:
        _deny(rules, "socket", errno.EPERM, [ArgCmp(0, CmpOp.MASKED_EQ, _AF_UNIX, mask=_LOW_32)])
        return
    for family in (_AF_INET, _AF_INET6):
        for protocol in (0, _IPPROTO_TCP):
            # Whole 64-bit equality: an argument with high bits set matches no allow and is refused.
            rules.allow(
                "socket",
                args=[
                    ArgCmp(0, CmpOp.EQ, family),
                    ArgCmp(1, CmpOp.MASKED_EQ, _SOCK_STREAM, mask=_SOCK_TYPE_MASK),
                    ArgCmp(2, CmpOp.EQ, protocol),
                ],
            )
    _deny(rules, "socket", errno.EPERM)
    for name in _NO_NETWORK_DENIED:
        _deny(rules, name, errno.EPERM)
    for name, flags_at in _SENDS:
        fast_open = ArgCmp(flags_at, CmpOp.MASKED_EQ, _MSG_FASTOPEN, mask=_MSG_FASTOPEN)
        _deny(rules, name, errno.EPERM, [fast_open])


def _supervised_socket_rules(rules: Filter) -> None:
    """TCP, UDP and unix sockets, made by the supervisor; bind, connect, listen and sendmsg answered by it.

    sendto goes to the supervisor only with an address (a send on a connected socket, the common
    case, stays a plain call). sendmmsg is refused as "not here" (glibc's resolver falls back to
    sendto): its messages carry control data, which could pick another interface.
    """
    from seccompy import ArgCmp, CmpOp

    for family in (_AF_INET, _AF_INET6):
        for kind, protocols in ((_SOCK_STREAM, (0, _IPPROTO_TCP)), (_SOCK_DGRAM, (0, _IPPROTO_UDP))):
            for protocol in protocols:
                rules.notify(
                    "socket",
                    args=[
                        ArgCmp(0, CmpOp.EQ, family),
                        ArgCmp(1, CmpOp.MASKED_EQ, kind, mask=_SOCK_TYPE_MASK),
                        ArgCmp(2, CmpOp.EQ, protocol),
                    ],
                )
    for kind in (_SOCK_STREAM, _SOCK_DGRAM, _SOCK_SEQPACKET):
        unix = [ArgCmp(0, CmpOp.EQ, _AF_UNIX), ArgCmp(1, CmpOp.MASKED_EQ, kind, mask=_SOCK_TYPE_MASK)]
        rules.notify("socket", args=[*unix, ArgCmp(2, CmpOp.EQ, 0)])
    _deny(rules, "socket", errno.EPERM)
    for name, flags_at in _SENDS:
        fast_open = ArgCmp(flags_at, CmpOp.MASKED_EQ, _MSG_FASTOPEN, mask=_MSG_FASTOPEN)
        _deny(rules, name, errno.EPERM, [fast_open])
    for name in ("bind", "connect", "listen", "sendmsg"):
        rules.notify(name)
    rules.notify("sendto", args=[ArgCmp(4, CmpOp.NE, 0)])
    _deny(rules, "sendmmsg", errno.ENOSYS)


def _deny(rules: Filter, name: str, error: int, args: Sequence[ArgCmp] = ()) -> None:
    """A rule for `name` where this architecture has the call (arm64 has no chmod, only fchmodat)."""
    from seccompy import syscall_nr

    try:
        syscall_nr(name)
    except ValueError:
        return
    rules.errno(name, error, args=list(args) or None)


def _refuse_x32() -> bytes:
    """Three instructions: a call number with the x32 bit gets ENOSYS before any other rule."""
    import struct

    from seccompy import Action

    load_nr, jump_if_at_least, ret = 0x20, 0x35, 0x06
    return b"".join(
        (
            struct.pack("<HBBI", load_nr, 0, 0, 0),  # seccomp_data.nr
            struct.pack("<HBBI", jump_if_at_least, 0, 1, _X32_BIT),
            struct.pack("<HBBI", ret, 0, 0, int(Action.ERRNO) | errno.ENOSYS),
        )
    )


def load_filter(program: bytes) -> None:
    """Install `program` on the calling thread, no_new_privs first (which it needs without privilege).

    Raises:
        OSError: The kernel refused the filter.
    """
    if libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs refused")
    # seccompy compiles in Python (0.6 ms, most of the confinement's cost) and loads only a Filter it
    # compiled itself, once: the program is compiled once per kind and loaded here by hand.
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len=len(program) // _BPF_INSTRUCTION_BYTES, filter=ctypes.addressof(buffer))
    if libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))
