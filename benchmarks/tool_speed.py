"""Tool speed: one test node and a warm type check through oct-mcp, against the same command run directly.

Goals: each <= 1.5x the direct command. oct-mcp's side is the whole default chain reached through
the SDK's in-memory `Client`, the command under the auto-selected sandbox backend, its bytecode,
mypy and pytest caches in the project's cache folder (kept between runs). The direct side is what
a developer types in a terminal in the project, its caches in the project as usual. Both are
warmed once before the interleaved rounds.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import anyio
from _common import Comparison, arguments, interleave_async, print_table
from mcp import Client

from oct_mcp.app import build_app
from oct_mcp.server import build_server

VENV_BIN: Final = Path(os.path.abspath(sys.executable)).parent
NODE: Final = "tests/test_shapes.py::test_area"
SOURCE: Final = '''"""Shapes."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Square:
    side: float

    def area(self) -> float:
        return self.side * self.side


def total(shapes: list[Square]) -> float:
    return sum(shape.area() for shape in shapes)
'''
TESTS: Final = """from shapes import Square, total


def test_area():
    assert Square(3).area() == 9


def test_total():
    assert total([Square(1), Square(2)]) == 5
"""


def _project(base: Path) -> Path:
    root = base / "project"
    (root / "shapes").mkdir(parents=True)
    (root / "shapes" / "__init__.py").write_text(SOURCE)
    (root / "tests").mkdir()
    (root / "tests" / "test_shapes.py").write_text(TESTS)
    (root / "pyproject.toml").write_text('[tool.mypy]\nstrict = true\nfiles = ["shapes"]\n')
    (root / ".venv" / "bin").mkdir(parents=True)
    for program in ("pytest", "mypy"):
        (root / ".venv" / "bin" / program).symlink_to(VENV_BIN / program)
    return root


def _direct(root: Path, argv: list[str]) -> Callable[[], Awaitable[float]]:
    env = {"PATH": f"{VENV_BIN}{os.pathsep}/usr/bin:/bin", "HOME": str(root.parent), "LANG": "C.UTF-8"}

    async def once() -> float:
        started = time.perf_counter()
        completed = await anyio.run_process(argv, cwd=root, env=env, check=False)
        if completed.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {completed.stdout!r} {completed.stderr!r}")
        return time.perf_counter() - started

    return once


def _through_oct(client: Client, tool: str, arguments: dict[str, Any]) -> Callable[[], Awaitable[float]]:
    async def once() -> float:
        started = time.perf_counter()
        result = await client.call_tool(tool, arguments)
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content!r}")
        return time.perf_counter() - started

    return once


async def _measure(rounds: int, root: Path, config: Path) -> list[list[float]]:
    server = build_server(build_app(root, config_path=config, environ={}), transport="memory")
    async with Client(server) as client:
        measures = [
            _through_oct(client, "oct_test", {"paths": [NODE]}),
            _direct(root, [sys.executable, "-m", "pytest", "-q", NODE]),
            _through_oct(client, "oct_typecheck", {}),
            _direct(root, [str(VENV_BIN / "mypy")]),
        ]
        for measure in measures:
            await measure()  # warm every cache once
        return await interleave_async(rounds, measures)


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=9)
    with tempfile.TemporaryDirectory() as temp:
        base = Path(temp).resolve()
        # The project's cache folder goes under this run's folder, not the user's cache directory.
        os.environ["XDG_CACHE_HOME"] = str(base / "cache")
        root = _project(base)
        config = base / "config.json"
        config.write_text(
            json.dumps({"audit_log_path": str(base / "audit.log"), "rate_limit_per_minute": 10_000})
        )
        test_oct, test_direct, check_oct, check_direct = anyio.run(_measure, args.rounds, root, config)
    print_table(
        [
            Comparison("one test node (oct_test / python -m pytest)", test_oct, test_direct, goal=1.5),
            Comparison("warm type check (oct_typecheck / mypy)", check_oct, check_direct, goal=1.5),
        ],
        args.rounds,
    )


if __name__ == "__main__":
    main()
