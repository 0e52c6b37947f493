"""Embedding: oct-mcp's chain around the tools of any MCP server, in one line.

    from oct_mcp.embed import guard
    guard(server)                # an SDK MCPServer or low-level Server

One SDK middleware runs the chain around every `tools/call` of the host's own tools (the
host's handler is the chain's endpoint) and filters `tools/list` by the policy and the pinned
tool definitions (`oct_mcp.embed.pins`). Other requests (resources, prompts, ...) pass untouched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import mcp_types as types
from mcp.server.context import CallNext as SdkCallNext
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from oct_mcp.app import App, CallFailure, build_app
from oct_mcp.consent import with_confirm_argument, without_confirm
from oct_mcp.diagnostics import get_logger
from oct_mcp.embed.pins import ToolPins, default_pin_file, definition_of, digest
from oct_mcp.errors import DryRunUnsupportedError, OctError, PinFileError
from oct_mcp.execution.checkpoints import project_key
from oct_mcp.middleware.audit import audit_record
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.transports.consent_adapter import (
    RequestFacts,
    call_with_consent,
    client_info,
    to_call_tool_result,
)
from oct_mcp.types import CallContext, LayerType, Outcome, ToolResult

__all__ = [
    "BINARY_DROPPED_NOTE",
    "EMBEDDED_PROFILE",
    "ForeignTool",
    "OctGuard",
    "guard",
    "host_arguments",
    "host_result",
    "pins_for",
    "session_client_id",
]

_log = get_logger(__name__)

EMBEDDED_PROFILE: Final = "embedded"
DRY_RUN_FIELD: Final = "dry_run"
_TRANSPORT: Final = "embedded"
BINARY_DROPPED_NOTE: Final = (
    "[oct-mcp: {count} binary content item(s) (image, audio or blob) left out: secrets in them cannot "
    "be masked; the server's guard passes them with keep_binary_content=True]"
)


@dataclass(frozen=True, slots=True)
class ForeignTool:
    """What oct-mcp should know about one of the host's tools, beyond its annotations."""

    risk: Risk | None = None
    """Overrides the risk read from the annotations (readOnlyHint: read; otherwise destructive)."""
    path_arguments: tuple[str, ...] = ()
    """Arguments that are paths: contained inside the project root like oct's own."""


PINS_WITHHELD_ALL: Final = (
    "every tool of this server is withheld: the file that pins its tool definitions cannot be read, or "
    "was changed by hand. The operator fixes or removes it (the server's log names the file and why)"
)
PINS_DEFAULT: Final = "default"
"""`guard(pin_file=...)`: the server's own pin file under `~/.oct-mcp/pins`, per project."""


def pins_for(
    app: App, server_name: str, pin_file: str | Path | None, *, allow_narrowing: bool
) -> ToolPins | None:
    """The pins of the server `server_name` guarded by `app`: None when `pin_file` is None (pinning off)."""
    if pin_file is None:
        return None
    if pin_file == PINS_DEFAULT:
        base = Path.home() / ".oct-mcp" / "pins" / project_key(app.workspace.root)
        path = default_pin_file(base, server_name)
    else:
        path = Path(pin_file).expanduser()
    pins = ToolPins(path, allow_narrowing=allow_narrowing)
    if pins.error is not None:
        _log.error("tool_pins_unusable", path=str(path), problem=pins.error.message)
    else:
        _log.info("tool_pins", path=str(path), pinned=len(pins.pinned_names()))
    return pins


async def audit_refusal(
    app: App, request: RequestFacts, client_id: str, tool: str, error: OctError, arguments: Mapping[str, Any]
) -> None:
    """Record a call refused before the chain ran, as the audit layer records a refusal."""
    if app.audit is None or "audit" not in app.chain.layer_names:
        return
    call = CallContext(
        tool=tool,
        arguments=arguments,
        client=client_info(request, _TRANSPORT, client_id),
        call_id=os.urandom(16).hex(),
    )
    await app.audit.record(audit_record(call, None, error, duration=0.0, profile=app.profile.name))


