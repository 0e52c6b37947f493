"""oct_git_diff against refs, oct_git_show, oct_git_log over a range and oct_git_blame: a real SDK client
over stdio, real git, each result compared with what git itself prints in the fixture repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import hints, model_view, oct_server
from git_repos import git, git_output, new_repo
from mcp import Client

from oct_mcp.tools.git.history import parse_blame

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

DIFF_OPTIONS = ("--no-color", "--find-renames", "--src-prefix=a/", "--dst-prefix=b/")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: three commits; feature: two of its own off main's second; an unstaged and a staged change."""
    root = new_repo(tmp_path)
    (root / "app.py").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    (root / "notes.txt").write_text("first\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Start the app")
    (root / "app.py").write_text("".join(f"line {n}\n" for n in range(1, 11)).replace("line 3", "line three"))
    git(root, "commit", "-q", "-am", "Spell out three", "-m", "The body of the message.\n\nTwo paragraphs.")
    git(root, "checkout", "-q", "-b", "feature")
    (root / "feature.py").write_text("def feature():\n    return 1\n")
    git(root, "add", "feature.py")
    git(root, "commit", "-q", "-m", "Add the feature")
    git(root, "mv", "notes.txt", "NOTES.txt")
    git(root, "commit", "-q", "-m", "Rename the notes")
    git(root, "checkout", "-q", "main")
    (root / "app.py").write_text((root / "app.py").read_text().replace("line 9", "line nine"))
    git(root, "commit", "-q", "-am", "Spell out nine")
    (root / "app.py").write_text((root / "app.py").read_text() + "line 11\n")
    (root / "staged.py").write_text("staged\n")
    git(root, "add", "staged.py")
    return root


async def _calls(
    project: Path, config: Path, *calls: tuple[str, dict[str, Any]]
) -> list[types.CallToolResult]:
    with anyio.fail_after(90):
        async with Client(oct_server(project, config)) as client:
            return [await client.call_tool(tool, arguments) for tool, arguments in calls]


def _structured(outcome: types.CallToolResult) -> dict[str, Any]:
    assert outcome.is_error is False, model_view(outcome)
    assert outcome.structured_content is not None
    # What a structured-content host passes the model is that JSON, within the default budget.
    view = model_view(outcome)
    assert json.loads(view) == outcome.structured_content
    assert len(view) <= 40_000
    return outcome.structured_content


def _numstat(repo: Path, *revisions: str) -> list[dict[str, Any]]:
    files = []
    for line in git_output(repo, "diff", "--numstat", "--find-renames", *revisions).splitlines():
        added, removed, path = line.split("\t")
        original = None
        if " => " in path:
            original, path = path.split(" => ")
        files.append(
            {
                "path": path,
                "original_path": original,
                "added": int(added),
                "removed": int(removed),
                "binary": False,
            }
        )
    return files


# oct_git_diff against refs


async def test_diff_against_a_commit_is_what_git_diff_prints(repo: Path, config_file: Path) -> None:
    (worktree, staged, between) = await _calls(
        repo,
        config_file,
        ("oct_git_diff", {"base": "HEAD~1"}),
        ("oct_git_diff", {"base": "HEAD~1", "staged": True}),
        ("oct_git_diff", {"base": "HEAD~2", "target": "HEAD~1"}),
    )

    expected = [
        (worktree, ("HEAD~1",)),
        (staged, ("--cached", "HEAD~1")),
        (between, ("HEAD~2", "HEAD~1")),
    ]
    for outcome, revisions in expected:
        diff = _structured(outcome)
        assert diff["diff"] == git_output(repo, "diff", *DIFF_OPTIONS, *revisions)
        assert diff["files"] == _numstat(repo, *revisions)
    assert (_structured(worktree)["base"], _structured(worktree)["target"]) == ("HEAD~1", None)
    assert [f["path"] for f in _structured(staged)["files"]] == ["app.py", "staged.py"]


