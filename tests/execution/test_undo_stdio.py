"""Every kind of change made through a real client over stdio, then undone newest first: all as it was."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import Accept, oct_server, only_text, own_tools_path
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

# python and ruff as the test's own environment has them (the project has no environment).
_PATH = own_tools_path()


def snapshot(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every entry under `root`: its kind, mode and content (a link's target), links not followed."""
    found: dict[str, tuple[str, int, bytes]] = {}
    for top, folders, files in os.walk(root):
        for name in (*folders, *files):
            path = Path(top, name)
            info = path.lstat()
            relative = path.relative_to(root).as_posix()
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("folder", 0, b"")
            else:
                found[relative] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
    return found


def _project(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "demo"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "core.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "old.txt").write_text("to be deleted by a patch\n")
    (root / "ren.txt").write_text("to be renamed by a patch\n")
    (root / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "script.sh").chmod(0o755)
    (root / "pkg" / "a.py").write_text("A = 1\n")
    (root / "pkg" / "sub" / "b.py").write_text("B = 2\n")
    (root / "pkg" / "link.py").symlink_to("a.py")
    (root / "data.bin").write_bytes(bytes(range(256)) * 4)
    (root / "docs" / "index.md").write_text("# Docs\n")
    (root / "docs" / "deep" / "page.md").write_text("deep\n")
    (root / "docs" / "deep" / "alias.md").symlink_to("page.md")
    (root / "private.env").write_text("API_TOKEN=ghp_R8k2Qz7LmX4vT9bW1nYc5JdF3hS6pA0eUgKi\n")
    # For ruff and a writing run, in a folder of their own.
    (root / "style").mkdir()
    (root / "style" / "ugly.py").write_text("import os\nx=1\n")
    return root


_PATCH = (
    "--- a/core.py\n+++ b/core.py\n@@ -1,2 +1,2 @@\n def plus(a, b):\n-    return a + b\n+    return b + a\n"
    "--- /dev/null\n+++ b/made.txt\n@@ -0,0 +1 @@\n+made by a patch\n"
    "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-to be deleted by a patch\n"
    "diff --git a/ren.txt b/renamed.txt\nsimilarity index 100%\nrename from ren.txt\nrename to renamed.txt\n"
)
_RUN = (
    "import os; os.chdir('style'); open('ugly.py', 'a').write('y = 2\\n'); "
    "open('made.py', 'w').write('m = 1\\n')"
)
# Every change is applied: dry_run=false, where a tool has it (oct_format applies by apply=true).
_NO_DRY_RUN = frozenset({"oct_format", "oct_run"})
_CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("oct_edit", {"path": "core.py", "edits": [{"old": "add", "new": "plus"}]}),
    ("oct_write_file", {"path": "new/dir/a.txt", "content": "a new file in new folders\n"}),
    ("oct_write_file", {"path": "private.env", "content": "API_TOKEN=[REDACTED:github_token]\nDEBUG=1\n"}),
    ("oct_apply_patch", {"patch": _PATCH}),
    ("oct_move", {"source": "script.sh", "destination": "bin/script.sh"}),
    ("oct_move", {"source": "pkg", "destination": "lib/pkg"}),
    ("oct_delete", {"path": "data.bin"}),
    ("oct_delete", {"path": "docs", "recursive": True}),
    ("oct_format", {"apply": True, "paths": ["style"]}),
    ("oct_fix", {"select": ["F401"], "paths": ["style"]}),
    ("oct_run", {"argv": ["python", "-c", _RUN], "writes": True}),
]


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_every_change_undone_newest_first_leaves_the_project_byte_identical(
    tmp_path: Path, backend: str
) -> None:
    project = _project(tmp_path)
    config = tmp_path / "config.json"
    settings = {
        "sandbox_backend": backend,
        "checkpoint_dir": str(tmp_path / "store"),
        "rate_limit_per_minute": 1000,
    }
    config.write_text(json.dumps(settings))
    start = snapshot(project)
    made: list[types.CallToolResult] = []
    undone: list[types.CallToolResult] = []
    with anyio.fail_after(240):
        async with Client(
            oct_server(project, config, env={"PATH": _PATH}), elicitation_callback=Accept()
        ) as client:
            for tool, arguments in _CHANGES:
                made.append(
                    await client.call_tool(
                        tool, arguments if tool in _NO_DRY_RUN else {**arguments, "dry_run": False}
                    )
                )
            changed = snapshot(project)
            listed = await client.call_tool("oct_checkpoints", {})
            ids = [entry["id"] for entry in (listed.structured_content or {})["checkpoints"]]
            for checkpoint in ids:
                undone.append(await client.call_tool("oct_undo", {"id": checkpoint, "dry_run": False}))
            after = await client.call_tool("oct_checkpoints", {"limit": 200})

    assert [result.is_error for result in made] == [False] * len(_CHANGES), [
        only_text(r)[:300] for r in made if r.is_error
    ]
    assert changed != start
    assert ids == [str(number) for number in range(len(_CHANGES), 0, -1)]
    assert [result.is_error for result in undone] == [False] * len(ids), [
        only_text(r)[:400] for r in undone if r.is_error
    ]
    assert snapshot(project) == start
    # Each undo is a checkpoint of its own (so it can be undone too), none of them unmasking a secret.
    assert (after.structured_content or {})["total"] == 2 * len(_CHANGES)
    assert all(
        "ghp_R8k2Qz7LmX4vT9bW1nYc5JdF3hS6pA0eUgKi" not in only_text(result)
        for result in (*made, *undone, listed, after)
    )
