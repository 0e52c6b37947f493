"""The SDK guard: oct-mcp's chain as one SDK middleware around an `MCPServer` or low-level `Server`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext as SdkCallNext
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from oct_mcp.app import App
from oct_mcp.consent import with_confirm_argument
from oct_mcp.embed._host import (
    EMBEDDED_PROFILE,
    PINS_DEFAULT,
    TRANSPORT,
    ForeignTool,
    HostExamples,
    host_arguments,
    host_result,
    hosted_app,
    pins_for,
    refuse_unpinned,
    review_pins,
    session_client_id,
    spec_of,
)
from oct_mcp.embed.pins import ToolPins, definition_of
from oct_mcp.errors import PinFileError
from oct_mcp.profiles import Profile
from oct_mcp.spec import ToolSpec
from oct_mcp.transports.consent_adapter import call_with_consent
from oct_mcp.types import CallContext, LayerType, Outcome, ToolResult

__all__ = ["OctGuard", "guard"]


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
    examples: HostExamples = field(init=False)
    """The rules' examples over the host's tools, judged at each listing."""

    def __post_init__(self) -> None:
        self.examples = HostExamples(self.app)

    def spec_for(self, name: str, listed: Mapping[str, Any] | None = None) -> ToolSpec:
        """The tool as the chain sees it: from its listing when seen, destructive until then."""
        return spec_of(self.specs, self.tools, name, listed)

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
        served = [
            (tool, self.spec_for(str(tool.get("name")), tool))
            for tool in listing["tools"]
            if tool.get("name") not in self.withheld
        ]
        if self.examples.judge({spec.name: spec for _tool, spec in served}):
            return {**listing, "tools": []}
        shown = []
        for tool, spec in served:
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
        client_id = session_client_id(ctx)
        refused = await refuse_unpinned(self.app, self.pins, self.withheld, params, ctx, client_id)
        if refused is None:
            refused = await self.examples.refusal(params, ctx, client_id)
        if refused is not None:
            return refused
        self.spec_for(params.name)

        async def to_host(chain_ctx: CallContext) -> Outcome:
            host_params = {k: v for k, v in raw.items() if k not in ("inputResponses", "requestState")}
            host_params["arguments"] = host_arguments(chain_ctx)
            answer = await call_next(dataclasses.replace(ctx, params=host_params))
            return _as_tool_result(answer, keep_binary=self.keep_binary_content)

        return await call_with_consent(self.app, params, ctx, TRANSPORT, forward=to_host, client_id=client_id)


def _wire(result: HandlerResult) -> Any:
    """What call_next gave back, as the wire dict (the SDK hands middleware serialized results)."""
    return result.model_dump(by_alias=True, exclude_none=True) if isinstance(result, BaseModel) else result


def _as_tool_result(answer: HandlerResult, *, keep_binary: bool) -> ToolResult:
    wire = _wire(answer)
    if not isinstance(wire, dict):
        raise TypeError("the host's tool answered something that is not a tool result")
    content = [item for item in wire.get("content") or [] if isinstance(item, dict)]
    return host_result(
        content, wire.get("structuredContent"), is_error=bool(wire.get("isError")), keep_binary=keep_binary
    )


def guard(
    server: MCPServer | Server[Any],
    *,
    project_root: str | Path = ".",
    profile: str | Profile = EMBEDDED_PROFILE,
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
            own tools), or a profile of your config file that ends without a terminal layer,
            by name, or a `Profile` made in code (`oct_mcp.Profile`), which needs no config file.
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
    app, specs = hosted_app(project_root, profile, config_path, environ, layers)
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
