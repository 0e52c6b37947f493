"""Faults while serving: each gives a clear error, and the server keeps serving what it can."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from clients import only_text
from mcp import Client

from oct_mcp.app import build_app
from oct_mcp.server import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_an_unwritable_audit_log_loses_no_result(project: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"audit_log_path": str(blocker / "audit.log")}))
    app = build_app(project, config_path=config, environ={})

    with anyio.fail_after(20):
        async with Client(build_server(app, transport="memory")) as client:
            results = [await client.call_tool("oct_read_file", {"path": "README.md"}) for _ in range(3)]

    assert [(r.is_error, only_text(r)) for r in results] == [(False, "# Demo\n\nline 3\nline 4\n")] * 3
    assert app.audit is not None
    assert app.audit.writer.status().startswith("failing since")


async def test_a_project_root_deleted_while_serving_is_a_clear_error_then_served_again(
    tmp_path: Path, config_file: Path
) -> None:
    root = tmp_path.resolve() / "vanishing"
    root.mkdir()
    (root / "a.txt").write_text("here\n")
    app = build_app(root, config_path=config_file, environ={})

    with anyio.fail_after(20):
        async with Client(build_server(app, transport="memory")) as client:
            before = await client.call_tool("oct_read_file", {"path": "a.txt"})
            shutil.rmtree(root)
            gone = await client.call_tool("oct_read_file", {"path": "a.txt"})
            listed = await client.list_tools()
            root.mkdir()
            (root / "a.txt").write_text("back\n")
            after = await client.call_tool("oct_read_file", {"path": "a.txt"})

    assert only_text(before) == "here\n"
    assert only_text(gone).startswith("[workspace] the project root is no longer an existing directory")
    assert listed.tools
    assert only_text(after) == "back\n"
