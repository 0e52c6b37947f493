"""What a writing run changed: the whole project listed before and after, every difference kept
as one checkpoint, links listed as themselves, git's and environment folders never looked at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oct_mcp.errors import LinkedFileError
from oct_mcp.execution.checkpoints import CheckpointStore
from oct_mcp.spec import ToolEnv
from oct_mcp.tools.writing_runs import WritingRun
from oct_mcp.workspace import Workspace


def _env(root: Path, store: CheckpointStore | None) -> ToolEnv:
    return ToolEnv(workspace=Workspace(root), max_output_bytes=1 << 20, checkpoints=store, call_id="c1")


def _project(tmp_path: Path) -> Path:
    root = (tmp_path / "project").resolve()
    for folder in ("src/deep", ".git", ".venv/lib", "docs"):
        (root / folder).mkdir(parents=True)
    (root / "src" / "a.py").write_text("a\n")
    (root / "src" / "deep" / "b.py").write_text("b\n")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".venv" / "lib" / "site.py").write_text("site\n")
    (root / "docs" / "index.md").write_text("docs\n")
    # A link to a folder is an entry of its own: never walked, and replacing it is a change.
    (root / "docs-link").symlink_to(root / "docs")
    return root


def test_every_change_anywhere_in_the_project_is_listed_and_kept(tmp_path: Path) -> None:
    root = _project(tmp_path)
    store = CheckpointStore(tmp_path / "store")
    run = WritingRun(_env(root, store), "oct_format")
    run.take()

    (root / "src" / "deep" / "b.py").write_text("b changed\n")
    (root / "src" / "a.py").unlink()
    (root / "planted.txt").write_text("planted\n")
    (root / "docs-link").unlink()
    (root / "docs-link").write_text("now a file\n")
    (root / "docs" / "index.md").write_text("docs through the link\n")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (root / ".venv" / "lib" / "site.py").write_text("site changed\n")
    changes = run.changes()

    assert changes.files == ["docs-link", "docs/index.md", "planted.txt", "src/a.py", "src/deep/b.py"]
    assert changes.checkpoint is not None
    entries = {entry.path: entry for entry in changes.checkpoint.entries}
    assert (changes.checkpoint.tool, changes.checkpoint.call_id) == ("oct_format", "c1")
    assert [entries[path].before.kind for path in changes.files] == [
        "symlink",
        "file",
        "absent",
        "file",
        "file",
    ]
    assert [entries[path].after.kind for path in changes.files] == ["file", "file", "file", "absent", "file"]
    assert store.blob(entries["src/a.py"].before.digest) == b"a\n"
    assert changes.notes == [f"checkpoint {changes.checkpoint.id}: oct_undo can put these files back"]


def test_a_run_that_changes_nothing_keeps_no_checkpoint(tmp_path: Path) -> None:
    root = _project(tmp_path)
    run = WritingRun(_env(root, CheckpointStore(tmp_path / "store")), "oct_run")
    run.take()

    changes = run.changes()

    assert (changes.files, changes.checkpoint, changes.notes) == ([], None, [])


def test_without_a_store_the_changes_are_listed_all_the_same(tmp_path: Path) -> None:
    root = _project(tmp_path)
    run = WritingRun(_env(root, None), "oct_run")
    run.take()
    (root / "src" / "a.py").write_text("changed\n")

    assert (run.changes().files, run.changes().checkpoint) == (["src/a.py"], None)


def test_past_its_limit_the_listing_says_it_stopped_and_stops_at_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path)
    run = WritingRun(_env(root, None), "oct_run", snapshot_limit=3)
    run.take()
    # Depth first, by name: docs-link, docs/index.md, src/a.py; src/deep/b.py is past the limit.
    (root / "src" / "a.py").write_text("changed\n")
    (root / "src" / "deep" / "b.py").write_text("changed\n")

    changes = run.changes()

    assert changes.files == ["src/a.py"]
    assert changes.notes == ["the project holds more than 3 files: changes past them are not listed"]


def test_a_file_with_another_name_refuses_the_run_before_it_runs(tmp_path: Path) -> None:
    root = _project(tmp_path)
    os.link(root / "src" / "a.py", tmp_path / "elsewhere.py")
    run = WritingRun(_env(root, CheckpointStore(tmp_path / "store")), "oct_run")

    with pytest.raises(LinkedFileError) as refused:
        run.take()

    assert refused.value.message.startswith("1 project file(s) have another name (a hard link)")
    assert "changes the other too: src/a.py; replace each" in refused.value.message
    with pytest.raises(RuntimeError):
        run.changes()
