"""Screening a file for a search: reading it as bounded text, and whether the pattern is in it, in the
server or in its screening helper process (`tools/screen_helper.py`), which runs this file alone.

Imports nothing of the package's, only the standard library (and RE2 where a pattern is compiled):
the helper runs this file by its path (`python -I -S -c <bootstrap> <RE2's folder> file_screen.py
<socket> <control socket>`), where the package's own imports would cost it half a second and tens
of MiB at every start. For the same reason `read_at_most`, which the workspace and the tools read
files with, lives here.
"""

from __future__ import annotations

import functools
import os
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "BINARY_SNIFF_BYTES",
    "CANCEL",
    "MATCH",
    "NO_MATCH",
    "READY",
    "REPLY_HEADER",
    "REQUEST_HEADER",
    "SKIPPED",
    "UNREACHED",
    "NotRegularFileError",
    "ScreenQuery",
    "compile_pattern",
    "decode_names",
    "encode_names",
    "open_regular_at",
    "read_at_most",
    "screen_descriptor",
    "screen_file_at",
    "screen_files",
    "serve",
]

# Bytes looked at to tell text from binary, as git does: a NUL among them means binary.
BINARY_SNIFF_BYTES: Final = 8_192
# What read_at_most asks for past fstat's size: a file that grew is read on in pieces this big.
_READ_CHUNK: Final = 65_536
_RE2_MAX_MEMORY: Final = 32 * 1_048_576
# O_NONBLOCK: opening a FIFO for reading must not hang the reader.
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK

# A file's verdict, one byte each, as the helper sends them.
MATCH: Final = b"m"[0]
"""Searched, and the pattern is somewhere in it (maybe only as an empty match past its last line)."""
NO_MATCH: Final = b"n"[0]
"""Searched: no line matches."""
SKIPPED: Final = b"s"[0]
"""Not searched: binary, over the size limit, gone, not a regular file, or not readable."""
UNREACHED: Final = b"u"[0]
"""Not screened: the search's time was up first, or it was cancelled (this file and every one after it)."""

# A request to the helper: its number, the query's flags, the size limit, the pattern's length, and the
# search's deadline on the monotonic clock, which every process of the machine shares (Linux's
# CLOCK_MONOTONIC): requests queued behind slow ones end with their search, not later.
REQUEST_HEADER: Final = struct.Struct("!IBIHd")
REPLY_HEADER: Final = struct.Struct("!I")
CANCEL: Final = struct.Struct("!I")
"""What the server sends on the helper's second socket: the first request number still wanted (the
requests before it are answered UNREACHED from the next file on, a search that stopped early)."""
_CANCEL_CHECK_FILES: Final = 8
READY: Final = b"R"
"""What the helper sends once, when it can take requests."""
_REGEX: Final = 1
_CASE_SENSITIVE: Final = 2


class NotRegularFileError(OSError):
    """What was opened is not a regular file (a FIFO, a device, a folder swapped in)."""


def read_at_most(fd: int, limit: int, size_hint: int) -> bytes:
    """Read a file's bytes from `fd`, stopping one byte past `limit`, so a caller sees it is over.

    `size_hint` is what fstat said: one read takes the whole file, and comes back short at its end;
    only a file that grew since is read on, in chunks. For regular files, whose reads are short
    only at the end. Not `BufferedReader.read(limit + 1)`, which allocates the whole limit
    on every call (a 550-byte file read with a 1 MiB limit: 22 us against 4, measured).
    """
    wanted = min(max(size_hint, 0), limit) + 1
    first = os.read(fd, wanted)
    if len(first) < wanted:
        # A regular file reads short only at its end: no second read to confirm it (a syscall a file).
        return first
    chunks, received = [first], len(first)
    while received <= limit:
        more = os.read(fd, min(limit + 1 - received, _READ_CHUNK))
        if not more:
            break
        chunks.append(more)
        received += len(more)
    return first if len(chunks) == 1 else b"".join(chunks)


