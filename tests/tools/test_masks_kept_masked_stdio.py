"""The red team's probe through a real SDK client over stdio: a renamed mask does not unmask its secret."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from clients import Accept, model_view, oct_server, only_text
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

PASSWORD = "hunter2hunter2x"  # noqa: S105 - a test secret
RANDOM = "Zq8vR2mK9xL4pT7w"
SETTINGS = f'import os\nDB_PASSWORD = "{PASSWORD}"\nDEBUG = True\n'
POD = f"env:\n- name: DB_PASSWORD\n  value: {RANDOM}\n"


@pytest.mark.parametrize("backend", ["native", "bubblewrap", "landlock"])
async def test_a_mask_renamed_joined_or_left_nameless_is_refused_and_reads_masked_after(
    tmp_path: Path, backend: str
) -> None:
    root = tmp_path.resolve() / "demo"
    root.mkdir()
    (root / "settings.py").write_text(SETTINGS)
    (root / "pod.yaml").write_text(POD)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"sandbox_backend": backend, "checkpoint_dir": str(tmp_path / "store")}))
    human = Accept()
    calls = {
        "renamed": (
            "oct_edit",
            {"path": "settings.py", "edits": [{"old": "DB_PASSWORD =", "new": "note ="}], "dry_run": False},
        ),
        "joined": (
            "oct_edit",
            {
                "path": "settings.py",
                "edits": [
                    {
                        "old": 'DB_PASSWORD = "[REDACTED:password]"',
                        "new": 'note = " ".join(["[REDACTED:password]"])',
                    }
                ],
                "dry_run": False,
            },
        ),
        "whole file": (
            "oct_write_file",
            {"path": "settings.py", "content": 'import os\nnote = "[REDACTED:password]"\nDEBUG = True\n'},
        ),
        "name above": (
            "oct_apply_patch",
            {
                "patch": "--- a/pod.yaml\n+++ b/pod.yaml\n@@ -2 +2 @@\n"
                + "-- name: DB_PASSWORD\n+- name: GREETING\n"
            },
        ),
    }
    results: dict[str, types.CallToolResult] = {}
    with anyio.fail_after(60):
        async with Client(oct_server(root, config), elicitation_callback=human) as client:
            before = await client.call_tool("oct_read_file", {"path": "settings.py"})
            for name, (tool, arguments) in calls.items():
                results[name] = await client.call_tool(tool, {**arguments, "dry_run": False})
            after = [
                await client.call_tool("oct_read_file", {"path": path})
                for path in ("settings.py", "pod.yaml")
            ]

    assert (before.structured_content or {})[
        "text"
    ] == 'import os\nDB_PASSWORD = "[REDACTED:password]"\nDEBUG = True\n'
    for name, result in results.items():
        assert result.is_error is True, name
        assert only_text(result).startswith("[secret_unmasked] "), (name, only_text(result))
        assert "would be read back in clear there" in only_text(result), name
    assert "line 2 of the new text" in only_text(results["renamed"])
    assert "line 3 of the new text" in only_text(results["name above"])
    # Refused before a human was asked: nobody approves a change that cannot be made.
    assert human.asked == 0
    assert (root / "settings.py").read_text() == SETTINGS
    assert (root / "pod.yaml").read_text() == POD
    for result in (before, *results.values(), *after):
        assert PASSWORD not in f"{model_view(result)}\n{only_text(result)}"
        assert RANDOM not in f"{model_view(result)}\n{only_text(result)}"
