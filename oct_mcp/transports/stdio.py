"""MCP over this process's stdin and stdout: the server the hosts start, both protocol eras."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, cast

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from oct_mcp.diagnostics import get_logger
from oct_mcp.stopping import STOP_SIGNALS
from oct_mcp.transports.binding import ArrivingEndpoint, Endpoint, server_for
from oct_mcp.transports.error_masking import MaskedErrorStream

__all__ = ["MAX_MESSAGE_BYTES", "serve_stdio"]

_STDIN_CHUNK: Final = 65_536
MAX_MESSAGE_BYTES: Final = 64 * 1_048_576
"""A longer line is not read into memory: it is dropped with a parse error."""

_log = get_logger(__name__)


async def serve_stdio(build: Callable[[], Endpoint | None]) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes stdin, or SIGTERM/SIGINT/SIGHUP.

    `build` makes the endpoint (the app, then `transports.endpoint.AppEndpoint`). It runs on a
    worker thread while the SDK answers the host's `initialize`, so the host hears back once the SDK
    is loaded, where importing and building the chain took about 300 ms more; tools requests wait
    for it. When it returns None (it has said why), the server ends.

    A signal cancels every call in flight: each kills its process tree on the way out
    (the runner's cancellation path), and the server returns normally.
    """
    coming = ArrivingEndpoint()
    server = server_for(coming)
    async with anyio.create_task_group() as tasks:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async for signum in signals:
                    _log.info("shutting_down", signal=signal.Signals(signum).name)
                    tasks.cancel_scope.cancel()
                    return

        async def arrive() -> None:
            endpoint = await anyio.to_thread.run_sync(build)
            if endpoint is None:
                tasks.cancel_scope.cancel()
                return
            coming.arrive(endpoint)

        tasks.start_soon(stop_on_signal)
        tasks.start_soon(arrive)
        stdin = _cancellable_stdin()
        with _claimed_stdout() as stdout:
            # The SDK only iterates its stdin for lines and awaits write and flush on its stdout:
            # _StdinLines and _StdoutWriter are that much of an AsyncFile each.
            async with stdio_server(stdin=cast(Any, stdin), stdout=cast(Any, stdout)) as (
                read_stream,
                write_stream,
            ):
                if stdin is not None:

                    async def reply(error: types.JSONRPCError) -> None:
                        await write_stream.send(SessionMessage(error))

                    stdin.reply = reply
                await server.run(
                    read_stream, MaskedErrorStream(write_stream), server.create_initialization_options()
                )
        tasks.cancel_scope.cancel()


class _StdinLines:
    """Lines of stdin for the SDK's stdio transport: read without a thread, answered when malformed.

    Without a thread, a shutdown can cancel the read (the SDK's thread waits for the
    client's next line). A line that is not a JSON-RPC message gets the error the
    JSON-RPC spec asks for (-32700 parse error, -32600 invalid request, with the id
    when one can be read) instead of silence; a line longer than the limit is dropped
    whole with a parse error, so memory stays bounded.
    """

    def __init__(self, fd: int, *, terminal: bool = False) -> None:
        if not terminal:
            os.set_blocking(fd, False)
        # A terminal stays blocking: the flag is the terminal's, shared with the shell that gets it
        # back. In canonical mode it is readable only with a whole line (or an end) to read.
        self._fd = fd
        self._buffer = bytearray()
        self._eof = False
        self._oversized = False
        self.reply: Callable[[types.JSONRPCError], Awaitable[None]] | None = None

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._next_line()
            if line is None:
                raise StopAsyncIteration
            error = None if line.strip() == b"" else _malformed(line)
            if error is None:
                if line.strip():
                    return line.decode("utf-8", errors="replace")
                continue
            if self.reply is not None:
                await self.reply(error)

    async def _next_line(self) -> bytes | None:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                if self._oversized:
                    self._oversized = False
                    return b"\x00"  # not JSON: answered with a parse error
                return line
            if len(self._buffer) > MAX_MESSAGE_BYTES:
                self._oversized = True
                self._buffer.clear()
            if self._eof:
                line, self._buffer = bytes(self._buffer), bytearray()
                return line or None
            await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, _STDIN_CHUNK)
            except BlockingIOError:
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


class _StdoutWriter:
    """Messages to the client, written to a non-blocking pipe from the event loop, without a thread.

    The SDK's own writer hands each message's write and flush to a worker thread: two hops, 77 us
    a message (measured on a bare SDK server over stdio: 757 against 680 us a call), and a thread
    stuck for good when a client stops reading. Here a full pipe is awaited, so a shutdown can
    cancel the wait.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> None:
        # "replace": a lone surrogate must not end the writer (and the server) with an encoding error.
        data = memoryview(text.encode("utf-8", errors="replace"))
        while data:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            data = data[written:]

    async def flush(self) -> None:
        """Nothing is buffered: each write reached the pipe."""


@contextmanager
def _claimed_stdout() -> Iterator[_StdoutWriter | None]:
    """The protocol's own copy of stdout, and fd 1 pointed at stderr while serving.

    As the SDK does when it writes stdout itself: a library or a child that prints to fd 1 must
    not put a stray line into the protocol stream. Where stdout is not a pipe or a socket (what
    MCP clients give), None: the SDK's writer, which works with any file.
    """
    if not _is_pipe_or_socket(1):
        yield None
        return
    private = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        os.dup2(2, 1)
        os.set_blocking(private, False)
        yield _StdoutWriter(private)
    finally:
        os.set_blocking(private, True)
        os.dup2(private, 1)
        os.close(private)


def _malformed(line: bytes) -> types.JSONRPCError | None:
    """The JSON-RPC error a line deserves, or None when it is a message the SDK can take."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line)
    except ValueError:
        pass
    else:
        # The SDK reads a request whose id is null or not a string or integer as a notification,
        # which nobody answers; MCP says such a request is invalid. Only such lines pay a second parse.
        if not (isinstance(message, types.JSONRPCNotification) and b'"id"' in line):
            return None
    try:
        document = json.loads(line)
    except (ValueError, RecursionError):
        return types.JSONRPCError(
            jsonrpc="2.0", id=None, error=types.ErrorData(code=-32700, message="Parse error")
        )
    ident = document.get("id") if isinstance(document, dict) else None
    if (
        isinstance(document, dict)
        and "method" not in document
        and ("result" in document or "error" in document)
    ):
        return None  # a response, however malformed: nothing to answer
    if isinstance(document, dict) and "method" in document and "id" not in document:
        return None  # a malformed notification: nobody is waiting for an answer; the SDK drops it
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        ident = None
    return types.JSONRPCError(
        jsonrpc="2.0", id=ident, error=types.ErrorData(code=-32600, message="Invalid Request")
    )


def _cancellable_stdin() -> _StdinLines | None:
    """Our own stdin reader where stdin is a pipe or socket (what MCP clients give) or a terminal (a
    person trying the server, whose Ctrl-C must stop it); else the SDK's."""
    if _is_pipe_or_socket(0):
        return _StdinLines(0)
    if os.isatty(0):
        return _StdinLines(0, terminal=True)
    return None


def _is_pipe_or_socket(fd: int) -> bool:
    """What the event loop can wait on (epoll refuses regular files), and what MCP clients give."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
