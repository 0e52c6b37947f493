"""One MCP tools/call through the chain, as server.py and embed/ both run it: who is calling, the
consent round the client's protocol era allows (an InputRequiredResult, an elicitation, or the
seed's sentinel), and the MCP result of what the chain answered."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter

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
from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import OctError
from oct_mcp.middleware.audit import audit_record
from oct_mcp.preview import TargetState
from oct_mcp.redaction import redact
from oct_mcp.telemetry import CallFacts, call_span, span
from oct_mcp.transports.scopes import LiveScopes
from oct_mcp.types import CallContext, ClientInfo, ConsentRequest, Outcome, ProgressReporter

__all__ = [
    "CONSENT_INPUT_KEY",
    "RequestFacts",
    "audit_refusal",
    "call_with_consent",
    "client_id_of",
    "client_info",
    "consent_from_retry",
    "elicit_consent",
    "input_required",
    "progress_reporter",
    "to_call_tool_result",
]

CONSENT_INPUT_KEY: Final = "oct_consent"
_CONTENT_BLOCK: Final = TypeAdapter(types.ContentBlock)
_log = get_logger(__name__)


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


def client_info(ctx: RequestFacts, transport: str, client_id: str | None = None) -> ClientInfo:
    client_params = getattr(ctx.session, "client_params", None)
    implementation = getattr(client_params, "client_info", None)
    capabilities = getattr(client_params, "capabilities", None)
    return ClientInfo(
        # One stdio server serves exactly one client, an in-memory one one caller; over HTTP the token
        # names it; an embedding host names its own sessions.
        client_id=client_id or _client_id(transport),
        application=None if client_id else _application(),
        transport=transport,
        name=getattr(implementation, "name", None),
        version=getattr(implementation, "version", None),
        protocol_version=ctx.protocol_version,
        can_elicit=getattr(capabilities, "elicitation", None) is not None,
    )


def _client_id(transport: str) -> str:
    """A stdio server serves one client, an in-memory one one caller; over HTTP, the token names it.

    An OAuth token (`JwtVerifier`) names a person and the application they use: the person is the
    client, so two people signed in to one host application are two clients (`oauth:` keeps a
    person apart from a bearer token of the same name); the application is recorded beside.
    """
    token = get_access_token()
    return transport if token is None else client_id_of(token, transport)


def client_id_of(token: AccessToken, transport: str) -> str:
    """The client an authenticated request is: the person for OAuth, the token's name otherwise."""
    if _is_oauth(token) and token.subject:
        return f"{transport}:oauth:{token.subject}"
    return f"{transport}:{token.client_id}"


def _application() -> str | None:
    token = get_access_token()
    return token.client_id if token is not None and _is_oauth(token) else None


def _is_oauth(token: AccessToken) -> bool:
    return bool((token.claims or {}).get("iss"))


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


async def call_with_consent(
    app: App,
    params: types.CallToolRequestParams,
    request: RequestFacts,
    transport: str,
    *,
    forward: Callable[[CallContext], Awaitable[Outcome]] | None = None,
    client_id: str | None = None,
    session_grants: SessionGrants | None = None,
    scopes: LiveScopes | None = None,
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
        scopes: The tools each token scope grants (HTTP with `http_scopes`): a call its token's
            scopes do not grant is refused `[forbidden]` and audited before the chain runs.
    """
    client = client_info(request, transport, client_id)
    if scopes is not None:
        token = get_access_token()
        held = list(token.scopes) if token is not None else []
        if not scopes.allows(held, app.catalog.get(params.name)):
            error = scopes.refusal(params.name, held)
            await audit_refusal(app, client, params.name, error, params.arguments or {})
            return to_call_tool_result(CallFailure(code=error.code, message=error.message))
    facts = CallFacts(
        tool=params.name if params.name in app.catalog else None,
        transport=transport,
        request_id=request.request_id,
        session_id=_session_header(request),
        protocol_version=request.protocol_version,
        meta=_meta_of(params),
    )
    with call_span(facts):
        return await _call_with_consent(app, params, request, client, forward, session_grants)


async def _call_with_consent(
    app: App,
    params: types.CallToolRequestParams,
    request: RequestFacts,
    client: ClientInfo,
    forward: Callable[[CallContext], Awaitable[Outcome]] | None,
    session_grants: SessionGrants | None,
) -> types.CallToolResult | types.InputRequiredResult:
    arguments = params.arguments or {}
    progress = progress_reporter(request)

    async def run_chain(consent: Consent | None) -> Outcome | CallFailure:
        return await run_call(
            app,
            params.name,
            arguments,
            client,
            consent=consent,
            progress=progress,
            forward=forward,
            session_grants=session_grants,
        )

    outcome = await run_chain(consent_from_retry(params, app.used_consents))
    if not (isinstance(outcome, ConsentRequest) and client.can_elicit):
        return to_call_tool_result(outcome)
    if request.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return input_required(outcome)
    return to_call_tool_result(await run_chain(await elicit_consent(request, outcome)))


async def audit_refusal(
    app: App, client: ClientInfo, tool: str, error: OctError, arguments: Mapping[str, Any]
) -> None:
    """Record a call refused before the chain ran, as the audit layer records a refusal."""
    if app.audit is None or "audit" not in app.chain.layer_names:
        return
    call = CallContext(tool=tool, arguments=arguments, client=client, call_id=secrets.token_hex(16))
    await app.audit.record(audit_record(call, None, error, duration=0.0, profile=app.profile.name))


def _session_header(request: RequestFacts) -> str | None:
    headers = getattr(getattr(request, "request", None), "headers", None)
    return None if headers is None else headers.get("mcp-session-id")


def _meta_of(params: types.CallToolRequestParams) -> Mapping[str, Any] | None:
    meta = params.meta
    if meta is None:
        return None
    return meta.model_dump(by_alias=True) if isinstance(meta, BaseModel) else dict(meta)


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
        with span("oct.consent.wait", {"gen_ai.tool.name": request.tool}):
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
