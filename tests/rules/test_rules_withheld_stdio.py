"""A path a deny rule covers is absent from what the reading tools list, search and show, over stdio:
not only refused when named. A listing or a search count that named the file would tell the model
what the rule keeps from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import model_view, oct_server
from git_repos import git, new_repo
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

KEYS = "keys and the secrets folder stay out of the model's reach"
MARKER = "WITHHELD-MARKER-7Q"


def deny_keys(**extra: Any) -> dict[str, Any]:
    when = {"paths": ["*.pem", "secrets/"]}
    return {"name": "no-keys", "effect": "deny", "when": when, "reason": KEYS, **extra}


def write_config(config_file: Path, tmp_path: Path, rules: list[dict[str, Any]]) -> None:
    config_file.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log"), "rules": rules}))


def seed(root: Path) -> None:
    """A key at depth, a secrets folder, a link to a secret under an innocent name, and code beside them."""
    (root / "keys" / "deep" / "a").mkdir(parents=True)
    (root / "keys" / "deep" / "a" / "server.pem").write_text(f"key {MARKER}\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "db.txt").write_text(f"password {MARKER}\n")
    (root / "innocent.txt").symlink_to(root / "secrets" / "db.txt")
    (root / "notes.md").write_text(f"the marker {MARKER} is also here\n")


async def test_listing_and_search_leave_out_what_a_deny_rule_covers(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    seed(project)
    write_config(config_file, tmp_path, [deny_keys()])

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            listed = await client.call_tool("oct_list_files", {"path": "."})
            keys_folder = await client.call_tool("oct_list_files", {"path": "keys"})
            lines = await client.call_tool("oct_search", {"pattern": MARKER})
            counts = await client.call_tool("oct_search", {"pattern": MARKER, "mode": "count"})
            read = await client.call_tool("oct_read_file", {"path": "keys/deep/a/server.pem"})

    listing = model_view(listed)
    assert listed.is_error is not True
    for shown in ("notes.md", "src/pkg/core.py"):
        assert shown in listing
    for hidden in ("server.pem", "secrets", "db.txt", "innocent.txt"):
        assert hidden not in listing
    assert keys_folder.is_error is not True
    assert "server.pem" not in model_view(keys_folder)
    for result in (lines, counts):
        seen = model_view(result)
        assert result.is_error is not True
        assert "notes.md" in seen
        for hidden in ("server.pem", "secrets", "innocent.txt"):
            assert hidden not in seen
    assert lines.structured_content is not None
    assert lines.structured_content["files_with_matches"] == 1
    assert [match["path"] for match in lines.structured_content["matches"]] == ["notes.md"]
    # Named, it is refused as before.
    assert read.is_error is True
    assert KEYS in model_view(read)


async def test_a_rule_for_other_tools_leaves_the_listing_whole(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    seed(project)
    write_config(config_file, tmp_path, [deny_keys(tools=["oct_read_file"])])

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            listed = await client.call_tool("oct_list_files", {"path": "."})

    assert "keys/deep/a/server.pem" in model_view(listed)
    assert "secrets/db.txt" in model_view(listed)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose history and work tree touch the denied paths every way git shows them."""
    root = new_repo(tmp_path)
    (root / "app.py").write_text("print('hello')\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "db.txt").write_text(f"password {MARKER}\n")
    # Renamed below to a name no rule covers: what it holds is then the new file's, readable by name.
    (root / "old.pem").write_text("key\nline two\nline three\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    # A commit that changes a secret and code; then work-tree changes of every kind.
    (root / "secrets" / "db.txt").write_text(f"password {MARKER}-2\n")
    (root / "app.py").write_text("print('hello, world')\n")
    git(root, "commit", "-q", "-am", "second")
    git(root, "mv", "old.pem", "renamed.txt")
    (root / "secrets" / "db.txt").write_text(f"password {MARKER}-3\n")
    (root / "secrets" / "new.txt").write_text("untracked secret\n")
    (root / "app.py").write_text("print('hello, there')\n")
    return root


async def test_git_status_diff_and_show_leave_out_what_a_deny_rule_covers(
    repo: Path, config_file: Path, tmp_path: Path
) -> None:
    write_config(config_file, tmp_path, [deny_keys()])

    with anyio.fail_after(90):
        async with Client(oct_server(repo, config_file)) as client:
            status = await client.call_tool("oct_git_status", {})
            unstaged = await client.call_tool("oct_git_diff", {})
            staged = await client.call_tool("oct_git_diff", {"staged": True})
            between = await client.call_tool("oct_git_diff", {"base": "HEAD~1", "target": "HEAD"})
            shown = await client.call_tool("oct_git_show", {"commit": "HEAD"})

    for result in (status, unstaged, staged, between, shown):
        seen = model_view(result)
        assert result.is_error is not True, seen
        for hidden in ("secrets", "old.pem", MARKER):
            assert hidden not in seen, seen
    assert "app.py" in model_view(status)
    assert "renamed.txt" in model_view(status)
    assert "hello, there" in model_view(unstaged)
    # The rename's old name is withheld: git shows the new name as a file added.
    assert "renamed.txt" in model_view(staged)
    assert "hello, world" in model_view(between)
    assert "hello, world" in model_view(shown)


async def test_git_add_commit_and_restore_never_show_stage_or_discard_what_a_deny_rule_covers(
    repo: Path, config_file: Path, tmp_path: Path
) -> None:
    write_config(config_file, tmp_path, [deny_keys()])
    add = {"paths": ["."], "dry_run": False}
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Dev\n\temail = dev@example.com\n")

    with anyio.fail_after(120):
        async with Client(oct_server(repo, config_file, env={"HOME": str(home)})) as client:
            restore_preview = await client.call_tool("oct_git_restore", {"paths": ["."], "dry_run": True})
            add_preview = await client.call_tool("oct_git_add", {"paths": ["."], "dry_run": True})
            await client.call_tool("oct_git_add", add)
            added = await client.call_tool("oct_git_add", {**add, "confirm": True})
            # The staged rename's old name (old.pem) is a path the rule withholds.
            refused = await client.call_tool("oct_git_commit", {"message": "Work", "dry_run": True})
            git(repo, "reset", "-q", "HEAD", "--", "old.pem")
            commit_preview = await client.call_tool("oct_git_commit", {"message": "Work", "dry_run": True})

    for result in (restore_preview, add_preview, added, commit_preview):
        seen = model_view(result)
        assert result.is_error is not True, seen
        for hidden in ("secrets", "old.pem", MARKER):
            assert hidden not in seen, seen
        assert "app.py" in seen
    # Nothing under the rule was staged: the secret's change is still only in the work tree.
    staged = git(repo, "diff", "--cached", "--name-only")
    assert "secrets/db.txt" not in staged
    assert "app.py" in staged
    assert "secrets/new.txt" in git(repo, "status", "--porcelain", "--untracked-files=all")
    assert refused.is_error is True
    assert model_view(refused).startswith("[policy] 1 staged file(s) are paths the rules keep from this call")
    assert "old.pem" not in model_view(refused)


async def test_a_switch_that_would_change_a_withheld_file_is_refused_without_naming_it(
    repo: Path, config_file: Path, tmp_path: Path
) -> None:
    write_config(config_file, tmp_path, [deny_keys()])
    git(repo, "stash", "-q", "--include-untracked")
    # `other`: the first commit, whose secret differs from main's. `plain`: main as it is now, before
    # main gets a commit that changes app.py alone.
    git(repo, "branch", "other", "HEAD~1")
    git(repo, "branch", "plain", "HEAD")
    (repo / "app.py").write_text("print('on main')\n")
    git(repo, "commit", "-q", "-am", "app only")

    with anyio.fail_after(90):
        async with Client(oct_server(repo, config_file)) as client:
            refused = await client.call_tool("oct_git_switch", {"branch": "other", "dry_run": True})
            allowed = await client.call_tool("oct_git_switch", {"branch": "plain", "dry_run": True})

    assert refused.is_error is True
    seen = model_view(refused)
    assert seen.startswith("[policy] 1 file(s) the switch would change are paths the rules keep"), seen
    assert "secrets" not in seen
    assert allowed.is_error is not True, model_view(allowed)
    assert "app.py" in model_view(allowed)
