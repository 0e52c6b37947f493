"""The read-only profile through a real SDK client over stdio: tools that change nothing, and no others."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from clients import hints, oct_server, only_text
from mcp import Client

from oct_mcp.spec import Risk
from oct_mcp.tools import default_catalog

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

READ_ONLY_TOOLS = {
    "oct_read_file",
    "oct_read_files",
    "oct_list_files",
    "oct_search",
    "oct_list_tasks",
    "oct_git_status",
    "oct_git_diff",
    "oct_git_log",
    "oct_git_show",
    "oct_git_blame",
    "oct_lint",
    "oct_typecheck",
    "oct_checkpoints",
}
# Each tool the profile leaves out, with a call that would change the project or run its code.
LEFT_OUT = {
    "oct_write_file": {"path": "new.txt", "content": "x\n", "dry_run": False, "confirm": True},
    "oct_edit": {"path": "README.md", "edits": [{"old": "line 3", "new": "changed"}], "dry_run": False},
    "oct_apply_patch": {"patch": "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# Demo\n+# Changed\n"},
    "oct_move": {"source": "README.md", "destination": "moved.md", "dry_run": False},
    "oct_delete": {"path": "README.md", "dry_run": False},
    "oct_undo": {"id": "1"},
    "oct_run": {"argv": ["python", "-c", "open('made.txt', 'w')"], "writes": True},
    "oct_test": {},
    "oct_format": {"apply": True},
    "oct_fix": {"dry_run": False},
    "oct_git_add": {"paths": ["README.md"]},
    "oct_git_commit": {"message": "m"},
    "oct_git_branch": {"name": "b"},
    "oct_git_switch": {"branch": "b"},
    "oct_git_restore": {"paths": ["README.md"]},
    # A read tool, but of the grants a human gives for writes, which this profile never asks about.
    "oct_grants": {},
}


def test_the_profile_leaves_out_every_tool_that_writes_or_runs_commands_and_keeps_the_rest() -> None:
    catalog = default_catalog()

    assert READ_ONLY_TOOLS | set(LEFT_OUT) == set(catalog)
    assert {name for name in READ_ONLY_TOOLS if catalog[name].risk is Risk.WRITE} == set()
    assert {name for name in LEFT_OUT if catalog[name].risk is Risk.READ} == {"oct_grants"}


async def test_a_client_sees_only_the_read_tools_and_each_left_out_tool_is_refused_by_the_policy(
    project: Path, config_file: Path
) -> None:
    config_file.write_text(json.dumps({"profile": "read-only"}))
    before = {path.relative_to(project): path.read_bytes() for path in project.rglob("*") if path.is_file()}

    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            read = await client.call_tool("oct_read_file", {"path": "README.md"})
            refused = {name: await client.call_tool(name, arguments) for name, arguments in LEFT_OUT.items()}

    assert set(tools) == READ_ONLY_TOOLS
    assert [name for name, tool in tools.items() if not hints(tool)[0]] == ["oct_lint", "oct_typecheck"]
    assert read.is_error is False
    for name, result in refused.items():
        assert result.is_error is True, name
        assert only_text(result).startswith("[policy] "), (name, only_text(result))
    after = {path.relative_to(project): path.read_bytes() for path in project.rglob("*") if path.is_file()}
    assert after == before
