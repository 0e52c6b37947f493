"""The screening helper: a second process that reads a search's files and says which hold the pattern,
while the server walks the tree and screens files of its own, so a search uses two cores.

Why a process: a search's time is in its system calls (an open, a stat, a read and a close a file),
and Python threads make it slower, not faster: each call hands the interpreter lock over and back
(on the benchmark's 10,000 files, 124 to 168 ms with 2 to 4 threads against 68 ms in one). One
helper process and the server each screening a share: 43 ms against 85 in one process, 1.05x
ripgrep's two threads (benchmarks/search.py, side by side on a quiet 2-core machine).

The helper is sent the open descriptors of the folders the walk reached (never a path) and the
names in them, and opens each name below its folder without following a symlink: it can read
nothing the walk would not. It answers a byte a file; only files it says match are read again here,
where the search's rules apply to them as to every other, so a helper that lies can hide a match
but show nothing. It runs `oct_mcp/file_screen.py` alone under this Python in isolated mode without
`site` (no environment variables, no `.pth` file or `sitecustomize` run, not the project's folder on
its path: only the standard library and RE2's folder), from `/`, in a session of its own, with
nothing on its standard streams (the server's own may be the MCP connection). It is not used where
any of that code lies inside the project. Each request carries the time the search has left, past
which the helper screens no more. It ends when the server closes its socket. Any failure (it cannot
start, dies, or is slow past `reply_timeout`) and the search goes on in the server alone, with the
same results.

Which files go to it, and how their results keep the walk's order: `screen_order`.
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import re2  # type: ignore[import-untyped]

from oct_mcp import file_screen
from oct_mcp.file_screen import (
    CANCEL,
    READY,
    REPLY_HEADER,
    ScreenQuery,
    encode_names,
)

__all__ = [
    "CHUNK_FILES",
    "IN_FLIGHT_MAX",
    "SCREEN_HELPER",
    "ScreenHelper",
    "helper_status",
    "runs_code_inside",
]

CHUNK_FILES: Final = 64
"""Files a request: enough that a request's round trip is small beside its files' screening."""
IN_FLIGHT_MAX: Final = 4
"""Requests the helper holds at once; past that the server screens the next chunk itself."""
STARTS_MAX: Final = 3
"""Starts of the helper in a server's life: one that keeps failing is not started again."""
REPLY_TIMEOUT_SECONDS: Final = 5.0


