"""A change git can only see by reading the file (same size, written in the index's own second) is
staged and committed through the tools as by git in a terminal: the run's private copy of the index
keeps the index's time, so git still reads such "racily clean" files instead of trusting their
cached times (a copy dated now made them look unchanged, and oct_git_add staged nothing)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from clients import model_view, oct_server
from git_repos import git, new_repo
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture
def racy_repo(tmp_path: Path) -> Path:
    """app.py changed to content of the same size, with the file, its index entry and the index all
    dated the same instant: git can tell the change only by reading the file ("racily clean")."""
    root = new_repo(tmp_path)
    git(root, "config", "core.trustctime", "false")  # the change time cannot be set back; leave it out
    instant = 1_700_000_000 * 10**9
    (root / "app.py").write_text("print('hello, world')\n")
    os.utime(root / "app.py", ns=(instant, instant))
    git(root, "add", "app.py")
    git(root, "commit", "-q", "-m", "first")
    (root / "app.py").write_text("print('hello, there')\n")
    os.utime(root / "app.py", ns=(instant, instant))
    os.utime(root / ".git" / "index", ns=(instant, instant))
    return root


async def test_a_racily_clean_change_is_staged_as_git_in_a_terminal_stages_it(
    racy_repo: Path, config_file: Path, tmp_path: Path
) -> None:
    config_file.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log")}))
    add = {"paths": ["."], "dry_run": False}

    with anyio.fail_after(90):
        async with Client(oct_server(racy_repo, config_file)) as client:
            await client.call_tool("oct_git_add", add)
            added = await client.call_tool("oct_git_add", {**add, "confirm": True})

    assert added.is_error is not True, model_view(added)
    assert "app.py" in model_view(added)
    assert git(racy_repo, "diff", "--cached", "--name-only") == "app.py"
    assert git(racy_repo, "diff", "--name-only") == ""