async def review_pins(
    app: App,
    pins: ToolPins | None,
    listed: Mapping[str, Mapping[str, Any]],
    client_id: str,
) -> frozenset[str]:
    """The listed tools to withhold, their definitions held against the pins; each change audited once.

    Raises:
        PinFileError: The pin file is unusable: withhold every tool.
    """
    if pins is None:
        return frozenset()
    review = pins.review(listed)
    if review.first_seen:
        _log.info("tools_pinned", tools=list(review.first_seen), pin_file=str(pins.path))
    for name in review.newly_changed:
        # For the operator: which file to review and accept it in.
        _log.warning("tool_changed", tool=name, pin_file=str(pins.path))
        if app.audit is not None and "audit" in app.chain.layer_names:
            await app.audit.record(
                {
                    "event": "tool_changed",
                    "tool": name[:200],
                    "client": {"id": client_id, "transport": _TRANSPORT},
                    "sha256": digest(listed[name]),
                }
            )
    return review.withheld


async def refuse_unpinned(
    app: App,
    pins: ToolPins | None,
    withheld: frozenset[str],
    params: types.CallToolRequestParams,
    request: RequestFacts,
    client_id: str,
) -> types.CallToolResult | None:
    """The answer to a call of a withheld tool (audited as a refusal); None when the call may go on."""
    if pins is None:
        return None
    if pins.error is not None:
        error: OctError = PinFileError(PINS_WITHHELD_ALL)
    elif params.name in withheld:
        error = pins.refusal(params.name)
    else:
        return None
    await audit_refusal(app, request, client_id, params.name, error, params.arguments or {})
    return to_call_tool_result(CallFailure(code=error.code, message=error.message))


_OWNERS: OrderedDict[int, tuple[Any, str]] = OrderedDict()
"""id(what stands for a client: its connection or its server run) -> (that object, the client id)."""
_OWNERS_KEPT: Final = 4_096
_OWNER_NUMBERS: Final = itertools.count(1)


def session_client_id(request: RequestFacts) -> str:
    """Who is calling, for the rate limit and the audit: one id per client connection.

    On the handshake era a connection is one client's. On 2026-07-28 each request is its own
    connection: the server run's lifespan state stands for the client instead, which is one
    client's where the SDK runs the server per client (stdio, in memory) and shared where it is
    not (FastMCP): those clients share one window, as callers that cannot be told apart should.
    Over HTTP a stateful session's id stands for its client; stateless requests share one window.
    """
    headers = getattr(getattr(request, "request", None), "headers", None)
    if headers is not None:
        session_id = headers.get("mcp-session-id")
        if not session_id:
            return _TRANSPORT
        # Hashed: the session id lets its holder speak for the session; the audit log must not hold it.
        return f"{_TRANSPORT}-http-{hashlib.sha256(session_id.encode()).hexdigest()[:16]}"
    if request.protocol_version in MODERN_PROTOCOL_VERSIONS:
        owner = getattr(request, "lifespan_context", None)
    else:
        # The SDK's session is made per request; the connection it belongs to is the client's.
        owner = getattr(request.session, "_connection", None)
    if owner is None:
        return _TRANSPORT
    # Held, so that its id is not reused while it names a client; the oldest go past the bound.
    known = _OWNERS.get(id(owner))
    if known is not None and known[0] is owner:
        return known[1]
    client_id = f"{_TRANSPORT}-{next(_OWNER_NUMBERS)}"
    _OWNERS[id(owner)] = (owner, client_id)
    while len(_OWNERS) > _OWNERS_KEPT:
        _OWNERS.popitem(last=False)
    return client_id


def _not_run_here(params: BaseModel, env: ToolEnv) -> InProcessPlan:
    raise RuntimeError("a host's tool runs in the host: the embedded chain has no sandbox layer")


def _risk_from(tool: Mapping[str, Any]) -> Risk:
    # The MCP spec's defaults: a tool is destructive unless it says it only reads.
    annotations = tool.get("annotations") or {}
    return Risk.READ if annotations.get("readOnlyHint") is True else Risk.WRITE


