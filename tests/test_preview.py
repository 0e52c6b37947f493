"""Previews: the folders a change writes in, its digest, the check of its targets before an approved run."""

from __future__ import annotations

from pathlib import Path

import pytest

from oct_mcp.consent import SessionGrants
from oct_mcp.errors import TargetChangedError
from oct_mcp.preview import ABSENT, FileChange, Preview, TargetState, content_digest, verify_targets
from oct_mcp.workspace import Workspace


def _preview(*changes: FileChange, targets: tuple[TargetState, ...] = ()) -> Preview:
    return Preview(files=changes, diff="", targets=targets)


def test_the_folders_of_a_change_are_each_file_s_folder_once_the_root_as_a_dot() -> None:
    preview = _preview(
        FileChange(path="src/a.py", action="modify", added=1, removed=0),
        FileChange(path="src/b.py", action="rename", added=0, removed=0, original_path="old/b.py"),
        FileChange(path="README.md", action="modify", added=1, removed=1),
    )

    assert preview.folders() == ("src", "old", ".")


def test_the_digest_of_a_preview_changes_with_what_it_shows_and_binds() -> None:
    change = FileChange(path="a.py", action="modify", added=1, removed=0)
    one = _preview(change, targets=(TargetState(path="a.py", digest="sha256:1"),))
    other = _preview(change, targets=(TargetState(path="a.py", digest="sha256:2"),))

    assert one.digest() == one.digest()
    assert one.digest() != other.digest()


def test_targets_as_approved_pass_and_a_changed_appeared_or_vanished_one_refuses(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path.resolve())
    (tmp_path / "kept.txt").write_text("kept\n")
    (tmp_path / "gone.txt").write_text("gone\n")
    approved = (
        TargetState(path="kept.txt", digest=content_digest(workspace, "kept.txt")),
        TargetState(path="new.txt", digest=ABSENT),
    )
    verify_targets(workspace, approved)

    for change in (
        lambda: (tmp_path / "kept.txt").write_text("edited\n"),
        lambda: (tmp_path / "new.txt").write_text("appeared\n"),
    ):
        change()
        with pytest.raises(TargetChangedError) as refused:
            verify_targets(workspace, approved)
        assert refused.value.code == "target_changed"
        (tmp_path / "kept.txt").write_text("kept\n")
        (tmp_path / "new.txt").unlink(missing_ok=True)

    gone = (TargetState(path="gone.txt", digest=content_digest(workspace, "gone.txt")),)
    (tmp_path / "gone.txt").unlink()
    with pytest.raises(TargetChangedError):
        verify_targets(workspace, gone)


def test_a_target_swapped_for_a_symlink_is_a_change(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path.resolve())
    (tmp_path / "real.txt").write_text("same\n")
    (tmp_path / "a.txt").write_text("same\n")
    approved = (TargetState(path="a.txt", digest=content_digest(workspace, "a.txt")),)
    (tmp_path / "a.txt").unlink()
    (tmp_path / "a.txt").symlink_to(tmp_path / "real.txt")

    with pytest.raises(TargetChangedError):
        verify_targets(workspace, approved)


def test_a_session_grant_covers_its_tool_in_its_folders_only() -> None:
    grants = SessionGrants()
    grants.grant("oct_write_file", ("src",))

    assert grants.covers("oct_write_file", ("src",)) is True
    assert grants.covers("oct_write_file", ("src", "docs")) is False
    assert grants.covers("oct_write_file", ("src/sub",)) is False
    assert grants.covers("oct_apply_patch", ("src",)) is False
    assert grants.covers("oct_write_file", ()) is False
