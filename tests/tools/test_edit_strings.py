"""oct_edit: exact replacements in order, all or nothing, the nearest match on a miss, line ends kept."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from changes import carried_out
from hypothesis import given
from hypothesis import strategies as st

from oct_mcp.errors import PathRefusedError, PolicyError
from oct_mcp.tools.edit.edit_strings import EDIT, EditParams
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

CORE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    (root / "core.py").write_text(CORE)
    (tmp_path / "outside.txt").write_text("not yours\n")
    return Workspace(root)


def edit(workspace: Workspace, path: str, *edits: dict[str, Any], dry_run: bool = False) -> ToolResult:
    params = EditParams.model_validate({"path": path, "edits": list(edits)})
    return carried_out(workspace, EDIT, params, dry_run=dry_run)


def test_an_edit_replaces_the_one_place_its_old_text_is(workspace: Workspace) -> None:
    result = edit(workspace, "core.py", {"old": "return a + b", "new": "return b + a"})

    assert result.is_error is False, result.text
    assert (workspace.root / "core.py").read_text() == CORE.replace("a + b", "b + a")
    assert result.structured is not None
    assert (result.structured["applied"], result.structured["replacements"]) == (True, [1])
    assert "-    return a + b\n+    return b + a\n" in result.structured["diff"]


def test_a_dry_run_shows_the_diff_and_writes_nothing(workspace: Workspace) -> None:
    result = edit(workspace, "core.py", {"old": "a - b", "new": "b - a"}, dry_run=True)

    assert result.is_error is False, result.text
    assert result.text.startswith("dry run, nothing changed: would edit core.py at 1 place(s) (+1 -1)")
    assert (workspace.root / "core.py").read_text() == CORE


def test_edits_apply_in_order_each_to_the_result_of_the_last(workspace: Workspace) -> None:
    result = edit(
        workspace,
        "core.py",
        {"old": "def add", "new": "def plus"},
        {"old": "def plus(a, b):\n    return a + b", "new": "def plus(a, b):\n    return sum((a, b))"},
    )

    assert result.is_error is False, result.text
    assert (workspace.root / "core.py").read_text() == CORE.replace(
        "def add(a, b):\n    return a + b", "def plus(a, b):\n    return sum((a, b))"
    )


def test_an_old_text_found_twice_is_refused_with_its_lines_unless_all_are_asked_for(
    workspace: Workspace,
) -> None:
    twice = edit(workspace, "core.py", {"old": "(a, b)", "new": "(x, y)"})
    every = edit(workspace, "core.py", {"old": "(a, b)", "new": "(x, y)", "replace_all": True})

    assert twice.is_error is True
    assert "edit 1 of 1: its old text is in the file 2 times (at lines 1, 5)" in twice.text
    assert every.is_error is False, every.text
    assert (workspace.root / "core.py").read_text() == CORE.replace("(a, b)", "(x, y)")


def test_an_expected_count_that_is_not_the_files_refuses_the_edit(workspace: Workspace) -> None:
    result = edit(workspace, "core.py", {"old": "return", "new": "yield", "expected_count": 3})

    assert result.is_error is True
    assert "is in the file 2 time(s), not the expected_count of 3 (at lines 2, 6)" in result.text
    assert (workspace.root / "core.py").read_text() == CORE


def test_when_the_second_edit_misses_the_first_is_not_written(workspace: Workspace) -> None:
    result = edit(workspace, "core.py", {"old": "a + b", "new": "b + a"}, {"old": "a * b", "new": "b * a"})

    assert result.is_error is True
    assert result.text.startswith("the edit does not apply; nothing was changed.\nedit 2 of 2:")
    assert (workspace.root / "core.py").read_text() == CORE


def test_a_miss_names_the_nearest_lines_and_shows_a_character_diff(workspace: Workspace) -> None:
    result = edit(workspace, "core.py", {"old": "    return a * b", "new": "    return a"})

    assert result.is_error is True
    assert "The nearest candidates start at lines 2, 6." in result.text
    assert "    return a {-*-}{+++} b" in result.text


def test_a_miss_by_whitespace_only_says_so(workspace: Workspace) -> None:
    result = edit(workspace, "core.py", {"old": "def sub(a, b):\n  return a - b\n", "new": ""})

    assert result.is_error is True
    assert "starts at line 5" in result.text or "start at lines 5" in result.text
    assert "Only whitespace differs" in result.text


def test_a_crlf_file_stays_crlf_when_old_and_new_use_bare_newlines(workspace: Workspace) -> None:
    (workspace.root / "win.txt").write_bytes(b"one\r\ntwo\r\nthree")

    result = edit(workspace, "win.txt", {"old": "one\ntwo\n", "new": "one\n2\n2.5\n"})

    assert result.is_error is False, result.text
    assert (workspace.root / "win.txt").read_bytes() == b"one\r\n2\r\n2.5\r\nthree"


def test_the_final_newline_is_kept_as_the_file_has_it(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_bytes(b"x = 1\n")
    (workspace.root / "b.txt").write_bytes(b"x = 1")

    edit(workspace, "a.txt", {"old": "x = 1", "new": "x = 2"})
    edit(workspace, "b.txt", {"old": "x = 1", "new": "x = 2"})

    assert (workspace.root / "a.txt").read_bytes() == b"x = 2\n"
    assert (workspace.root / "b.txt").read_bytes() == b"x = 2"


def test_an_edit_keeps_the_files_mode(workspace: Workspace) -> None:
    (workspace.root / "run.sh").write_text("echo one\n")
    (workspace.root / "run.sh").chmod(0o750)

    edit(workspace, "run.sh", {"old": "one", "new": "two"})

    assert (workspace.root / "run.sh").stat().st_mode & 0o777 == 0o750


@pytest.mark.parametrize("path", [".git/config", ".github/workflows/ci.yml"])
def test_an_edit_to_a_protected_path_is_refused(workspace: Workspace, path: str) -> None:
    (workspace.root / path).parent.mkdir(parents=True)
    (workspace.root / path).write_text("x\n")

    with pytest.raises(PolicyError) as raised:
        edit(workspace, path, {"old": "x", "new": "y"})

    assert raised.value.code == "policy"
    assert (workspace.root / path).read_text() == "x\n"


def test_an_edit_outside_the_project_is_refused(workspace: Workspace) -> None:
    with pytest.raises(PathRefusedError):
        edit(workspace, "../outside.txt", {"old": "not", "new": "now"})

    assert (workspace.root.parent / "outside.txt").read_text() == "not yours\n"


def test_a_missing_or_binary_file_is_refused(workspace: Workspace) -> None:
    (workspace.root / "blob").write_bytes(b"\x00x")

    missing = edit(workspace, "none.py", {"old": "x", "new": "y"})
    binary = edit(workspace, "blob", {"old": "x", "new": "y"})

    assert missing.is_error is True
    assert "create it with oct_write_file" in missing.text
    assert binary.is_error is True
    assert (workspace.root / "blob").read_bytes() == b"\x00x"


def test_the_edit_tool_is_a_destructive_write_that_is_not_idempotent() -> None:
    assert EDIT.annotations["destructiveHint"] is True
    assert EDIT.annotations["idempotentHint"] is False
    assert EDIT.path_fields == frozenset({"path"})
    for other in ("oct_write_file", "oct_apply_patch"):
        assert other in EDIT.description


_TEXT = st.text(alphabet="ab é名 \t\r\n", max_size=40)


@st.composite
def _file_and_edits(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    text = draw(_TEXT)
    current = text
    edits: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 4))):
        if current and draw(st.booleans()):
            start = draw(st.integers(0, len(current) - 1))
            old = current[start : draw(st.integers(start + 1, len(current)))]
        else:
            # No line break: a miss cannot be rescued by adapting its line ends.
            old = draw(st.text(alphabet="ab \t", min_size=1, max_size=4))
        new = draw(_TEXT)
        mode = draw(st.sampled_from(["unique", "all", "count"]))
        edit_: dict[str, Any] = {"old": old, "new": new}
        if mode == "all":
            edit_["replace_all"] = True
        elif mode == "count":
            edit_["expected_count"] = max(1, current.count(old) + draw(st.integers(-1, 1)))
        edits.append(edit_)
        current = current.replace(old, new)
    return text, edits


def _python_result(text: str, edits: list[dict[str, Any]]) -> str | None:
    for one in edits:
        count = text.count(one["old"])
        wanted = one.get("expected_count")
        if count == 0 or (wanted is not None and count != wanted):
            return None
        if wanted is None and not one.get("replace_all") and count > 1:
            return None
        text = text.replace(one["old"], one["new"])
    return text


@given(_file_and_edits())
def test_edits_that_apply_give_the_bytes_python_gives_and_others_leave_the_file(
    case: tuple[str, list[dict[str, Any]]],
) -> None:
    text, edits = case
    expected = _python_result(text, edits)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        (root / "f.txt").write_bytes(text.encode())

        result = edit(Workspace(root), "f.txt", *edits)

        on_disk = (root / "f.txt").read_bytes()
    if expected is None:
        assert result.is_error is True
        assert on_disk == text.encode()
    else:
        assert result.is_error is False, result.text
        assert on_disk == expected.encode()