async def test_diff_with_merge_base_is_git_diffs_three_dots(repo: Path, config_file: Path) -> None:
    (three_dots, two_ends, from_head) = await _calls(
        repo,
        config_file,
        ("oct_git_diff", {"base": "main", "target": "feature", "merge_base": True}),
        ("oct_git_diff", {"base": "main", "target": "feature"}),
        ("oct_git_diff", {"base": "feature", "merge_base": True}),
    )

    merged = _structured(three_dots)
    assert merged["diff"] == git_output(repo, "diff", *DIFF_OPTIONS, "main...feature")
    # Only the feature's own changes: the rename and the new file, not main's later commit undone.
    assert merged["files"] == [
        {"path": "NOTES.txt", "original_path": "notes.txt", "added": 0, "removed": 0, "binary": False},
        {"path": "feature.py", "original_path": None, "added": 2, "removed": 0, "binary": False},
    ]
    assert merged["diff"] != _structured(two_ends)["diff"]
    assert _structured(two_ends)["diff"] == git_output(repo, "diff", *DIFF_OPTIONS, "main", "feature")
    assert _structured(from_head)["diff"] == git_output(repo, "diff", *DIFF_OPTIONS, "feature...HEAD")
    assert _structured(from_head)["target"] == "HEAD"
    assert (merged["base"], merged["target"], merged["merge_base"]) == ("main", "feature", True)


async def test_diff_sides_that_do_not_fit_together_are_refused(repo: Path, config_file: Path) -> None:
    outcomes = await _calls(
        repo,
        config_file,
        ("oct_git_diff", {"target": "HEAD"}),
        ("oct_git_diff", {"merge_base": True}),
        ("oct_git_diff", {"base": "main", "target": "feature", "staged": True}),
    )

    for outcome in outcomes:
        assert outcome.is_error is True
        assert model_view(outcome).startswith("[invalid_arguments]")


async def test_diff_between_refs_in_stat_mode_and_pages(repo: Path, config_file: Path) -> None:
    whole = git_output(repo, "diff", *DIFF_OPTIONS, "HEAD~2", "feature")
    pages: list[str] = []
    offset: int | None = 0
    async with Client(oct_server(repo, config_file)) as client:
        with anyio.fail_after(90):
            stat = await client.call_tool(
                "oct_git_diff", {"base": "HEAD~2", "target": "feature", "stat": True}
            )
            while offset is not None:
                page = _structured(
                    await client.call_tool(
                        "oct_git_diff",
                        {"base": "HEAD~2", "target": "feature", "offset": offset, "max_chars": 1_000},
                    )
                )
                pages.append(page["diff"])
                offset = page["next_offset"]

    assert _structured(stat)["diff"] == ""
    assert _structured(stat)["files"] == _numstat(repo, "HEAD~2", "feature")
    assert len(pages) > 1
    assert "".join(pages) == whole


# oct_git_show


async def test_show_gives_the_header_message_stat_and_diff(repo: Path, config_file: Path) -> None:
    (head, older, stat) = await _calls(
        repo,
        config_file,
        ("oct_git_show", {}),
        ("oct_git_show", {"commit": "HEAD~1"}),
        ("oct_git_show", {"commit": "feature", "stat": True}),
    )

    shown = _structured(older)
    sha, parent, date = git_output(repo, "log", "-1", "--format=%H %P %aI", "HEAD~1").split()
    assert {key: shown[key] for key in ("commit", "parents", "author", "email", "date", "subject")} == {
        "commit": sha,
        "parents": [parent],
        "author": "Ada Lovelace",
        "email": "ada@example.invalid",
        "date": date,
        "subject": "Spell out three",
    }
    assert shown["message"] == "Spell out three\n\nThe body of the message.\n\nTwo paragraphs."
    assert shown["diff"] == git_output(repo, "diff", *DIFF_OPTIONS, "HEAD~2", "HEAD~1")
    assert shown["files"] == _numstat(repo, "HEAD~2", "HEAD~1")
    assert (shown["added"], shown["removed"]) == (1, 1)
    assert _structured(head)["subject"] == "Spell out nine"
    renamed = _structured(stat)
    assert (renamed["subject"], renamed["diff"]) == ("Rename the notes", "")
    assert renamed["files"] == [
        {"path": "NOTES.txt", "original_path": "notes.txt", "added": 0, "removed": 0, "binary": False}
    ]