def _foreign_spec(name: str, tool: Mapping[str, Any] | None, declared: ForeignTool | None) -> ToolSpec:
    declared = declared or ForeignTool()
    risk = declared.risk or (_risk_from(tool) if tool is not None else Risk.WRITE)
    fields: dict[str, Any] = dict.fromkeys(declared.path_arguments, (ProjectPath | None, None))
    if _declares_dry_run(tool):
        # The gate then knows the host's tool makes a dry run of its own (`host_arguments`).
        fields[DRY_RUN_FIELD] = (bool | None, None)
    # The host validates its own arguments; ours only contains declared paths (the validator has
    # taken the chain's `confirm` off before).
    params = create_model(
        f"{name.replace('-', '_')}_arguments", __config__=ConfigDict(extra="allow", frozen=True), **fields
    )
    return ToolSpec(
        name=name,
        title=str((tool or {}).get("title") or name),
        description=str((tool or {}).get("description") or ""),
        params=params,
        output=None,
        risk=risk,
        plan=_not_run_here,
        idempotent=risk is Risk.READ,
    )


def _declares_dry_run(tool: Mapping[str, Any] | None) -> bool:
    schema = (tool or {}).get("inputSchema") or {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    declared = properties.get(DRY_RUN_FIELD) if isinstance(properties, Mapping) else None
    return isinstance(declared, Mapping) and declared.get("type") == "boolean"


def _spec_for(
    specs: dict[str, ToolSpec], tools: Mapping[str, ForeignTool], name: str, listed: Mapping[str, Any] | None
) -> ToolSpec:
    """`name` as the chain sees it, kept in `specs`: from its listing when given, else as known so far,
    else destructive (a tool never listed asks before it runs)."""
    if listed is not None or name not in specs:
        specs[name] = _foreign_spec(name, listed, tools.get(name))
    return specs[name]


@dataclass
class OctGuard:
    """The SDK middleware: the chain around the host's `tools/call`, the policy over its `tools/list`."""

    app: App
    specs: dict[str, ToolSpec]
    """The host's tools as the chain sees them: the very dict the app's validator reads."""
    tools: Mapping[str, ForeignTool] = field(default_factory=dict)
    keep_binary_content: bool = False
    """Pass the host's images, audio and blobs on, which the redactor cannot look into."""
    pins: ToolPins | None = None
    """The pinned tool definitions: a changed tool is withheld; None: pinning off."""
    withheld: frozenset[str] = frozenset()
    """The tools the last listing found changed since pinned."""

    def spec_for(self, name: str, listed: Mapping[str, Any] | None = None) -> ToolSpec:
        """The tool as the chain sees it: from its listing when seen, destructive until then."""
        return _spec_for(self.specs, self.tools, name, listed)

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: SdkCallNext) -> HandlerResult:
        if ctx.method == "tools/list":
            return await self._filter_listing(await call_next(ctx), ctx)
        if ctx.method == "tools/call":
            return await self._call(ctx, call_next)
        return await call_next(ctx)

    async def _filter_listing(self, result: HandlerResult, ctx: ServerRequestContext[Any]) -> HandlerResult:
        listing = (
            result.model_dump(by_alias=True, exclude_none=True) if isinstance(result, BaseModel) else result
        )
        if not isinstance(listing, dict) or not isinstance(listing.get("tools"), list):
            return result
        listed = {str(tool.get("name")): definition_of(tool) for tool in listing["tools"]}
        try:
            self.withheld = await review_pins(self.app, self.pins, listed, session_client_id(ctx))
        except PinFileError:
            return {**listing, "tools": []}
        shown = []
        for tool in listing["tools"]:
            if tool.get("name") in self.withheld:
                continue
            spec = self.spec_for(str(tool.get("name")), tool)
            if not self.app.chain.is_visible(spec):
                continue
            if self.app.chain.takes_confirm(spec):
                tool = {**tool, "inputSchema": with_confirm_argument(tool.get("inputSchema") or {})}
            shown.append(tool)
        return {**listing, "tools": shown}

    async def _learn_tools(self, ctx: ServerRequestContext[Any], call_next: SdkCallNext) -> None:
        """Read the host's own listing for the tools' annotations: a client may call before it lists."""
        # The same _meta as the call: on 2026-07-28 it carries the protocol version every request needs.
        params = {"_meta": ctx.params["_meta"]} if ctx.params and "_meta" in ctx.params else {}
        try:
            await self._filter_listing(
                await call_next(dataclasses.replace(ctx, method="tools/list", params=params)), ctx
            )
        except (MCPError, ValidationError):
            return  # no listing: unknown tools stay destructive, which asks before running them

    async def _call(self, ctx: ServerRequestContext[Any], call_next: SdkCallNext) -> HandlerResult:
        raw = dict(ctx.params or {})
        try:
            params = types.CallToolRequestParams.model_validate(raw)
        except ValidationError:
            return await call_next(ctx)  # the SDK answers a malformed call with its own error
        if params.name not in self.specs:
            await self._learn_tools(ctx, call_next)
        refused = await refuse_unpinned(
            self.app, self.pins, self.withheld, params, ctx, session_client_id(ctx)
        )
        if refused is not None:
            return refused
        self.spec_for(params.name)

        async def to_host(chain_ctx: CallContext) -> Outcome:
            host_params = {k: v for k, v in raw.items() if k not in ("inputResponses", "requestState")}
            host_params["arguments"] = host_arguments(chain_ctx)
            answer = await call_next(dataclasses.replace(ctx, params=host_params))
            return _as_tool_result(answer, keep_binary=self.keep_binary_content)

        return await call_with_consent(
            self.app, params, ctx, _TRANSPORT, forward=to_host, client_id=session_client_id(ctx)
        )


