"""Every result on a big project fits a host's budget and pages to the end, through the whole chain.

The project: an unignored 5,000-file .venv, a lockfile with a 1,000-line diff, 3,000 lint problems.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from oct_mcp.app import build_app, run_call
from oct_mcp.tools._paging.results import MODEL_VIEW_BUDGET, model_view
from oct_mcp.types import ClientInfo, ToolResult

pytestmark = pytest.mark.e2e

_CLIENTS = itertools.count()
VENV_BIN = Path(sys.executable).parent
# Two lines a package, the version's changing: 500 packages give a 1,000-line diff.
LOCK_ENTRY = 'name = "package-{n:04}-with-a-longer-name"\nversion = "{major}.{n}.0+build.{n}.sha256-abcdef"\n'


def git(root: Path, *arguments: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *arguments],
        cwd=root,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def big_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big").resolve()
    for n in range(5_000):
        path = root / ".venv" / "lib" / f"pkg{n % 50:02}" / f"module_{n:04}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("value = 1\n")
    (root / ".venv" / "bin").mkdir()
    (root / ".venv" / "bin" / "ruff").symlink_to(VENV_BIN / "ruff")
    (root / "ruff.toml").write_text('extend-exclude = [".venv"]\n')
    for n in range(300):
        (root / "src" / f"bad_{n:03}.py").parent.mkdir(exist_ok=True)
        (root / "src" / f"bad_{n:03}.py").write_text("".join(f"x{i} = undefined_{i}\n" for i in range(10)))
    (root / "uv.lock").write_text("".join(LOCK_ENTRY.format(n=n, major=1) for n in range(500)))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "src", "uv.lock", "ruff.toml")
    git(root, "commit", "-q", "-m", "Start")
    (root / "uv.lock").write_text("".join(LOCK_ENTRY.format(n=n, major=2) for n in range(500)))
    return root


def call(project: Path, config: Path, tool: str, arguments: dict[str, Any]) -> ToolResult:
    app = build_app(project, config_path=config, environ={})
    client = ClientInfo(client_id=f"big-{next(_CLIENTS)}", transport="memory")

    async def run() -> Any:
        with anyio.fail_after(120):
            return await run_call(app, tool, arguments, client)

    outcome = anyio.run(run)
    assert isinstance(outcome, ToolResult), outcome
    assert outcome.is_error is False, outcome.text
    return outcome


def every_page(project: Path, config: Path, tool: str, key: str, **arguments: Any) -> list[Any]:
    """The entries of every page, each page checked against the default budget."""
    entries: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        page = call(project, config, tool, {**arguments, "offset": offset})
        assert page.structured is not None
        assert len(model_view(page.structured, page.text)) <= arguments.get("max_chars", MODEL_VIEW_BUDGET)
        entries += [page.structured[key]] if isinstance(page.structured[key], str) else page.structured[key]
        offset = page.structured.get("next_offset")
    return entries


def test_list_files_pages_through_the_venv(big_project: Path, config_file: Path) -> None:
    files = every_page(big_project, config_file, "oct_list_files", "files", max_results=10_000)
    expected = sorted(
        p.relative_to(big_project).as_posix()
        for p in big_project.rglob("*")
        if (p.is_file() or p.is_symlink()) and ".git" not in p.relative_to(big_project).parts
    )

    paths = list(files)
    assert len(paths) == len(set(paths))
    assert set(paths) <= set(expected)
    assert {p for p in expected if not p.startswith(".venv/")} <= set(paths)


def test_search_pages_through_every_match(big_project: Path, config_file: Path) -> None:
    matches = every_page(
        big_project, config_file, "oct_search", "matches", pattern="undefined_", max_results=2_000
    )

    # max_results bounds a page; the pages go on to the last match.
    assert len(matches) == 3_000
    assert len({(m["path"], m["line"]) for m in matches}) == 3_000


def every_cursor_page(project: Path, config: Path, tool: str, key: str, **arguments: Any) -> list[Any]:
    """The entries of every page, paged by cursor, each page checked against the default budget."""
    entries: list[Any] = []
    cursor: str | None = None
    while True:
        page = call(project, config, tool, {**arguments, **({} if cursor is None else {"cursor": cursor})})
        assert page.structured is not None
        assert len(model_view(page.structured, page.text)) <= MODEL_VIEW_BUDGET
        entries += page.structured[key]
        cursor = page.structured.get("next_cursor")
        if cursor is None:
            return entries


def test_list_files_pages_by_cursor_as_by_offset(big_project: Path, config_file: Path) -> None:
    # Listed from inside it, the .venv is listed: 5,000 files, pages of a few hundred.
    arguments: dict[str, Any] = {"path": ".venv", "max_results": 10_000}
    by_cursor = every_cursor_page(big_project, config_file, "oct_list_files", "files", **arguments)
    by_offset = every_page(big_project, config_file, "oct_list_files", "files", **arguments)

    assert len(by_cursor) == 5_001
    assert by_cursor == by_offset


def test_search_pages_by_cursor_through_every_match(big_project: Path, config_file: Path) -> None:
    matches = every_cursor_page(
        big_project, config_file, "oct_search", "matches", pattern="undefined_", max_results=2_000
    )

    assert len(matches) == 3_000
    assert len({(m["path"], m["line"]) for m in matches}) == 3_000


def test_status_pages_to_the_end(big_project: Path, config_file: Path) -> None:
    entries = every_page(big_project, config_file, "oct_git_status", "entries")

    paths = [e["path"] for e in entries]
    assert len(paths) == len(set(paths))
    assert "uv.lock" in paths


def test_the_lockfile_diff_pages_to_the_end(big_project: Path, config_file: Path) -> None:
    pages = every_page(big_project, config_file, "oct_git_diff", "diff")
    stat = call(big_project, config_file, "oct_git_diff", {"stat": True})

    patch = "".join(pages)
    assert len(pages) > 1
    assert patch.count("\n+version") == 500
    assert patch.count("\n-version") == 500
    assert stat.structured is not None
    assert [(f["path"], f["added"], f["removed"]) for f in stat.structured["files"]] == [
        ("uv.lock", 500, 500)
    ]


def test_lint_pages_through_3000_problems_and_summarises_them(big_project: Path, config_file: Path) -> None:
    diagnostics = every_page(big_project, config_file, "oct_lint", "diagnostics")
    summary = call(big_project, config_file, "oct_lint", {"summary": True})

    assert len(diagnostics) == 3_000
    assert len({(d["path"], d["line"], d["column"]) for d in diagnostics}) == 3_000
    assert summary.structured is not None
    assert summary.structured["by_rule"] == {"F821": 3_000}
    assert len(summary.structured["diagnostics"]) == 10
    assert len(model_view(summary.structured, summary.text)) < 3_000


def test_a_whole_read_of_the_lockfile_fits_the_budget(big_project: Path, config_file: Path) -> None:
    read = call(big_project, config_file, "oct_read_file", {"path": "uv.lock"})

    assert read.structured is not None
    assert read.structured["total_lines"] == 1_000
    # A whole read may pass the default budget, up to the figure the tool declares to hosts.
    assert len(model_view(read.structured, read.text)) <= 101_000
    assert read.structured.get("next_start_line") is None


def test_lint_pages_through_300_problems_and_summarises_them_by_rule(
    big_project: Path, config_file: Path
) -> None:
    paths = [f"src/bad_{n:03}.py" for n in range(30)]
    diagnostics = every_page(
        big_project, config_file, "oct_lint", "diagnostics", paths=paths, max_chars=4_000
    )
    summary = call(big_project, config_file, "oct_lint", {"paths": paths, "summary": True})

    assert len({(d["path"], d["line"], d["column"]) for d in diagnostics}) == len(diagnostics) == 300
    assert summary.structured is not None
    assert (summary.structured["count"], summary.structured["by_rule"]) == (300, {"F821": 300})
    assert len(summary.structured["diagnostics"]) == 10
