"""Loopback for a landlock run without network: TCP, UDP and unix sockets of its own, nothing else.

The run's seccomp filter sends its `socket`, `bind`, `connect`, `listen`, `sendmsg` and `sendto`
(with an address) calls to a supervisor thread of the server (seccomp user notification). The
supervisor never lets the kernel run the call as the run made it: the run could rewrite the
address in its memory after the check. It acts on copies instead:

- `socket()` of TCP, UDP or unix: made by the supervisor from the call's registers and put in the
  run's descriptor table as the call's result; TCP and UDP ones tied to the `lo` device
  (SO_BINDTODEVICE, which the run, holding no capability, cannot undo): whatever it is later told,
  such a socket sends and receives on `lo` only, so nothing leaves the machine and nothing from
  elsewhere comes in.
- `bind`, `connect`: the address is copied out of the run once, checked (loopback only; no
  wildcard, no privileged port, no port another socket holds), and the supervisor binds or
  connects the run's own socket (taken with pidfd_getfd) to its copy. A connect or send reaches
  only a socket the run made: the host's own loopback services answer as closed ports. A UDP
  port no socket holds may be connected and sent to, as in a terminal, once the supervisor holds
  it for the run (`_reserve`): no host service can take it while the run lives.
- unix paths: under the run's scratch folder only (its HOME and TMPDIR, pytest's `tmp_path`). A
  bind is made by a throwaway thread whose own Landlock domain allows sockets there only, so the
  kernel checks the path as it binds; a connect or send goes through a descriptor of the socket
  file opened beneath the folder with no link on the way. Abstract names are refused: the
  supervisor stands outside the run's domain, whose scope keeps the run from the host's.
- `listen`: only on a socket bound to loopback. An unbound socket, which the kernel would bind to
  every address, is first bound by the supervisor to a free port on loopback.
- `sendmsg`, and `sendto` with an address: to loopback only, sent by the supervisor from copies
  of the data, the address and the control data (which could choose the interface past
  SO_BINDTODEVICE: IP_PKTINFO), which may carry only descriptors (SCM_RIGHTS, taken from the run
  like its socket).

socketpair() stays a plain call. The kernel must give user notification with
descriptor installs (Linux 5.14) and a killable wait once a call is received (5.19), so a signal
never makes the run repeat a call the supervisor already made; where it does not, the run's
network stays refused as before (`loopback_support`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import select
import socket
import stat
import struct
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from seccompy.notify import Listener, Notification

from oct_mcp.backends.beneath import open_beneath, relative_beneath
from oct_mcp.backends.confined import start_run_thread
from oct_mcp.backends.libc import libc
from oct_mcp.backends.project_entries import ENTRY_CALLS, ProjectEntries
from oct_mcp.backends.ptys import answer_pty_peer
from oct_mcp.backends.run_memory import read_bytes
from oct_mcp.backends.scratch_metadata import METADATA_CALLS, ScratchMetadata
from oct_mcp.backends.shm import SHM_CALLS, RunSharedMemory

__all__ = ["LoopbackSupervisor", "loopback_support"]

_PR_SET_NO_NEW_PRIVS: Final = 38
_SECCOMP_SET_MODE_FILTER: Final = 1
_FLAG_NEW_LISTENER: Final = 1 << 3
_FLAG_WAIT_KILLABLE_RECV: Final = 1 << 5
_PIDFD_THREAD: Final = os.O_EXCL
_ADDFD_FLAG_SEND: Final = 1 << 1
_SO_BINDTODEVICE: Final = 25
_SOCK_CLOEXEC: Final = 0o2000000
_MSG_NOSIGNAL: Final = 0x4000
_MSG_DONTWAIT: Final = 0x40
_SCM_RIGHTS: Final = 1
_LOOPBACK_DEVICE: Final = b"lo"
_MAX_ADDRESS: Final = 128
_MAX_CONTROL: Final = 4096
_MAX_IOV: Final = 1024
_MAX_RESERVED: Final = 64
"""UDP ports one run may have held for it: a run must not keep the host's services from many."""
_MAX_SEND: Final = 1 << 20
"""Bytes one supervised sendmsg copies; a stream send past it is partial, as the kernel's may be."""
_NETLINK_SOCK_DIAG: Final = 4
_SOCK_DIAG_BY_FAMILY: Final = 20
_NLM_F_REQUEST: Final = 1
_NLMSG_ERROR: Final = 2
_ALL_STATES: Final = 0xFFFFFFFF
_NO_COOKIE: Final = 0xFFFFFFFF
_CLONE_FS: Final = 0x200
"""RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH."""
_V4_MAPPED: Final = bytes(10) + b"\xff\xff"
_V6_LOOPBACK: Final = bytes(15) + b"\x01"


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


