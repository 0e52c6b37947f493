"""Spawning a command from a fresh thread that confines itself first, so only the command is confined.

Landlock domains, seccomp filters and no_new_privs belong to a thread, and a process forked
from that thread inherits them across exec. The server's own threads stay free: a fresh
thread restricts itself, spawns the command, then waits for the end of the run to sweep away
what the command left behind, from inside the same domain. Measured against a `python -I -S`
shim that restricts itself and execs (+26 ms a spawn, the interpreter's start-up): the thread
costs under 1 ms, so the command starts already confined at no real cost.

asyncio spawns from the event loop's thread, so the command is started here with
`subprocess.Popen` and handed to the runner as an anyio `Process`: the pipes are read and
the exit awaited through anyio's readiness waits on the pipe and on a pidfd.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from oct_mcp.errors import SandboxUnavailableError

__all__ = [
    "ConfinedRun",
    "Confinement",
    "kill_and_reap",
    "load_unwinder",
    "start_confined",
    "start_run_thread",
]


class Confinement(Protocol):
    """What a backend applies to the thread that spawns a command, and how it ends the command's domain."""

    def restrict_current_thread(self) -> None:
        """Confine the calling thread for good; raise SandboxUnavailableError if the kernel did not."""
        ...

    def end_domain(self, leader: int) -> None:
        """From the same thread, after the run: kill and reap what is left in the domain, but `leader`."""
        ...


