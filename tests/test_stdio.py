"""A real SDK client over stdio against `python -m oct_mcp`, in both protocol eras."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from oct_mcp.tools import default_catalog

pytestmark = pytest.mark.anyio


def _server(project: Path, config_file: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "oct_mcp", "--project-root", str(project), "--config", str(config_file)],
        cwd=str(project),
    )


def _text(result: types.CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, types.TextContent)
    return content.text


@pytest.mark.parametrize(("mode", "protocol"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_a_client_over_stdio_lists_reads_and_is_refused_outside_the_project(
    project: Path, config_file: Path, mode: Any, protocol: str
) -> None:
    with anyio.fail_after(60):
        async with Client(_server(project, config_file), mode=mode) as client:
            negotiated = client.session.protocol_version
            listed = await client.list_tools()
            read = await client.call_tool("oct_read_file", {"path": "src/pkg/core.py"})
            files = await client.call_tool("oct_list_files", {"path": "src", "glob": "*.py"})
            refused = await client.call_tool("oct_read_file", {"path": "../outside.txt"})

    assert negotiated == protocol
    assert [tool.name for tool in listed.tools] == list(default_catalog())
    assert read.is_error is False
    assert _text(read) == "def answer() -> int:\n    return 42\n"
    assert _text(files).splitlines() == ["src/pkg/__init__.py", "src/pkg/core.py"]
    assert refused.is_error is True
    assert _text(refused).startswith("[path_refused] ")
    assert "not yours" not in _text(refused)


async def test_the_server_exits_cleanly_when_the_client_closes_stdin(
    project: Path, config_file: Path
) -> None:
    command = [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config_file)]
    with anyio.fail_after(60):
        process = await anyio.run_process(command, input=b"", check=False)

    assert process.returncode == 0
    assert process.stdout == b""
    assert b"Traceback" not in process.stderr