class _Iovec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


class _MsgHdr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.c_void_p),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    )


class _RefusedError(Exception):
    """A call the supervisor answers with `error` without making it."""

    def __init__(self, error: int) -> None:
        super().__init__(error)
        self.error = error


def _check(result: int) -> int:
    if result < 0:
        raise _RefusedError(ctypes.get_errno())
    return result


@cache
def _unprivileged_port_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as file:
            return int(file.read())
    except (OSError, ValueError):
        return 1024


def _is_loopback(address: bytes) -> bool:
    """Whether a copied sockaddr names a loopback address (IPv4, IPv6 or IPv4-mapped IPv6)."""
    family = int.from_bytes(address[:2], "little")
    if family == socket.AF_INET and len(address) >= 8:
        return address[4] == 127
    if family == socket.AF_INET6 and len(address) >= 24:
        host = address[8:24]
        return host == _V6_LOOPBACK or (host[:12] == _V4_MAPPED and host[12] == 127)
    return False


def _port(address: bytes) -> int:
    return int.from_bytes(address[2:4], "big")


def _on_loopback(address: bytes) -> bytes:
    """A copied sockaddr with the wildcard host (`0.0.0.0`, `::`, `::ffff:0.0.0.0`) made loopback's.

    A test server binds the wildcard as often as loopback (`""` is Python's default host), and
    is reached by its clients on `127.0.0.1` or `localhost` either way: bound to loopback it serves
    them all the same, and no other address of the machine. Any other host is left as it is.
    """
    family = int.from_bytes(address[:2], "little")
    if family == socket.AF_INET and len(address) >= 8 and address[4:8] == bytes(4):
        return address[:4] + b"\x7f\0\0\x01" + address[8:]
    if family == socket.AF_INET6 and len(address) >= 24:
        host = address[8:24]
        if host == bytes(16):
            return address[:8] + _V6_LOOPBACK + address[24:]
        if host == _V4_MAPPED + bytes(4):
            return address[:8] + _V4_MAPPED + b"\x7f\0\0\x01" + address[24:]
    return address


@dataclass(slots=True)
class _Run:
    """What the supervisor needs to act for one notification: the calling thread's handles."""

    pid: int
    pidfd: int