async def test_show_of_the_first_commit_and_of_a_merge(repo: Path, config_file: Path) -> None:
    git(repo, "stash", "-q")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge the feature", "feature")
    (first, merge) = await _calls(
        repo,
        config_file,
        ("oct_git_show", {"commit": git(repo, "rev-list", "--max-parents=0", "HEAD")}),
        ("oct_git_show", {"commit": "HEAD"}),
    )

    root = _structured(first)
    assert (root["parents"], [f["path"] for f in root["files"]]) == ([], ["app.py", "notes.txt"])
    merged = _structured(merge)
    assert len(merged["parents"]) == 2
    assert merged["diff"] == git_output(repo, "diff", *DIFF_OPTIONS, "HEAD^1", "HEAD")


async def test_show_pages_return_the_whole_patch(repo: Path, config_file: Path) -> None:
    (repo / "big.txt").write_text("".join(f"entry {n} of a long file\n" for n in range(600)))
    git(repo, "add", "big.txt")
    git(repo, "commit", "-q", "-m", "A big file")
    pages: list[str] = []
    offset: int | None = 0
    async with Client(oct_server(repo, config_file)) as client:
        with anyio.fail_after(90):
            while offset is not None:
                page = _structured(
                    await client.call_tool("oct_git_show", {"offset": offset, "max_chars": 2_000})
                )
                assert len(model_view_of(page)) <= 2_000
                pages.append(page["diff"])
                offset = page["next_offset"]

    assert len(pages) > 3
    assert "".join(pages) == git_output(repo, "diff", *DIFF_OPTIONS, "HEAD~1", "HEAD")


def model_view_of(structured: dict[str, Any]) -> str:
    return json.dumps(structured, ensure_ascii=False, separators=(",", ":"))


# oct_git_log over a range


async def test_log_over_a_range_and_on_a_path(repo: Path, config_file: Path) -> None:
    (own, of_target, on_path, both) = await _calls(
        repo,
        config_file,
        ("oct_git_log", {"base": "main", "target": "feature"}),
        ("oct_git_log", {"target": "feature"}),
        ("oct_git_log", {"path": "app.py"}),
        ("oct_git_log", {"base": "HEAD~2", "path": "app.py"}),
    )

    def shas(outcome: types.CallToolResult) -> list[str]:
        return [commit["sha"] for commit in _structured(outcome)["commits"]]

    assert shas(own) == git_output(repo, "rev-list", "main..feature").split()
    assert [c["subject"] for c in _structured(own)["commits"]] == ["Rename the notes", "Add the feature"]
    assert shas(of_target) == git_output(repo, "rev-list", "feature").split()
    assert shas(on_path) == git_output(repo, "rev-list", "HEAD", "--", "app.py").split()
    assert shas(both) == git_output(repo, "rev-list", "HEAD~2..HEAD", "--", "app.py").split()
    assert len(shas(both)) == 2


async def test_log_refuses_a_base_that_is_no_commit(repo: Path, config_file: Path) -> None:
    (outcome,) = await _calls(repo, config_file, ("oct_git_log", {"base": "no-such-branch"}))

    assert outcome.is_error is True
    assert model_view(outcome).startswith("[not_found] the base argument names no commit")


# oct_git_blame


async def test_blame_gives_each_line_its_commit_author_and_summary(repo: Path, config_file: Path) -> None:
    (ranged, as_of, uncommitted) = await _calls(
        repo,
        config_file,
        ("oct_git_blame", {"path": "app.py", "start_line": 2, "end_line": 4}),
        ("oct_git_blame", {"path": "app.py", "start_line": 3, "end_line": 3, "commit": "HEAD~2"}),
        ("oct_git_blame", {"path": "app.py", "start_line": 11, "end_line": 11}),
    )

    blame = _structured(ranged)
    first, second = git_output(repo, "rev-list", "--reverse", "HEAD~1").split()
    assert [(b["line"], b["commit"], b["summary"], b["text"]) for b in blame["lines"]] == [
        (2, first, "Start the app", "line 2"),
        (3, second, "Spell out three", "line three"),
        (4, first, "Start the app", "line 4"),
    ]
    assert {(b["author"], b["email"]) for b in blame["lines"]} == {("Ada Lovelace", "ada@example.invalid")}
    dates = dict(line.split(" ", 1) for line in git_output(repo, "log", "--format=%H %aI").splitlines())
    assert [b["date"] for b in blame["lines"]] == [dates[first], dates[second], dates[first]]
    assert blame["next_start_line"] is None
    assert [(b["commit"], b["text"]) for b in _structured(as_of)["lines"]] == [(first, "line 3")]
    (line,) = _structured(uncommitted)["lines"]
    assert (line["commit"], line["text"]) == ("0" * 40, "line 11")


