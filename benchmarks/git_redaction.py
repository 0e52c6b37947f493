"""What masking git's output with the whole file as context costs: oct_git_blame of a 1,000-line range
and oct_git_show of a 500-line diff, against the way they ran before (the range alone, hunks of 3 lines).

Both sides run through the default chain (`run_call` on `build_app`'s chain: audit, validation, policy,
safety, the redactor, the sandbox under the auto-selected backend), on the same repository, in
interleaved rounds. Before: blame ran `git blame -L` alone and the redactor masked the lines it
printed; show ran `git show --unified=3`. Now: blame also reads the file whole (the work tree's
file, or `git cat-file` of the commit's blob, one more git run in the sandbox) and masks the range
in it; show asks git for each changed file whole and cuts the hunks itself from the masked lines.
The file is 5,000 lines of ordinary code with no secret, as most files are.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
from _common import Comparison, arguments, interleave, print_table

from oct_mcp.app import App, CallFailure, build_app, run_call
from oct_mcp.spec import CommandPlan, RunResult, ToolEnv
from oct_mcp.tools import default_catalog
from oct_mcp.tools._paging.results import take_within
from oct_mcp.tools.git.history import (
    GIT_BLAME,
    GIT_SHOW,
    BlameOutput,
    GitBlameParams,
    GitShowParams,
    parse_blame,
    parse_show,
)
from oct_mcp.tools.git.runner import git_failed, git_plan, pathspec
from oct_mcp.types import ClientInfo, ToolResult

LINES = 5_000
CHANGED_EVERY = 80
GIT = shutil.which("git") or "/usr/bin/git"
IDENTITY = ("-c", "user.name=Bench", "-c", "user.email=bench@example.invalid")


def _git(root: Path, *arguments: str) -> None:
    subprocess.run([GIT, "-C", str(root), *IDENTITY, *arguments], check=True, capture_output=True)


def build_repo(root: Path) -> None:
    """A 5,000-line file in three commits; the last changes every 80th line (a 500-line diff)."""
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    lines = [f"def function_{n}(value: int) -> int:  # line {n}" for n in range(LINES)]
    (root / "module.py").write_text("\n".join(lines) + "\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "one")
    lines[::7] = [line + "  # touched" for line in lines[::7]]
    (root / "module.py").write_text("\n".join(lines) + "\n")
    _git(root, "commit", "-q", "-am", "two")
    lines[::CHANGED_EVERY] = [line + "  # changed" for line in lines[::CHANGED_EVERY]]
    (root / "module.py").write_text("\n".join(lines) + "\n")
    _git(root, "commit", "-q", "-am", "three")


def _range_only_blame(params: GitBlameParams, env: ToolEnv) -> CommandPlan:
    """oct_git_blame as it ran before: `git blame -L` alone, the range's lines as git printed them."""
    paths = pathspec(env.workspace, params.path)

    def arguments(commits: Mapping[str, str]) -> tuple[str, ...]:
        revision = [commits["commit"]] if "commit" in commits else []
        span = f"-L{params.start_line},{params.last_line + (params.end_line is None)}"
        return ("blame", "--porcelain", "--no-textconv", span, *revision, *paths)

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        every = parse_blame(run.stdout)
        lines, _cut = take_within(every[: params.last_line - params.start_line + 1], params.max_chars)
        output = BlameOutput(path=params.path, commit=params.commit, lines=lines)
        return ToolResult(text="\n".join(line.text for line in lines), structured=output.model_dump())

    refs = () if params.commit is None else (("commit", params.commit),)
    return git_plan(env, arguments, parse, refs=refs)


def _hunks_only_show(params: GitShowParams, env: ToolEnv) -> CommandPlan:
    """oct_git_show as it ran before: git's hunks of `context_lines`, as git printed them."""
    paths = pathspec(env.workspace, params.path) or ["--"]

    def arguments(commits: Mapping[str, str]) -> tuple[str, ...]:
        return (
            "show",
            "-z",
            "--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--no-relative",
            "--no-show-signature",
            "--numstat",
            "--patch",
            "--find-renames",
            "--diff-merges=first-parent",
            "--submodule=short",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            f"--unified={params.context_lines}",
            "--end-of-options",
            commits["commit"],
            *paths,
        )

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        output = parse_show(run.stdout, truncated=run.truncated)
        return ToolResult(text=output.diff, structured=output.model_dump())

    return git_plan(env, arguments, parse, refs=(("commit", params.commit),))


def _app(root: Path, config: Path, *, before: bool) -> App:
    catalog = dict(default_catalog())
    if before:
        catalog[GIT_BLAME.name] = replace(GIT_BLAME, plan=_range_only_blame)
        catalog[GIT_SHOW.name] = replace(GIT_SHOW, plan=_hunks_only_show)
    return build_app(root, config_path=config, environ={}, catalog=catalog)


def _timed(app: App, tool: str, arguments: dict[str, Any]) -> Callable[[], float]:
    client = ClientInfo(client_id="bench", transport="memory")

    def once() -> float:
        started = time.perf_counter()
        outcome = anyio.run(run_call, app, tool, arguments, client)
        if isinstance(outcome, CallFailure) or getattr(outcome, "is_error", False):
            raise RuntimeError(f"{tool} failed: {outcome!r}")
        return time.perf_counter() - started

    return once


def main() -> None:
    options = arguments(__doc__ or "", default_rounds=9)
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch).resolve()
        root = base / "project"
        build_repo(root)
        config = base / "config.json"
        config.write_text(
            json.dumps({"audit_log_path": str(base / "audit.log"), "rate_limit_per_minute": 10_000})
        )
        now, before = _app(root, config, before=False), _app(root, config, before=True)
        blame = {"path": "module.py", "start_line": 2_001, "end_line": 3_000}
        blame_commit = {**blame, "commit": "HEAD~1"}
        show: dict[str, Any] = {}
        shown = anyio.run(
            run_call, now, "oct_git_show", show, ClientInfo(client_id="bench", transport="memory")
        )
        diff_lines = len(getattr(shown, "structured", {})["diff"].splitlines())
        measures = [
            _timed(now, "oct_git_blame", blame),
            _timed(before, "oct_git_blame", blame),
            _timed(now, "oct_git_blame", blame_commit),
            _timed(before, "oct_git_blame", blame_commit),
            _timed(now, "oct_git_show", show),
            _timed(before, "oct_git_show", show),
        ]
        for measure in measures:
            measure()  # warm once
        samples = interleave(options.rounds, measures)
        now.close()
        before.close()
    print(f"oct_git_show's diff: {diff_lines} lines")
    print_table(
        [
            Comparison(
                "oct_git_blame, 1,000 lines of the work tree's file, masked in the whole file / range only",
                samples[0],
                samples[1],
                goal=1.5,
            ),
            Comparison(
                "oct_git_blame, 1,000 lines as of a commit (+ git cat-file) / range only",
                samples[2],
                samples[3],
                goal=1.5,
            ),
            Comparison(
                f"oct_git_show, a {diff_lines}-line diff cut from whole files, masked / git's hunks",
                samples[4],
                samples[5],
                goal=1.5,
            ),
        ],
        options.rounds,
    )


if __name__ == "__main__":
    main()
