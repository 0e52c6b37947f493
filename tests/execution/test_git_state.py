"""Installing a git write's private copies into the repository: all of them or none."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from oct_mcp.errors import ExecutionError, LinkedFileError, TargetChangedError
from oct_mcp.execution.git_state import PrivateGitFolder, install_git_state

pytestmark = pytest.mark.e2e


def _repository(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / "a.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(root), "add", "a.txt"], check=True)
    return root / ".git"


def _scratch(tmp_path: Path) -> Path:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return scratch


def test_a_copy_that_cannot_be_installed_leaves_every_other_file_as_it_was(tmp_path: Path) -> None:
    git_dir = _repository(tmp_path)
    shutil.rmtree(git_dir / "logs", ignore_errors=True)
    head, index = (git_dir / "HEAD").read_bytes(), (git_dir / "index").read_bytes()
    private = PrivateGitFolder(_scratch(tmp_path), git_dir, ("HEAD", "index", "logs/HEAD"), ())
    (private.path / "HEAD").write_bytes(b"ref: refs/heads/other\n")
    (private.path / "index").write_bytes(index + b"changed")
    (private.path / "logs").mkdir(exist_ok=True)
    (private.path / "logs" / "HEAD").write_bytes(b"an entry\n")

    with pytest.raises(ExecutionError, match="nothing was installed"):
        install_git_state(git_dir, private.changed())

    assert (git_dir / "HEAD").read_bytes() == head
    assert (git_dir / "index").read_bytes() == index
    assert sorted(p.name for p in git_dir.iterdir() if p.name.endswith(".lock")) == []


def test_an_original_changed_during_the_run_installs_nothing(tmp_path: Path) -> None:
    git_dir = _repository(tmp_path)
    index = (git_dir / "index").read_bytes()
    private = PrivateGitFolder(_scratch(tmp_path), git_dir, ("HEAD", "index"), ())
    (private.path / "HEAD").write_bytes(b"ref: refs/heads/other\n")
    (private.path / "index").write_bytes(index + b"changed")
    (git_dir / "index").write_bytes(index + b"by another git")

    with pytest.raises(TargetChangedError):
        install_git_state(git_dir, private.changed())

    assert (git_dir / "HEAD").read_bytes() == b"ref: refs/heads/main\n"
    assert (git_dir / "index").read_bytes() == index + b"by another git"


def test_every_changed_copy_is_installed(tmp_path: Path) -> None:
    git_dir = _repository(tmp_path)
    index = (git_dir / "index").read_bytes()
    private = PrivateGitFolder(_scratch(tmp_path), git_dir, ("HEAD", "index"), ())
    (private.path / "HEAD").write_bytes(b"ref: refs/heads/other\n")
    (private.path / "index").write_bytes(index + b"changed")

    install_git_state(git_dir, private.changed())

    assert (git_dir / "HEAD").read_bytes() == b"ref: refs/heads/other\n"
    assert (git_dir / "index").read_bytes() == index + b"changed"


def test_a_reflog_hard_linked_during_the_run_installs_nothing(tmp_path: Path) -> None:
    git_dir = _repository(tmp_path)
    (git_dir / "logs" / "refs" / "heads").mkdir(parents=True)
    (git_dir / "logs" / "refs" / "heads" / "main").write_text("")
    private = PrivateGitFolder(_scratch(tmp_path), git_dir, ("HEAD", "index"), ("logs", "refs", "objects"))
    (private.path / "index").write_bytes(b"DIRC changed")
    os.link(git_dir / "logs" / "refs" / "heads" / "main", git_dir / "hooks" / "pre-commit")

    with pytest.raises(LinkedFileError) as raised:
        private.changed()

    assert raised.value.code == "linked_file"
    assert raised.value.message.startswith("git's .git/logs/refs/heads/main has another name (a hard link)")
    assert "; git ran, but nothing it changed was installed: " in raised.value.message


@pytest.mark.parametrize("where", ["refs/heads/fifo", "index"])
def test_a_fifo_where_git_writes_is_refused_before_git_runs(tmp_path: Path, where: str) -> None:
    git_dir = _repository(tmp_path)
    (git_dir / where).unlink(missing_ok=True)
    os.mkfifo(git_dir / where)

    with pytest.raises(LinkedFileError) as raised:
        PrivateGitFolder(_scratch(tmp_path), git_dir, ("HEAD", "index"), ("logs", "refs", "objects"))

    assert (
        raised.value.message
        == f"git's .git/{where} is no regular file; nothing ran: remove it, then call again"
    )