def compile_pattern(pattern: str, *, regex: bool, case_sensitive: bool) -> Any:
    """The compiled RE2 pattern, over bytes, one line at a time.

    Raises:
        ValueError: Not a valid RE2 expression; the message names the problem, not the pattern.
    """
    # Imported here, not with the module: the workspace imports this module for read_at_most alone.
    import re2  # type: ignore[import-untyped]

    options = re2.Options()
    options.log_errors = False
    options.literal = not regex
    options.case_sensitive = case_sensitive
    # No match ever spans a line break, whatever the pattern says (`\s`, `[^a]`).
    options.never_nl = True
    options.max_mem = _RE2_MAX_MEMORY
    # (?m): ^ and $ match at each line's start and end, as in grep.
    source = pattern if not regex else "(?m)" + pattern
    try:
        return re2.compile(source.encode("utf-8", errors="surrogatepass"), options)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else b""
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        # RE2 says "<problem>: <the offending part of the pattern>"; keep the problem only.
        problem = text.split(":", 1)[0].strip() or "invalid pattern"
        raise ValueError(f"pattern is not a valid RE2 regular expression ({problem})") from None


@dataclass(frozen=True, slots=True)
class ScreenQuery:
    """What a search looks for, and in which files: all a screen needs, and all the helper is sent."""

    pattern: str
    regex: bool
    case_sensitive: bool
    file_max_bytes: int
    """Larger files are skipped."""

    def matcher(self) -> Any:
        """The pattern's bytes when it is plain case-sensitive text (a substring test finds what RE2
        would, sooner), else the compiled pattern."""
        if not self.regex and self.case_sensitive:
            return self.pattern.encode("utf-8", errors="surrogatepass")
        return compile_pattern(self.pattern, regex=self.regex, case_sensitive=self.case_sensitive)

    def encode(self, request: int, deadline: float) -> bytes:
        """The request's head: its number, this query and the search's `deadline` (monotonic)."""
        pattern = self.pattern.encode("utf-8", errors="surrogatepass")
        flags = (_REGEX if self.regex else 0) | (_CASE_SENSITIVE if self.case_sensitive else 0)
        return REQUEST_HEADER.pack(request, flags, self.file_max_bytes, len(pattern), deadline) + pattern

    @classmethod
    def decode(cls, message: bytes) -> tuple[int, ScreenQuery, float, bytes]:
        """The request's number, its query, its search's deadline (monotonic), and what follows them.

        Raises:
            ValueError, struct.error: Not a request.
        """
        request, flags, file_max_bytes, length, deadline = REQUEST_HEADER.unpack_from(message)
        start = REQUEST_HEADER.size
        pattern = message[start : start + length].decode("utf-8", errors="surrogatepass")
        query = cls(pattern, bool(flags & _REGEX), bool(flags & _CASE_SENSITIVE), file_max_bytes)
        return request, query, deadline, message[start + length :]


