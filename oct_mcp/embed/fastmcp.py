"""The FastMCP adapter: oct-mcp's chain as a FastMCP `Middleware`, on its typed hooks.

    from oct_mcp.embed.fastmcp import guard_fastmcp
    guard_fastmcp(mcp)           # a fastmcp.FastMCP server

Needs the `fastmcp` extra (`pip install 'oct-mcp[fastmcp]'`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import mcp_types as types
from fastmcp import FastMCP
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import InputRequiredToolResult, Tool
from fastmcp.tools.base import ToolResult as FastMCPToolResult

from oct_mcp.app import App
from oct_mcp.consent import with_confirm_argument
from oct_mcp.embed._host import (
    EMBEDDED_PROFILE,
    PINS_DEFAULT,
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

__all__ = ["OctFastMCPMiddleware", "guard_fastmcp"]

_TRANSPORT = "embedded"


class OctFastMCPMiddleware(Middleware):
    """The chain around a FastMCP server's `tools/call`, the policy over its `tools/list`."""

    def __init__(
        self,
        app: App,
        specs: dict[str, ToolSpec],
        tools: Mapping[str, ForeignTool],
        *,
        keep_binary_content: bool = False,
        pins: ToolPins | None = None,
    ) -> None:
        self.app = app
        self.specs = specs
        self.tools = dict(tools)
        self.keep_binary_content = keep_binary_content
        self.pins = pins
        self.withheld: frozenset[str] = frozenset()
        """The tools the last listing found changed since pinned."""
        self.examples = HostExamples(app)
        """The rules' examples over the host's tools, judged when they are listed or first called."""

    def _learn(self, tool: Tool) -> ToolSpec:
        listed = {
            "title": tool.title,
            "description": tool.description,
            "inputSchema": tool.parameters,
            "annotations": tool.annotations.model_dump(by_alias=True, exclude_none=True)
            if tool.annotations
            else {},
        }
        return spec_of(self.specs, self.tools, tool.name, listed)

    async def on_list_tools(
        self,
        context: MiddlewareContext[types.ListToolsRequest],
        call_next: CallNext[types.ListToolsRequest, Sequence[Tool]],
    ) -> Sequence[Tool]:
        tools = await call_next(context)
        try:
            self.withheld = await self._review(tools, context)
        except PinFileError:
            return []
        served = [(tool, self._learn(tool)) for tool in tools if tool.name not in self.withheld]
        if self.examples.judge({spec.name: spec for _tool, spec in served}):
            return []
        shown = []
        for tool, spec in served:
            if not self.app.chain.is_visible(spec):
                continue
            if self.app.chain.takes_confirm(spec):
                tool = tool.model_copy(update={"parameters": with_confirm_argument(tool.parameters)})
            shown.append(tool)
        return shown

    async def _review(self, tools: Sequence[Tool], context: MiddlewareContext[Any]) -> frozenset[str]:
        """Which of `tools` to withhold, their definitions held against the pins."""
        listed = {
            tool.name: definition_of(tool.to_mcp_tool().model_dump(by_alias=True, exclude_none=True))
            for tool in tools
        }
        fastmcp_context = context.fastmcp_context
        request = None if fastmcp_context is None else fastmcp_context.request_context
        client_id = _TRANSPORT if request is None else session_client_id(request)
        return await review_pins(self.app, self.pins, listed, client_id)

    async def on_call_tool(
        self,
        context: MiddlewareContext[types.CallToolRequestParams],
        call_next: CallNext[types.CallToolRequestParams, FastMCPToolResult],
    ) -> FastMCPToolResult:
        params = context.message
        fastmcp_context = context.fastmcp_context
        if fastmcp_context is None or fastmcp_context.request_context is None:
            raise RuntimeError("oct-mcp needs FastMCP's request context to run a call through the chain")
        request = fastmcp_context.request_context
        if params.name not in self.specs and fastmcp_context.fastmcp is not None:
            tool = await fastmcp_context.fastmcp.get_tool(params.name)
            if tool is not None:
                self._learn(tool)
                with contextlib.suppress(PinFileError):  # answered below, with every tool withheld
                    changed = await self._review([tool], context)
                    self.withheld = (self.withheld - {tool.name}) | changed
                self.examples.judge(dict(self.specs))
        client_id = session_client_id(request)
        refused = await refuse_unpinned(self.app, self.pins, self.withheld, params, request, client_id)
        if refused is None:
            refused = await self.examples.refusal(params, request, client_id)
        if refused is not None:
            return FastMCPToolResult(content=refused.content, is_error=True)
        spec_of(self.specs, self.tools, params.name, None)

        async def to_host(chain_ctx: CallContext) -> Outcome:
            host = params.model_copy(
                update={
                    "arguments": host_arguments(chain_ctx),
                    "input_responses": None,
                    "request_state": None,
                }
            )
            return _from_fastmcp(
                await call_next(context.copy(message=host)), keep_binary=self.keep_binary_content
            )

        answer = await call_with_consent(
            self.app, params, request, _TRANSPORT, forward=to_host, client_id=client_id
        )
        if isinstance(answer, types.InputRequiredResult):
            return InputRequiredToolResult(input_required=answer)
        return FastMCPToolResult(
            content=answer.content, structured_content=answer.structured_content, is_error=answer.is_error
        )


def _from_fastmcp(result: FastMCPToolResult, *, keep_binary: bool) -> ToolResult:
    content = [
        {"type": "text", "text": block.text}
        if isinstance(block, types.TextContent)
        else block.model_dump(by_alias=True, exclude_none=True)
        for block in result.content
    ]
    is_error = bool(getattr(result, "is_error", False))
    return host_result(content, result.structured_content, is_error=is_error, keep_binary=keep_binary)


def guard_fastmcp(
    server: FastMCP[Any],
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
) -> OctFastMCPMiddleware:
    """Put oct-mcp's chain around every tool of a FastMCP server; as `oct_mcp.embed.guard` for the SDK.

    Takes the same arguments as `guard`, `layers` included.

    Returns:
        The middleware, already added to the server (first, so it is outermost).

    Raises:
        ConfigError: The profile does not exist or does not build.
    """
    app, specs = hosted_app(project_root, profile, config_path, environ, layers)
    pins = pins_for(app, server.name, pin_file, allow_narrowing=allow_narrowing)
    middleware = OctFastMCPMiddleware(
        app, specs, tools or {}, keep_binary_content=keep_binary_content, pins=pins
    )
    server.middleware.insert(0, middleware)
    return middleware