# With -S the helper imports no `site`: the standard library, then RE2's own folder, and nothing else.
_BOOTSTRAP: Final = (
    "import runpy, sys; sys.path.append(sys.argv[1]); sys.argv = sys.argv[2:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def _re2_folder() -> str:
    """The folder RE2's package sits in (site-packages), which the helper imports it from."""
    package: str = re2.__file__
    return os.path.dirname(os.path.dirname(os.path.realpath(package)))


def _helper_argv(socket_fd: int, control_fd: int) -> list[str]:
    folder, screen = _re2_folder(), file_screen.__file__
    return [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, folder, screen, str(socket_fd), str(control_fd)]


def _usable_cores() -> int:
    # On one core the helper only takes turns with the server, and costs more than it saves.
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - platforms without CPU affinity (macOS)


@functools.cache
def _helper_code() -> tuple[Path, ...]:
    """Where a new helper process loads code from: this Python and its installations, file_screen,
    RE2's folder, and the library folders the environment names."""
    places = [sys.executable, sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    places += [file_screen.__file__, _re2_folder()]
    # The helper runs from `/`, where the loader reads a relative entry from.
    library_path = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    places += [os.path.join("/", folder) for folder in library_path if folder]
    return tuple(Path(os.path.realpath(place)) for place in places if place)


def runs_code_inside(project: Path) -> bool:
    """A helper started now would load code from inside `project` (the server's venv in the project, or
    its own source there): a tool that writes files could choose what it runs, outside the sandbox."""
    root = Path(os.path.realpath(project))
    return any(place == root or root in place.parents for place in _helper_code())


def _helper_environment() -> dict[str, str]:
    # Nothing of the server's environment but what this Python may need to load its own libraries
    # (whose folders runs_code_inside checks).
    library_path = os.environ.get("LD_LIBRARY_PATH")
    return {} if library_path is None else {"LD_LIBRARY_PATH": library_path}


class ScreenHelper:
    """The helper process and its socket, started on first use, one search at a time.

    `argv_for` gives the helper's command line from the descriptor numbers of its two sockets: the
    requests' and the CANCEL numbers'.
    """

    def __init__(
        self,
        argv_for: Callable[[int, int], Sequence[str]] = _helper_argv,
        reply_timeout: float = REPLY_TIMEOUT_SECONDS,
        chunk_files: int = CHUNK_FILES,
    ) -> None:
        """`chunk_files`: files a request carries (`screen_order` cuts the walk into chunks of as many)."""
        self._argv_for = argv_for
        self.reply_timeout = reply_timeout
        self.chunk_files = chunk_files
        self._in_use = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._control: socket.socket | None = None
        self._ready = False
        self._unanswered = 0
        self._stale = 0
        """Of the unanswered requests, those of searches that ended before their answers came."""
        self._starts = 0
        self._requests = 0
        self._first_request = 1
        """The first request of the search that has the helper: replies to older ones are left over from
        searches that stopped early, and are passed over, not waited for."""

    @property
    def unanswered(self) -> int:
        """Requests sent and not answered yet, a search's that stopped early among them."""
        return self._unanswered

    @property
    def pid(self) -> int | None:
        """The helper process's, while it runs."""
        return None if self._process is None else self._process.pid

    def acquire(self, project: Path | None = None) -> bool:
        """Take the helper for one search of `project`: False when another search has it, it cannot run,
        or it would run code from inside the project."""
        if _usable_cores() < 2 or (project is not None and runs_code_inside(project)):
            return False
        if not self._in_use.acquire(blocking=False):
            return False
        if self._process is not None and self._process.poll() is not None:
            self.stop()  # it died while idle: reaped here, and started again
        if self._socket is None and not self._start():
            self._in_use.release()
            return False
        self._first_request = self._requests + 1
        self._stale = self._unanswered
        return True

    def has_room(self) -> bool:
        """A request may be sent now (never waits): the helper is ready and holds fewer than
        IN_FLIGHT_MAX requests. Those of earlier searches that stopped early count (the helper is on
        them until it reads their CANCEL), and the answers to them already there are read here: no
        search of theirs waits for those, so nothing else would, and they would fill the helper for
        good."""
        if not self.ready():
            return False
        self._discard_stale()
        return self._unanswered < IN_FLIGHT_MAX

    def _discard_stale(self) -> None:
        """Read the answers already there to requests of earlier searches; they come first, in order."""
        while self._stale and self._socket is not None:
            try:
                header = self._socket.recv(REPLY_HEADER.size, socket.MSG_DONTWAIT | socket.MSG_PEEK)
            except BlockingIOError:
                return
            except OSError:
                self.stop()
                return
            if len(header) < REPLY_HEADER.size or REPLY_HEADER.unpack_from(header)[0] >= self._first_request:
                return  # this search's (or malformed: receive() stops the helper over it)
            try:
                self._socket.recv(65_536, socket.MSG_DONTWAIT)
            except OSError:
                self.stop()
                return
            self._unanswered -= 1
            self._stale -= 1

    def release(self) -> None:
        """Give the helper back; what it still holds of this search it answers UNREACHED from its next
        few files on, so the next search does not wait behind it."""
        if self._unanswered and self._control is not None:
            try:
                self._control.send(CANCEL.pack(self._requests + 1), socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
            except OSError:
                self.stop()
        self._in_use.release()

    def warm(self, timeout: float) -> bool:
        """Start the helper and wait until it takes requests, for at most `timeout` seconds: a search
        that finds it starting screens alone. For benchmarks and tests, which want it in use."""
        if not self.acquire():
            return False
        try:
            if not self._ready and self._socket is not None:
                self._socket.settimeout(timeout)
                try:
                    self._ready = self._socket.recv(len(READY)) == READY
                except OSError:
                    self._ready = False
                if self._ready:
                    self._socket.settimeout(None)
                else:
                    self.stop()
            return self._ready
        finally:
            self.release()

    def ready(self) -> bool:
        """It has said it takes requests (never waits for that)."""
        if not self._ready and self._socket is not None:
            try:
                self._ready = self._socket.recv(len(READY), socket.MSG_DONTWAIT) == READY
            except BlockingIOError:
                return False
            except OSError:
                self.stop()
                return False
            if not self._ready:
                self.stop()
        return self._ready

    def send(
        self, query: ScreenQuery, folders: list[int], names: list[tuple[int, str]], deadline: float
    ) -> int | None:
        """Send a request, to be screened until `deadline` (monotonic); its number, or None when the
        helper is gone (and stopped)."""
        if self._socket is None:
            return None
        self._requests += 1
        message = query.encode(self._requests, deadline) + encode_names(names)
        try:
            # Never waits: the helper holds at most IN_FLIGHT_MAX requests, far under the socket's buffer.
            socket.send_fds(self._socket, [message], folders, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except OSError:
            self.stop()
            return None
        self._unanswered += 1
        return self._requests

    def receive(self, timeout: float) -> tuple[int, bytes] | None:
        """The next reply to this search (its request's number and its verdicts), or None: none within
        `timeout` seconds (0: only one already there), or the helper is gone. A helper silent for
        `reply_timeout` is stopped; one silent for a shorter `timeout` is not."""
        wait = min(timeout, self.reply_timeout)
        # One end for the whole wait: replies left over from earlier searches do not start it again.
        end = time.monotonic() + wait
        while self._socket is not None:
            left = end - time.monotonic()
            try:
                if wait <= 0:
                    reply = self._socket.recv(65_536, socket.MSG_DONTWAIT)
                elif left <= 0:
                    raise TimeoutError
                else:
                    self._socket.settimeout(left)
                    try:
                        reply = self._socket.recv(65_536)
                    finally:
                        if self._socket is not None:
                            self._socket.settimeout(None)
            except BlockingIOError:
                return None
            except TimeoutError:
                if wait >= self.reply_timeout:
                    self.stop()  # a helper this slow is not waited for again
                return None
            except OSError:
                self.stop()
                return None
            if len(reply) < REPLY_HEADER.size:
                self.stop()
                return None
            self._unanswered -= 1
            request: int = REPLY_HEADER.unpack_from(reply)[0]
            if request >= self._first_request:
                return request, reply[REPLY_HEADER.size :]
            self._stale -= 1
        return None

    def stop(self) -> None:
        """End the helper; the next search may start another, up to STARTS_MAX in all."""
        for held in (self._socket, self._control):
            if held is not None:
                held.close()
        self._socket = self._control = None
        self._unanswered = self._stale = 0
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None
        self._ready = False

    def _start(self) -> bool:
        if self._starts >= STARTS_MAX or not sys.executable:
            return False
        self._starts += 1
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except (OSError, AttributeError):  # no SOCK_SEQPACKET (macOS): the server screens alone
            return False
        try:
            control, their_control = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError:
            ours.close()
            theirs.close()
            return False
        try:
            self._process = subprocess.Popen(  # fixed argv, no shell
                self._argv_for(theirs.fileno(), their_control.fileno()),
                pass_fds=(theirs.fileno(), their_control.fileno()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env=_helper_environment(),
                start_new_session=True,
            )
        except OSError:
            ours.close()
            control.close()
            return False
        finally:
            theirs.close()
            their_control.close()
        self._socket, self._control = ours, control
        return True


def helper_status(project: Path, timeout: float = 10.0) -> str:
    """Whether searches of `project` get a screening helper, found by starting one for real (for `doctor`)."""
    cores = _usable_cores()
    if cores < 2:
        return "in the server alone: one usable core, where a helper only takes turns with it"
    if runs_code_inside(project):
        return (
            "in the server alone: the helper would load code from inside the project (the server's Python "
            "or its packages are there), which a tool that writes files could change"
        )
    probe = ScreenHelper()
    try:
        if probe.warm(timeout):
            return f"a screening helper process beside the server ({cores} usable cores)"
    finally:
        probe.stop()
    command = f"{sys.executable} -I -S {file_screen.__file__}"
    return f"in the server alone: the screening helper did not start ({command})"


SCREEN_HELPER: Final = ScreenHelper()
"""The server's helper, shared by its searches (one at a time; the others screen alone)."""
