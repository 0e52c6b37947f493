"""oct_search and oct_list_files against ripgrep and `git ls-files` on a generated 10,000-file tree.

The tree has nested .gitignore files (ignored folders at three depths). oct's tools are called in
process, as the server runs them, with every page fetched (by offset, and by cursor for the
listing); `rg` runs as a subprocess (ripgrep's PyPI wheel, or `rg` on PATH), `git ls-files` on the
same tree committed. Goal: ratio <= 1.3. oct_search runs as the server runs it, with its screening
helper process (started before the rounds, as a server's first search starts it), and once more
without it, in one process, for reference. The listing is also measured with sizes=true (a stat a
file), and through the default chain (`run_call` on `build_app`'s chain: audit, validation, policy,
safety, redaction of every page, in an event loop of its own), as a client reaches it. One more
row, where bubblewrap is usable: `rg --json` run under the sandbox as a tool would be (project
read-only, no network), the least a search that ran ripgrep in the sandbox could cost, before its
output is read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from _common import Comparison, arguments, interleave, print_table
from sandbox_spawn import read_only_prepared

from oct_mcp.app import App, build_app, run_call
from oct_mcp.backends import Prepared
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.runner import run_prepared
from oct_mcp.tools.files import ListFilesParams, list_files
from oct_mcp.tools.screen_helper import SCREEN_HELPER
from oct_mcp.tools.search import SearchParams, search
from oct_mcp.types import ClientInfo, ToolResult
from oct_mcp.workspace import Workspace

GIT = shutil.which("git") or "/usr/bin/git"
FILES = 10_000
LINE = "def function_{n}(value: int) -> int:\n    return value * {n}  # a line of ordinary code\n"


def build_tree(root: Path) -> None:
    for n in range(FILES):
        folder = root / f"pkg{n % 20:02}" / f"sub{n % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "".join(LINE.format(n=i) for i in range(20))
        if n % 200 == 0:
            body += "needle_marker = True\n"
        (folder / f"module_{n:05}.py").write_text(body)
    (root / ".gitignore").write_text("build/\n*.log\n")
    for n in range(20):
        (root / f"pkg{n:02}" / ".gitignore").write_text("generated/\n")
        for ignored in ("build", f"pkg{n:02}/generated", f"pkg{n:02}/sub1/build"):
            (root / ignored).mkdir(parents=True, exist_ok=True)
            (root / ignored / "ignored.py").write_text("needle_marker = False\n")
    subprocess.run([GIT, "init", "-q"], cwd=root, check=True)
    subprocess.run([GIT, "add", "-A"], cwd=root, check=True)


def every_page(call: Callable[[int], Any], key: str) -> list[Any]:
    entries: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        structured = call(offset).structured
        entries += structured[key]
        offset = structured.get("next_offset")
    return entries


def every_cursor_page(call: Callable[[str | None], Any], key: str) -> list[Any]:
    entries: list[Any] = []
    cursor: str | None = None
    while True:
        structured = call(cursor).structured
        entries += structured[key]
        cursor = structured.get("next_cursor")
        if cursor is None:
            return entries


def timed(action: Callable[[], object]) -> Callable[[], float]:
    def measure() -> float:
        start = time.perf_counter()
        action()
        return time.perf_counter() - start

    return measure


def main() -> None:
    options = arguments(__doc__ or "", default_rounds=5)
    rg = shutil.which("rg", path=str(Path(sys.executable).parent)) or shutil.which("rg")
    if rg is None:
        raise SystemExit("ripgrep is not installed: pip install ripgrep")
    with tempfile.TemporaryDirectory() as scratch:
        # The chain's config and audit log sit beside the project, not in it.
        root = Path(scratch).resolve() / "project"
        root.mkdir()
        build_tree(root)
        workspace = Workspace(root)

        def oct_search(helper: Any = SCREEN_HELPER) -> list[Any]:
            return every_page(
                lambda offset: search(
                    workspace, SearchParams(pattern="needle_marker", offset=offset), screen_helper=helper
                ),
                "matches",
            )

        def oct_list() -> list[Any]:
            return every_page(
                lambda offset: list_files(workspace, ListFilesParams(max_results=10_000, offset=offset)),
                "files",
            )

        def oct_list_by_cursor(sizes: bool = False) -> list[Any]:
            return every_cursor_page(
                lambda cursor: list_files(
                    workspace, ListFilesParams(max_results=10_000, cursor=cursor, sizes=sizes)
                ),
                "files",
            )

        app = chain_app(root)

        def rg_search() -> bytes:
            return subprocess.run(
                [rg, "--json", "--hidden", "--glob", "!.git", "needle_marker"],
                cwd=root,
                capture_output=True,
                check=True,
            ).stdout

        def rg_files() -> bytes:
            return subprocess.run(
                [rg, "--files", "--hidden", "--glob", "!.git"], cwd=root, capture_output=True, check=True
            ).stdout

        def git_files() -> bytes:
            return subprocess.run([GIT, "ls-files"], cwd=root, capture_output=True, check=True).stdout

        if not SCREEN_HELPER.warm(30):
            print("the screening helper did not start: oct_search runs in one process", file=sys.stderr)
        found = sorted(m["path"] for m in oct_search())
        assert oct_search(None) == oct_search(), "oct_search with and without its helper disagree"
        assert chain_search(app) == oct_search(), "the chain finds other lines"
        listed = sorted(oct_list())
        assert found == sorted(rg_files_matching(rg, root)), "oct_search and rg disagree"
        assert listed == sorted(rg_files().decode().splitlines()), "oct_list_files and rg --files disagree"
        assert oct_list_by_cursor() == oct_list(), "cursor and offset paging disagree"
        paths = oct_list()
        assert oct_list_by_cursor(sizes=True) == paths, "sizes=true lists other files"
        sizes = every_cursor_page(
            lambda cursor: list_files(
                workspace, ListFilesParams(max_results=10_000, cursor=cursor, sizes=True)
            ),
            "size_bytes",
        )
        assert len(sizes) == len(paths), "sizes=true without a size for each file"
        assert all(size > 0 for size in sizes), "sizes=true without sizes"
        assert chain_list(app) == paths, "the chain lists other files"
        in_sandbox = sandboxed(
            root, (os.path.realpath(rg), "--json", "--hidden", "--glob", "!.git", "needle_marker")
        )
        measures = [
            timed(oct_search),
            timed(rg_search),
            timed(lambda: oct_search(None)),
            timed(lambda: chain_search(app)),
            timed(oct_list),
            timed(oct_list_by_cursor),
            timed(rg_files),
            timed(git_files),
            timed(lambda: oct_list_by_cursor(sizes=True)),
            timed(lambda: chain_list(app)),
        ]
        if in_sandbox is not None:
            assert run_sandboxed(in_sandbox).count(b'"type":"match"') == len(found), "rg in the sandbox"
            measures.append(timed(lambda: run_sandboxed(in_sandbox)))
        samples = interleave(options.rounds, measures)
        app.close()
        search_oct, search_rg, search_alone, search_chain = samples[:4]
        list_oct, list_cursor, list_rg, list_git, list_sizes, list_chain = samples[4:10]
    sandbox_rows = (
        [Comparison("rg --json under bubblewrap, vs rg --json", samples[10], search_rg, goal=1.3)]
        if len(samples) > 10
        else []
    )
    print_table(
        [
            Comparison("oct_search, every page, vs rg --json", search_oct, search_rg, goal=1.3),
            Comparison(
                "oct_search through the chain, every page, vs rg --json", search_chain, search_rg, goal=1.3
            ),
            Comparison(
                "oct_search in one process (no helper, for reference), vs rg --json",
                search_alone,
                search_rg,
                goal=1.3,
            ),
            *sandbox_rows,
            Comparison("oct_list_files, every page by offset, vs rg --files", list_oct, list_rg, goal=1.3),
            Comparison("oct_list_files, every page by cursor, vs rg --files", list_cursor, list_rg, goal=1.3),
            Comparison(
                "oct_list_files sizes=true, every page by cursor, vs rg --files",
                list_sizes,
                list_rg,
                goal=1.3,
            ),
            Comparison(
                "oct_list_files through the chain, every page by cursor, vs rg --files",
                list_chain,
                list_rg,
                goal=1.3,
            ),
            Comparison(
                "oct_list_files, every page by cursor, vs git ls-files", list_cursor, list_git, goal=1.3
            ),
        ],
        options.rounds,
    )


def chain_app(project: Path) -> App:
    """The default chain over `project`, auditing to a file beside it, with room for every call."""
    config = project.parent / "bench-config.json"
    audit_log = project.parent / "bench-audit.log"
    config.write_text(json.dumps({"audit_log_path": str(audit_log), "rate_limit_per_minute": 10_000}))
    return build_app(project, config_path=config, environ={})


def chain_search(app: App) -> list[Any]:
    """Every page of the search by cursor, each call through the whole chain."""
    return chain_pages(app, "oct_search", {"pattern": "needle_marker"}, "matches")


def chain_list(app: App) -> list[Any]:
    """Every page of the listing by cursor, each call through the whole chain."""
    return chain_pages(app, "oct_list_files", {"max_results": 10_000}, "files")


def chain_pages(app: App, tool: str, first: dict[str, Any], key: str) -> list[Any]:
    """The entries under `key` of every page of a tool's result by cursor, each call through the chain."""
    client = ClientInfo(client_id="bench", transport="memory")

    async def pages() -> list[Any]:
        entries: list[Any] = []
        arguments = dict(first)
        while True:
            outcome = await run_call(app, tool, arguments, client)
            if not isinstance(outcome, ToolResult) or outcome.structured is None:
                raise RuntimeError(f"{tool} did not answer: {outcome}")
            entries += outcome.structured[key]
            cursor = outcome.structured.get("next_cursor")
            if cursor is None:
                return entries
            arguments = {**first, "cursor": cursor}

    return anyio.run(pages)


def sandboxed(project: Path, argv: tuple[str, ...]) -> Prepared | None:
    """`argv` prepared under bubblewrap as a read-only tool without network, or None without it."""
    backend = Bubblewrap()
    return read_only_prepared(backend, project, argv) if backend.probe().usable else None


def run_sandboxed(prepared: Prepared) -> bytes:
    async def once() -> bytes:
        result = await run_prepared(prepared, backend="bubblewrap", time_limit=30, max_output=64 * 1_048_576)
        if result.exit_code != 0:
            raise RuntimeError(f"rg under bubblewrap failed: {result.stderr!r}")
        return result.stdout

    return anyio.run(once)


def rg_files_matching(rg: str, root: Path) -> list[str]:
    completed = subprocess.run(
        [rg, "-l", "--hidden", "--glob", "!.git", "needle_marker"], cwd=root, capture_output=True, check=True
    )
    return completed.stdout.decode().splitlines()


if __name__ == "__main__":
    main()
