"""The MCP server: the only module that speaks MCP for oct's own tools (stdio, both protocol eras)."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import stat
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, Protocol, cast

import anyio
import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from oct_mcp import __version__
from oct_mcp.app import App, CallFailure, run_call
from oct_mcp.consent import (
    CONSENT_META_KEY,
    CONSENT_STATE_TTL_SECONDS,
    SESSION_GRANT_FIELD,
    Consent,
    SessionGrants,
    UsedConsents,
    consent_form_schema,
    unmistakable_output,
)
from oct_mcp.context import CallContext, ClientInfo, ConsentRequest, Outcome, ProgressReporter
from oct_mcp.diagnostics import get_logger
from oct_mcp.preview import TargetState
from oct_mcp.redaction import redact, redact_value
from oct_mcp.spec import ToolSpec

__all__ = [
    "CONSENT_INPUT_KEY",
    "RequestFacts",
    "build_server",
    "call_with_consent",
    "client_info",
    "compact_schema",
    "consent_from_retry",
    "elicit_consent",
    "input_required",
    "progress_reporter",
    "serve_stdio",
    "to_call_tool_result",
]

SERVER_NAME: Final = "oct-mcp"
MAX_RESULT_META_KEY: Final = "anthropic/maxResultSizeChars"
CONSENT_INPUT_KEY: Final = "oct_consent"
_STDIN_CHUNK: Final = 65_536
MAX_MESSAGE_BYTES: Final = 64 * 1_048_576
"""A longer line is not read into memory: it is dropped with a parse error."""

_CONTENT_BLOCK: Final = TypeAdapter(types.ContentBlock)
_log = get_logger(__name__)
INSTRUCTIONS: Final = (
    "oct-mcp runs this project's developer tools behind security layers. Paths are relative to the "
    "project root; tools refuse paths outside it. Errors start with a stable code in brackets."
)


class RequestFacts(Protocol):
    """What the consent and progress helpers read of a request: the SDK's context and FastMCP's have it."""

    @property
    def session(self) -> Any: ...

    @property
    def request_id(self) -> Any: ...

    @property
    def meta(self) -> Any: ...

    @property
    def protocol_version(self) -> str | None: ...


def _tool_listing(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=compact_schema(spec.params.model_json_schema()),
        output_schema=compact_schema(spec.output.model_json_schema()) if spec.output is not None else None,
        annotations=types.ToolAnnotations.model_validate(spec.annotations),
        # Claude Code saves a larger result to a file and shows the model its path instead.
        meta={MAX_RESULT_META_KEY: spec.max_result_chars} if spec.max_result_chars is not None else None,
    )


def compact_schema(schema: Any) -> Any:
    """A JSON schema without pydantic's generated titles, which repeat each property's name.

    tools/list is in every turn of a model's context; the titles are a fifth of it.
    """
    if isinstance(schema, dict):
        # A "title" whose value is a string is a schema's title; under "properties" a field named
        # title maps to a schema, and stays.
        return {
            key: compact_schema(value)
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    return schema


def client_info(ctx: RequestFacts, transport: str, client_id: str | None = None) -> ClientInfo:
    client_params = getattr(ctx.session, "client_params", None)
    implementation = getattr(client_params, "client_info", None)
    capabilities = getattr(client_params, "capabilities", None)
    return ClientInfo(
        # One stdio server serves exactly one client, an in-memory one one caller; over HTTP the token
        # names it; an embedding host names its own sessions.
        client_id=client_id or _client_id(transport),
        transport=transport,
        name=getattr(implementation, "name", None),
        version=getattr(implementation, "version", None),
        protocol_version=ctx.protocol_version,
        can_elicit=getattr(capabilities, "elicitation", None) is not None,
    )


def _client_id(transport: str) -> str:
    """A stdio server serves one client, an in-memory one one caller; over HTTP, the token names it."""
    token = get_access_token()
    return transport if token is None else f"{transport}:{token.client_id}"


def to_call_tool_result(outcome: Outcome | CallFailure) -> types.CallToolResult:
    """The MCP form of what the chain answered."""
    if isinstance(outcome, CallFailure):
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"[{outcome.code}] {outcome.message}")],
            is_error=True,
        )
    if isinstance(outcome, ConsentRequest):
        # The seed's sentinel. Marked as an error: the tool did not run, and a tool with an output
        # schema owes structured content on every result that is not one. The `_meta` entry says
        # so structurally, where no tool's output can reach.
        consent = {
            "tool": outcome.tool,
            "digest": outcome.digest,
            "human_required": outcome.human_required,
            "preview_digest": None if outcome.preview is None else outcome.preview.digest(),
        }
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.message)],
            is_error=True,
            meta={CONSENT_META_KEY: consent},
        )
    text = types.TextContent(type="text", text=unmistakable_output(outcome.text))
    return types.CallToolResult(
        content=[text, *map(_CONTENT_BLOCK.validate_python, outcome.passthrough_content)],
        # A client checks structured content against the output schema: an error result carries none.
        structured_content=None if outcome.is_error else dict(outcome.structured or {}) or None,
        is_error=outcome.is_error,
    )


def build_server(
    app: App, *, transport: str = "stdio", sealing: RequestStateSecurity | None = None
) -> Server[Any]:
    """An SDK low-level Server whose tools/list and tools/call go through `app`'s chain.

    Args:
        app: The built application.
        transport: How clients reach this server (`stdio`, `memory`, `http`); identifies the client.
        sealing: How consent rounds' request state is sealed; None: a key of this process's own.
    """
    listing = types.ListToolsResult(tools=[_tool_listing(spec) for spec in app.visible_tools()])
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


async def call_with_consent(
    app: App,
    params: types.CallToolRequestParams,
    request: RequestFacts,
    transport: str,
    *,
    forward: Callable[[CallContext], Awaitable[Outcome]] | None = None,
    client_id: str | None = None,
    session_grants: SessionGrants | None = None,
) -> types.CallToolResult | types.InputRequiredResult:
    """Run a tools/call through the chain, asking the human through the client where consent is due.

    On 2026-07-28 the question goes back as an InputRequiredResult (no server-to-client requests
    there); on the handshake era it is an elicitation during the call, after which the chain runs
    again with the answer; a client that cannot ask gets the seed's sentinel.

    Args:
        app: The built application.
        params: The call as the client sent it, retry fields included.
        request: The SDK's (or FastMCP's) request context.
        transport: How the client reached the server, to identify it.
        forward: An embedding host's own handler, the chain's endpoint.
        client_id: Who the caller is, where a transport serves many (an embedding host's
            sessions); the transport's name otherwise.
        session_grants: What the human allowed for the rest of this client session; None where the
            transport cannot tell one client session from another (no grant is offered then).
    """
    client = client_info(request, transport, client_id)
    arguments = params.arguments or {}
    progress = progress_reporter(request)
    consent = consent_from_retry(params, app.used_consents)
    outcome = await run_call(
        app,
        params.name,
        arguments,
        client,
        consent=consent,
        progress=progress,
        forward=forward,
        session_grants=session_grants,
    )
    if not (isinstance(outcome, ConsentRequest) and client.can_elicit):
        return to_call_tool_result(outcome)
    if request.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return input_required(outcome)
    consent = await elicit_consent(request, outcome)
    outcome = await run_call(
        app,
        params.name,
        arguments,
        client,
        consent=consent,
        progress=progress,
        forward=forward,
        session_grants=session_grants,
    )
    return to_call_tool_result(outcome)


def progress_reporter(ctx: RequestFacts) -> ProgressReporter | None:
    """Progress notifications for this request, if the client sent a progress token."""
    meta = ctx.meta or {}
    # The SDK's typed meta says progress_token; a raw _meta block (FastMCP's) says progressToken.
    token = meta.get("progress_token", meta.get("progressToken"))
    if not isinstance(token, str | int):
        return None

    async def report(progress: float, total: float | None, message: str | None) -> None:
        # A message is read from the tool's output, which passes no layer before the call ends.
        shown = None if message is None else redact(message)[0]
        await ctx.session.send_progress_notification(
            token, progress, total, shown, related_request_id=str(ctx.request_id)
        )

    return report


def input_required(request: ConsentRequest) -> types.InputRequiredResult:
    form = types.ElicitRequestFormParams(
        message=request.question or request.message,
        requested_schema=consent_form_schema(request.tool, request.grant_folders),
    )
    # Our own binding inside the sealed state: the gate accepts the answer only for this tool and digest,
    # and the sandbox runs it only on the target contents the preview was made from.
    # The nonce makes the answer single use (UsedConsents); the expiry says how long to remember it.
    preview = request.preview
    state = json.dumps(
        {
            "v": 3,
            "tool": request.tool,
            "digest": request.digest,
            "nonce": secrets.token_hex(16),
            "expires": time.time() + CONSENT_STATE_TTL_SECONDS,
            "preview": None if preview is None else preview.digest(),
            "targets": None if preview is None else [[t.path, t.digest] for t in preview.targets],
            "grant": list(request.grant_folders),
        }
    )
    return types.InputRequiredResult(
        input_requests={CONSENT_INPUT_KEY: types.ElicitRequest(params=form)}, request_state=state
    )


def consent_from_retry(params: types.CallToolRequestParams, used: UsedConsents) -> Consent | None:
    """The human's answer carried by a 2026-07-28 retry, bound to what our sealed state names.

    A state answered before (its nonce in `used`) gives a consent marked `replayed`, which the
    safety gate refuses.
    """
    answer = (params.input_responses or {}).get(CONSENT_INPUT_KEY)
    if answer is None or params.request_state is None or not isinstance(answer, types.ElicitResult):
        return None
    try:
        state = json.loads(params.request_state)
    except ValueError:
        return None
    if not isinstance(state, dict) or state.get("v") != 3:
        return None
    nonce, expires = state.get("nonce"), state.get("expires")
    if not isinstance(nonce, str) or not isinstance(expires, int | float):
        return None
    targets = _targets_of(state.get("targets"))
    offered = tuple(str(folder) for folder in state.get("grant") or ())
    preview = state.get("preview")
    return Consent(
        tool=str(state.get("tool")),
        digest=str(state.get("digest")),
        approved=_approves(answer),
        replayed=not used.claim(nonce, float(expires)),
        targets=targets,
        preview_digest=preview if isinstance(preview, str) else None,
        grant_folders=offered if _grants_session(answer) else (),
    )


def _targets_of(raw: object) -> tuple[TargetState, ...] | None:
    if not isinstance(raw, list):
        return None
    return tuple(
        TargetState(path=str(item[0]), digest=str(item[1])) for item in raw if isinstance(item, list)
    )


async def elicit_consent(ctx: RequestFacts, request: ConsentRequest) -> Consent:
    """Ask the human through a handshake-era client's elicitation, during the call."""
    preview = request.preview
    targets = None if preview is None else preview.targets
    preview_digest = None if preview is None else preview.digest()
    try:
        answer = await ctx.session.elicit_form(
            request.question or request.message,
            consent_form_schema(request.tool, request.grant_folders),
            related_request_id=ctx.request_id,
        )
    except MCPError as exc:
        # No answer is a no: nothing runs without one. (NoBackChannelError is an MCPError.)
        _log.warning("consent_elicitation_failed", tool=request.tool, problem=type(exc).__name__)
        return Consent(tool=request.tool, digest=request.digest, approved=False)
    return Consent(
        tool=request.tool,
        digest=request.digest,
        approved=_approves(answer),
        targets=targets,
        preview_digest=preview_digest,
        grant_folders=request.grant_folders if _grants_session(answer) else (),
    )


