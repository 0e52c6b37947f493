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
import os
import select
import socket
import threading
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from seccompy.notify import Listener, Notification

from oct_mcp.backends.confined import start_run_thread
from oct_mcp.backends.libc import libc
from oct_mcp.backends.loopback_addresses import (
    LOOPBACK_DEVICE,
    MAX_ADDRESS,
    NETLINK_SOCK_DIAG,
    destination_of,
    family_of,
    is_loopback,
    is_stream,
    on_loopback,
    port_of,
    receiver_of,
    source_of,
    unprivileged_port_start,
)
from oct_mcp.backends.loopback_calls import (
    MAX_SEND,
    Caller,
    CallRefusedError,
    Iovec,
    MsgHdr,
    checked,
    copy_control,
    int_argument,
    may_block,
    pidfd_open_thread,
    read_address,
    read_iov,
    read_memory,
    supervised_names,
)
from oct_mcp.backends.loopback_unix import ScratchUnixSockets
from oct_mcp.backends.project_entries import ENTRY_CALLS, ProjectEntries
from oct_mcp.backends.ptys import answer_pty_peer
from oct_mcp.backends.scratch_metadata import METADATA_CALLS, ScratchMetadata
from oct_mcp.backends.shm import SHM_CALLS, RunSharedMemory

__all__ = ["LoopbackSupervisor", "loopback_support"]