class LoopbackSupervisor:
    """Answers one run's supervised socket calls, from a thread of its own, until the run is gone.

    Made before the spawning thread confines itself: a thread starts with its creator's
    credentials and filters, and the supervisor must have neither the run's Landlock domain nor
    its filter. The thread ends by itself when the last thread under the filter has ended (the
    listener hangs up): the spawning thread and every process of the run. A call whose caller died
    is dropped; a call that can block (a blocking socket) is made on a thread of its own, so one
    waiting send never holds back the run's other calls.
    """

    def __init__(self, scratch: Path, entries: ProjectEntries | None = None) -> None:
        """`entries`: a writable run's calls that make or remove entries, answered by it."""
        self._scratch = os.path.realpath(scratch)
        self._entries = entries
        self._listener: Listener | None = None
        self._attached = threading.Event()
        self._made: set[int] = set()
        """The inode of every socket made for the run: the only receivers its sends may reach."""
        self._reserved: dict[tuple[int, bytes, int], socket.socket] = {}
        """The UDP ports held for the run by a placeholder (`_reserve`), by family, host and port."""
        self._reserved_lock = threading.Lock()
        self._diag: socket.socket | None = None
        self._diag_lock = threading.Lock()
        self._shared_memory = RunSharedMemory()
        self._metadata = ScratchMetadata(self._scratch)
        # Started now, unconfined; it waits for the listener the confined thread will make.
        start_run_thread(self._serve)

    def load(self, program: bytes) -> None:
        """Install `program` (with its notify rules) on the calling thread and supervise it.

        Raises:
            OSError: The kernel refused the filter or its listener; nothing is supervised.
        """
        from seccompy import syscall_nr
        from seccompy.notify import FdFlag, Listener

        # Without privilege the kernel loads a filter only under no_new_privs (a run has it already).
        if libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            self.abandon()
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
        buffer = ctypes.create_string_buffer(program, len(program))
        fprog = _SockFprog(len=len(program) // 8, filter=ctypes.addressof(buffer))
        fd = libc().syscall(
            ctypes.c_long(syscall_nr("seccomp")),
            ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
            ctypes.c_long(_FLAG_NEW_LISTENER | _FLAG_WAIT_KILLABLE_RECV),
            ctypes.byref(fprog),
        )
        if fd < 0:
            self.abandon()
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
        try:
            listener = Listener(fd)
        except OSError:
            self.abandon()
            raise
        # Linux 6.6+: the answer wakes the run on this CPU, a shorter round trip; older kernels lack it.
        with contextlib.suppress(OSError):
            listener.set_flags(FdFlag.SYNC_WAKE_UP)
        self._listener = listener
        self._attached.set()

    def abandon(self) -> None:
        """No filter came: the thread ends."""
        self._attached.set()

    def _serve(self) -> None:
        from seccompy import SeccompError

        self._attached.wait()
        listener = self._listener
        if listener is None:
            return
        poller = select.poll()
        poller.register(listener.fileno(), select.POLLIN)
        self._diag = socket.socket(
            socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG
        )
        try:
            while True:
                events = poller.poll()
                if any(event & (select.POLLHUP | select.POLLERR) for _, event in events):
                    return
                try:
                    notification = listener.recv()
                except SeccompError:
                    continue  # the caller died before it could be read
                self._answer(notification)
        finally:
            listener.close()
            self._diag.close()
            self._shared_memory.close()
            for placeholder in self._reserved.values():
                placeholder.close()

    def _answer(self, notification: Notification) -> None:
        name = _supervised_names().get(notification.nr, "")
        if name == "ioctl":
            answer_pty_peer(self._listener_now(), notification)
            return
        if name in SHM_CALLS or name in ENTRY_CALLS:
            self._path_call(notification, name)
            return
        if name in METADATA_CALLS:
            self._metadata.answer(self._listener_now(), notification, name)
            return
        if name == "socket":
            try:
                self._socket(notification)
            except _RefusedError as refused:
                self._refuse(notification, refused.error)
            except OSError as exc:
                self._refuse(notification, exc.errno or errno.EPERM)
            return
        handler = self._handlers().get(name)
        if handler is None:
            self._refuse(notification, errno.ENOSYS)
            return
        try:
            run = self._open_run(notification)
        except _RefusedError:
            return  # the caller is gone: nobody to answer
        try:
            target = self._take_fd(run, notification)
        except _RefusedError as refused:
            os.close(run.pidfd)
            self._refuse(notification, refused.error)
            return
        if name in ("connect", "sendmsg", "sendto") and _may_block(target, name, notification):
            threading.Thread(
                target=self._finish, args=(handler, run, target, notification), daemon=True
            ).start()
            return
        self._finish(handler, run, target, notification)

    def _path_call(self, notification: Notification, name: str) -> None:
        """A call that may name `/dev/shm`, or make or remove an entry of a writable run's project."""
        from seccompy import SeccompError
        from seccompy.notify import RespFlag

        listener = self._listener_now()
        if name in SHM_CALLS and self._shared_memory.answer(listener, notification, name):
            return
        if self._entries is not None and name in ENTRY_CALLS:
            self._entries.answer(listener, notification, name)
            return
        # Neither: the kernel makes the call as the run asked, under its Landlock rules.
        with contextlib.suppress(SeccompError, RuntimeError):
            listener.respond(notification.id, flags=RespFlag.CONTINUE)

    def _refuse(self, notification: Notification, error: int) -> None:
        from seccompy import SeccompError

        # SeccompError: the caller is gone; RuntimeError: so is the whole run (the listener closed).
        with contextlib.suppress(SeccompError, RuntimeError):
            self._listener_now().respond(notification.id, error=error)

    def _handlers(self) -> dict[str, Callable[[_Run, int, Notification], int]]:
        return {
            "bind": self._bind,
            "connect": self._connect,
            "listen": self._listen,
            "sendmsg": self._sendmsg,
            "sendto": self._sendto,
        }

    def _listener_now(self) -> Listener:
        assert self._listener is not None  # noqa: S101 - only called while serving
        return self._listener

    def _finish(
        self,
        handler: Callable[[_Run, int, Notification], int],
        run: _Run,
        target: int,
        notification: Notification,
    ) -> None:
        from seccompy import SeccompError

        try:
            result, error = handler(run, target, notification), 0
        except _RefusedError as refused:
            result, error = 0, refused.error
        except OSError as exc:
            # Anything else the kernel said (the scratch folder gone, a netlink failure): the call
            # fails, the supervisor goes on serving the run's other calls.
            result, error = 0, exc.errno or errno.EPERM
        finally:
            os.close(target)
            os.close(run.pidfd)
        with contextlib.suppress(SeccompError, RuntimeError):
            self._listener_now().respond(notification.id, val=result, error=error)

    def _open_run(self, notification: Notification) -> _Run:
        """A pidfd of the calling thread, checked to be the caller still (its id is not reused)."""
        from seccompy import SeccompError

        try:
            pidfd = _pidfd_open_thread(notification.pid)
        except OSError as exc:
            raise _RefusedError(exc.errno or errno.ESRCH) from exc
        try:
            alive = self._listener_now().valid(notification.id)
        except SeccompError:
            alive = False
        if not alive:
            os.close(pidfd)
            raise _RefusedError(errno.ESRCH)
        return _Run(notification.pid, pidfd)

    def _take_fd(self, run: _Run, notification: Notification) -> int:
        from seccompy.notify import pidfd_getfd

        try:
            return pidfd_getfd(run.pidfd, _int(notification.args[0]))
        except OSError as exc:
            raise _RefusedError(errno.EBADF if exc.errno == errno.EBADF else errno.EPERM) from exc

    def _socket(self, notification: Notification) -> None:
        from seccompy import SeccompError
        from seccompy.notify import AddFdFlag

        family, kind, protocol = (_int(value) for value in notification.args[:3])
        try:
            made = socket.socket(family, kind & ~_SOCK_CLOEXEC, protocol)
        except OSError as exc:
            raise _RefusedError(exc.errno or errno.EINVAL) from exc
        try:
            if family != socket.AF_UNIX:
                made.setsockopt(socket.SOL_SOCKET, _SO_BINDTODEVICE, _LOOPBACK_DEVICE)
            self._made.add(os.fstat(made.fileno()).st_ino)
            with contextlib.suppress(SeccompError):
                self._listener_now().addfd(
                    notification.id,
                    made.fileno(),
                    flags=AddFdFlag.SEND,
                    newfd_flags=os.O_CLOEXEC if kind & _SOCK_CLOEXEC else 0,
                )
        finally:
            made.close()

    def _check_receiver(self, target: int, address: bytes) -> None:
        """Refuse a destination off loopback, or on loopback held by no socket of the run.

        Loopback is the whole machine's: a local resolver (127.0.0.53), a proxy, a database or the
        Docker API listen there, and would carry the run's data elsewhere. The kernel is asked which
        socket would receive (sock_diag, as for a packet on `lo`): it must be one the run made.
        Nothing there, or another's, reads as a port where nothing listens.
        """
        if not _is_loopback(address):
            raise _RefusedError(errno.ENETUNREACH)
        stream = _is_stream(target)
        family, host, port = _destination(address)
        source = _source(target, family) if not stream else (bytes(16), 0)
        with self._diag_lock:
            assert self._diag is not None  # noqa: S101 - made before the first notification
            inode = _receiver(self._diag, family, stream, (host, port), source)
        if inode in self._made:
            return
        if inode is None and not stream:
            self._reserve(family, host, port)
            return
        raise _RefusedError(errno.ECONNREFUSED)

    def _reserve(self, family: int, host: bytes, port: int) -> None:
        """Hold a UDP port on loopback no socket holds, for the run to send to: a placeholder socket.

        A terminal connects a UDP socket to a port where nothing listens (test suites do, to read
        the socket's addresses) and sends there: the datagrams are dropped. The run may do the
        same, but a send on a connected socket is a plain call, not supervised: were the port
        free, a host service that binds it later would receive the run's datagrams. So the
        supervisor binds the port itself first, on `lo`, with no sharing option (nobody else can
        bind it, the wildcard included, until the run ends), and reads nothing from it. The
        run's own bind of that port takes it over (`_bind`); a run that then closes that socket
        frees the port while another of its sockets may still be connected there (a host service
        binding it in that window would receive what that socket sends). Never a port below the
        unprivileged start; at most `_MAX_RESERVED` a run. Which loopback UDP ports are held by
        the host this tells the run is in /proc/net/udp already.

        Raises:
            _RefusedError: ECONNREFUSED, as before, past the limit or where the port was taken
                meanwhile.
        """
        if port < _unprivileged_port_start():
            # The run may not bind such a port itself: nor is one held for it (a resolver's 53).
            raise _RefusedError(errno.ECONNREFUSED)
        key = (family, host, port)
        # Sends that may block are answered on threads of their own: one lock for the table.
        with self._reserved_lock:
            if key in self._reserved:
                return
            if len(self._reserved) >= _MAX_RESERVED:
                raise _RefusedError(errno.ECONNREFUSED)
            placeholder = socket.socket(family, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            try:
                placeholder.setsockopt(socket.SOL_SOCKET, _SO_BINDTODEVICE, _LOOPBACK_DEVICE)
                shown = socket.inet_ntop(family, host[:4] if family == socket.AF_INET else host)
                placeholder.bind((shown, port))
            except OSError as exc:
                placeholder.close()
                raise _RefusedError(errno.ECONNREFUSED) from exc
            self._reserved[key] = placeholder
            self._made.add(os.fstat(placeholder.fileno()).st_ino)

    def _release(self, address: bytes) -> bool:
        """Give up the placeholder on the port the run now binds itself; whether there was one."""
        with self._reserved_lock:
            placeholder = self._reserved.pop(_destination(address), None)
        if placeholder is None:
            return False
        self._made.discard(os.fstat(placeholder.fileno()).st_ino)
        placeholder.close()
        return True

    def _bind(self, run: _Run, target: int, notification: Notification) -> int:
        address = _read_address(run, notification.args[1], notification.args[2])
        if _family(address) == socket.AF_UNIX:
            return self._bind_unix(run, target, address)
        address = _on_loopback(address)
        if not _is_loopback(address):
            raise _RefusedError(errno.EACCES)
        if 0 < _port(address) < _unprivileged_port_start():
            raise _RefusedError(errno.EACCES)
        if _port(address) != 0:
            # SO_REUSEPORT would let a run of the same user join a host service's port and take a
            # share of its clients: a port another socket holds is in use, whatever the options.
            family, host, port = _destination(address)
            with self._diag_lock:
                assert self._diag is not None  # noqa: S101 - made before the first notification
                holder = _receiver(self._diag, family, _is_stream(target), (host, port), (bytes(16), 0))
            if holder is not None and holder not in self._made:
                raise _RefusedError(errno.EADDRINUSE)
            if not _is_stream(target) and self._release(address):
                try:
                    return _check(libc().bind(target, address, len(address)))
                except _RefusedError:
                    # The run's bind failed (its socket bound already): the port is held again,
                    # or, taken meanwhile, stays refused to the run's sends as any host port.
                    with contextlib.suppress(_RefusedError):
                        family, host, port = _destination(address)
                        self._reserve(family, host, port)
                    raise
        return _check(libc().bind(target, address, len(address)))

    def _connect(self, run: _Run, target: int, notification: Notification) -> int:
        address = _read_address(run, notification.args[1], notification.args[2])
        if _family(address) == socket.AF_UNIX:
            with self._unix_socket_file(run, address) as through:
                return _check(libc().connect(target, through, len(through)))
        # AF_UNSPEC only dissolves an association: it connects to nothing.
        if _family(address) != socket.AF_UNSPEC:
            self._check_receiver(target, address)
        return _check(libc().connect(target, address, len(address)))

    def _listen(self, run: _Run, target: int, notification: Notification) -> int:
        address = ctypes.create_string_buffer(_MAX_ADDRESS)
        size = ctypes.c_uint32(_MAX_ADDRESS)
        _check(libc().getsockname(target, address, ctypes.byref(size)))
        bound = address.raw[: size.value]
        if _family(bound) in (socket.AF_INET, socket.AF_INET6) and _port(bound) == 0:
            # Unbound: the kernel would bind it to every address; a port on loopback serves the same.
            bound = _on_loopback(bound)
            _check(libc().bind(target, bound, len(bound)))
        # A unix socket listens only where it was bound (the kernel refuses an unbound one).
        if _family(bound) != socket.AF_UNIX and not _is_loopback(bound):
            raise _RefusedError(errno.EACCES)
        return _check(libc().listen(target, ctypes.c_int(_int(notification.args[1]))))

    def _sendmsg(self, run: _Run, target: int, notification: Notification) -> int:
        header = _MsgHdr.from_buffer_copy(_read(run, notification.args[1], ctypes.sizeof(_MsgHdr)))
        flags = _int(notification.args[2])
        name = b""
        if header.name and header.namelen:
            name = _read_address(run, header.name, header.namelen)
        with contextlib.ExitStack() as stack:
            name = stack.enter_context(self._destination_of(run, target, name)) if name else b""
            return self._send_copies(run, target, header, flags, name)

    def _send_copies(self, run: _Run, target: int, header: _MsgHdr, flags: int, name: bytes) -> int:
        data = _read_iov(run, header.iov or 0, header.iovlen, stream=_is_stream(target))
        control, held = _copy_control(run, header.control or 0, header.controllen)
        try:
            name_buffer = ctypes.create_string_buffer(name, len(name)) if name else None
            data_buffer = ctypes.create_string_buffer(data, len(data))
            control_buffer = ctypes.create_string_buffer(control, len(control)) if control else None
            iov = _Iovec(ctypes.addressof(data_buffer), len(data))
            sent = _MsgHdr(
                ctypes.addressof(name_buffer) if name_buffer else None,
                len(name),
                ctypes.addressof(iov),
                1,
                ctypes.addressof(control_buffer) if control_buffer else None,
                len(control),
                0,
            )
            # No SIGPIPE for the server: the run reads EPIPE (Python runs ignore the signal anyway).
            return _check(libc().sendmsg(target, ctypes.byref(sent), ctypes.c_int(flags | _MSG_NOSIGNAL)))
        finally:
            for fd in held:
                os.close(fd)

    def _sendto(self, run: _Run, target: int, notification: Notification) -> int:
        size = notification.args[2]
        if size > _MAX_SEND and not _is_stream(target):
            raise _RefusedError(errno.EMSGSIZE)
        asked = _read_address(run, notification.args[4], notification.args[5])
        with self._destination_of(run, target, asked) as address:
            data = _read(run, notification.args[1], min(size, _MAX_SEND))
            flags = ctypes.c_int(_int(notification.args[3]) | _MSG_NOSIGNAL)
            return _check(libc().sendto(target, data, len(data), flags, address, len(address)))

    @contextlib.contextmanager
    def _destination_of(self, run: _Run, target: int, address: bytes) -> Iterator[bytes]:
        """The address to send to: a unix path as the checked socket file itself, else checked as is."""
        if _family(address) == socket.AF_UNIX:
            with self._unix_socket_file(run, address) as through:
                yield through
            return
        self._check_receiver(target, address)
        yield address

    @contextlib.contextmanager
    def _unix_socket_file(self, run: _Run, address: bytes) -> Iterator[bytes]:
        """A sockaddr naming, through /proc/self/fd, the socket file `address` names under the scratch folder.

        The file is opened beneath the scratch folder with no symlink anywhere on the way
        (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), then reached through its own descriptor:
        renaming, or swapping a folder or the file for a link after the check reaches nothing else.
        Abstract names are refused: the supervisor stands outside the run's Landlock domain, whose
        scope would keep the run from the host's (D-Bus, X11).
        """
        path = _unix_path(address)
        if path is None:
            raise _RefusedError(errno.EPERM)
        relative = self._beneath_scratch(run, path)
        try:
            fd = open_beneath(self._scratch, relative)
        except OSError as exc:
            # Beneath the run's own folder, which it may list: a missing name is missing, as in a
            # terminal (a test expects FileNotFoundError); anything else (a link) is refused.
            raise _RefusedError(errno.ENOENT if exc.errno == errno.ENOENT else errno.EACCES) from exc
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                raise _RefusedError(errno.ECONNREFUSED)
            yield struct.pack("=H", socket.AF_UNIX) + f"/proc/self/fd/{fd}".encode() + b"\0"
        finally:
            os.close(fd)

    def _beneath_scratch(self, run: _Run, path: bytes) -> str:
        """`path` (relative to the caller's folder when not absolute) relative to the scratch folder."""
        try:
            relative = relative_beneath(self._scratch, run.pid, os.fsdecode(path))
        except OSError as exc:
            raise _RefusedError(errno.EPERM) from exc
        if relative is None:
            raise _RefusedError(errno.EACCES)
        return relative

    def _bind_unix(self, run: _Run, target: int, address: bytes) -> int:
        """Bind from a throwaway thread whose Landlock domain lets it make sockets in the scratch folder only.

        The kernel then checks the path as it resolves it, when it binds: a folder swapped for a
        link after any check of ours still makes no socket file outside.
        """
        if _unix_path(address) is None:
            raise _RefusedError(errno.EPERM)  # abstract names, and autobind, which picks one
        outcome: list[int | _RefusedError] = []

        def bind() -> None:
            from landlockpy import AccessFS, AccessNet, LandlockError, Ruleset

            try:
                # A folder of its own for this thread: the caller's, so a relative path means the same.
                if libc().unshare(_CLONE_FS) != 0:
                    raise _RefusedError(ctypes.get_errno())
                os.chdir(f"/proc/{run.pid}/cwd")
                with Ruleset(handled_fs=AccessFS.MAKE_SOCK, handled_net=AccessNet.NONE) as ruleset:
                    ruleset.allow_path(self._scratch, AccessFS.MAKE_SOCK)
                    ruleset.restrict(no_new_privs=True)
                    if not ruleset.enforced:
                        raise _RefusedError(errno.EPERM)
                outcome.append(_check(libc().bind(target, address, len(address))))
            except _RefusedError as refused:
                outcome.append(refused)
            except (OSError, LandlockError, ValueError):
                outcome.append(_RefusedError(errno.EPERM))

        thread = threading.Thread(target=bind, name="oct-loopback-bind", daemon=True)
        thread.start()
        thread.join()
        result = outcome[0] if outcome else _RefusedError(errno.EPERM)
        if isinstance(result, _RefusedError):
            raise result
        return result


def _family(address: bytes) -> int:
    return int.from_bytes(address[:2], "little")


def _unix_path(address: bytes) -> bytes | None:
    """The path of a unix sockaddr; None for an abstract name or none (autobind)."""
    path = address[2:].split(b"\0", 1)[0]
    return path or None


def _destination(address: bytes) -> tuple[int, bytes, int]:
    """Family, host (16 bytes) and port of a loopback sockaddr; IPv4-mapped counts as IPv4, as sent."""
    family = int.from_bytes(address[:2], "little")
    if family == socket.AF_INET:
        return socket.AF_INET, address[4:8].ljust(16, b"\0"), _port(address)
    host = address[8:24]
    if host[:12] == _V4_MAPPED:
        return socket.AF_INET, host[12:].ljust(16, b"\0"), _port(address)
    return socket.AF_INET6, host, _port(address)


def _source(fd: int, family: int) -> tuple[bytes, int]:
    """Where a datagram from `fd` comes from (a connected receiver accepts only its peer); zero if unbound."""
    buffer = ctypes.create_string_buffer(_MAX_ADDRESS)
    size = ctypes.c_uint32(_MAX_ADDRESS)
    if libc().getsockname(fd, buffer, ctypes.byref(size)) < 0 or size.value < 8:
        return bytes(16), 0
    bound = buffer.raw[: size.value]
    if int.from_bytes(bound[:2], "little") not in (socket.AF_INET, socket.AF_INET6):
        return bytes(16), 0
    found, host, port = _destination(bound)
    return (host, port) if found == family else (bytes(16), 0)


def _receiver(
    diag: socket.socket, family: int, stream: bool, destination: tuple[bytes, int], source: tuple[bytes, int]
) -> int | None:
    """The inode of the socket that would receive on `lo` from `source` at `destination`, or None."""
    host, port = destination
    origin, origin_port = source
    tail = struct.pack("=III", _loopback_index(), _NO_COOKIE, _NO_COOKIE)
    if stream:
        # TCP looks up a packet from dst:dport to src:sport: the listener is the "source".
        sockid = struct.pack("!HH", port, origin_port) + host + origin + tail
        protocol = socket.IPPROTO_TCP
    else:
        # UDP looks up a packet from src:sport to dst:dport.
        sockid = struct.pack("!HH", origin_port, port) + origin + host + tail
        protocol = socket.IPPROTO_UDP
    request = struct.pack("=BBBBI", family, protocol, 0, 0, _ALL_STATES) + sockid
    diag.send(struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 0, 0) + request)
    answer = diag.recv(8192)
    if len(answer) < 16 or struct.unpack_from("=H", answer, 4)[0] == _NLMSG_ERROR:
        return None
    return int(struct.unpack_from("=I", answer, 16 + 68)[0]) if len(answer) >= 16 + 72 else None


@cache
def _supervised_names() -> dict[int, str]:
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


@cache
def _loopback_index() -> int:
    return socket.if_nametoindex(_LOOPBACK_DEVICE.decode())


def _int(value: int) -> int:
    """A register as the kernel reads an int argument: its low 32 bits, signed."""
    return ctypes.c_int(value & 0xFFFFFFFF).value


def _pidfd_open_thread(tid: int) -> int:
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


def _read(run: _Run, pointer: int, size: int) -> bytes:
    """`size` bytes of the run's memory, read once into the supervisor's own buffer."""
    try:
        return read_bytes(run.pid, pointer, size)
    except OSError as exc:
        raise _RefusedError(errno.EFAULT) from exc


def _read_address(run: _Run, pointer: int, length: int) -> bytes:
    length = _int(length)
    if not 2 <= length <= _MAX_ADDRESS:
        raise _RefusedError(errno.EINVAL)
    return _read(run, pointer, length)


def _read_iov(run: _Run, pointer: int, count: int, *, stream: bool) -> bytes:
    if count > _MAX_IOV:
        raise _RefusedError(errno.EMSGSIZE)
    vectors: ctypes.Array[_Iovec] | list[_Iovec] = (
        (_Iovec * count).from_buffer_copy(_read(run, pointer, ctypes.sizeof(_Iovec) * count)) if count else []
    )
    parts: list[bytes] = []
    left = _MAX_SEND
    for vector in vectors:
        size = min(vector.len, left)
        if size < vector.len and not stream:
            raise _RefusedError(errno.EMSGSIZE)
        parts.append(_read(run, vector.base or 0, size))
        left -= size
        if not left:
            break
    return b"".join(parts)


def _copy_control(run: _Run, pointer: int, length: int) -> tuple[bytes, list[int]]:
    """The control data with each descriptor it passes replaced by the supervisor's copy of it.

    Only SCM_RIGHTS: any other message may steer the send (IP_PKTINFO picks the interface) or
    claim credentials the supervisor's privilege would let through.
    """
    if not pointer or not length:
        return b"", []
    if length > _MAX_CONTROL:
        raise _RefusedError(errno.EINVAL)
    control = bytearray(_read(run, pointer, length))
    held: list[int] = []
    offset = 0
    header = 16  # struct cmsghdr: size_t len, int level, int type
    try:
        while offset + header <= len(control):
            size = int.from_bytes(control[offset : offset + 8], "little")
            level = int.from_bytes(control[offset + 8 : offset + 12], "little", signed=True)
            kind = int.from_bytes(control[offset + 12 : offset + 16], "little", signed=True)
            if size < header or offset + size > len(control):
                raise _RefusedError(errno.EINVAL)
            if (level, kind) != (socket.SOL_SOCKET, _SCM_RIGHTS):
                raise _RefusedError(errno.EPERM)
            for at in range(offset + header, offset + size - 3, 4):
                wanted = int.from_bytes(control[at : at + 4], "little", signed=True)
                from seccompy.notify import pidfd_getfd

                try:
                    mine = pidfd_getfd(run.pidfd, wanted)
                except OSError as exc:
                    raise _RefusedError(errno.EBADF) from exc
                held.append(mine)
                control[at : at + 4] = mine.to_bytes(4, "little", signed=True)
            offset += (size + 7) & ~7
    except BaseException:
        for fd in held:
            os.close(fd)
        raise
    return bytes(control), held


def _is_stream(fd: int) -> bool:
    kind = ctypes.c_int()
    size = ctypes.c_uint32(4)
    libc().getsockopt(fd, socket.SOL_SOCKET, socket.SO_TYPE, ctypes.byref(kind), ctypes.byref(size))
    return kind.value == socket.SOCK_STREAM


def _may_block(fd: int, name: str, notification: Notification) -> bool:
    """Whether the call may wait (a blocking socket, a send without MSG_DONTWAIT)."""
    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK:
        return False
    flags_at = {"sendmsg": 2, "sendto": 3}.get(name)
    return flags_at is None or not _int(notification.args[flags_at]) & _MSG_DONTWAIT


@cache
def loopback_support() -> str | None:
    """Why this kernel cannot supervise a run's loopback, or None when it can.

    Tried for real once: a thread loads a filter that hands socket() to a supervisor, asks for a
    UDP socket, and binds it to 127.0.0.1 through the supervisor.
    """
    try:
        import seccompy  # noqa: F401
    except ImportError:
        return "the seccompy package is not installed"
    outcome: list[str | None] = []

    def probe() -> None:
        from oct_mcp.backends.seccomp import filter_program

        supervisor = LoopbackSupervisor(Path("/nonexistent"))  # no unix socket in the probe
        try:
            supervisor.load(filter_program(sockets=True, network=False, writes=False, supervised=True))
            probe_socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        except OSError as exc:
            outcome.append(
                f"seccomp user notification failed ({os.strerror(exc.errno or 0)}; needs Linux 5.19)"
            )
            return
        with probe_socket:
            device = probe_socket.getsockopt(socket.SOL_SOCKET, _SO_BINDTODEVICE, 16).rstrip(b"\0")
            try:
                probe_socket.bind(("127.0.0.1", 0))
            except OSError as exc:
                outcome.append(f"a supervised bind failed ({os.strerror(exc.errno or 0)})")
                return
        outcome.append(None if device == _LOOPBACK_DEVICE else "a supervised socket was not tied to lo")

    thread = threading.Thread(target=probe, name="oct-loopback-probe", daemon=True)
    thread.start()
    thread.join()
    return outcome[0] if outcome else "the loopback probe did not finish"