def host_arguments(chain_ctx: CallContext) -> dict[str, Any]:
    """The arguments the host's tool is called with: the call's own, without the chain's `confirm`;
    with `dry_run=true` where the gate decided a dry run and the tool's schema has a boolean `dry_run`.

    Raises:
        DryRunUnsupportedError: The gate decided a dry run (`dry_run_default_for_writes`) for a tool
            that may change something. A host's handler has no dry run to be switched to; run for
            real, it would do what the human was told would not happen, and the audit would record
            a dry run.
    """
    arguments = without_confirm(chain_ctx.arguments)
    spec = chain_ctx.spec
    if not chain_ctx.dry_run or (spec is not None and spec.risk is Risk.READ):
        return arguments
    if spec is not None and DRY_RUN_FIELD in spec.params.model_fields:
        return {**arguments, DRY_RUN_FIELD: True}
    raise DryRunUnsupportedError(
        f"{chain_ctx.tool} is the host's own tool, and it has no boolean dry_run argument to make the dry "
        "run this configuration asks for (dry_run_default_for_writes); nothing ran. Set "
        "dry_run_default_for_writes to false in the config so that a confirmed call runs"
    )


def _wire(result: HandlerResult) -> Any:
    """What call_next gave back, as the wire dict (the SDK hands middleware serialized results)."""
    return result.model_dump(by_alias=True, exclude_none=True) if isinstance(result, BaseModel) else result


def _is_binary(item: Mapping[str, Any]) -> bool:
    """An image, audio, or a resource given as a blob: bytes the redactor cannot look into."""
    resource = item.get("resource")
    return item.get("type") in ("image", "audio") or (isinstance(resource, Mapping) and "blob" in resource)


def host_result(
    content: Sequence[Mapping[str, Any]], structured: Any, *, is_error: bool, keep_binary: bool
) -> ToolResult:
    """A host's tool result as the chain's ToolResult: text items joined, other items carried.

    The redactor masks every string the other items hold (a resource's text and URI, names,
    `_meta`); binary items it cannot look into are dropped, with a note, unless `keep_binary`.

    Args:
        content: The result's content items, as wire dicts.
        structured: Its structured content.
        is_error: Whether the host marked it an error.
        keep_binary: The host opted in to pass images, audio and blobs unredacted.
    """
    texts = [str(item.get("text", "")) for item in content if item.get("type") == "text"]
    others = [item for item in content if item.get("type") != "text"]
    carried = tuple(item for item in others if keep_binary or not _is_binary(item))
    if len(carried) < len(others):
        texts.append(BINARY_DROPPED_NOTE.format(count=len(others) - len(carried)))
    return ToolResult(
        text="\n".join(texts),
        structured=structured if isinstance(structured, dict) else None,
        is_error=is_error,
        passthrough_content=carried,
    )


