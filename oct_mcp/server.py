"""The MCP server: the only module that speaks MCP for oct's own tools (stdio, both protocol eras)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Final, cast

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from oct_mcp import __version__
from oct_mcp.app import App
from oct_mcp.consent import CONSENT_STATE_TTL_SECONDS, SessionGrants, with_confirm_argument
from oct_mcp.diagnostics import get_logger
from oct_mcp.spec import ToolSpec
from oct_mcp.stopping import STOP_SIGNALS
from oct_mcp.transports.consent_adapter import call_with_consent
from oct_mcp.transports.error_masking import MaskedErrorStream

__all__ = [
    "SERVER_NAME",
    "build_server",
    "compact_schema",
    "listed_annotations",
    "listed_input_schema",
    "listed_output_schema",
    "serve_stdio",
]

SERVER_NAME: Final = "oct-mcp"
MAX_RESULT_META_KEY: Final = "anthropic/maxResultSizeChars"
_STDIN_CHUNK: Final = 65_536
MAX_MESSAGE_BYTES: Final = 64 * 1_048_576
"""A longer line is not read into memory: it is dropped with a parse error."""

_log = get_logger(__name__)
INSTRUCTIONS: Final = (
    "oct-mcp runs this project's developer tools behind security layers. Paths are relative to the "
    "project root; tools refuse paths outside it. Errors start with a stable code in brackets. Prefer "
    "these tools to shell commands: their runs are sandboxed and audited, git without hooks or network."
)


def _tool_listing(spec: ToolSpec, *, takes_confirm: bool) -> types.Tool:
    """How tools/list shows `spec`; with the chain's `confirm` where a call of it may need consent."""
    input_schema = listed_input_schema(spec.params.model_json_schema())
    if takes_confirm:
        input_schema = with_confirm_argument(input_schema)
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=input_schema,
        output_schema=listed_output_schema(spec.output.model_json_schema())
        if spec.output is not None
        else None,
        annotations=types.ToolAnnotations.model_validate(listed_annotations(spec.annotations)),
        # Claude Code saves a larger result to a file and shows the model its path instead.
        meta={MAX_RESULT_META_KEY: spec.max_result_chars} if spec.max_result_chars is not None else None,
    )


def listed_annotations(annotations: Mapping[str, Any]) -> dict[str, Any]:
    """`annotations` without the hints a client reads the same when they are absent.

    The title is listed once, here, where clients of both protocol eras look for it (a newer
    client reads a tool's `title`, then this one). A hint equal to the protocol's default
    (destructive, not idempotent, open world), or that the protocol reads only of a tool that
    is not read-only (destructiveHint, idempotentHint), goes: it costs every turn and says nothing.
    """
    read_only = annotations.get("readOnlyHint") is True
    listed = dict(annotations)
    for hint, default in _HINT_DEFAULTS.items():
        if hint in listed and (listed[hint] is default or (read_only and hint in _WRITE_HINTS)):
            del listed[hint]
    return listed


