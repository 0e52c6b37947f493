"""Secrets survive edits: the edit tools work on the file as the model read it, masks and all."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from changes import carried_out
from hypothesis import given
from hypothesis import strategies as st

from oct_mcp.deadline import Deadline
from oct_mcp.errors import ToolTimeoutError
from oct_mcp.redaction import redact
from oct_mcp.tools._text.masks import masked, unmask
from oct_mcp.tools.edit.apply_patch import APPLY_PATCH, ApplyPatchParams
from oct_mcp.tools.edit.edit_strings import EDIT, EditParams
from oct_mcp.tools.edit.write_file import WRITE_FILE, WriteFileParams
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

SECRET = "django-insecure-9f8d7s6a5d4f3g2h1j0k9l8m7n6b5v4c3x2z1"  # noqa: S105 - a test secret
AWS = "AKIAIOSFODNN7EXAMPLE"
PASSWORD = "s3cr3tPassw0rd"  # noqa: S105 - a test secret
SETTINGS = (
    "import os\n"
    f'SECRET_KEY = "{SECRET}"\n'
    f'AWS_ACCESS_KEY_ID = "{AWS}"\n'
    f'DATABASE_URL = "postgres://admin:{PASSWORD}@db.example.com:5432/app"\n'
    "DEBUG = True\n"
)
VIEW = (
    "import os\n"
    'SECRET_KEY = "[REDACTED:django_secret_key]"\n'
    'AWS_ACCESS_KEY_ID = "[REDACTED:aws_access_key_id]"\n'
    'DATABASE_URL = "postgres://admin:[REDACTED:url_password]@db.example.com:5432/app"\n'
    "DEBUG = True\n"
)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    (root / "settings.py").write_text(SETTINGS)
    return Workspace(root)


def on_disk(workspace: Workspace) -> str:
    return (workspace.root / "settings.py").read_text()


def edit(workspace: Workspace, *edits: dict[str, Any]) -> ToolResult:
    params = EditParams.model_validate({"path": "settings.py", "edits": list(edits)})
    return carried_out(workspace, EDIT, params, dry_run=False)


def assert_no_secret(result: ToolResult) -> None:
    shown = f"{result.text}\n{result.structured}"
    for secret in (SECRET, AWS, PASSWORD):
        assert secret not in shown


def test_the_view_is_what_the_redactor_shows() -> None:
    seen = masked(SETTINGS)

    assert seen.view == VIEW == redact(SETTINGS)[0]
    assert seen.originals == (SECRET, AWS, PASSWORD)


def test_an_edit_to_another_line_keeps_every_secret(workspace: Workspace) -> None:
    result = edit(workspace, {"old": "DEBUG = True", "new": "DEBUG = False"})

    assert result.is_error is False, result.text
    assert on_disk(workspace) == SETTINGS.replace("DEBUG = True", "DEBUG = False")
    assert_no_secret(result)


def test_an_edit_whose_old_text_holds_masks_matches_the_secrets_there(workspace: Workspace) -> None:
    result = edit(
        workspace,
        {
            "old": 'SECRET_KEY = "[REDACTED:django_secret_key]"\n'
            'AWS_ACCESS_KEY_ID = "[REDACTED:aws_access_key_id]"\n',
            "new": 'SECRET_KEY = "[REDACTED:django_secret_key]"  # rotate yearly\n'
            'AWS_KEY_ID = "[REDACTED:aws_access_key_id]"\n',
        },
    )

    assert result.is_error is False, result.text
    assert on_disk(workspace) == SETTINGS.replace(f'"{SECRET}"', f'"{SECRET}"  # rotate yearly').replace(
        "AWS_ACCESS_KEY_ID", "AWS_KEY_ID"
    )
    assert result.structured is not None
    assert result.structured["masked_kept"] == 3
    assert '+SECRET_KEY = "[REDACTED:django_secret_key]"  # rotate yearly\n' in result.structured["diff"]
    assert "masked value(s) kept" in result.text
    assert_no_secret(result)


def test_a_mask_moved_to_another_line_is_refused(workspace: Workspace) -> None:
    result = edit(workspace, {"old": "DEBUG = True", "new": 'DEBUG = "[REDACTED:secret]"'})

    assert result.is_error is True
    assert "line 5 of the new text has a mask" in result.text
    assert on_disk(workspace) == SETTINGS


def test_a_whole_file_write_carrying_the_masks_keeps_the_secrets(workspace: Workspace) -> None:
    content = VIEW.replace("DEBUG = True", "DEBUG = False\nALLOWED_HOSTS = []")

    result = carried_out(
        workspace, WRITE_FILE, WriteFileParams(path="settings.py", content=content), dry_run=False
    )

    assert result.is_error is False, result.text
    assert on_disk(workspace) == SETTINGS.replace("DEBUG = True", "DEBUG = False\nALLOWED_HOSTS = []")
    assert result.structured is not None
    assert result.structured["diff"] == (
        "--- a/settings.py\n+++ b/settings.py\n@@ -2,4 +2,5 @@\n"
        + "".join(f" {line}\n" for line in VIEW.splitlines()[1:4])
        + "-DEBUG = True\n+DEBUG = False\n+ALLOWED_HOSTS = []\n"
    )
    assert_no_secret(result)


def test_a_whole_file_write_that_moves_a_mask_is_refused(workspace: Workspace) -> None:
    lines = VIEW.splitlines(keepends=True)
    content = "".join([lines[0], lines[2], lines[3], lines[4], lines[1]])

    result = carried_out(
        workspace, WRITE_FILE, WriteFileParams(path="settings.py", content=content), dry_run=False
    )

    assert result.is_error is True
    assert "has a mask" in result.text
    assert on_disk(workspace) == SETTINGS


def test_a_new_file_with_a_mask_is_refused(workspace: Workspace) -> None:
    params = WriteFileParams(path="new.py", content='KEY = "[REDACTED:secret]"\n')

    result = carried_out(workspace, WRITE_FILE, params, dry_run=False)

    assert result.is_error is True
    assert not (workspace.root / "new.py").exists()


def test_a_patch_whose_context_holds_masks_applies_to_the_secrets_there(workspace: Workspace) -> None:
    text = (
        "--- a/settings.py\n+++ b/settings.py\n@@ -2,4 +2,4 @@\n"
        ' SECRET_KEY = "[REDACTED:django_secret_key]"\n'
        '-AWS_ACCESS_KEY_ID = "[REDACTED:aws_access_key_id]"\n'
        '+AWS_ACCESS_KEY_ID = "[REDACTED:aws_access_key_id]"  # read-only key\n'
        ' DATABASE_URL = "postgres://admin:[REDACTED:url_password]@db.example.com:5432/app"\n'
        "-DEBUG = True\n+DEBUG = False\n"
    )

    result = carried_out(workspace, APPLY_PATCH, ApplyPatchParams(patch=text), dry_run=False)

    assert result.is_error is False, result.text
    assert on_disk(workspace) == SETTINGS.replace(f'"{AWS}"', f'"{AWS}"  # read-only key').replace(
        "DEBUG = True", "DEBUG = False"
    )
    assert "3 masked value(s) kept" in result.text
    assert result.structured is not None
    assert result.structured["files"][0]["masked_kept"] == 3
    assert_no_secret(result)


def test_a_patch_without_masks_shows_masks_in_its_diff(workspace: Workspace) -> None:
    text = "--- a/settings.py\n+++ b/settings.py\n@@ -5 +5 @@\n-DEBUG = True\n+DEBUG = False\n"

    result = carried_out(workspace, APPLY_PATCH, ApplyPatchParams(patch=text), dry_run=True)

    assert result.is_error is False, result.text
    assert ' DATABASE_URL = "postgres://admin:[REDACTED:url_password]@' in result.text
    assert_no_secret(result)


def test_a_literal_mask_already_in_a_file_stays_a_literal(workspace: Workspace) -> None:
    (workspace.root / "settings.py").write_text('EXAMPLE = "[REDACTED:secret]"\nX = 1\n')

    result = edit(workspace, {"old": "X = 1", "new": "X = 2"})

    assert result.is_error is False, result.text
    assert on_disk(workspace) == 'EXAMPLE = "[REDACTED:secret]"\nX = 2\n'


def test_comparing_the_views_stops_once_the_deadline_has_passed() -> None:
    seen = masked(SETTINGS * 200)
    deadline = Deadline(0.0)

    with pytest.raises(ToolTimeoutError):
        unmask(seen, seen.view.replace("DEBUG = True", "DEBUG = 1"), deadline)


@given(at=st.integers(0, 5), inserted=st.text(alphabet="abc =#\n", max_size=30))
def test_a_write_back_of_the_view_with_lines_added_keeps_every_secret(at: int, inserted: str) -> None:
    lines = VIEW.splitlines(keepends=True)
    content = "".join([*lines[:at], inserted, *lines[at:]])
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        (root / "settings.py").write_text(SETTINGS)

        result = carried_out(
            Workspace(root), WRITE_FILE, WriteFileParams(path="settings.py", content=content), dry_run=False
        )

        written = (root / "settings.py").read_text()
    assert result.is_error is False, result.text
    assert written == "".join(
        [*SETTINGS.splitlines(keepends=True)[:at], inserted, *SETTINGS.splitlines(keepends=True)[at:]]
    )


def test_a_patch_that_does_not_apply_names_the_files_line_as_the_model_read_it(workspace: Workspace) -> None:
    text = "--- a/settings.py\n+++ b/settings.py\n@@ -2,2 +2,2 @@\n SECRET_KEY = 'x'\n-AWS = 1\n+AWS = 2\n"

    result = carried_out(workspace, APPLY_PATCH, ApplyPatchParams(patch=text), dry_run=True)

    assert result.is_error is True
    assert "which reads 'SECRET_KEY = \"[REDACTED:django_secret_key]\"'" in result.text
    assert_no_secret(result)
