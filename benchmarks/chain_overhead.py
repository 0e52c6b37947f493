"""Chain overhead: oct_read_file through oct-mcp's server and full default chain, against a bare SDK server.

Goal: ratio <= 1.05 per call. Both sides are SDK low-level servers reached through the SDK's
in-memory `Client` (default mode), answering the same tool on the same small file: the same
listing (input and output schema), the same `read_file` function run on the event loop (as
oct-mcp runs a read of a file under 128 KiB), text and structured content back. oct-mcp's side is
`build_server(build_app(...), transport="memory")`: every layer of the default profile, the audit
log written to a file, the consent round's state boundary. The bare side validates the arguments
with the tool's model and calls the function.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import anyio
import mcp_types as types
from _common import Comparison, arguments, interleave_async, print_table
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from oct_mcp.app import App, build_app
from oct_mcp.diagnostics import configure_diagnostics
from oct_mcp.server import build_server
from oct_mcp.tools.files import READ_FILE, ReadFileParams, read_file
from oct_mcp.workspace import Workspace

CALLS_PER_ROUND: Final = 200
RATE_LIMIT: Final = 10_000
FILE: Final = "notes.md"
TEXT: Final = "# Notes\n\n" + "".join(
    f"- item {index}: check the build and the docs\n" for index in range(12)
)


def bare_server(workspace: Workspace, max_output_bytes: int) -> Server[Any]:
    """The SDK's low-level server with oct_read_file and nothing around it."""
    assert READ_FILE.output is not None
    listing = types.ListToolsResult(
        tools=[
            types.Tool(
                name=READ_FILE.name,
                title=READ_FILE.title,
                description=READ_FILE.description,
                input_schema=READ_FILE.params.model_json_schema(),
                output_schema=READ_FILE.output.model_json_schema(),
            )
        ]
    )

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        checked = ReadFileParams.model_validate(params.arguments or {})
        result = read_file(workspace, checked, max_output_bytes)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)],
            structured_content=dict(result.structured or {}),
        )

    return Server("bare", version="0", on_list_tools=list_tools, on_call_tool=call_tool)


def build(project: Path) -> App:
    """The default chain over `project`, auditing to a file there, with a rate limit no run reaches."""
    (project / FILE).write_text(TEXT)
    config = project / "config.json"
    config.write_text(
        json.dumps({"audit_log_path": str(project / "audit.log"), "rate_limit_per_minute": RATE_LIMIT})
    )
    return build_app(project, config_path=config, environ={})


async def _round(client: Client, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        result = await client.call_tool(READ_FILE.name, {"path": FILE})
        if result.is_error:
            raise RuntimeError(f"the call failed: {result.content}")
    return (time.perf_counter() - started) / calls


async def _measure(rounds: int, project: Path) -> tuple[list[float], list[float]]:
    app = build(project)
    # Every call of the run counts against one client's limit (an in-memory server has one client id):
    # the rounds share half of it, so none is refused.
    calls = min(CALLS_PER_ROUND, RATE_LIMIT // 2 // (rounds + 1))
    try:
        ours = build_server(app, transport="memory")
        bare = bare_server(app.workspace, app.loaded.config.max_output_bytes)
        async with Client(ours) as ours_client, Client(bare) as bare_client:
            await _round(ours_client, calls)  # warm-up
            await _round(bare_client, calls)
            chain, reference = await interleave_async(
                rounds, [lambda: _round(ours_client, calls), lambda: _round(bare_client, calls)]
            )
        if app.audit is not None and app.audit.writer.failure is not None:
            raise RuntimeError(f"the audit log failed: {app.audit.writer.failure}")
    finally:
        app.close()
    return chain, reference


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    # As `oct-mcp serve` does at its default level: diagnostics on the path cost what they cost there.
    configure_diagnostics(1)
    with tempfile.TemporaryDirectory() as temp:
        chain, reference = anyio.run(_measure, args.rounds, Path(temp).resolve())
    print_table(
        [Comparison("chain overhead per call (oct-mcp / bare SDK server)", chain, reference, 1.05, "us")],
        args.rounds,
    )
    extra = (statistics.median(chain) - statistics.median(reference)) * 1e6
    print(f"the chain adds {extra:.0f} us per call")


if __name__ == "__main__":
    main()