def _approves(answer: types.ElicitResult) -> bool:
    return answer.action == "accept" and (answer.content or {}).get("approve") is True


def _grants_session(answer: types.ElicitResult) -> bool:
    return _approves(answer) and (answer.content or {}).get(SESSION_GRANT_FIELD) is True


async def serve_stdio(app: App) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes stdin, or SIGTERM/SIGINT.

    A signal cancels every call in flight: each kills its process tree on the way out
    (the runner's cancellation path), and the server returns normally.
    """
    server = build_server(app, transport="stdio")
    async with anyio.create_task_group() as tasks:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
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
                    read_stream, _MaskedErrors(write_stream), server.create_initialization_options()
                )
        tasks.cancel_scope.cancel()


class _MaskedErrors:
    """The SDK's write stream, with each JSON-RPC error's message and data masked.

    The SDK answers some requests itself, before any layer sees them: an unknown method comes
    back with the method's name as `data`. Whatever the client put there, its secrets stay masked.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCError):
            error = message.error
            data, _count = redact_value(error.data)
            masked = error.model_copy(update={"message": redact(error.message)[0], "data": data})
            item = SessionMessage(
                message=message.model_copy(update={"error": masked}), metadata=item.metadata
            )
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _MaskedErrors:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return cast("bool | None", await self._inner.__aexit__(*exc_info))


class _StdinLines:
    """Lines of stdin for the SDK's stdio transport: read without a thread, answered when malformed.

    Without a thread, a shutdown can cancel the read (the SDK's thread waits for the
    client's next line). A line that is not a JSON-RPC message gets the error the
    JSON-RPC spec asks for (-32700 parse error, -32600 invalid request, with the id
    when one can be read) instead of silence; a line longer than the limit is dropped
    whole with a parse error, so memory stays bounded.
    """

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
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
    """Our own stdin reader where stdin is a pipe or socket (what MCP clients give); else the SDK's."""
    return _StdinLines(0) if _is_pipe_or_socket(0) else None


def _is_pipe_or_socket(fd: int) -> bool:
    """What the event loop can wait on (epoll refuses regular files), and what MCP clients give."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