class _PipeReader(ByteReceiveStream):
    """The parent's end of a pipe, read without blocking the event loop."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._closed = False

    async def receive(self, max_bytes: int = 65_536) -> bytes:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            # Waiting first, even when data is there: a flood must not keep the loop from other tasks.
            await anyio.wait_readable(self._fd)
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            anyio.notify_closing(self._fd)
            os.close(self._fd)


class ConfinedRun(Process):
    """The command of one confined run, as the runner sees any process."""

    def __init__(self, popen: subprocess.Popen[bytes], pidfd: int, stdout: int, stderr: int) -> None:
        self._popen = popen
        self._pidfd = pidfd
        self._stdout = _PipeReader(stdout)
        self._stderr = _PipeReader(stderr)
        self._waiting = anyio.Lock()
        self._ended: threading.Event | None = None
        self._swept: _ThreadSignal | None = None

    async def wait(self) -> int:
        # One waiter on the pidfd at a time: the others find the exit status when they get the lock.
        async with self._waiting:
            while self._popen.poll() is None:
                await anyio.wait_readable(self._pidfd)
        return self._popen.returncode

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    def send_signal(self, signal: int) -> None:
        self._popen.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    @property
    def stdin(self) -> ByteSendStream | None:
        return None

    @property
    def stdout(self) -> ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> ByteReceiveStream:
        return self._stderr

    async def end_domain(self) -> None:
        """Have the spawning thread kill what the command left in its domain, and wait until it has."""
        ended, swept = self._ended, self._swept
        self._ended = self._swept = None
        if ended is None or swept is None:
            return
        ended.set()
        await swept.wait()
        swept.close()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._stdout.aclose()
            await self._stderr.aclose()
            if self._popen.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._popen.kill()
                await self.wait()
            await self.end_domain()
            os.close(self._pidfd)


@functools.cache
def load_unwinder() -> None:
    """Load glibc's unwinder (libgcc_s) into the server before any thread is confined.

    glibc loads it the first time a thread ends (Python's threads end with `pthread_exit`, which
    unwinds): loaded then by a spawning thread under a run's seccomp filter, the loader's open of
    `/etc/ld.so.cache` waits on the loopback supervisor while holding the loader's lock, which the
    supervisor's own Python may need, and the run's thread and the supervisor wait on each other
    for good (seen under load, about one run in twenty as an unprivileged server). Loaded here,
    once, the later load finds it in memory and opens nothing.
    """
    with contextlib.suppress(OSError):  # a libc that unwinds without it has nothing to load
        ctypes.CDLL("libgcc_s.so.1")


async def start_confined(
    confinement: Confinement, argv: Sequence[str], env: Mapping[str, str], cwd: Path
) -> ConfinedRun:
    """Start `argv` in its own session from a fresh thread that `confinement` restricted first.

    Raises:
        SandboxUnavailableError: The kernel did not enforce the confinement; nothing ran.
        OSError: The program could not be started.
    """
    # The thread reports to the event loop through one eventfd: spawned, then later swept. No
    # worker thread waits for it (two hand-offs a run, measured at 0.1 to 1 ms on a loaded machine).
    load_unwinder()
    signal_loop = _ThreadSignal()
    ended = threading.Event()
    outcome: list[ConfinedRun | Exception] = []

    def spawn_and_keep_domain() -> None:
        out_read, out_write = os.pipe2(os.O_CLOEXEC)
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        try:
            confinement.restrict_current_thread()
            popen = subprocess.Popen(  # argv is a list, never a shell
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out_write,
                stderr=err_write,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                # What the backend makes in the child before the exec (bubblewrap's own network).
                preexec_fn=getattr(confinement, "child_setup", None),
            )
            outcome.append(ConfinedRun(popen, os.pidfd_open(popen.pid), out_read, err_read))
        except (SandboxUnavailableError, OSError, subprocess.SubprocessError, ValueError) as exc:
            # Handed to the caller, which raises it: nothing ran.
            os.close(out_read)
            os.close(err_read)
            outcome.append(exc)
            return
        finally:
            os.close(out_write)
            os.close(err_write)
            signal_loop.set()
        ended.wait()
        try:
            confinement.end_domain(popen.pid)
        finally:
            signal_loop.set()

    start_run_thread(spawn_and_keep_domain)
    # Shielded: a command that started must reach the caller, whose cleanup kills it if cancelled.
    with anyio.CancelScope(shield=True):
        await signal_loop.wait()
    if not outcome:
        # The thread ended on an error none of the above: nothing was started, and the caller must
        # not wait for a run that is not there.
        signal_loop.close()
        raise SandboxUnavailableError("the sandbox could not confine the run's thread; nothing ran")
    result = outcome[0]
    if isinstance(result, subprocess.SubprocessError):
        # The child's setup before the exec failed (subprocess keeps no more than that): fail
        # closed with what the user can act on, never the run outside what it was to be given.
        signal_loop.close()
        raise SandboxUnavailableError(
            "the sandbox could not prepare the run's own network before starting it; nothing ran. "
            "`oct-mcp doctor` shows whether this user may make namespaces"
        ) from result
    if isinstance(result, Exception):
        signal_loop.close()
        raise result
    result._ended, result._swept = ended, signal_loop
    return result


def start_run_thread(function: Callable[[], None]) -> None:
    """Start `function` on a new daemon thread, without waiting for it to be scheduled.

    The thread exists, with its creator's credentials, Landlock domain and filters, when this
    returns: the kernel copies them when it makes the thread, so what matters for confinement is
    done. `threading.Thread.start` also waits until the new thread runs (55 us a thread measured,
    two a run); each caller waits for the word it needs from the thread itself. Nothing may join
    such a thread: an error in it is reported by `sys.unraisablehook`, like any thread's.
    """
    _thread.start_new_thread(function, ())


class _ThreadSignal:
    """A thread's word to the event loop, on an eventfd the loop waits on like any pipe."""

    def __init__(self) -> None:
        self._fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)

    def set(self) -> None:
        os.eventfd_write(self._fd, 1)

    async def wait(self) -> None:
        while True:
            try:
                os.eventfd_read(self._fd)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
            else:
                return

    def close(self) -> None:
        os.close(self._fd)


def kill_and_reap(pid: int) -> bool:
    """SIGKILL `pid` and reap it if it is a dead child; False if the signal was refused or it is gone.

    Called from inside a Landlock domain with signals scoped, a refusal means: not of this domain.
    """
    try:
        os.kill(pid, signal.SIGKILL)
    except (PermissionError, ProcessLookupError):
        return False
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return True
