"""What the Python tools share: their arguments' shapes, the tool's own failure, and its warnings."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BaseModel, StringConstraints

from oct_mcp.spec import (
    Risk,
    RunResult,
    ToolSpec,
)
from oct_mcp.tools._project.ignores import ENVIRONMENT_FOLDERS
from oct_mcp.types import ToolResult

__all__ = [
    "HIDDEN_NAMED",
    "IGNORED_MAX",
    "MAX_PATHS",
    "RUFF_REPORT",
    "SKIPPED_FOLDERS",
    "SUMMARY_FIRST",
    "PytestExpression",
    "RuleCode",
    "path_arguments",
    "project_relative",
    "pyproject_tool",
    "python_tool_spec",
    "read_config",
    "tool_failed",
    "warning_lines",
]

MAX_PATHS: Final = 64


SUMMARY_FIRST: Final = 10


SKIPPED_FOLDERS: Final = ENVIRONMENT_FOLDERS | {".git"}


_TAIL_CHARS: Final = 4_000


_NEXT_STEP: Final = (
    "run the same command in a terminal in the project to see all of it; `oct-mcp doctor` shows "
    "which program ran"
)


RUFF_REPORT: Final = "ruff.json"


IGNORED_MAX: Final = 200


HIDDEN_NAMED: Final = 10


RuleCode = Annotated[str, StringConstraints(pattern=r"^[A-Z]{1,4}[0-9]{0,4}$", max_length=8)]


# A pytest -k or -m expression: words, operators and parentheses; it can never start with '-'.
PytestExpression = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_ ()\[\].:]+$", max_length=256)]


def path_arguments(paths: list[str]) -> list[str]:
    """Paths after `--`, so none can be read as an option; the project root when none is given."""
    return ["--", *paths] if paths else ["--", "."]


def project_relative(root: Path, filename: str) -> str | None:
    path = Path(filename) if os.path.isabs(filename) else root / filename
    try:
        return Path(os.path.normpath(path)).relative_to(root).as_posix()
    except ValueError:
        return None


def tool_failed(tool: str, run: RunResult, next_step: str = _NEXT_STEP) -> ToolResult:
    """An error result: the code, what happened, the next step, then the ends of stderr and stdout."""
    parts = [f"[tool_failed] {tool} failed (exit code {run.exit_code}); {next_step}"]
    for name, stream in (("stderr", run.stderr), ("stdout", run.stdout)):
        tail = stream.decode(errors="replace").strip()[-_TAIL_CHARS:]
        if tail:
            parts.append(f"--- end of {name} ---\n{tail}")
    return ToolResult(text="\n".join(parts), is_error=True)


def warning_lines(run: RunResult) -> list[str]:
    """The warnings a tool printed on stderr ("No Python files found" is not "no problems")."""
    lines = run.stderr.decode(errors="replace").splitlines()
    return [line.strip()[:500] for line in lines if line.lower().startswith("warning:")][:20]


_CONFIG_READ_BYTES: Final = 1_048_576


def read_config(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(_CONFIG_READ_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def pyproject_tool(root: Path) -> dict[str, Any]:
    text = read_config(root / "pyproject.toml")
    if text is None:
        return {}
    try:
        tool = tomllib.loads(text).get("tool")
    except tomllib.TOMLDecodeError:
        return {}
    return tool if isinstance(tool, dict) else {}


def python_tool_spec(
    name: str,
    title: str,
    description: str,
    params: type[BaseModel],
    output: type[BaseModel] | None,
    risk: Risk,
    plan: Any,
    *,
    program: str,
    idempotent: bool = True,
    preview: Any = None,
    call_risk: Any = None,
) -> ToolSpec:
    return ToolSpec(
        name=name,
        title=title,
        description=description,
        params=params,
        output=output,
        risk=risk,
        plan=plan,
        preview=preview,
        idempotent=idempotent,
        program=program,
        call_risk=call_risk,
    )
