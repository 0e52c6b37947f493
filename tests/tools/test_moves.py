"""oct_move and oct_delete: contained at both ends, protected paths refused, never through a link."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from changes import carried_out

from oct_mcp.errors import PathRefusedError, PolicyError, TargetChangedError
from oct_mcp.preview import ABSENT, content_digest
from oct_mcp.tools.edit.moves import DELETE, MOVE, DeleteParams, MoveParams
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = (tmp_path / "project").resolve()
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "a.py").write_text("A = 1\n")
    (root / "src" / "pkg" / "b.py").write_text("B = 2\n")
    (root / "notes.txt").write_text("one\ntwo\n")
    (root / "empty").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x.txt").write_text("not yours\n")
    return Workspace(root)


def move(workspace: Workspace, source: str, destination: str, **extra: Any) -> ToolResult:
    dry_run = extra.pop("dry_run", False)
    params = MoveParams.model_validate({"source": source, "destination": destination, **extra})
    return carried_out(workspace, MOVE, params, dry_run=dry_run)


def delete(workspace: Workspace, path: str, **extra: Any) -> ToolResult:
    dry_run = extra.pop("dry_run", False)
    return carried_out(
        workspace, DELETE, DeleteParams.model_validate({"path": path, **extra}), dry_run=dry_run
    )


def test_a_file_is_renamed_into_a_folder_that_is_made(workspace: Workspace) -> None:
    result = move(workspace, "notes.txt", "docs/notes.md")

    assert result.is_error is False, result.text
    assert not (workspace.root / "notes.txt").exists()
    assert (workspace.root / "docs" / "notes.md").read_text() == "one\ntwo\n"
    assert result.structured is not None
    assert (result.structured["kind"], result.structured["files"], result.structured["applied"]) == (
        "file",
        1,
        True,
    )


def test_a_folder_moves_with_everything_in_it(workspace: Workspace) -> None:
    result = move(workspace, "src/pkg", "lib/pkg")

    assert result.is_error is False, result.text
    assert sorted(p.name for p in (workspace.root / "lib" / "pkg").iterdir()) == ["a.py", "b.py"]
    assert not (workspace.root / "src" / "pkg").exists()
    assert result.text == "moved the folder src/pkg to lib/pkg (2 file(s))"


def test_a_dry_run_move_changes_nothing(workspace: Workspace) -> None:
    result = move(workspace, "notes.txt", "n.txt", dry_run=True)

    assert result.text == "dry run, nothing changed: would move the file notes.txt to n.txt"
    assert (workspace.root / "notes.txt").exists()
    assert not (workspace.root / "n.txt").exists()


def test_a_move_onto_a_file_needs_overwrite(workspace: Workspace) -> None:
    refused = move(workspace, "notes.txt", "src/pkg/a.py")
    still = (workspace.root / "src" / "pkg" / "a.py").read_text()
    replaced = move(workspace, "notes.txt", "src/pkg/a.py", overwrite=True)

    assert refused.is_error is True
    assert "set overwrite=true" in refused.text
    assert still == "A = 1\n"
    assert replaced.is_error is False, replaced.text
    assert (workspace.root / "src" / "pkg" / "a.py").read_text() == "one\ntwo\n"


def test_a_move_onto_a_folder_or_into_itself_is_refused(workspace: Workspace) -> None:
    onto_folder = move(workspace, "notes.txt", "empty")
    into_itself = move(workspace, "src", "src/pkg/inner")
    folder_over_file = move(workspace, "empty", "notes.txt", overwrite=True)

    assert all(r.is_error for r in (onto_folder, into_itself, folder_over_file))
    assert (workspace.root / "notes.txt").read_text() == "one\ntwo\n"
    assert (workspace.root / "empty").is_dir()


@pytest.mark.parametrize(
    ("source", "destination"),
    [("notes.txt", ".github/workflows/ci.yml"), ("notes.txt", ".git/hooks/pre-commit"), (".vscode/x", "x")],
)
def test_a_move_at_a_protected_end_is_refused(workspace: Workspace, source: str, destination: str) -> None:
    (workspace.root / ".vscode").mkdir()
    (workspace.root / ".vscode" / "x").write_text("x\n")

    with pytest.raises(PolicyError):
        move(workspace, source, destination)

    assert (workspace.root / "notes.txt").exists()
    assert (workspace.root / ".vscode" / "x").exists()


def test_a_folder_whose_contents_would_land_on_a_protected_path_is_refused(workspace: Workspace) -> None:
    (workspace.root / "ci" / "workflows").mkdir(parents=True)
    (workspace.root / "ci" / "workflows" / "x.yml").write_text("on: push\n")
    (workspace.root / "vendored" / ".git").mkdir(parents=True)

    with pytest.raises(PolicyError):
        move(workspace, "ci", ".github")
    with pytest.raises(PolicyError):
        move(workspace, "vendored", "third_party")

    assert not (workspace.root / ".github").exists()
    assert (workspace.root / "vendored" / ".git").is_dir()


@pytest.mark.parametrize(
    ("source", "destination"), [("../outside/x.txt", "x.txt"), ("notes.txt", "../x.txt")]
)
def test_a_move_with_an_end_outside_the_project_is_refused(
    workspace: Workspace, source: str, destination: str
) -> None:
    with pytest.raises(PathRefusedError):
        move(workspace, source, destination)

    assert (workspace.root.parent / "outside" / "x.txt").exists()
    assert (workspace.root / "notes.txt").exists()


def test_a_move_through_or_of_a_symlink_is_refused(workspace: Workspace) -> None:
    (workspace.root / "link").symlink_to(workspace.root / "src")
    (workspace.root / "file-link").symlink_to(workspace.root / "notes.txt")

    with pytest.raises(PathRefusedError):
        move(workspace, "link/pkg", "pkg")
    with pytest.raises(PathRefusedError):
        move(workspace, "notes.txt", "link/notes.txt")
    with pytest.raises(PathRefusedError):
        move(workspace, "file-link", "other-link")

    assert (workspace.root / "src" / "pkg").is_dir()
    assert not (workspace.root / "src" / "notes.txt").exists()
    assert (workspace.root / "file-link").is_symlink()


def test_a_file_is_deleted_with_its_diff(workspace: Workspace) -> None:
    preview = delete(workspace, "notes.txt", dry_run=True)
    kept = (workspace.root / "notes.txt").exists()
    result = delete(workspace, "notes.txt")

    assert kept is True
    assert preview.structured is not None
    assert preview.structured["diff"] == "--- a/notes.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n"
    assert result.is_error is False, result.text
    assert not (workspace.root / "notes.txt").exists()


def test_an_empty_folder_is_deleted_a_full_one_only_with_recursive(workspace: Workspace) -> None:
    empty = delete(workspace, "empty")
    full = delete(workspace, "src")
    still = (workspace.root / "src" / "pkg" / "a.py").exists()
    recursive = delete(workspace, "src", recursive=True)

    assert empty.is_error is False, empty.text
    assert not (workspace.root / "empty").exists()
    assert full.is_error is True
    assert "set recursive=true" in full.text
    assert still is True
    assert recursive.is_error is False, recursive.text
    assert recursive.structured is not None
    assert recursive.structured["files"] == ["src/pkg/a.py", "src/pkg/b.py"]
    assert not (workspace.root / "src").exists()


def test_a_delete_of_or_around_a_protected_path_is_refused(workspace: Workspace) -> None:
    (workspace.root / ".git").mkdir()
    (workspace.root / ".git" / "config").write_text("[core]\n")
    (workspace.root / "sub" / ".vscode").mkdir(parents=True)

    with pytest.raises(PolicyError):
        delete(workspace, ".git/config")
    with pytest.raises(PolicyError):
        delete(workspace, "sub", recursive=True)

    assert (workspace.root / ".git" / "config").exists()
    assert (workspace.root / "sub" / ".vscode").is_dir()


def test_a_delete_outside_through_a_link_or_of_the_root_is_refused(workspace: Workspace) -> None:
    (workspace.root / "link").symlink_to(workspace.root / "src")
    (workspace.root / "out").symlink_to(workspace.root.parent / "outside")

    for path in ("../outside/x.txt", "link/pkg/a.py", "link", "out", "."):
        with pytest.raises(PathRefusedError):
            delete(workspace, path, recursive=True)

    assert (workspace.root / "src" / "pkg" / "a.py").exists()
    assert (workspace.root.parent / "outside" / "x.txt").exists()
    assert os.path.islink(workspace.root / "link")


def test_a_recursive_delete_removes_a_link_inside_without_following_it(workspace: Workspace) -> None:
    (workspace.root / "src" / "out").symlink_to(workspace.root.parent / "outside")

    result = delete(workspace, "src", recursive=True)

    assert result.is_error is False, result.text
    assert (workspace.root.parent / "outside" / "x.txt").read_text() == "not yours\n"


def test_move_and_delete_are_destructive_writes_naming_their_paths() -> None:
    assert MOVE.path_fields == frozenset({"source", "destination"})
    assert DELETE.path_fields == frozenset({"path"})
    for spec in (MOVE, DELETE):
        assert spec.annotations["destructiveHint"] is True


def test_a_move_preview_binds_every_file_at_both_ends(workspace: Workspace) -> None:
    (workspace.root / "lib").mkdir()
    params = MoveParams(source="src/pkg", destination="lib/pkg")

    result = carried_out(workspace, MOVE, params, dry_run=False, preview=True)

    assert result.preview is not None
    assert [(f.original_path, f.path, f.action) for f in result.preview.files] == [
        ("src/pkg/a.py", "lib/pkg/a.py", "rename"),
        ("src/pkg/b.py", "lib/pkg/b.py", "rename"),
    ]
    assert [t.path for t in result.preview.targets] == [
        "src/pkg/a.py",
        "lib/pkg/a.py",
        "src/pkg/b.py",
        "lib/pkg/b.py",
    ]
    assert [t.digest for t in result.preview.targets] == [
        content_digest(workspace, "src/pkg/a.py"),
        ABSENT,
        content_digest(workspace, "src/pkg/b.py"),
        ABSENT,
    ]
    assert (workspace.root / "src" / "pkg" / "a.py").exists()


def test_a_delete_preview_binds_every_file_under_the_folder_and_shows_their_lines(
    workspace: Workspace,
) -> None:
    params = DeleteParams(path="src", recursive=True)

    result = carried_out(workspace, DELETE, params, dry_run=False, preview=True)

    assert result.preview is not None
    assert [(f.path, f.action, f.removed) for f in result.preview.files] == [
        ("src/pkg/a.py", "delete", 1),
        ("src/pkg/b.py", "delete", 1),
    ]
    assert [t.path for t in result.preview.targets] == ["src/pkg/a.py", "src/pkg/b.py"]
    assert "-A = 1\n" in result.preview.diff
    assert (workspace.root / "src" / "pkg" / "a.py").exists()


def test_an_empty_folder_deleted_is_a_change_to_preview(workspace: Workspace) -> None:
    result = carried_out(workspace, DELETE, DeleteParams(path="empty"), dry_run=False, preview=True)

    assert result.preview is not None
    assert result.preview.changes_nothing is False


def _move_src(workspace: Workspace, **extra: Any) -> ToolResult:
    return carried_out(workspace, MOVE, MoveParams(source="src", destination="lib"), **extra)


def _delete_src(workspace: Workspace, **extra: Any) -> ToolResult:
    return carried_out(workspace, DELETE, DeleteParams(path="src", recursive=True), **extra)


@pytest.mark.parametrize("change", [_move_src, _delete_src])
def test_a_consented_change_to_a_folder_refuses_a_file_added_after_the_preview(
    workspace: Workspace, change: Callable[..., ToolResult]
) -> None:
    previewed = change(workspace, dry_run=True, preview=True)
    assert previewed.preview is not None
    (workspace.root / "src" / "pkg" / "c.py").write_text("C = 3\n")

    with pytest.raises(TargetChangedError):
        change(workspace, dry_run=False, approved=previewed.preview.targets)

    assert (workspace.root / "src" / "pkg" / "c.py").read_text() == "C = 3\n"
    assert not (workspace.root / "lib").exists()