def open_regular_at(folder_fd: int, name: str | bytes) -> tuple[int, int]:
    """Open the entry `name` of an open folder for reading, as a regular file, not through a symlink.

    Returns:
        A read-only descriptor the caller must close, and the file's size.

    Raises:
        NotRegularFileError: It is something else than a regular file.
        OSError: It cannot be opened: gone (FileNotFoundError), a symlink (ELOOP), unreadable.
    """
    fd = os.open(name, _FILE_FLAGS, dir_fd=folder_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFileError("not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def screen_descriptor(fd: int, size: int, matcher: Any, file_max_bytes: int) -> tuple[int, bytes | None]:
    """The verdict on an open regular file of `size` bytes, and its bytes unless SKIPPED."""
    if size > file_max_bytes:
        return SKIPPED, None
    data = read_at_most(fd, file_max_bytes, size)
    if len(data) > file_max_bytes or b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return SKIPPED, None
    found = matcher in data if isinstance(matcher, bytes) else matcher.search(data) is not None
    return (MATCH if found else NO_MATCH), data


def screen_file_at(
    folder_fd: int, name: str | bytes, matcher: Any, file_max_bytes: int
) -> tuple[int, bytes | None]:
    """`screen_descriptor` on the entry `name` of an open folder; SKIPPED when it cannot be opened."""
    try:
        fd, size = open_regular_at(folder_fd, name)
    except OSError:
        return SKIPPED, None
    try:
        return screen_descriptor(fd, size, matcher, file_max_bytes)
    except OSError:
        return SKIPPED, None
    finally:
        os.close(fd)


def screen_files(
    folders: list[int],
    names: list[tuple[int, bytes]] | list[tuple[int, str]],
    matcher: Any,
    file_max_bytes: int,
    time_up: Callable[[], bool],
    wanted: Callable[[], bool] | None = None,
) -> bytes:
    """A verdict for each file, given by its folder's index in `folders` and its name: UNREACHED for
    the first file found unscreened when `time_up` says the search's time is up, or that `wanted`
    (asked every few files) says no one waits for any more, and every one after it."""
    verdicts = bytearray()
    for index, name in names:
        cancelled = wanted is not None and len(verdicts) % _CANCEL_CHECK_FILES == 0 and not wanted()
        if cancelled or time_up():
            verdicts += bytes((UNREACHED,)) * (len(names) - len(verdicts))
            break
        verdicts.append(screen_file_at(folders[index], name, matcher, file_max_bytes)[0])
    return bytes(verdicts)


def encode_names(names: list[tuple[int, str]]) -> bytes:
    """A request's files: each its folder's index among the request's descriptors, and its name.

    One byte of index, from 1 (never NUL), then the name's bytes; NUL between files, which no name holds.
    """
    return b"\0".join(bytes((index + 1,)) + os.fsencode(name) for index, name in names)


def decode_names(payload: bytes) -> list[tuple[int, bytes]]:
    return [(item[0] - 1, item[1:]) for item in payload.split(b"\0")] if payload else []


def _passed(deadline: float) -> bool:
    return time.monotonic() > deadline


class _Cancels:
    """The CANCEL numbers the server sent, the latest kept."""

    def __init__(self, control: socket.socket) -> None:
        control.setblocking(False)
        self._control = control
        self._wanted_from = 0

    def wants(self, request: int) -> bool:
        """Someone still waits for `request`'s verdicts.

        Raises:
            struct.error: The server closed the socket (an empty message): the helper ends.
        """
        while True:
            try:
                (self._wanted_from,) = CANCEL.unpack(self._control.recv(CANCEL.size))
            except BlockingIOError:
                return request >= self._wanted_from


def serve(connection: socket.socket, control: socket.socket) -> None:
    """Answer screening requests until the server closes its end: the helper process's whole work.

    Each request is one message (a SOCK_SEQPACKET socket keeps them whole) with the open folders'
    descriptors; each reply, the request's number and a verdict a file. It opens nothing but the
    entries of the folders it is sent, and never follows a symlink. `control` brings CANCEL numbers.
    """
    connection.sendall(READY)
    cancels = _Cancels(control)
    matchers: dict[ScreenQuery, Any] = {}
    while True:
        message, folders, _, _ = socket.recv_fds(connection, 1_048_576, 64)
        if not message:
            return
        try:
            request, query, deadline, payload = ScreenQuery.decode(message)
            matcher = matchers.get(query)
            if matcher is None:
                matchers.clear()
                matcher = matchers[query] = query.matcher()
            wanted = functools.partial(cancels.wants, request)
            names = decode_names(payload)
            time_up = functools.partial(_passed, deadline)
            verdicts = screen_files(folders, names, matcher, query.file_max_bytes, time_up, wanted)
        finally:
            for fd in folders:
                os.close(fd)
        connection.sendall(REPLY_HEADER.pack(request) + verdicts)


if __name__ == "__main__":
    # Started as `python -I -S -c <bootstrap> <RE2's folder> <this file> <socket> <control socket>`.
    serve(socket.socket(fileno=int(sys.argv[1])), socket.socket(fileno=int(sys.argv[2])))