async def test_blame_pages_by_start_line_and_bounds_its_range(repo: Path, config_file: Path) -> None:
    (default, cut, past, too_long, backwards) = await _calls(
        repo,
        config_file,
        ("oct_git_blame", {"path": "app.py"}),
        ("oct_git_blame", {"path": "app.py", "max_chars": 1_000}),
        ("oct_git_blame", {"path": "app.py", "start_line": 50}),
        ("oct_git_blame", {"path": "app.py", "start_line": 1, "end_line": 1_001}),
        ("oct_git_blame", {"path": "app.py", "start_line": 5, "end_line": 4}),
    )

    assert [b["line"] for b in _structured(default)["lines"]] == list(range(1, 12))
    assert _structured(default)["next_start_line"] is None
    page = _structured(cut)
    assert 0 < len(page["lines"]) < 11
    assert page["next_start_line"] == len(page["lines"]) + 1
    assert model_view(past) == "[out_of_range] start_line is past the end: the file has 11 lines"
    for refused in (too_long, backwards):
        assert refused.is_error is True
        assert model_view(refused).startswith("[invalid_arguments]")


def test_parse_blame_reads_the_details_of_a_commit_seen_before() -> None:
    sha = "a" * 40
    porcelain = (
        f"{sha} 1 1 2\nauthor Ada\nauthor-mail <ada@example.invalid>\nauthor-time 1700000000\n"
        f"author-tz +0100\nsummary First\nfilename old.py\n\tone\n{sha} 2 2\n\ttwo\n"
    ).encode()

    lines = parse_blame(porcelain)

    assert [(b.line, b.commit, b.author, b.date, b.original_path, b.text) for b in lines] == [
        (1, sha, "Ada", "2023-11-14T23:13:20+01:00", "old.py", "one"),
        (2, sha, "Ada", "2023-11-14T23:13:20+01:00", "old.py", "two"),
    ]


# defanged


@pytest.fixture
def native_config(tmp_path: Path) -> Path:
    """The native backend: no namespaces, so a command git ran would show on the host."""
    path = tmp_path / "native-config.json"
    path.write_text(json.dumps({"sandbox_backend": "native", "allow_unconfined_project_code": True}))
    return path


def _plant_textconv(repo: Path, marker: Path) -> None:
    git(repo, "config", "diff.external", f"touch {marker}")
    git(repo, "config", "diff.evil.textconv", f"touch {marker}; cat")
    (repo / ".gitattributes").write_text("*.py diff=evil\n")


async def test_show_and_blame_never_run_a_textconv_or_external_diff(
    repo: Path, tmp_path: Path, native_config: Path
) -> None:
    marker = tmp_path / "ran"
    _plant_textconv(repo, marker)

    outcomes = await _calls(
        repo,
        native_config,
        ("oct_git_show", {"commit": "HEAD~1"}),
        ("oct_git_blame", {"path": "app.py", "start_line": 1, "end_line": 3}),
        ("oct_git_blame", {"path": "app.py", "start_line": 1, "end_line": 3, "commit": "HEAD"}),
        ("oct_git_diff", {"base": "HEAD~2", "target": "HEAD"}),
    )

    for outcome in outcomes:
        _structured(outcome)
    assert not marker.exists()


def test_plain_git_show_and_blame_run_the_textconv(repo: Path, tmp_path: Path) -> None:
    # The check above is meaningful: plain git, on this setup, runs the command.
    for command in (("show", "HEAD~1"), ("blame", "app.py")):
        marker = tmp_path / f"ran-{command[0]}"
        _plant_textconv(repo, marker)

        git(repo, *command)

        assert marker.exists()


async def test_the_history_tools_are_listed_read_only_with_output_schemas(
    repo: Path, config_file: Path
) -> None:
    with anyio.fail_after(60):
        async with Client(oct_server(repo, config_file)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    for name in ("oct_git_show", "oct_git_blame"):
        assert hints(tools[name])[:2] == (True, False)
        assert tools[name].output_schema is not None
    assert {"base", "target", "merge_base"} <= set(tools["oct_git_diff"].input_schema["properties"])
    assert {"base", "target"} <= set(tools["oct_git_log"].input_schema["properties"])
