"""A file a write changes in place that has another name: the write must not reach that other name.

git appends a branch's reflog in place, and the sandbox lets a commit's git write into the git
folder's `logs`: a hostile `.git` that hard-links `logs/refs/heads/main` to `hooks/pre-commit` (or
makes it a symlink to it) would get the commit's subject into the hook as a runnable line. Every
git write refuses such a file before git runs, naming it. The file applier replaces a file by a new
one renamed over it, so a project file hard-linked to a hook, or to a file outside the project,
leaves the other name as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import oct_server, only_text
from mcp import Client
from optional import usable_backend

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BACKENDS = ["bubblewrap", "landlock"]
IDENTITY = ("-c", "user.name=Terminal User", "-c", "user.email=terminal@example.invalid")
HOOK = "#!/bin/sh\n# the user's own hook\n"


def git(root: Path, *arguments: str) -> str:
    completed = subprocess.run(
        ["git", "-C", str(root), *IDENTITY, *arguments], check=True, capture_output=True, text=True
    )
    return completed.stdout.strip()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[user]\n\tname = "Ada Lovelace"\n\temail = ada@example.invalid\n')
    return home


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit, a pre-commit hook, and a change staged for the next commit."""
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    (root / "core.py").write_text("x = 1\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "First commit")
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    (root / "core.py").write_text("x = 2\n")
    git(root, "add", "core.py")
    return root


async def _call(
    project: Path, home: Path, tmp_path: Path, backend: str, tool: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    usable_backend(backend)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"sandbox_backend": backend, "audit_log_path": str(tmp_path / "audit.jsonl")})
    )

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    with anyio.fail_after(120):
        async with Client(
            oct_server(project, config, env={"HOME": str(home)}), mode="auto", elicitation_callback=approve
        ) as client:
            return await client.call_tool(tool, arguments)


def _link_reflog_to_hook(repo: Path, how: str) -> None:
    reflog = repo / ".git" / "logs" / "refs" / "heads" / "main"
    reflog.unlink()
    if how == "hard-link":
        os.link(repo / ".git" / "hooks" / "pre-commit", reflog)
    else:
        reflog.symlink_to("../../../hooks/pre-commit")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["hard-link", "symlink"])
async def test_a_commit_whose_reflog_leads_to_a_hook_is_refused_before_git_runs_and_the_hook_stays(
    repo: Path, home: Path, tmp_path: Path, backend: str, how: str
) -> None:
    _link_reflog_to_hook(repo, how)
    head = git(repo, "rev-parse", "HEAD")
    subject = "$(touch pwned)"

    result = await _call(
        repo, home, tmp_path, backend, "oct_git_commit", {"message": subject, "dry_run": False}
    )

    assert result.is_error is True
    what = "has another name (a hard link)" if how == "hard-link" else "is a symbolic link"
    assert only_text(result).startswith(f"[linked_file] git's .git/logs/refs/heads/main {what}")
    assert only_text(result).endswith(
        "nothing ran: replace it with a copy of itself (cp F F.new && mv F.new F) or remove it if git can "
        "make it anew, then call again"
    )
    assert (repo / ".git" / "hooks" / "pre-commit").read_text() == HOOK
    assert git(repo, "rev-parse", "HEAD") == head
    assert not (repo / "pwned").exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_branch_whose_ref_is_hard_linked_to_a_hook_is_refused(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    ref = repo / ".git" / "refs" / "heads" / "main"
    os.link(ref, repo / ".git" / "hooks" / "post-checkout")

    result = await _call(repo, home, tmp_path, backend, "oct_git_branch", {"name": "topic", "dry_run": False})

    assert result.is_error is True
    assert only_text(result).startswith(
        "[linked_file] git's .git/refs/heads/main has another name (a hard link)"
    )
    assert "topic" not in git(repo, "branch", "--list")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_local_clone_whose_objects_are_hard_linked_still_commits(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    clone = (tmp_path / "clone").resolve()
    git(repo, "commit", "-q", "-m", "Second commit")
    subprocess.run(["git", "clone", "-q", "--local", str(repo), str(clone)], check=True)
    linked = [
        path
        for path in (clone / ".git" / "objects").rglob("*")
        if path.is_file() and path.stat().st_nlink > 1
    ]
    assert linked  # what a local clone is: its objects share their files with the original's
    (clone / "core.py").write_text("x = 3\n")
    git(clone, "add", "core.py")

    result = await _call(
        clone, home, tmp_path, backend, "oct_git_commit", {"message": "Third", "dry_run": False}
    )

    assert result.is_error is False, only_text(result)
    assert git(clone, "log", "-1", "--format=%s") == "Third"


@pytest.mark.parametrize("backend", [*BACKENDS, "native"])
async def test_a_write_to_a_project_file_hard_linked_to_a_hook_and_to_a_file_outside_leaves_both(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own file\n")
    os.link(repo / ".git" / "hooks" / "pre-commit", repo / "notes.sh")
    os.link(outside, repo / "notes.txt")
    written = []
    for name in ("notes.sh", "notes.txt"):
        result = await _call(
            repo, home, tmp_path, backend, "oct_write_file",
            {"path": name, "content": "echo pwned\n", "dry_run": False, "confirm": True},
        )  # fmt: skip
        written.append(result.is_error)

    assert written == [False, False]
    assert (repo / "notes.sh").read_text() == (repo / "notes.txt").read_text() == "echo pwned\n"
    # The applier renames a new file over the name: the other names keep their file as it was.
    assert (repo / ".git" / "hooks" / "pre-commit").read_text() == HOOK
    assert outside.read_text() == "the user's own file\n"
    assert (repo / "notes.sh").stat().st_nlink == 1