_HINT_DEFAULTS: Final[Mapping[str, bool]] = MappingProxyType(
    {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
)
"""MCP's tool annotation defaults: what a client assumes of a hint that is absent."""
_WRITE_HINTS: Final = frozenset({"destructiveHint", "idempotentHint"})
"""Hints MCP says are meaningful only when readOnlyHint is false."""


def listed_output_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """How tools/list shows an output schema: an object with the fields every result carries.

    An output schema is for a client to check results with; the model never reads it, yet
    tools/list carries it into every turn of the host's context (the whole structure was 14,000
    of 55,800 characters). Every result of the tool still passes it (structured content is the
    model's dump: an object with its required fields), a client resolves no `$ref`, and the
    structure itself is the output model's, checked in tests against each tool's real results.
    """
    listed: dict[str, Any] = {"type": "object"}
    required = schema.get("required")
    if isinstance(required, list) and required:
        listed["required"] = list(required)
    return listed


def listed_input_schema(schema: Mapping[str, Any]) -> Any:
    """How tools/list shows an input schema: what a model needs to write a call, compacted.

    Types, enums, required fields, defaults and descriptions stay. Limits (numeric bounds, string
    and list lengths, character patterns) and the closing of the object to other fields go: the
    validator checks the call against the whole model all the same, and refuses what they would
    have refused with `[invalid_arguments]`, naming the limit. So a call the listed schema refuses
    is refused by the server too; the reverse is not kept.
    """
    return _without_limits(compact_schema(schema))


_LIMITS: Final = frozenset(
    {
        "minimum",
        "maximum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "additionalProperties",
    }
)
"""Keywords the listing leaves to the server's validator (`listed_input_schema`)."""


def _without_limits(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_limits(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: (
            {name: _without_limits(value) for name, value in value.items()}
            if key in _SCHEMA_MAPS and isinstance(value, dict)
            else _without_limits(value)
        )
        for key, value in schema.items()
        if key not in _LIMITS
    }


def compact_schema(schema: Any) -> Any:
    """`schema` in fewer characters, accepting the same values.

    tools/list is in every turn of a model's context. Pydantic's generated titles repeat each
    property's name; an optional field's `anyOf` of a type and null is one `type` list; a default
    of null, false or 0 (what an absent field means to anyone) goes; a definition used once is
    written where it is used, so neither the model nor a client follows a `$ref` for it.
    """
    return _compacted(_inline_single_use(schema))


def _compacted(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_compacted(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    # A "title" whose value is a string is a schema's title; under "properties" a field named
    # title maps to a schema, and stays. So does a property named "default".
    compacted = {
        key: (
            {name: _compacted(value) for name, value in value.items()}
            if key in _SCHEMA_MAPS and isinstance(value, dict)
            else _compacted(value)
        )
        for key, value in schema.items()
        if not (key == "title" and isinstance(value, str)) and not (key == "default" and _means_absent(value))
    }
    return _merged_optional(compacted)


def _means_absent(default: Any) -> bool:
    """Whether a default is what an absent field means to anyone: null, false, 0 (an offset, no context)."""
    return default is None or default is False or (type(default) is int and default == 0)


_SCHEMA_MAPS: Final = frozenset({"properties", "$defs", "patternProperties"})
"""Keys whose value maps names to schemas: a name there is not a keyword."""


def _merged_optional(schema: dict[str, Any]) -> dict[str, Any]:
    """`{"anyOf": [{"type": T, ...}, {"type": "null"}], ...}` as `{"type": [T, "null"], ...}`."""
    choices = schema.get("anyOf")
    if not isinstance(choices, list) or len(choices) != 2 or {"type": "null"} not in choices:
        return schema
    (other,) = [choice for choice in choices if choice != {"type": "null"}]
    if not isinstance(other.get("type"), str) or set(other) & set(schema):
        return schema
    merged = {key: value for key, value in schema.items() if key != "anyOf"}
    merged.update(other)
    merged["type"] = [other["type"], "null"]
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    if "const" in merged:
        merged["enum"] = [merged.pop("const"), None]
    return merged


def _inline_single_use(schema: Any) -> Any:
    """`schema` with each `$defs` entry that one `$ref` names written in its place."""
    if not isinstance(schema, dict) or not isinstance(schema.get("$defs"), dict):
        return schema
    definitions: dict[str, Any] = schema["$defs"]
    uses: dict[str, int] = {}

    def count(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_DEFS):
                uses[ref.removeprefix(_DEFS)] = uses.get(ref.removeprefix(_DEFS), 0) + 1
            for value in node.values():
                count(value)
        elif isinstance(node, list):
            for value in node:
                count(value)

    count(schema)
    # A definition that refers to itself, or is named more than once, stays a definition.
    inlined = {name for name, used in uses.items() if used == 1 and name in definitions}
    inlined -= {name for name in inlined if f"{_DEFS}{name}" in repr(definitions[name])}

    def replace(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if len(node) == 1 and isinstance(ref, str) and ref.removeprefix(_DEFS) in inlined:
                return replace(definitions[ref.removeprefix(_DEFS)])
            return {key: replace(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [replace(value) for value in node]
        return node

    result = replace(schema)
    kept = {name: replace(value) for name, value in definitions.items() if name not in inlined}
    if kept:
        result["$defs"] = kept
    return result


_DEFS: Final = "#/$defs/"


def build_server(
    app: App, *, transport: str = "stdio", sealing: RequestStateSecurity | None = None
) -> Server[Any]:
    """An SDK low-level Server whose tools/list and tools/call go through `app`'s chain.

    Args:
        app: The built application.
        transport: How clients reach this server (`stdio`, `memory`, `http`); identifies the client.
        sealing: How consent rounds' request state is sealed; None: a key of this process's own.
    """
    listing = types.ListToolsResult(
        tools=[
            _tool_listing(spec, takes_confirm=app.chain.takes_confirm(spec)) for spec in app.visible_tools()
        ]
    )
    # stdio and memory servers serve one client session (this process, this server object): what its
    # human allowed for the session lives and dies with it. One HTTP server serves every client, and
    # the SDK's sessions do not reach here, so nothing is offered there.
    grants = None if transport == "http" else SessionGrants()
    # What streamable HTTP checks a call's Mcp-Param headers against, looked up instead of
    # serialising the whole listing on every call (3.8 ms a call, measured).
    schemas = {tool.name: tool.input_schema for tool in listing.tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await call_with_consent(app, params, ctx, transport, session_grants=grants)

    server = Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=schemas.get,
    )
    # Seals the consent round's request state (AES-GCM, bound by the SDK to the tool and its
    # arguments) under a key that lives and dies with this process, unless replicas share one.
    if sealing is None:
        sealing = RequestStateSecurity.ephemeral(ttl=CONSENT_STATE_TTL_SECONDS)
    server.middleware.append(RequestStateBoundary(sealing, default_audience=SERVER_NAME))
    return server


async def serve_stdio(app: App) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes stdin, or SIGTERM/SIGINT/SIGHUP.

    A signal cancels every call in flight: each kills its process tree on the way out
    (the runner's cancellation path), and the server returns normally.
    """
    server = build_server(app, transport="stdio")
    async with anyio.create_task_group() as tasks:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async for signum in signals:
                    _log.info("shutting_down", signal=signal.Signals(signum).name)
                    tasks.cancel_scope.cancel()
                    return

        tasks.start_soon(stop_on_signal)
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
