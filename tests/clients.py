"""What the tests that speak MCP share: starting oct-mcp over stdio, reading a result, a human who accepts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import StdioServerParameters

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def handshake(server: subprocess.Popen[bytes]) -> None:
    """initialize, its answer read, then initialized: a client opening a session over raw stdio."""
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    server.stdin.flush()
    assert json.loads(server.stdout.readline())["id"] == 1
    server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    server.stdin.flush()


def oct_server(
    project: Path, config_file: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> StdioServerParameters:
    """`python -m oct_mcp` serving `project` with `config_file`, for the SDK's stdio client.

    `env` adds to the SDK's default environment for the server (a cache folder of the test's own).
    """
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "oct_mcp", "--project-root", str(project), "--config", str(config_file)],
        cwd=str(cwd) if cwd is not None else None,
        env=env,
    )


def only_text(result: types.CallToolResult) -> str:
    """The text of a result that holds exactly one content item, a text."""
    (content,) = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def model_view(result: types.CallToolResult) -> str:
    """What Claude Code, Codex, Copilot CLI and OpenCode pass the model: the structured content as
    JSON when there is some (the text dropped), else the text items."""
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


class Accept:
    """A human who accepts every consent form, and counts them."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked += 1
        return types.ElicitResult(action="accept", content={"approve": True})


def own_tools_path() -> str:
    """PATH with this test run's interpreter's folder first: its python, ruff and pytest for a
    project that has no environment of its own."""
    return f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"


def hints(tool: types.Tool) -> tuple[bool, bool, bool, bool]:
    """(read-only, destructive, idempotent, open world) as a client reads a tool's annotations.

    An absent hint takes MCP's default (not read-only, destructive, not idempotent, open world);
    a read-only tool changes nothing, so it destroys nothing and may be called again.
    """
    annotations = tool.annotations or types.ToolAnnotations()
    read_only = annotations.read_only_hint is True
    destructive = not read_only and annotations.destructive_hint is not False
    idempotent = read_only or annotations.idempotent_hint is True
    return read_only, destructive, idempotent, annotations.open_world_hint is not False
