"""What finding the files a read shows masked costs a command run, first and warm.

A project of 10,000 files (Python modules in 500 folders, one `.env` holding a password) and a git
repository. Each backend that works here runs `python -I -c pass` through the sandbox layer three
ways, side by side: with `show_secrets_to_runs` on (the reference: no scan), with a fresh cache
each time (the first run of a server: every file read and redacted), and with the cache warm (a
walk of the project's entries, nothing read). Goals: warm <= 3x the reference, first <= 25x
(once a server; then only changed files are read again).

The warm cost is a stat of every file (the cache's key): the warm walk alone is also measured
against `os.walk` with an `lstat` of each file, the least any cache keyed by a file's stat can
do. Goal: <= 1.2x.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _common import Comparison, arguments, interleave, print_table
from pydantic import BaseModel, ConfigDict

from oct_mcp.backends import Backend
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.runner import run_prepared
from oct_mcp.backends.secret_files import SecretFileCache
from oct_mcp.execution.applier import ChangeApplier
from oct_mcp.execution.commands import CommandRunner
from oct_mcp.middleware.sandbox import ExecutionSandbox
from oct_mcp.spec import CommandPlan, Risk, RunResult, ToolEnv, ToolSpec
from oct_mcp.testing import make_context, validated
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

FOLDERS = 500
FILES_PER_FOLDER = 20
MODULE = (
    '"""A module."""\n\nimport os\n\n\ndef handler(event: dict) -> str:\n'
    '    return os.environ.get("NAME", "x")\n'
)
MIB = 1_048_576


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _parse(run: RunResult) -> ToolResult:
    if run.exit_code != 0:
        raise RuntimeError(f"run failed: {run.stderr!r}")
    return ToolResult(text="")


def _plan(params: _Params, env: ToolEnv) -> CommandPlan:
    return CommandPlan(argv=(os.path.abspath(sys.executable), "-I", "-c", "pass"), parse=_parse)


SPEC = ToolSpec(
    name="bench_command", title="", description="", params=_Params, output=None, risk=Risk.EXECUTE, plan=_plan
)


def _tree(root: Path) -> int:
    for number in range(FOLDERS):
        folder = root / f"pkg{number // 50}" / f"mod{number}"
        folder.mkdir(parents=True)
        for index in range(FILES_PER_FOLDER):
            (folder / f"f{index}.py").write_text(MODULE)
    (root / ".env").write_text("DB_PASSWORD=Xk9vR2mQ7pL4sT8wZ3nB\n")
    who = ["-c", "user.name=Bench", "-c", "user.email=bench@example.invalid"]
    git = [shutil.which("git") or "git", "-C", str(root), *who]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "pkg0"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tree"], check=True)
    return sum(len(files) for _, _, files in os.walk(root))


def _sandbox(backend: Backend, *, shows: bool, cache: SecretFileCache) -> ExecutionSandbox:
    return ExecutionSandbox(
        commands=CommandRunner(
            backend=backend,
            runner=run_prepared,
            required=frozenset(),
            allow_degraded=False,
            max_output_bytes=MIB,
            timeout_seconds=120,
            test_timeout_seconds=120,
            memory_bytes=512 * MIB,
            threads=1,
            show_secrets_to_runs=shows,
            secret_files=cache,
        ),
        applier=ChangeApplier(),
    )


def _timed(sandbox: ExecutionSandbox, root: Path) -> float:
    ctx = validated(make_context("bench_command", Workspace(root)), SPEC, _Params())

    async def once() -> float:
        started = time.perf_counter()
        await sandbox(ctx, _never)
        return time.perf_counter() - started

    return anyio.run(once)


async def _never(ctx: object) -> ToolResult:
    raise RuntimeError("the terminal layer called next")


def _timed_find(cache: SecretFileCache, root: Path) -> float:
    started = time.perf_counter()
    cache.find(root)
    return time.perf_counter() - started


def _timed_lstats(root: Path) -> float:
    started = time.perf_counter()
    for folder, _, names in os.walk(root):
        for name in names:
            os.lstat(os.path.join(folder, name))
    return time.perf_counter() - started


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=9)
    comparisons: list[Comparison] = []
    backends: list[Backend] = [b for b in (Bubblewrap(), LandlockBackend()) if b.probe().usable]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch).resolve() / "project"
        files = _tree(root)
        for backend in backends:
            reference = _sandbox(backend, shows=True, cache=SecretFileCache())
            warm = _sandbox(backend, shows=False, cache=SecretFileCache())
            measures = [
                lambda reference=reference: _timed(reference, root),
                lambda backend=backend: _timed(_sandbox(backend, shows=False, cache=SecretFileCache()), root),
                lambda warm=warm: _timed(warm, root),
            ]
            for measure in measures:
                measure()  # warm-up: the page cache, and the warm sandbox's verdicts
            shown, first, warmed = interleave(args.rounds, measures)
            label = f"{backend.name}, {files} files"
            comparisons += [
                Comparison(f"secret files: first run / shown ({label})", first, shown, goal=25),
                Comparison(f"secret files: warm run / shown ({label})", warmed, shown, goal=3),
            ]
        if not backends:
            print("neither bubblewrap nor landlock works on this machine: not measured")
        cache = SecretFileCache()
        cache.find(root)
        walks = [lambda: _timed_find(cache, root), lambda: _timed_lstats(root)]
        walked, stats = interleave(args.rounds, walks)
        comparisons.append(
            Comparison(f"secret files: warm walk / os.walk + lstat ({files} files)", walked, stats, goal=1.2)
        )
    print_table(comparisons, args.rounds)


if __name__ == "__main__":
    main()
