"""What the git tools' tests share: git run as the person at a terminal would, on a new repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

IDENTITY = ("-c", "user.name=Ada Lovelace", "-c", "user.email=ada@example.invalid")


def git_output(root: Path, *arguments: str) -> str:
    """What the host's git prints for `arguments` in `root`, to the last newline; raises if it fails."""
    completed = subprocess.run(
        ["git", "-C", str(root), *IDENTITY, *arguments], check=True, capture_output=True, text=True
    )
    return completed.stdout


def git(root: Path, *arguments: str) -> str:
    """`git_output` without the white space around it: a commit id, a branch name."""
    return git_output(root, *arguments).strip()


def new_repo(tmp_path: Path) -> Path:
    """An empty repository at `tmp_path/repo`, on branch main."""
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root