_PR_SET_NO_NEW_PRIVS: Final = 38
_SECCOMP_SET_MODE_FILTER: Final = 1
_FLAG_NEW_LISTENER: Final = 1 << 3
_FLAG_WAIT_KILLABLE_RECV: Final = 1 << 5
_ADDFD_FLAG_SEND: Final = 1 << 1
_SO_BINDTODEVICE: Final = 25
_SOCK_CLOEXEC: Final = 0o2000000
_MSG_NOSIGNAL: Final = 0x4000
_MAX_RESERVED: Final = 64
"""UDP ports one run may have held for it: a run must not keep the host's services from many."""


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


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
        self._unix = ScratchUnixSockets(self._scratch)
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
            socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG
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
        name = supervised_names().get(notification.nr, "")
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
            except CallRefusedError as refused:
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
        except CallRefusedError:
            return  # the caller is gone: nobody to answer
        try:
            target = self._take_fd(run, notification)
        except CallRefusedError as refused:
            os.close(run.pidfd)
            self._refuse(notification, refused.error)
            return
        if name in ("connect", "sendmsg", "sendto") and may_block(target, name, notification):
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

    def _handlers(self) -> dict[str, Callable[[Caller, int, Notification], int]]:
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
        handler: Callable[[Caller, int, Notification], int],
        run: Caller,
        target: int,
        notification: Notification,
    ) -> None:
        from seccompy import SeccompError

        try:
            result, error = handler(run, target, notification), 0
        except CallRefusedError as refused:
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

    def _open_run(self, notification: Notification) -> Caller:
        """A pidfd of the calling thread, checked to be the caller still (its id is not reused)."""
        from seccompy import SeccompError

        try:
            pidfd = pidfd_open_thread(notification.pid)
        except OSError as exc:
            raise CallRefusedError(exc.errno or errno.ESRCH) from exc
        try:
            alive = self._listener_now().valid(notification.id)
        except SeccompError:
            alive = False
        if not alive:
            os.close(pidfd)
            raise CallRefusedError(errno.ESRCH)
        return Caller(notification.pid, pidfd)

    def _take_fd(self, run: Caller, notification: Notification) -> int:
        from seccompy.notify import pidfd_getfd

        try:
            return pidfd_getfd(run.pidfd, int_argument(notification.args[0]))
        except OSError as exc:
            raise CallRefusedError(errno.EBADF if exc.errno == errno.EBADF else errno.EPERM) from exc

    def _socket(self, notification: Notification) -> None:
        from seccompy import SeccompError
        from seccompy.notify import AddFdFlag

        family, kind, protocol = (int_argument(value) for value in notification.args[:3])
        try:
            made = socket.socket(family, kind & ~_SOCK_CLOEXEC, protocol)
        except OSError as exc:
            raise CallRefusedError(exc.errno or errno.EINVAL) from exc
        try:
            if family != socket.AF_UNIX:
                made.setsockopt(socket.SOL_SOCKET, _SO_BINDTODEVICE, LOOPBACK_DEVICE)
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
        if not is_loopback(address):
            raise CallRefusedError(errno.ENETUNREACH)
        stream = is_stream(target)
        family, host, port = destination_of(address)
        source = source_of(target, family) if not stream else (bytes(16), 0)
        with self._diag_lock:
            assert self._diag is not None  # noqa: S101 - made before the first notification
            inode = receiver_of(self._diag, family, stream, (host, port), source)
        if inode in self._made:
            return
        if inode is None and not stream:
            self._reserve(family, host, port)
            return
        raise CallRefusedError(errno.ECONNREFUSED)

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
            CallRefusedError: ECONNREFUSED, as before, past the limit or where the port was taken
                meanwhile.
        """
        if port < unprivileged_port_start():
            # The run may not bind such a port itself: nor is one held for it (a resolver's 53).
            raise CallRefusedError(errno.ECONNREFUSED)
        key = (family, host, port)
        # Sends that may block are answered on threads of their own: one lock for the table.
        with self._reserved_lock:
            if key in self._reserved:
                return
            if len(self._reserved) >= _MAX_RESERVED:
                raise CallRefusedError(errno.ECONNREFUSED)
            placeholder = socket.socket(family, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            try:
                placeholder.setsockopt(socket.SOL_SOCKET, _SO_BINDTODEVICE, LOOPBACK_DEVICE)
                shown = socket.inet_ntop(family, host[:4] if family == socket.AF_INET else host)
                placeholder.bind((shown, port))
            except OSError as exc:
                placeholder.close()
                raise CallRefusedError(errno.ECONNREFUSED) from exc
            self._reserved[key] = placeholder
            self._made.add(os.fstat(placeholder.fileno()).st_ino)

    def _release(self, address: bytes) -> bool:
        """Give up the placeholder on the port the run now binds itself; whether there was one."""
        with self._reserved_lock:
            placeholder = self._reserved.pop(destination_of(address), None)
        if placeholder is None:
            return False
        self._made.discard(os.fstat(placeholder.fileno()).st_ino)
        placeholder.close()
        return True

    def _bind(self, run: Caller, target: int, notification: Notification) -> int:
        address = read_address(run, notification.args[1], notification.args[2])
        if family_of(address) == socket.AF_UNIX:
            return self._unix.bind(run, target, address)
        address = on_loopback(address)
        if not is_loopback(address):
            raise CallRefusedError(errno.EACCES)
        if 0 < port_of(address) < unprivileged_port_start():
            raise CallRefusedError(errno.EACCES)
        if port_of(address) != 0:
            # SO_REUSEPORT would let a run of the same user join a host service's port and take a
            # share of its clients: a port another socket holds is in use, whatever the options.
            family, host, port = destination_of(address)
            with self._diag_lock:
                assert self._diag is not None  # noqa: S101 - made before the first notification
                holder = receiver_of(self._diag, family, is_stream(target), (host, port), (bytes(16), 0))
            if holder is not None and holder not in self._made:
                raise CallRefusedError(errno.EADDRINUSE)
            if not is_stream(target) and self._release(address):
                try:
                    return checked(libc().bind(target, address, len(address)))
                except CallRefusedError:
                    # The run's bind failed (its socket bound already): the port is held again,
                    # or, taken meanwhile, stays refused to the run's sends as any host port.
                    with contextlib.suppress(CallRefusedError):
                        family, host, port = destination_of(address)
                        self._reserve(family, host, port)
                    raise
        return checked(libc().bind(target, address, len(address)))

    def _connect(self, run: Caller, target: int, notification: Notification) -> int:
        address = read_address(run, notification.args[1], notification.args[2])
        if family_of(address) == socket.AF_UNIX:
            with self._unix.socket_file(run, address) as through:
                return checked(libc().connect(target, through, len(through)))
        # AF_UNSPEC only dissolves an association: it connects to nothing.
        if family_of(address) != socket.AF_UNSPEC:
            self._check_receiver(target, address)
        return checked(libc().connect(target, address, len(address)))

    def _listen(self, run: Caller, target: int, notification: Notification) -> int:
        address = ctypes.create_string_buffer(MAX_ADDRESS)
        size = ctypes.c_uint32(MAX_ADDRESS)
        checked(libc().getsockname(target, address, ctypes.byref(size)))
        bound = address.raw[: size.value]
        if family_of(bound) in (socket.AF_INET, socket.AF_INET6) and port_of(bound) == 0:
            # Unbound: the kernel would bind it to every address; a port on loopback serves the same.
            bound = on_loopback(bound)
            checked(libc().bind(target, bound, len(bound)))
        # A unix socket listens only where it was bound (the kernel refuses an unbound one).
        if family_of(bound) != socket.AF_UNIX and not is_loopback(bound):
            raise CallRefusedError(errno.EACCES)
        return checked(libc().listen(target, ctypes.c_int(int_argument(notification.args[1]))))

    def _sendmsg(self, run: Caller, target: int, notification: Notification) -> int:
        header = MsgHdr.from_buffer_copy(read_memory(run, notification.args[1], ctypes.sizeof(MsgHdr)))
        flags = int_argument(notification.args[2])
        name = b""
        if header.name and header.namelen:
            name = read_address(run, header.name, header.namelen)
        with contextlib.ExitStack() as stack:
            name = stack.enter_context(self._destination_of(run, target, name)) if name else b""
            return self._send_copies(run, target, header, flags, name)

    def _send_copies(self, run: Caller, target: int, header: MsgHdr, flags: int, name: bytes) -> int:
        data = read_iov(run, header.iov or 0, header.iovlen, stream=is_stream(target))
        control, held = copy_control(run, header.control or 0, header.controllen)
        try:
            name_buffer = ctypes.create_string_buffer(name, len(name)) if name else None
            data_buffer = ctypes.create_string_buffer(data, len(data))
            control_buffer = ctypes.create_string_buffer(control, len(control)) if control else None
            iov = Iovec(ctypes.addressof(data_buffer), len(data))
            sent = MsgHdr(
                ctypes.addressof(name_buffer) if name_buffer else None,
                len(name),
                ctypes.addressof(iov),
                1,
                ctypes.addressof(control_buffer) if control_buffer else None,
                len(control),
                0,
            )
            # No SIGPIPE for the server: the run reads EPIPE (Python runs ignore the signal anyway).
            return checked(libc().sendmsg(target, ctypes.byref(sent), ctypes.c_int(flags | _MSG_NOSIGNAL)))
        finally:
            for fd in held:
                os.close(fd)

    def _sendto(self, run: Caller, target: int, notification: Notification) -> int:
        size = notification.args[2]
        if size > MAX_SEND and not is_stream(target):
            raise CallRefusedError(errno.EMSGSIZE)
        asked = read_address(run, notification.args[4], notification.args[5])
        with self._destination_of(run, target, asked) as address:
            data = read_memory(run, notification.args[1], min(size, MAX_SEND))
            flags = ctypes.c_int(int_argument(notification.args[3]) | _MSG_NOSIGNAL)
            return checked(libc().sendto(target, data, len(data), flags, address, len(address)))

    @contextlib.contextmanager
    def _destination_of(self, run: Caller, target: int, address: bytes) -> Iterator[bytes]:
        """The address to send to: a unix path as the checked socket file itself, else checked as is."""
        if family_of(address) == socket.AF_UNIX:
            with self._unix.socket_file(run, address) as through:
                yield through
            return
        self._check_receiver(target, address)
        yield address


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
        outcome.append(None if device == LOOPBACK_DEVICE else "a supervised socket was not tied to lo")

    thread = threading.Thread(target=probe, name="oct-loopback-probe", daemon=True)
    thread.start()
    thread.join()
    return outcome[0] if outcome else "the loopback probe did not finish"