def _as_tool_result(answer: HandlerResult, *, keep_binary: bool) -> ToolResult:
    wire = _wire(answer)
    if not isinstance(wire, dict):
        raise TypeError("the host's tool answered something that is not a tool result")
    content = [item for item in wire.get("content") or [] if isinstance(item, dict)]
    return host_result(
        content, wire.get("structuredContent"), is_error=bool(wire.get("isError")), keep_binary=keep_binary
    )


def _hosted_app(
    project_root: str | Path,
    profile: str,
    config_path: Path | None,
    environ: Mapping[str, str] | None,
    layers: Sequence[LayerType],
) -> tuple[App, dict[str, ToolSpec]]:
    """The chain for a host that runs its own tools, and the catalog its middleware fills.

    Raises:
        ConfigError: The profile does not exist or does not build.
    """
    specs: dict[str, ToolSpec] = {}
    app = build_app(
        project_root,
        profile=profile,
        config_path=config_path,
        environ=environ,
        catalog=specs,
        hosted=True,
        layers=layers,
        telemetry=True,
    )
    return app, specs


def guard(
    server: MCPServer | Server[Any],
    *,
    project_root: str | Path = ".",
    profile: str = EMBEDDED_PROFILE,
    config_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    tools: Mapping[str, ForeignTool] | None = None,
    keep_binary_content: bool = False,
    layers: Sequence[LayerType] = (),
    pin_file: str | Path | None = PINS_DEFAULT,
    allow_narrowing: bool = False,
) -> OctGuard:
    """Put oct-mcp's chain around every tool of `server`.

    Args:
        server: The host, an SDK `MCPServer` or low-level `Server`.
        project_root: The folder declared path arguments must stay inside.
        profile: `embedded` (the default profile without the sandbox: the host runs its
            own tools), or a profile of your config file that ends without a terminal layer.
        config_path: The oct-mcp config file; `~/.oct-mcp/config.json` when None.
        environ: The environment for the config's overrides; `os.environ` when None.
        tools: Per tool: a risk override and which arguments are paths.
        keep_binary_content: Pass the tools' images, audio and blob resources on. Off by default:
            the redactor masks every string a result carries but cannot look into bytes, so
            they are left out, with a note in the text.
        layers: Layer types of your own, which the profile may name (see `build_app`).
        pin_file: Where the tools' definitions are pinned: by default
            `~/.oct-mcp/pins/PROJECT/SERVER.json`; a path of your own; None turns pinning off. A
            tool whose definition changed since first served is withheld until accepted
            (`oct-mcp tools accept NAME --pins FILE`).
        allow_narrowing: A change that only moves annotations toward allowing less (readOnlyHint
            true, destructiveHint or openWorldHint false) is served without acceptance.

    Returns:
        The middleware, already added to the server.

    Raises:
        ConfigError: The profile does not exist or does not build.
    """
    lowlevel = server._lowlevel_server if isinstance(server, MCPServer) else server
    app, specs = _hosted_app(project_root, profile, config_path, environ, layers)
    middleware = OctGuard(
        app=app,
        specs=specs,
        tools=dict(tools or {}),
        keep_binary_content=keep_binary_content,
        pins=pins_for(app, lowlevel.name, pin_file, allow_narrowing=allow_narrowing),
    )
    if not any(isinstance(layer, RequestStateBoundary) for layer in lowlevel.middleware):
        # The consent round on 2026-07-28 carries sealed state; a low-level Server has no boundary.
        lowlevel.middleware.append(
            RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=lowlevel.name)
        )
    lowlevel.middleware.append(middleware)
    return middleware
