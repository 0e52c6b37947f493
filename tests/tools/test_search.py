"""oct_search called directly and through the chain: text and regex, bounds, .gitignore, regex safety."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from clocks import TickingClock
from pydantic import ValidationError
from trees import write

from oct_mcp.app import CallFailure, build_app, run_call
from oct_mcp.errors import NotFoundError, PathRefusedError
from oct_mcp.tools import search as search_module
from oct_mcp.tools._paging.results import model_view
from oct_mcp.tools.search import SEARCH, SearchLimits, SearchParams, search
from oct_mcp.types import ClientInfo, ToolResult
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.e2e

_CLIENTS = itertools.count()


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    (tmp_path / "outside.txt").write_text("needle outside\n")
    return Workspace(root)


def found(workspace: Workspace, **arguments: Any) -> list[tuple[str, int, str]]:
    result = search(workspace, SearchParams(**arguments))
    assert result.structured is not None
    return [(m["path"], m["line"], m["text"]) for m in result.structured["matches"]]


def test_search_finds_a_string_with_path_line_and_text_in_path_order(workspace: Workspace) -> None:
    write(workspace.root, {"b.py": "x = 1\nneedle = 2\n", "a/c.py": "needle\n", "d.txt": "no\n"})

    assert found(workspace, pattern="needle") == [("a/c.py", 1, "needle"), ("b.py", 2, "needle = 2")]


def test_search_reports_the_column_and_counts(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "  café needle\n", "b.py": "none\n"})

    result = search(workspace, SearchParams(pattern="needle"))

    assert result.structured == {
        "matches": [{"path": "a.py", "line": 1, "column": 8, "text": "  café needle"}],
        "files_searched": 2,
        "files_with_matches": 1,
        "files_skipped": 0,
        "truncated": False,
        "stopped_early": False,
    }
    assert result.text == "a.py:1:  café needle\n[oct-mcp: 1 shown; 1 file(s) match]"


def test_search_reads_the_pattern_as_text_unless_regex_is_set(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "a.b\naxb\n"})

    assert found(workspace, pattern="a.b") == [("a.py", 1, "a.b")]
    assert found(workspace, pattern="a.b", regex=True) == [("a.py", 1, "a.b"), ("a.py", 2, "axb")]


def test_search_matches_line_anchors_at_every_line(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "import os\ndef f():\n    def g(): pass\ndef h(): pass"})

    assert found(workspace, pattern=r"^def (\w+)", regex=True) == [
        ("a.py", 2, "def f():"),
        ("a.py", 4, "def h(): pass"),
    ]
    assert found(workspace, pattern="pass$", regex=True) == [
        ("a.py", 3, "    def g(): pass"),
        ("a.py", 4, "def h(): pass"),
    ]


def test_search_never_matches_across_a_line_break(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "first\nsecond\n"})

    assert found(workspace, pattern=r"first\s+second", regex=True) == []


def test_search_ignores_case_when_asked(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "Needle\nÉTÉ\n"})

    assert found(workspace, pattern="needle") == []
    assert found(workspace, pattern="needle", case_sensitive=False) == [("a.py", 1, "Needle")]
    assert found(workspace, pattern="été", case_sensitive=False) == [("a.py", 2, "ÉTÉ")]


def test_search_gives_one_result_per_line(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "aa aa aa\n"})

    assert found(workspace, pattern="aa") == [("a.py", 1, "aa aa aa")]


def test_search_gives_no_phantom_line_for_an_empty_match_at_the_end(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "one\ntwo\n"})

    assert found(workspace, pattern="x*", regex=True) == [("a.py", 1, "one"), ("a.py", 2, "two")]


def test_search_drops_a_carriage_return_from_the_line(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "one\r\nneedle\r\n"})

    assert found(workspace, pattern="needle") == [("a.py", 2, "needle")]


def test_search_respects_gitignore_and_skips_dot_git(workspace: Workspace) -> None:
    write(
        workspace.root,
        {
            ".gitignore": "build/\n*.log\n",
            "build/out.py": "needle\n",
            "debug.log": "needle\n",
            ".git/config": "needle\n",
            "src/keep.py": "needle\n",
        },
    )

    assert found(workspace, pattern="needle") == [("src/keep.py", 1, "needle")]


def test_search_filters_files_by_glob(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "needle\n", "b.txt": "needle\n", "src/c.py": "needle\n"})

    assert [path for path, _, _ in found(workspace, pattern="needle", glob="*.py")] == ["a.py", "src/c.py"]
    assert [path for path, _, _ in found(workspace, pattern="needle", glob="src/**/*.py")] == ["src/c.py"]


def test_search_searches_under_a_folder_or_in_one_file(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "needle\n", "src/b.py": "needle\n"})

    assert found(workspace, pattern="needle", path="src") == [("src/b.py", 1, "needle")]
    assert found(workspace, pattern="needle", path="a.py") == [("a.py", 1, "needle")]


def test_search_skips_binary_and_oversized_files_and_counts_them(workspace: Workspace) -> None:
    limits = SearchLimits(file_max_bytes=100)
    write(workspace.root, {"bin.dat": b"needle\x00\x01", "big.txt": "needle\n" * 20, "a.py": "needle\n"})

    result = search(workspace, SearchParams(pattern="needle"), limits=limits)

    assert result.structured is not None
    assert [m["path"] for m in result.structured["matches"]] == ["a.py"]
    assert (result.structured["files_searched"], result.structured["files_skipped"]) == (1, 2)
    assert "2 binary, oversized or unreadable file(s) skipped" in result.text


def test_search_does_not_follow_symlinks(workspace: Workspace) -> None:
    write(workspace.root, {"real.py": "needle\n"})
    (workspace.root / "link.py").symlink_to("real.py")
    (workspace.root / "out.txt").symlink_to(workspace.root.parent / "outside.txt")

    assert found(workspace, pattern="needle") == [("real.py", 1, "needle")]


def test_search_stops_at_max_results_and_says_so(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "needle\n" * 3, "b.py": "needle\n"})

    result = search(workspace, SearchParams(pattern="needle", max_results=2))

    assert result.structured is not None
    assert [(m["path"], m["line"]) for m in result.structured["matches"]] == [("a.py", 1), ("a.py", 2)]
    assert (result.structured["truncated"], result.truncated) == (True, True)
    cursor = result.structured["next_cursor"]
    assert f"more follow: call again with cursor={cursor} (or offset=2)" in result.text


def test_search_is_not_truncated_with_exactly_max_results_matches(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "needle\nneedle\n", "b.py": "nothing\n"})

    result = search(workspace, SearchParams(pattern="needle", max_results=2))

    assert result.structured is not None
    assert (len(result.structured["matches"]), result.structured["truncated"]) == (2, False)


def test_search_cuts_a_long_line_to_a_window_around_the_match(workspace: Workspace) -> None:
    line = "a" * 5_000 + "needle" + "b" * 5_000
    write(workspace.root, {"min.js": line + "\n"})

    result = search(workspace, SearchParams(pattern="needle"))

    assert result.structured is not None
    (match,) = result.structured["matches"]
    assert (match["column"], match["line_cut"]) == (5_001, True)
    assert len(match["text"]) == search_module.LINE_TEXT_MAX
    assert "needle" in match["text"]


def test_search_reads_its_time_limit_between_files_and_stops_there_with_what_it_found(
    workspace: Workspace,
) -> None:
    write(workspace.root, {f"f{n:03}.txt": "needle\n" for n in range(300)})
    clock = TickingClock(0.01)
    # 100 readings of the clock: a search of 300 files, each read and matched, stops part way.
    limits = SearchLimits(time_seconds=1.0, clock=clock)

    result = search(workspace, SearchParams(pattern="needle", mode="files", max_results=500), limits=limits)

    assert result.structured is not None
    shown = [entry["path"] for entry in result.structured["files"]]
    assert result.structured["stopped_early"] is True
    assert 0 < len(shown) == result.structured["files_searched"] < 100
    # What it found before the time was up, in order: the first files, none skipped.
    assert shown == [f"f{n:03}.txt" for n in range(len(shown))]
    assert clock.readings <= 101


def test_search_stops_early_at_its_time_limit(workspace: Workspace) -> None:
    limits = SearchLimits(time_seconds=-1.0)
    write(workspace.root, {"a.py": "needle\n"})

    result = search(workspace, SearchParams(pattern="needle"), limits=limits)

    assert result.structured is not None
    assert (result.structured["matches"], result.structured["stopped_early"]) == ([], True)
    assert "time or size limit" in result.text


def test_search_runs_a_catastrophic_pattern_in_linear_time(workspace: Workspace) -> None:
    write(workspace.root, {"a.txt": "a" * 100_000 + "b\n"})
    started = time.monotonic()

    assert found(workspace, pattern="(a+)+$", regex=True) == []
    # Python's re would take longer than the universe's age here; RE2 takes milliseconds.
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("pattern", ["(a", "a{2000}", "[z-a]", r"(a)\1", "(?<=a)b"])
def test_search_params_refuse_a_bad_regex_without_repeating_it(pattern: str) -> None:
    with pytest.raises(ValidationError) as caught:
        SearchParams(pattern=pattern, regex=True)

    message = str(caught.value.errors()[0]["msg"])
    assert message.startswith("Value error, pattern is not a valid RE2 regular expression (")
    assert pattern not in message


def test_search_params_accept_regex_syntax_as_plain_text() -> None:
    assert SearchParams(pattern="(a").pattern == "(a"


@pytest.mark.parametrize(
    "arguments",
    [
        {"pattern": ""},
        {"pattern": "x" * 1_001},
        {"pattern": "a\nb"},
        {"pattern": "x", "max_results": 0},
        {"pattern": "x", "max_results": 2_001},
        {"pattern": "x", "glob": "*.py\n"},
        {"pattern": "x", "regex": "yes"},
        {"pattern": "x", "extra": 1},
    ],
)
def test_search_params_refuse_what_is_out_of_bounds(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SearchParams(**arguments)


def test_search_answers_a_missing_path_with_not_found(workspace: Workspace) -> None:
    with pytest.raises(NotFoundError):
        search(workspace, SearchParams(pattern="x", path="missing"))


def test_search_refuses_a_path_outside_the_root(workspace: Workspace) -> None:
    with pytest.raises(PathRefusedError):
        search(workspace, SearchParams(pattern="x", path="../outside.txt"))


def test_search_spec_is_a_read_only_idempotent_closed_world_tool() -> None:
    assert SEARCH.annotations == {
        "title": "Search project files",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert SEARCH.path_fields == frozenset({"path"})


def _call(project: Path, config: Path, arguments: dict[str, Any]) -> ToolResult | CallFailure:
    app = build_app(project, config_path=config, environ={})
    client = ClientInfo(client_id=f"search-{next(_CLIENTS)}", transport="memory")
    outcome = anyio.run(run_call, app, "oct_search", arguments, client)
    assert isinstance(outcome, ToolResult | CallFailure)
    return outcome


def test_search_runs_through_the_chain(project: Path, config_file: Path) -> None:
    outcome = _call(project, config_file, {"pattern": "return", "glob": "*.py"})

    assert isinstance(outcome, ToolResult)
    assert outcome.text.splitlines()[0] == "src/pkg/core.py:2:    return 42"


def test_search_through_the_chain_answers_a_bad_regex_with_invalid_arguments(
    project: Path, config_file: Path
) -> None:
    outcome = _call(project, config_file, {"pattern": "(unclosed", "regex": True})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "invalid_arguments"
    assert "(unclosed" not in outcome.message


def _paged(workspace: Workspace, key: str, **arguments: Any) -> list[Any]:
    entries: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        result = search(workspace, SearchParams(offset=offset, max_chars=1_000, **arguments))
        assert result.structured is not None
        assert len(model_view(result.structured, result.text)) <= 1_000
        entries += result.structured[key]
        offset = result.structured.get("next_offset")
    return entries


@pytest.mark.parametrize("mode", ["lines", "files", "count"])
def test_search_pages_return_every_entry_exactly_once_within_the_budget(
    workspace: Workspace, mode: str
) -> None:
    write(workspace.root, {f"pkg{n % 5}/m{n:03}.py": "needle = 1\nx = 2\nneedle = 3\n" for n in range(120)})
    key = "matches" if mode == "lines" else "files"
    whole = search(workspace, SearchParams(pattern="needle", mode=mode, max_results=2_000))
    assert whole.structured is not None

    paged = _paged(workspace, key, pattern="needle", mode=mode)

    assert len(whole.structured[key]) == (240 if mode == "lines" else 120)
    assert paged == whole.structured[key]


def _paged_by_cursor(workspace: Workspace, key: str, **arguments: Any) -> list[Any]:
    entries: list[Any] = []
    cursor: str | None = None
    while True:
        result = search(workspace, SearchParams(cursor=cursor, max_chars=1_000, **arguments))
        assert result.structured is not None
        assert len(model_view(result.structured, result.text)) <= 1_000
        entries += result.structured[key]
        cursor = result.structured.get("next_cursor")
        if cursor is None:
            assert "next_offset" not in result.structured
            return entries
        assert result.structured["next_offset"] == len(entries)


@pytest.mark.parametrize("mode", ["lines", "files", "count"])
def test_search_cursor_pages_return_every_entry_exactly_once_within_the_budget(
    workspace: Workspace, mode: str
) -> None:
    write(workspace.root, {f"pkg{n % 5}/m{n:03}.py": "needle = 1\nx = 2\nneedle = 3\n" for n in range(120)})
    key = "matches" if mode == "lines" else "files"
    whole = search(workspace, SearchParams(pattern="needle", mode=mode, max_results=2_000))
    assert whole.structured is not None

    paged = _paged_by_cursor(workspace, key, pattern="needle", mode=mode, before=1)

    expected = search(workspace, SearchParams(pattern="needle", mode=mode, max_results=2_000, before=1))
    assert expected.structured is not None
    assert len(paged) == (240 if mode == "lines" else 120)
    assert paged == expected.structured[key]


def test_search_cursor_resumes_inside_a_file_after_its_last_line_shown(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "needle\n" * 3, "b.py": "needle\n"})
    first = search(workspace, SearchParams(pattern="needle", max_results=2))
    assert first.structured is not None

    rest = found(workspace, pattern="needle", cursor=first.structured["next_cursor"])

    assert rest == [("a.py", 3, "needle"), ("b.py", 1, "needle")]


def test_search_offset_a_page_gave_resumes_after_its_last_match_as_its_cursor(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "needle\n" * 3, "b.py": "needle\n"})
    first = search(workspace, SearchParams(pattern="needle", max_results=2))
    assert first.structured is not None
    write(workspace.root, {"a.py": "x\nx\nneedle\n"})

    after_the_mark = found(workspace, pattern="needle", offset=first.structured["next_offset"])
    # Another query has no mark: its offset is walked to, counting the matches again.
    counted_again = found(workspace, pattern="needle", regex=True, offset=first.structured["next_offset"])

    assert after_the_mark == [("a.py", 3, "needle"), ("b.py", 1, "needle")]
    assert counted_again == []


def test_search_refuses_offset_and_cursor_together() -> None:
    with pytest.raises(ValidationError, match="pass offset or cursor, not both"):
        SearchParams(pattern="x", offset=3, cursor="MDowOmEudHh0")


def test_search_files_mode_gives_paths_and_count_mode_the_lines_per_file(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "needle\nneedle\n", "b.py": "no\n", "c.py": "x\nneedle\n"})

    files = search(workspace, SearchParams(pattern="needle", mode="files")).structured
    counts = search(workspace, SearchParams(pattern="needle", mode="count")).structured

    assert files is not None
    assert counts is not None
    assert files["files"] == [{"path": "a.py"}, {"path": "c.py"}]
    assert counts["files"] == [{"path": "a.py", "count": 2}, {"path": "c.py", "count": 1}]
    assert "matches" not in files


def test_search_gives_context_lines_before_and_after_as_grep_does(workspace: Workspace) -> None:
    write(workspace.root, {"a.py": "one\ntwo\nneedle\nfour\nfive\nsix\n", "b.py": "needle\n"})

    result = search(workspace, SearchParams(pattern="needle", before=2, after=1))

    assert result.structured is not None
    assert result.structured["matches"] == [
        {
            "path": "a.py",
            "line": 3,
            "column": 1,
            "text": "needle",
            "before": ["one", "two"],
            "after": ["four"],
        },
        {"path": "b.py", "line": 1, "column": 1, "text": "needle"},
    ]
    assert result.text.splitlines()[:4] == ["a.py-1-one", "a.py-2-two", "a.py:3:needle", "a.py-4-four"]


def test_search_masks_a_secret_in_a_context_line(workspace: Workspace) -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    write(workspace.root, {"a.py": f"token = '{secret}'\nneedle\n"})

    result = search(workspace, SearchParams(pattern="needle", before=1))

    assert result.structured is not None
    (match,) = result.structured["matches"]
    assert secret not in match["before"][0]
    assert "[REDACTED:" in match["before"][0]


def test_a_search_under_a_path_longer_than_its_budget_still_moves_on_a_match_a_page(
    workspace: Workspace,
) -> None:
    folder = workspace.root.joinpath(*["d" * 250] * 6)
    folder.mkdir(parents=True)
    (folder / "a.txt").write_text("needle one\nneedle two\n")

    lines: list[int] = []
    offset: int | None = 0
    for _ in range(5):
        page = search(workspace, SearchParams(pattern="needle", offset=offset or 0, max_chars=1_000))
        assert page.structured is not None
        lines += [match["line"] for match in page.structured["matches"]]
        offset = page.structured.get("next_offset")
        if offset is None:
            break

    assert lines == [1, 2]
