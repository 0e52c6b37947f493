"""read_file and list_files called directly: line ranges, size and text checks, .gitignore, bounds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from trees import write

from oct_mcp.errors import BinaryFileError, FileTooLargeError, LineRangeError, NotFoundError, PathRefusedError
from oct_mcp.spec import ToolEnv
from oct_mcp.tools import files
from oct_mcp.tools._paging.results import model_view
from oct_mcp.tools.files import (
    ListFilesOutput,
    ListFilesParams,
    ReadFileParams,
    ReadFilesParams,
    list_files,
    read_file,
    read_files,
)
from oct_mcp.workspace import Workspace

FOUR_LINES = "one\ntwo\nthree\nfour\n"
LIMIT = 1_000


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("not yours\n")
    return Workspace(root)


def read(workspace: Workspace, path: str, start: int | None = None, end: int | None = None) -> str:
    params = ReadFileParams(path=path, start_line=start, end_line=end)
    return read_file(workspace, params, LIMIT).text


def listed(workspace: Workspace, path: str = ".", glob: str | None = None) -> list[str]:
    result = list_files(workspace, ListFilesParams(path=path, glob=glob))
    assert result.structured is not None
    return list(result.structured["files"])


# read_file


def test_read_file_returns_the_whole_file(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    assert read(workspace, "notes.txt") == FOUR_LINES


def test_read_file_reports_what_it_read(workspace: Workspace) -> None:
    write(workspace.root, {"src/pkg/core.py": FOUR_LINES})

    result = read_file(workspace, ReadFileParams(path="src/pkg/core.py", start_line=2, end_line=3), LIMIT)

    assert result.structured == {
        "path": "src/pkg/core.py",
        "text": "two\nthree\n",
        "start_line": 2,
        "end_line": 3,
        "total_lines": 4,
    }
    assert (result.is_error, result.truncated) == (False, False)


def test_read_file_reports_a_whole_read_from_line_one_to_the_last(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    result = read_file(workspace, ReadFileParams(path="notes.txt"), LIMIT)

    assert result.structured == {
        "path": "notes.txt",
        "text": FOUR_LINES,
        "start_line": 1,
        "end_line": 4,
        "total_lines": 4,
    }


def test_read_file_reports_a_path_given_as_absolute_relative_to_the_root(workspace: Workspace) -> None:
    write(workspace.root, {"src/core.py": FOUR_LINES})

    result = read_file(workspace, ReadFileParams(path=str(workspace.root / "src" / "core.py")), LIMIT)

    assert result.structured is not None
    assert result.structured["path"] == "src/core.py"


def test_read_file_reads_an_empty_file_as_zero_lines(workspace: Workspace) -> None:
    write(workspace.root, {"empty.txt": ""})

    result = read_file(workspace, ReadFileParams(path="empty.txt"), LIMIT)

    assert result.text == ""
    assert result.structured == {
        "path": "empty.txt",
        "text": "",
        "start_line": 1,
        "end_line": 0,
        "total_lines": 0,
    }


def test_read_file_returns_the_first_lines_up_to_end_line(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    assert read(workspace, "notes.txt", end=2) == "one\ntwo\n"


def test_read_file_returns_lines_from_start_line_to_the_end(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    assert read(workspace, "notes.txt", start=3) == "three\nfour\n"


def test_read_file_returns_a_middle_range_inclusive(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    assert read(workspace, "notes.txt", start=2, end=3) == "two\nthree\n"


def test_read_file_returns_a_single_line(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    assert read(workspace, "notes.txt", start=2, end=2) == "two\n"


def test_read_file_stops_a_range_that_runs_past_the_end_at_the_last_line(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    result = read_file(workspace, ReadFileParams(path="notes.txt", start_line=3, end_line=10), LIMIT)

    assert result.text == "three\nfour\n"
    assert result.structured is not None
    assert (result.structured["start_line"], result.structured["end_line"]) == (3, 4)


def test_read_file_says_how_many_lines_the_file_has_for_a_start_past_the_end(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    with pytest.raises(LineRangeError, match="the file has 4 lines") as raised:
        read_file(workspace, ReadFileParams(path="notes.txt", start_line=10, end_line=12), LIMIT)

    assert raised.value.code == "out_of_range"


def test_read_file_tail_returns_the_last_lines(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    result = read_file(workspace, ReadFileParams(path="notes.txt", tail=2), LIMIT)

    assert result.structured is not None
    assert (result.structured["text"], result.structured["start_line"]) == ("three\nfour\n", 3)
    assert read_file(workspace, ReadFileParams(path="notes.txt", tail=10), LIMIT).text == FOUR_LINES


def test_read_file_numbers_lines_as_cat_n_when_asked(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": FOUR_LINES})

    result = read_file(workspace, ReadFileParams(path="notes.txt", start_line=3, line_numbers=True), LIMIT)

    assert result.text == "     3\tthree\n     4\tfour\n"


def test_read_file_stops_at_a_whole_line_under_max_chars_and_says_where_to_read_on(
    workspace: Workspace,
) -> None:
    lines = [f"line {n:04} " + "x" * 90 + "\n" for n in range(1, 101)]
    write(workspace.root, {"long.txt": "".join(lines)})

    first = read_file(workspace, ReadFileParams(path="long.txt", max_chars=1_000), 1_000_000)
    assert first.structured is not None
    assert first.truncated is True
    assert model_view(first.structured, first.text).__len__() <= 1_000 + 200
    cut = first.structured["next_start_line"]
    assert first.structured["text"] == "".join(lines[: cut - 1])
    assert f"start_line={cut}" in first.text

    pages, start = [first.structured["text"]], cut
    while start is not None:
        page = read_file(
            workspace, ReadFileParams(path="long.txt", start_line=start, max_chars=1_000), 1_000_000
        )
        assert page.structured is not None
        pages.append(page.structured["text"])
        start = page.structured.get("next_start_line")
    assert "".join(pages) == "".join(lines)


def test_read_file_keeps_the_last_line_without_a_newline(workspace: Workspace) -> None:
    write(workspace.root, {"notes.txt": "one\ntwo"})

    assert read(workspace, "notes.txt", start=2) == "two"


def test_read_file_counts_crlf_as_one_line_break(workspace: Workspace) -> None:
    write(workspace.root, {"dos.txt": b"one\r\ntwo\r\n"})

    assert read(workspace, "dos.txt", start=2) == "two\r\n"


def test_read_file_numbers_lines_by_newline_as_compilers_and_grep_do(workspace: Workspace) -> None:
    # A form feed (a page break in older sources) and U+2028 are not line breaks for
    # Python, ruff, mypy or grep; a client reading "line 2" from their output must get it.
    write(workspace.root, {"paged.py": "a = 1\x0c\nb = '\u2028'\nc = 3\n"})

    result = read_file(workspace, ReadFileParams(path="paged.py", start_line=2, end_line=2), LIMIT)

    assert result.text == "b = '\u2028'\n"
    assert result.structured is not None
    assert result.structured["total_lines"] == 3


def test_read_file_params_refuse_an_end_line_before_the_start_line() -> None:
    with pytest.raises(ValidationError):
        ReadFileParams(path="notes.txt", start_line=3, end_line=2)


@pytest.mark.parametrize("field", ["start_line", "end_line"])
def test_read_file_params_refuse_line_zero(field: str) -> None:
    with pytest.raises(ValidationError):
        ReadFileParams.model_validate({"path": "notes.txt", field: 0})


def test_read_file_refuses_a_file_with_nul_in_its_first_bytes(workspace: Workspace) -> None:
    write(workspace.root, {"image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"})

    with pytest.raises(BinaryFileError) as caught:
        read(workspace, "image.png")

    assert caught.value.code == "binary_file"


def test_read_file_refuses_a_binary_file_read_by_line_range(workspace: Workspace) -> None:
    write(workspace.root, {"data.bin": b"one\ntwo\x00\n"})

    with pytest.raises(BinaryFileError) as caught:
        read(workspace, "data.bin", start=1, end=1)

    assert caught.value.code == "binary_file"


def test_read_file_reads_a_nul_past_the_sniffed_bytes_as_text(workspace: Workspace) -> None:
    content = "a" * files.BINARY_SNIFF_BYTES + "\x00\n"
    write(workspace.root, {"late.txt": content})

    result = read_file(workspace, ReadFileParams(path="late.txt"), len(content))

    assert result.text == content


def test_read_file_refuses_a_file_that_is_not_utf8(workspace: Workspace) -> None:
    write(workspace.root, {"latin1.txt": "café\n".encode("latin-1")})

    with pytest.raises(BinaryFileError) as caught:
        read(workspace, "latin1.txt")

    assert caught.value.code == "binary_file"


def test_read_file_refuses_a_whole_read_over_max_output_bytes(workspace: Workspace) -> None:
    write(workspace.root, {"big.txt": "line\n" * 300})

    with pytest.raises(FileTooLargeError) as caught:
        read(workspace, "big.txt")

    assert caught.value.code == "file_too_large"


def test_read_file_reads_a_whole_file_of_exactly_max_output_bytes(workspace: Workspace) -> None:
    content = "x" * (LIMIT - 1) + "\n"
    write(workspace.root, {"full.txt": content})

    assert read(workspace, "full.txt") == content


def test_read_file_reads_a_line_range_of_a_file_over_max_output_bytes(workspace: Workspace) -> None:
    write(workspace.root, {"big.txt": "".join(f"line {n}\n" for n in range(1, 301))})

    result = read_file(workspace, ReadFileParams(path="big.txt", start_line=150, end_line=151), LIMIT)

    assert result.text == "line 150\nline 151\n"
    assert result.structured is not None
    assert result.structured["total_lines"] == 300


def test_read_file_refuses_a_line_range_of_a_file_over_the_scan_limit(workspace: Workspace) -> None:
    write(workspace.root, {"big.txt": "line\n" * 30})
    params = ReadFileParams(path="big.txt", start_line=1, end_line=1)

    assert read_file(workspace, params, LIMIT, range_scan_limit=150).text == "line\n"
    with pytest.raises(FileTooLargeError) as caught:
        read_file(workspace, params, LIMIT, range_scan_limit=100)

    assert caught.value.code == "file_too_large"


@pytest.mark.parametrize("path", ["missing.txt", "missing/file.txt"])
def test_read_file_answers_a_missing_file_with_not_found(workspace: Workspace, path: str) -> None:
    with pytest.raises(NotFoundError) as caught:
        read(workspace, path)

    assert caught.value.code == "not_found"


@pytest.mark.parametrize("path", [".", "src"])
def test_read_file_refuses_a_folder(workspace: Workspace, path: str) -> None:
    write(workspace.root, {"src/core.py": FOUR_LINES})

    with pytest.raises(PathRefusedError) as caught:
        read(workspace, path)

    assert caught.value.code == "path_refused"


def test_read_file_refuses_a_path_outside_the_root(workspace: Workspace) -> None:
    with pytest.raises(PathRefusedError) as caught:
        read(workspace, "../outside/secret.txt")

    assert caught.value.code == "path_refused"


def test_read_file_refuses_a_symlink_loop(workspace: Workspace) -> None:
    (workspace.root / "loop").symlink_to("loop")

    with pytest.raises(PathRefusedError) as caught:
        read(workspace, "loop")

    assert caught.value.code == "path_refused"


def test_read_file_reads_through_a_symlink_inside_and_reports_the_target(workspace: Workspace) -> None:
    write(workspace.root, {"real.txt": FOUR_LINES})
    (workspace.root / "link.txt").symlink_to("real.txt")

    result = read_file(workspace, ReadFileParams(path="link.txt"), LIMIT)

    assert result.text == FOUR_LINES
    assert result.structured is not None
    assert result.structured["path"] == "real.txt"


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.sampled_from("ab \n\r\u00e9"), max_size=40))
def test_a_whole_read_counts_the_lines_a_range_read_numbers(workspace: Workspace, text: str) -> None:
    (workspace.root / "counted.txt").write_bytes(text.encode())

    whole = read_file(workspace, ReadFileParams(path="counted.txt"), LIMIT)
    ranged = read_file(workspace, ReadFileParams(path="counted.txt", start_line=1), LIMIT)

    assert whole.text == ranged.text == text
    assert whole.structured == ranged.structured
    assert whole.structured is not None
    # Lines end at "\n" only; a last line without one still counts.
    pieces = text.split("\n")
    assert whole.structured["total_lines"] == len(pieces) - 1 + (1 if pieces[-1] else 0)


def test_a_small_file_is_read_on_the_event_loop_and_a_larger_one_in_a_thread(workspace: Workspace) -> None:
    write(
        workspace.root,
        {"small.txt": "x" * files.INLINE_READ_BYTES, "large.txt": "x" * (files.INLINE_READ_BYTES + 1)},
    )
    os.mkfifo(workspace.root / "pipe")
    env = ToolEnv(workspace=workspace, max_output_bytes=LIMIT)

    def inline(path: str) -> bool:
        return files.READ_FILE.plan(ReadFileParams(path=path), env).inline  # type: ignore[union-attr]

    assert inline("small.txt") is True
    assert inline("large.txt") is False
    # Not a regular file, or not there: the threaded read reports what is wrong.
    assert inline("pipe") is False
    assert inline("missing.txt") is False


# list_files


def test_list_files_lists_in_name_order_each_folder_files_first_then_subfolders(workspace: Workspace) -> None:
    write(workspace.root, dict.fromkeys(["b.txt", "a.txt", "C.txt", "m/y.txt", "m/x.txt", "d/z.txt"], ""))

    # Names sort by code point (upper case first); a folder's files come before its subfolders.
    assert listed(workspace) == ["C.txt", "a.txt", "b.txt", "d/z.txt", "m/x.txt", "m/y.txt"]


def test_list_files_lists_nested_folders_sorted_by_path_as_git_does(workspace: Workspace) -> None:
    write(workspace.root, dict.fromkeys(["a/b/c/deep.txt", "a/b/mid.txt", "a/top.txt", "a.txt", "z.txt"], ""))

    # "a.txt" before "a/...": git compares a folder's name as "a/", and "." sorts before "/".
    assert listed(workspace) == ["a.txt", "a/b/c/deep.txt", "a/b/mid.txt", "a/top.txt", "z.txt"]


def test_list_files_reports_each_file_by_its_path_and_no_size_by_default(workspace: Workspace) -> None:
    write(workspace.root, {"src/core.py": FOUR_LINES})

    result = list_files(workspace, ListFilesParams(path="src"))

    # As a host's own file search answers: paths. A read says a file is too large when it is.
    assert result.structured == {
        "folder": "src",
        "files": ["src/core.py"],
        "truncated": False,
    }
    assert result.text == "src/core.py"
    assert result.truncated is False


def test_list_files_with_sizes_reports_each_file_with_its_size(workspace: Workspace) -> None:
    write(workspace.root, {"src/core.py": FOUR_LINES, "src/empty.py": ""})
    (workspace.root / "src" / "link.py").symlink_to("core.py")

    result = list_files(workspace, ListFilesParams(path="src", sizes=True))

    assert result.structured == {
        "folder": "src",
        "files": ["src/core.py", "src/empty.py", "src/link.py"],
        "symlinks": ["src/link.py"],
        # A symlink's own size, the length of its target's name: it is not followed.
        "size_bytes": [len(FOUR_LINES), 0, len("core.py")],
        "truncated": False,
    }
    assert result.text == "src/core.py\nsrc/empty.py\nsrc/link.py"


def test_list_files_reports_the_root_folder_as_dot(workspace: Workspace) -> None:
    result = list_files(workspace, ListFilesParams())

    assert result.structured == {"folder": ".", "files": [], "truncated": False}


def test_list_files_skips_what_the_root_gitignore_ignores(workspace: Workspace) -> None:
    write(
        workspace.root,
        {
            ".gitignore": "*.log\nbuild/\n",
            "debug.log": "",
            "build/out.txt": "",
            "src/trace.log": "",
            "src/core.py": "",
        },
    )

    assert listed(workspace) == [".gitignore", "src/core.py"]


def test_list_files_applies_a_subfolder_gitignore_only_below_it(workspace: Workspace) -> None:
    write(
        workspace.root,
        {"sub/.gitignore": "*.tmp\n", "sub/scratch.tmp": "", "sub/keep.txt": "", "top.tmp": ""},
    )

    assert listed(workspace) == ["sub/.gitignore", "sub/keep.txt", "top.tmp"]


def test_list_files_re_includes_a_file_negated_in_the_same_gitignore(workspace: Workspace) -> None:
    write(workspace.root, {".gitignore": "*.log\n!keep.log\n", "debug.log": "", "keep.log": ""})

    assert listed(workspace) == [".gitignore", "keep.log"]


def test_list_files_lets_a_deeper_gitignore_negate_an_outer_rule(workspace: Workspace) -> None:
    write(
        workspace.root,
        {".gitignore": "*.log\n", "sub/.gitignore": "!keep.log\n", "sub/keep.log": "", "sub/drop.log": ""},
    )

    assert listed(workspace) == [".gitignore", "sub/.gitignore", "sub/keep.log"]


def test_list_files_does_not_descend_an_ignored_folder(workspace: Workspace) -> None:
    # Git cannot re-include a file whose folder is excluded, so the negation has no effect.
    write(workspace.root, {".gitignore": "build/\n!build/keep.txt\n", "build/keep.txt": "", "a.txt": ""})

    assert listed(workspace) == [".gitignore", "a.txt"]


def test_list_files_applies_outer_gitignore_rules_when_listing_a_subfolder(workspace: Workspace) -> None:
    write(workspace.root, {".gitignore": "*.log\n", "src/trace.log": "", "src/core.py": ""})

    assert listed(workspace, "src") == ["src/core.py"]


def test_list_files_ignores_a_gitignore_that_is_a_symlink(workspace: Workspace) -> None:
    (workspace.root.parent / "outside" / "rules").write_text("*\n")
    (workspace.root / ".gitignore").symlink_to(workspace.root.parent / "outside" / "rules")
    write(workspace.root, {"a.txt": ""})

    assert listed(workspace) == [".gitignore", "a.txt"]


def test_list_files_never_lists_the_git_folder(workspace: Workspace) -> None:
    write(
        workspace.root,
        {".git/HEAD": "ref: refs/heads/main\n", ".git/config": "", "vendor/lib/.git/HEAD": "", "a.txt": ""},
    )

    assert listed(workspace) == ["a.txt"]


def test_list_files_honours_git_info_exclude(workspace: Workspace) -> None:
    write(
        workspace.root,
        {".git/info/exclude": "secret.txt\n", "secret.txt": "", "src/secret.txt": "", "a.txt": ""},
    )

    assert listed(workspace) == ["a.txt"]


def test_list_files_honours_git_info_exclude_when_listing_a_subfolder(workspace: Workspace) -> None:
    write(workspace.root, {".git/info/exclude": "*.tmp\n", "src/scratch.tmp": "", "src/core.py": ""})

    assert listed(workspace, "src") == ["src/core.py"]


def test_list_files_keeps_only_files_matching_a_glob_at_any_depth(workspace: Workspace) -> None:
    write(workspace.root, {"setup.py": "", "README.md": "", "src/pkg/core.py": "", "src/pkg/data.json": ""})

    assert listed(workspace, glob="*.py") == ["setup.py", "src/pkg/core.py"]


def test_list_files_matches_a_glob_with_a_slash_from_the_listed_folder(workspace: Workspace) -> None:
    write(
        workspace.root,
        {"setup.py": "", "src/top.py": "", "src/pkg/core.py": "", "src/pkg/data.json": "", "tests/t.py": ""},
    )

    assert listed(workspace, glob="src/**/*.py") == ["src/pkg/core.py", "src/top.py"]


def test_list_files_matches_a_glob_relative_to_a_listed_subfolder(workspace: Workspace) -> None:
    write(workspace.root, {"src/pkg/core.py": "", "src/pkg/data.json": "", "pkg/other.py": ""})

    assert listed(workspace, "src", glob="pkg/*.py") == ["src/pkg/core.py"]


def test_list_files_stops_at_max_results_and_says_it_was_truncated(workspace: Workspace) -> None:
    write(workspace.root, {f"f{n}.txt": "" for n in range(5)})

    result = list_files(workspace, ListFilesParams(max_results=3))

    assert result.structured is not None
    assert result.structured["files"] == ["f0.txt", "f1.txt", "f2.txt"]
    assert (len(result.structured["files"]), result.structured["truncated"], result.truncated) == (
        3,
        True,
        True,
    )
    assert result.text.splitlines()[:3] == ["f0.txt", "f1.txt", "f2.txt"]
    assert len(result.text.splitlines()) == 4


def test_list_files_is_not_truncated_with_exactly_max_results_files(workspace: Workspace) -> None:
    write(workspace.root, {f"f{n}.txt": "" for n in range(3)})

    result = list_files(workspace, ListFilesParams(max_results=3))

    assert result.structured is not None
    assert (len(result.structured["files"]), result.structured["truncated"], result.truncated) == (
        3,
        False,
        False,
    )
    assert result.text == "f0.txt\nf1.txt\nf2.txt"


def test_list_files_is_not_truncated_when_only_non_matching_files_follow_max_results(
    workspace: Workspace,
) -> None:
    write(workspace.root, {"a.py": "", "b.py": "", "c.txt": "", "d.txt": ""})

    result = list_files(workspace, ListFilesParams(glob="*.py", max_results=2))

    assert result.structured is not None
    assert (len(result.structured["files"]), result.structured["truncated"]) == (2, False)


def test_list_files_stops_at_the_scan_limit_however_few_files_match(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "", "b.txt": "", "c.txt": "", "d.txt": "", "e.py": ""})

    result = list_files(workspace, ListFilesParams(glob="*.py"), scan_limit=3)

    assert result.structured is not None
    assert (result.structured["files"], result.structured["truncated"]) == (
        ["a.py"],
        True,
    )


def test_list_files_counts_folders_toward_the_scan_limit(workspace: Workspace) -> None:
    for name in ("a", "b", "c", "d"):
        (workspace.root / name).mkdir()
    write(workspace.root, {"z.py": ""})

    result = list_files(workspace, ListFilesParams(), scan_limit=3)

    assert result.structured is not None
    assert (result.structured["files"], result.structured["truncated"]) == ([], True)


@pytest.mark.parametrize("max_results", [0, files.LIST_FILES_MAX + 1])
def test_list_files_params_refuse_max_results_out_of_bounds(max_results: int) -> None:
    with pytest.raises(ValidationError):
        ListFilesParams(max_results=max_results)


def test_list_files_params_refuse_a_glob_with_a_control_character() -> None:
    with pytest.raises(ValidationError):
        ListFilesParams(glob="*.py\n")


def test_list_files_lists_a_symlinked_folder_as_a_symlink_without_following_it(workspace: Workspace) -> None:
    write(workspace.root, {"real/inner.txt": ""})
    (workspace.root / "inside_link").symlink_to("real")
    (workspace.root / "outside_link").symlink_to(workspace.root.parent / "outside")

    result = list_files(workspace, ListFilesParams())

    assert result.structured is not None
    assert result.structured["files"] == ["inside_link", "outside_link", "real/inner.txt"]
    assert result.structured["symlinks"] == ["inside_link", "outside_link"]


def test_list_files_lists_a_symlinked_file_among_the_symlinks(workspace: Workspace) -> None:
    write(workspace.root, {"real.txt": FOUR_LINES})
    (workspace.root / "link.txt").symlink_to("real.txt")
    (workspace.root / "dangling.txt").symlink_to("gone.txt")

    result = list_files(workspace, ListFilesParams())

    assert result.structured is not None
    assert result.structured["files"] == ["dangling.txt", "link.txt", "real.txt"]
    assert result.structured["symlinks"] == ["dangling.txt", "link.txt"]


def test_list_files_skips_what_is_neither_a_file_nor_a_symlink(workspace: Workspace) -> None:
    write(workspace.root, {"a.txt": ""})
    os.mkfifo(workspace.root / "pipe")

    assert listed(workspace) == ["a.txt"]


def test_list_files_refuses_a_path_that_is_a_file(workspace: Workspace) -> None:
    write(workspace.root, {"a.txt": ""})

    with pytest.raises(PathRefusedError) as caught:
        list_files(workspace, ListFilesParams(path="a.txt"))

    assert caught.value.code == "path_refused"


def test_list_files_answers_a_missing_folder_with_not_found(workspace: Workspace) -> None:
    with pytest.raises(NotFoundError) as caught:
        list_files(workspace, ListFilesParams(path="missing"))

    assert caught.value.code == "not_found"


@pytest.mark.parametrize("path", ["..", "../outside", "OUTSIDE"])
def test_list_files_refuses_a_path_outside_the_root(workspace: Workspace, path: str) -> None:
    path = path.replace("OUTSIDE", str(workspace.root.parent / "outside"))

    with pytest.raises(PathRefusedError) as caught:
        list_files(workspace, ListFilesParams(path=path))

    assert caught.value.code == "path_refused"


@pytest.mark.parametrize("sizes", [False, True])
def test_list_files_pages_return_every_file_exactly_once_within_the_budget(
    workspace: Workspace, sizes: bool
) -> None:
    write(workspace.root, {f"pkg{n % 7}/sub{n % 3}/module_{n:03}.py": "x = 1\n" for n in range(300)})
    # Names the page must escape or quote, and symlinks, which the answer names twice.
    write(
        workspace.root,
        {f"odd/{name}{n}.txt": "y\n" for n in range(12) for name in ('q"', "b\\", "é", "tab\t")},
    )
    for n in range(12):
        (workspace.root / "odd" / f"link{n}").symlink_to(f"é{n}.txt")
    everything = listed(workspace)

    paged: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = list_files(workspace, ListFilesParams(offset=offset, max_chars=1_000, sizes=sizes))
        assert page.structured is not None
        assert len(model_view(page.structured, page.text)) <= 1_000
        if sizes:
            assert len(page.structured["size_bytes"]) == len(page.structured["files"])
        else:
            assert "size_bytes" not in page.structured
        paged += page.structured["files"]
        offset = page.structured.get("next_offset")
        assert (offset is None) or f"offset={offset}" in page.text

    assert len(everything) == 300 + 48 + 12
    assert paged == everything


@pytest.mark.parametrize("sizes", [False, True])
def test_a_page_counts_exactly_what_its_lists_add_to_the_answer(workspace: Workspace, sizes: bool) -> None:
    # The budget is kept by counting each entry without building the JSON: the count must be the
    # JSON's own size, for names JSON escapes and symlinks named twice, taken whole or one by one.
    names = ["plain.py", 'q"uote.txt', "back\\slash", "é-accent.md", "tab\tname", "x" * 120]
    write(workspace.root, dict.fromkeys(names, "y" * 7))
    for name in names:
        (workspace.root / f"link-{name}").symlink_to(name)
    with os.scandir(workspace.root) as found:
        entries = sorted(found, key=lambda entry: entry.name)
    for whole in (True, False):
        page = files._Page(1_000_000, 10_000, 0, sizes)
        if whole:
            assert page.add("", entries)
        else:
            for entry in entries:
                assert page.add("", [entry])
        lists = [page.files, page.links, *([page.sizes] if sizes else [])]
        # Each list's JSON without its brackets: the envelope (results.py) keeps room for those.
        written = sum(
            len(json.dumps(values, ensure_ascii=False, separators=(",", ":"))) - 1 for values in lists
        )

        assert len(page.links) == len(names)
        assert 1_000_000 - page.room == written


@pytest.mark.parametrize("sizes", [False, True])
def test_a_page_of_long_symlinks_stays_within_the_budget_though_each_is_named_twice(
    workspace: Workspace, sizes: bool
) -> None:
    write(workspace.root, {"target.txt": "x\n"})
    for n in range(40):
        (workspace.root / f"link-{n:02}-{'x' * 60}").symlink_to("target.txt")

    pages, offset = 0, 0
    while offset is not None:
        page = list_files(workspace, ListFilesParams(offset=offset, max_chars=1_000, sizes=sizes))
        assert page.structured is not None
        assert len(model_view(page.structured, page.text)) <= 1_000
        assert page.structured["symlinks"] == [p for p in page.structured["files"] if p.startswith("link-")]
        pages += 1
        offset = page.structured.get("next_offset")

    assert pages > 5


@pytest.mark.parametrize("sizes", [False, True])
def test_list_files_cursor_pages_return_every_file_once_and_the_offsets_of_offset_paging(
    workspace: Workspace, sizes: bool
) -> None:
    write(workspace.root, {f"pkg{n % 7}/sub{n % 3}/module_{n:03}.py": "x = 1\n" for n in range(300)})
    # Names the page must escape or quote, and symlinks, which the answer names twice.
    write(
        workspace.root,
        {f"odd/{name}{n}.txt": "y\n" for n in range(12) for name in ('q"', "b\\", "é", "tab\t")},
    )
    for n in range(12):
        (workspace.root / "odd" / f"link{n}").symlink_to(f"é{n}.txt")
    everything = listed(workspace)

    paged: list[str] = []
    cursor: str | None = None
    while True:
        page = list_files(workspace, ListFilesParams(cursor=cursor, max_chars=1_000, sizes=sizes))
        assert page.structured is not None
        assert len(model_view(page.structured, page.text)) <= 1_000
        paged += page.structured["files"]
        cursor = page.structured.get("next_cursor")
        if cursor is None:
            break
        assert f"cursor={cursor}" in page.text
        assert page.structured["next_offset"] == len(paged)
        assert (
            ListFilesOutput.model_validate(page.structured).model_dump(exclude_none=True) == page.structured
        )

    assert len(paged) == 300 + 48 + 12
    assert paged == everything


def test_list_files_cursor_page_walks_only_what_follows(workspace: Workspace) -> None:
    write(workspace.root, {f"a{n:03}.txt": "x\n" for n in range(200)} | {"b/last.txt": "y\n"})
    first = list_files(workspace, ListFilesParams(max_results=199))
    assert first.structured is not None
    # The scan limit counts every entry a walk sees: 201 from the start, 3 from the cursor on.
    rest = list_files(workspace, ListFilesParams(cursor=first.structured["next_cursor"]), scan_limit=10)

    assert rest.structured is not None
    assert rest.structured["files"] == ["a199.txt", "b/last.txt"]
    assert rest.structured["truncated"] is False


def test_list_files_offset_a_page_gave_resumes_without_walking_the_pages_before(workspace: Workspace) -> None:
    write(workspace.root, {f"a{n:03}.txt": "x\n" for n in range(200)} | {"b/last.txt": "y\n"})
    first = list_files(workspace, ListFilesParams(max_results=199))
    assert first.structured is not None
    rest = list_files(workspace, ListFilesParams(offset=first.structured["next_offset"]), scan_limit=10)

    assert rest.structured is not None
    assert rest.structured["files"] == ["a199.txt", "b/last.txt"]
    assert rest.structured["truncated"] is False


def test_list_files_offset_no_page_gave_is_walked_to(workspace: Workspace) -> None:
    write(workspace.root, {f"a{n:03}.txt": "x\n" for n in range(20)})

    assert listed_from(workspace, offset=17) == ["a017.txt", "a018.txt", "a019.txt"]
    # A mark for another folder or glob is not this listing's.
    list_files(workspace, ListFilesParams(glob="a00*", max_results=3))
    assert listed_from(workspace, offset=3)[:2] == ["a003.txt", "a004.txt"]


def listed_from(workspace: Workspace, offset: int) -> list[str]:
    result = list_files(workspace, ListFilesParams(offset=offset))
    assert result.structured is not None
    return list(result.structured["files"])


@pytest.mark.parametrize("cursor", ["not base64!", "bm90IGEgY3Vyc29y", "LTE6MDphLnR4dA=="])
def test_list_files_refuses_a_cursor_no_result_gave(cursor: str) -> None:
    with pytest.raises(ValidationError, match="cursor is not one a result gave"):
        ListFilesParams(cursor=cursor)


def test_list_files_refuses_offset_and_cursor_together() -> None:
    with pytest.raises(ValidationError, match="pass offset or cursor, not both"):
        ListFilesParams(offset=3, cursor="MDowOmEudHh0")


def test_read_files_reads_several_files_and_names_the_ones_it_cannot_read(workspace: Workspace) -> None:
    write(workspace.root, {"a.txt": "alpha\n", "b.bin": b"\x00\x01", "c.txt": FOUR_LINES})

    result = read_files(workspace, ReadFilesParams(paths=["a.txt", "b.bin", "missing.txt", "c.txt"]), LIMIT)

    assert result.structured is not None
    assert [(f["path"], f["text"]) for f in result.structured["files"]] == [
        ("a.txt", "alpha\n"),
        ("c.txt", FOUR_LINES),
    ]
    assert [(u["path"], u["problem"].split("]")[0]) for u in result.structured["unread"]] == [
        ("b.bin", "[binary_file"),
        ("missing.txt", "[not_found"),
    ]
    assert "==> c.txt <==\none\n" in result.text


def test_read_files_shares_one_budget_and_cuts_the_file_that_passes_it(workspace: Workspace) -> None:
    lines = "".join(f"line {n:04} " + "x" * 90 + "\n" for n in range(1, 31))
    write(workspace.root, {"a.txt": lines, "b.txt": lines, "c.txt": lines})

    result = read_files(
        workspace, ReadFilesParams(paths=["a.txt", "b.txt", "c.txt"], max_chars=5_000), 1_000_000
    )

    assert result.structured is not None
    assert len(model_view(result.structured, result.text)) <= 5_000 + 600
    (first, second) = result.structured["files"]
    assert first["text"] == lines
    assert second["next_start_line"] > 1
    assert [u["path"] for u in result.structured["unread"]] == ["c.txt"]


def test_a_listing_under_a_path_longer_than_its_budget_still_moves_on_a_file_a_page(
    workspace: Workspace,
) -> None:
    # A page with no entry would name its own offset as the next: a client paging to the end
    # would ask for it for ever. The first entry goes out whatever its size.
    folder = "/".join(["d" * 250] * 6)
    write(workspace.root, {f"{folder}/a.txt": "", f"{folder}/b.txt": ""})

    paged: list[str] = []
    offset: int | None = 0
    for _ in range(5):
        page = list_files(workspace, ListFilesParams(path=folder, offset=offset or 0, max_chars=1_000))
        assert page.structured is not None
        paged += page.structured["files"]
        offset = page.structured.get("next_offset")
        if offset is None:
            break

    assert paged == [f"{folder}/a.txt", f"{folder}/b.txt"]
