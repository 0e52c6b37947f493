"""Every tool's structured content, in each of its modes, is valid under the output schema it advertises,
as a real SDK client over stdio checks it (the client raises on a result its schema rejects)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from clients import Accept, oct_server, own_tools_path
from git_repos import git, new_repo
from mcp import Client

from oct_mcp.tools import default_catalog

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
CATALOG = default_catalog()

# Each tool, with arguments that take each of its modes (a change made for real, and as a dry run).
CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("oct_read_file", {"path": "pkg/core.py"}),
    ("oct_read_file", {"path": "pkg/core.py", "start_line": 2, "line_numbers": True}),
    ("oct_read_file", {"path": "pkg/core.py", "tail": 1}),
    ("oct_read_files", {"paths": ["pkg/core.py", "missing.py"]}),
    ("oct_list_files", {}),
    ("oct_list_files", {"glob": "*.py", "sizes": True, "max_results": 1}),
    ("oct_search", {"pattern": "def"}),
    ("oct_search", {"pattern": "def", "before": 1, "after": 1, "max_results": 1}),
    ("oct_search", {"pattern": "def", "mode": "files"}),
    ("oct_search", {"pattern": "def", "mode": "count"}),
    ("oct_search", {"pattern": "nowhere at all", "mode": "files"}),
    ("oct_list_tasks", {}),
    ("oct_git_status", {}),
    ("oct_git_diff", {}),
    ("oct_git_diff", {"staged": True}),
    ("oct_git_diff", {"base": "HEAD~1", "target": "HEAD", "context_lines": 0}),
    ("oct_git_diff", {"stat": True}),
    ("oct_git_log", {}),
    ("oct_git_log", {"max_count": 1}),
    ("oct_git_show", {}),
    ("oct_git_show", {"stat": True}),
    ("oct_git_blame", {"path": "pkg/core.py"}),
    ("oct_git_blame", {"path": "pkg/core.py", "commit": "HEAD~1", "end_line": 1}),
    ("oct_git_add", {"paths": ["pkg/core.py"], "dry_run": True}),
    ("oct_git_add", {"paths": ["pkg/core.py"], "dry_run": False}),
    ("oct_git_commit", {"message": "A change", "dry_run": True}),
    ("oct_git_branch", {"name": "topic", "dry_run": True}),
    ("oct_git_switch", {"branch": "main", "dry_run": True}),
    ("oct_git_restore", {"paths": ["pkg/__init__.py"], "dry_run": True}),
    ("oct_lint", {}),
    ("oct_lint", {"summary": True}),
    ("oct_typecheck", {}),
    ("oct_typecheck", {"summary": True}),
    ("oct_format", {}),
    ("oct_fix", {"dry_run": True}),
    ("oct_test", {}),
    ("oct_run", {"argv": ["python", "-c", "print(42)"]}),
    ("oct_edit", {"path": "pkg/core.py", "edits": [{"old": "41", "new": "42"}], "dry_run": True}),
    ("oct_write_file", {"path": "notes.txt", "content": "notes\n", "dry_run": True}),
    ("oct_write_file", {"path": "notes.txt", "content": "notes\n", "dry_run": False}),
    (
        "oct_apply_patch",
        {"patch": "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-notes\n+more notes\n", "dry_run": True},
    ),
    ("oct_move", {"source": "notes.txt", "destination": "moved.txt", "dry_run": True}),
    ("oct_delete", {"path": "notes.txt", "dry_run": True}),
    ("oct_grants", {}),
    ("oct_checkpoints", {}),
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = new_repo(tmp_path)
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "core.py").write_text("def answer() -> int:\n    return 41\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "First")
    (root / "pkg" / "core.py").write_text(
        "def answer() -> int:\n    return 41\n\n\ndef other() -> None: ...\n"
    )
    git(root, "commit", "-q", "-am", "Second")
    (root / "pkg" / "core.py").write_text("def answer() -> int:\n    return 41  # the work tree\n")
    (root / "pkg" / "__init__.py").write_text('"""The package."""\n')
    return root


async def test_every_tool_gives_structured_content_its_own_output_schema_accepts(
    repo: Path, tmp_path: Path
) -> None:
    # A home of the test's own whose git config names someone: a commit asks for a name.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.invalid\n")
    # ruff, mypy and pytest as the test's own environment has them, for the tools that run them.
    path = own_tools_path()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"rate_limit_per_minute": 1000, "checkpoint_dir": str(tmp_path / "store")}))
    results: list[tuple[str, dict[str, Any], types.CallToolResult]] = []
    with anyio.fail_after(300):
        async with Client(
            oct_server(repo, config, env={"HOME": str(home), "PATH": path}), elicitation_callback=Accept()
        ) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            for name, arguments in CALLS:
                results.append((name, arguments, await client.call_tool(name, arguments)))
            checkpoints = results[-1][2].structured_content or {}
            newest = checkpoints["checkpoints"][0]["id"]
            undo = {"id": newest, "dry_run": True}
            results.append(("oct_undo", undo, await client.call_tool("oct_undo", undo)))

    assert {name for name, _, _ in results} == set(tools)
    failed = [(name, arguments) for name, arguments, result in results if result.is_error]
    assert failed == [], [(n, a, r.content) for n, a, r in results if r.is_error]
    for name, arguments, result in results:
        if result.is_error:
            continue
        schema = tools[name].output_schema
        assert schema is not None
        assert result.structured_content is not None, (name, arguments)
        jsonschema.validate(result.structured_content, schema)
        # The listing gives clients the fields every result carries; the whole structure is the
        # output model's, and every real result must match it too.
        output = CATALOG[name].output
        assert output is not None
        jsonschema.validate(result.structured_content, output.model_json_schema())
