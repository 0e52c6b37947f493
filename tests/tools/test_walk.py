"""ProjectWalk: descriptor-relative, so what is swapped for a symlink mid-walk never leads outside."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Generator
from pathlib import Path

import pathspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from trees import write

from oct_mcp.file_screen import open_regular_at
from oct_mcp.tools import files as files_module
from oct_mcp.tools import search as search_module
from oct_mcp.tools._paging.cursors import PageMarks, WalkCursor, cursor_may_not_fit
from oct_mcp.tools._project.walk import FolderRun, ProjectWalk
from oct_mcp.tools.files import ListFilesParams, list_files
from oct_mcp.tools.search import SearchParams, search
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.e2e


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = (tmp_path / "project").resolve()
    write(project, {"a.txt": "needle a\n", "sub/b.txt": "needle b\n", "sub/c.txt": "needle c\n"})
    write(tmp_path / "outside", {"b.txt": "needle outside\n", "c.txt": "needle outside\n"})
    return project


def walked(root: Path, folder: Path | None = None, start_at: str | None = None) -> list[str]:
    return [entry.path for entry in ProjectWalk(root, folder or root, 1_000, start_at=start_at)]


def test_walk_lists_every_file_in_path_order(root: Path) -> None:
    assert walked(root) == ["a.txt", "sub/b.txt", "sub/c.txt"]


def test_walk_opens_an_entry_it_found_with_its_size(root: Path) -> None:
    walk = iter(ProjectWalk(root, root, 1_000))
    first = next(walk)
    fd, size = open_regular_at(first.folder_fd, first.entry.name)
    try:
        assert (os.read(fd, 100), size) == (b"needle a\n", len("needle a\n"))
    finally:
        os.close(fd)


def test_walk_starts_in_a_folder_with_paths_from_the_root(root: Path) -> None:
    assert walked(root, root / "sub") == ["sub/b.txt", "sub/c.txt"]


def test_walk_refuses_to_open_a_file_swapped_for_a_symlink_after_it_was_listed(root: Path) -> None:
    walk = iter(ProjectWalk(root, root, 1_000))
    first = next(walk)
    target = root / first.path
    target.unlink()
    target.symlink_to(root.parent / "outside" / "b.txt")

    with pytest.raises(OSError, match="Too many levels of symbolic links") as caught:
        open_regular_at(first.folder_fd, first.entry.name)

    assert caught.value.errno == errno.ELOOP


def test_walk_does_not_enter_a_folder_swapped_for_a_symlink_after_it_was_listed(root: Path) -> None:
    walk = iter(ProjectWalk(root, root, 1_000))
    assert next(walk).path == "a.txt"
    # The root is listed: `sub` is already an entry when it becomes a symlink to a folder outside.
    (root / "sub" / "b.txt").unlink()
    (root / "sub" / "c.txt").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(root.parent / "outside")

    assert [entry.path for entry in walk] == []


def test_walk_reads_a_held_folder_never_its_replacement(root: Path) -> None:
    walk = iter(ProjectWalk(root, root, 1_000))
    next(walk)
    first_in_sub = next(walk)
    # `sub` is open: its files are opened relative to it, not by a path that now leads outside.
    (root / "sub").rename(root / "moved")
    (root / "sub").symlink_to(root.parent / "outside")
    rest = list(walk)

    assert [first_in_sub.path, *(entry.path for entry in rest)] == ["sub/b.txt", "sub/c.txt"]


def test_walk_from_a_path_gives_only_the_paths_that_sort_at_or_after_it(root: Path) -> None:
    write(root, {"sub/deep/d.txt": "d\n", "z.txt": "z\n"})

    assert walked(root, start_at="sub/c.txt") == ["sub/c.txt", "sub/deep/d.txt", "z.txt"]
    assert walked(root, start_at="sub/b") == ["sub/b.txt", "sub/c.txt", "sub/deep/d.txt", "z.txt"]
    assert walked(root, start_at="sub/deep/e") == ["z.txt"]
    assert walked(root, start_at="z.txt0") == []


def test_walk_from_a_path_keeps_the_ignore_rules_of_the_folders_it_resumes_in(root: Path) -> None:
    write(root, {"sub/.gitignore": "*.log\n", "sub/d.log": "d\n", "sub/e.txt": "e\n"})

    assert walked(root, start_at="sub/c.txu") == ["sub/e.txt"]


def test_walk_from_a_path_does_not_list_the_folders_wholly_before_it(root: Path) -> None:
    write(root, {f"early/{n:02}.txt": "x\n" for n in range(50)})
    # The walk stops after `limit` entries seen: 50 in `early` would pass it, were they listed.
    walk = ProjectWalk(root, root, 6, start_at="sub/b.txt")

    assert [entry.path for entry in walk] == ["sub/b.txt", "sub/c.txt"]
    assert not walk.stopped_early


def test_walk_stops_early_below_its_depth_limit(root: Path) -> None:
    walk = ProjectWalk(root, root, 1_000, depth_max=1)

    assert [entry.path for entry in walk] == ["a.txt"]
    assert walk.stopped_early


def test_search_skips_a_file_swapped_for_a_symlink_between_listing_and_opening(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class SwappingWalk(ProjectWalk):
        def runs(self) -> Generator[FolderRun, None, None]:
            for folder_fd, prefix, entries in super().runs():
                if prefix == "sub/":
                    (root / "sub" / "b.txt").unlink()
                    (root / "sub" / "b.txt").symlink_to(root.parent / "outside" / "b.txt")
                yield folder_fd, prefix, entries

    monkeypatch.setattr(search_module, "ProjectWalk", SwappingWalk)
    result = search(Workspace(root), SearchParams(pattern="needle"))

    assert result.structured is not None
    assert [m["path"] for m in result.structured["matches"]] == ["a.txt", "sub/c.txt"]
    assert result.structured["files_skipped"] == 1


def test_walk_skips_what_git_ignores_for_every_form_of_pattern(tmp_path: Path) -> None:
    project = (tmp_path / "forms").resolve()
    names = ["a.log", "keep.log", "top", "sub/top", "a/x/y/b", "a/b", "q/x", "y/z/w", "z/one", "z/deep/two"]
    names += [
        "acxd",
        "bcd",
        "sub/dir/sub/f",
        "dir/sub/g",
        "trail ",
        "#hash",
        "é.txt",
        "sub/é.txt",
        "plain.py",
    ]
    names += ["sub/deeper/n.tmp", "sub/deeper/keep.tmp", "other/n.tmp"]
    write(project, dict.fromkeys(names, "x\n"))
    rules = ["*.log", "!keep.log", "/top", "a/**/b", "**/x", "y/**", "z/*", "[ab]c?d", "dir/sub/", "trail\\ "]
    rules += ["\\#hash", "é.txt", "sub/**/*.tmp", "!sub/deeper/keep.tmp"]
    write(project, {".gitignore": "\n".join(rules) + "\n", "sub/deeper/.gitignore": "!n.tmp\n*.tmp\n"})
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    listed = subprocess.run(
        ["git", "-c", "core.quotePath=false", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=project,
        capture_output=True,
        check=True,
    )

    assert walked(project) == sorted(listed.stdout.decode().split("\0")[:-1])


def test_walk_reads_an_ignore_file_changed_since_the_last_walk(root: Path) -> None:
    write(root, {".gitignore": "a.txt\n"})
    assert walked(root) == [".gitignore", "sub/b.txt", "sub/c.txt"]

    write(root, {".gitignore": "sub/\n"})

    assert walked(root) == [".gitignore", "a.txt"]


def test_walk_ignores_names_with_line_breaks_as_a_check_of_each_path_alone(tmp_path: Path) -> None:
    project = (tmp_path / "breaks").resolve()
    files = [".gitignore", "odd\nname.log", "plain/y.log", "plain/z.py", "we\nird/keep.py", "we\nird/x.log"]
    write(project, dict.fromkeys(files, "x\n") | {".gitignore": "*.log\n"})
    rules = pathspec.GitIgnoreSpec.from_lines(["*.log"])

    # A folder's entries are screened as lines of one text: a line break in a name must not split one.
    assert walked(project) == [path for path in files if not rules.check_file(path).include]


def test_list_files_lists_nothing_outside_when_its_folder_becomes_a_symlink_after_contain(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class SwapFirstWalk(ProjectWalk):
        def runs(self) -> Generator[FolderRun, None, None]:
            for name in ("b.txt", "c.txt"):
                (root / "sub" / name).unlink()
            (root / "sub").rmdir()
            (root / "sub").symlink_to(root.parent / "outside")
            return super().runs()

    monkeypatch.setattr(files_module, "ProjectWalk", SwapFirstWalk)
    result = list_files(Workspace(root), ListFilesParams(path="sub"))

    assert result.structured is not None
    assert result.structured["files"] == []


def test_page_marks_keep_the_most_recent_and_tell_queries_apart() -> None:
    marks = PageMarks(2)
    marks.remember("one", WalkCursor(10, "a"))
    marks.remember("two", WalkCursor(10, "b"))
    assert marks.recall("one", 10) == WalkCursor(10, "a")  # now the most recent
    marks.remember("three", WalkCursor(5, "c"))

    assert (marks.recall("one", 10), marks.recall("two", 10), marks.recall("three", 5)) == (
        WalkCursor(10, "a"),
        None,
        WalkCursor(5, "c"),
    )
    assert marks.recall("one", 5) is None


# Names as the file system gives them: any character, undecodable bytes as surrogate escapes.
NAME_CHARACTERS = st.one_of(
    st.characters(blacklist_categories=("Cs",)), st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)
)


@given(st.text(NAME_CHARACTERS, min_size=1), st.integers(0, 50_000))
def test_cursor_may_not_fit_is_whether_the_cursor_passes_the_room(path: str, room: int) -> None:
    assert cursor_may_not_fit(room, path) == (room < WalkCursor.size(path))


@given(st.text(NAME_CHARACTERS, min_size=1, max_size=4_096))
def test_a_cursor_field_is_at_most_six_characters_a_path_character_and_64(path: str) -> None:
    assert WalkCursor.size(path) < 6 * len(path) + 64


def test_walk_in_a_folder_from_a_path_outside_it_gives_what_sorts_after_that_path(root: Path) -> None:
    write(root, {"sub/deep/d.txt": "d\n"})

    assert walked(root, root / "sub", start_at="z.txt") == []
    assert walked(root, root / "sub", start_at="sub0") == []
    assert walked(root, root / "sub", start_at="a.txt") == ["sub/b.txt", "sub/c.txt", "sub/deep/d.txt"]
    assert walked(root, root / "sub" / "deep", start_at="sub/c.txt") == ["sub/deep/d.txt"]


def test_walk_by_runs_gives_what_it_gives_an_entry_at_a_time_and_stops_alike(root: Path) -> None:
    write(root, {"sub/deep/d.txt": "d\n", "sub/e.txt": "e\n", "z.txt": "z\n", ".gitignore": "*.log\n"})
    write(root, {"sub/x.log": "x\n", "sub/deep/y.log": "y\n"})
    starts = [None, "a.txt", "sub/c.txt", "sub/d", "sub/deep/e", "z.txt0"]

    for limit in range(12):
        for start_at in starts:
            by_entry = ProjectWalk(root, root, limit, start_at=start_at)
            by_run = ProjectWalk(root, root, limit, start_at=start_at)
            entries = [entry.path for entry in by_entry]
            runs = [prefix + entry.name for _, prefix, run in by_run.runs() for entry in run]

            assert (runs, by_run.stopped_early) == (entries, by_entry.stopped_early)


@pytest.mark.parametrize("sizes", [False, True])
def test_list_files_leaves_out_a_file_removed_after_its_folder_was_listed(
    root: Path, monkeypatch: pytest.MonkeyPatch, sizes: bool
) -> None:
    class RemovingWalk(ProjectWalk):
        def runs(self) -> Generator[FolderRun, None, None]:
            for run in super().runs():
                if run[1] == "sub/":
                    (root / "sub" / "b.txt").unlink()
                yield run

    monkeypatch.setattr(files_module, "ProjectWalk", RemovingWalk)
    result = list_files(Workspace(root), ListFilesParams(sizes=sizes))

    assert result.structured is not None
    # Without sizes, the folder's listing is the answer (as `rg --files`); with them, the stat.
    expected = ["a.txt", "sub/b.txt", "sub/c.txt"] if not sizes else ["a.txt", "sub/c.txt"]
    assert result.structured["files"] == expected
