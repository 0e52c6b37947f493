"""A dry run for a client that cannot ask a human, through a real SDK client over stdio: no round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import oct_server, only_text
from mcp import Client

from oct_mcp.middleware.safety import CONFIRMATION_PREFIX

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

EDIT: dict[str, Any] = {"path": "README.md", "edits": [{"old": "line 3", "new": "line three"}]}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_dry_run_edit_returns_its_diff_at_once_and_changes_nothing(
    project: Path, config_file: Path, mode: str
) -> None:
    before = (project / "README.md").read_bytes()

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), mode=mode) as client:
            result = await client.call_tool("oct_edit", {**EDIT, "dry_run": True})

    text = only_text(result)
    assert result.is_error is False, text
    assert not text.startswith(CONFIRMATION_PREFIX)
    assert result.structured_content is not None
    assert result.structured_content["applied"] is False
    assert "+line three" in result.structured_content["diff"]
    assert (project / "README.md").read_bytes() == before
