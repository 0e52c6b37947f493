"""Hunks cut from a whole-file patch: git's own hunks where nothing is secret, masked where something is."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_repos import git, git_output, new_repo

from oct_mcp.tools._text.diffs import unified_diff
from oct_mcp.tools.git.masks import WHOLE_FILE, masked_hunks, masked_patch

OLD = "".join(
    f"def function_{n}():\n    return {n}\n" if n % 7 == 0 else f"    line {n}\n" for n in range(1, 120)
)


def _edited(text: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[3] = "    changed near the top\n"
    lines[40:43] = ["    replaced\n"]
    lines[50] = "    one more\n"
    lines.insert(90, "def inserted():\n")
    del lines[110]
    return "".join(lines).removesuffix("\n")


@pytest.fixture
def edited_repo(tmp_path: Path) -> Path:
    root = new_repo(tmp_path)
    (root / "code.py").write_text(OLD)
    (root / "gone.txt").write_text("bye\n")
    (root / "moved.txt").write_text("".join(f"moved line {n}\n" for n in range(30)))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    (root / "code.py").write_text(_edited(OLD))
    (root / "gone.txt").unlink()
    (root / "new.txt").write_text("hello\nworld")
    git(root, "mv", "moved.txt", "renamed.txt")
    (root / "renamed.txt").write_text("".join(f"moved line {n}\n" for n in range(29)) + "last\n")
    (root / "bytes.bin").write_bytes(b"\0\1\2")
    git(root, "add", "-A")
    return root


@pytest.mark.parametrize("context", [0, 1, 3, 10])
def test_hunks_cut_from_a_whole_file_patch_are_the_hunks_git_writes(edited_repo: Path, context: int) -> None:
    options = ("diff", "--cached", "--find-renames", "--no-color")
    whole = git_output(edited_repo, *options, f"--unified={WHOLE_FILE}")
    expected = git_output(edited_repo, *options, f"--unified={context}")

    assert masked_patch(whole, context) == (expected, False)


def test_a_patch_cut_inside_a_file_leaves_that_file_out(edited_repo: Path) -> None:
    whole = git_output(edited_repo, "diff", "--cached", "--find-renames", f"--unified={WHOLE_FILE}")
    cut = whole[: whole.index("def inserted")]

    patch, left_out = masked_patch(cut, 3)

    assert left_out is True
    assert "code.py" not in patch
    assert "def inserted" not in patch


def test_a_tools_hunks_without_a_secret_come_back_as_they_were() -> None:
    new = _edited(OLD)
    hunks = unified_diff(OLD, new, "a/code.py", "b/code.py").text.splitlines()[2:]

    assert masked_hunks(hunks, OLD) == hunks


def test_a_tools_hunks_that_do_not_fit_the_file_as_it_is_are_not_masked_but_refused() -> None:
    hunks = unified_diff(OLD, _edited(OLD), "a/code.py", "b/code.py").text.splitlines()[2:]
    changed_since = OLD.replace("    line 40\n", "    line forty\n")

    assert masked_hunks(hunks, changed_since) is None
