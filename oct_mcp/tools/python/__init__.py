"""The Python tools: oct_lint and oct_fix (ruff check), oct_format (ruff format), oct_typecheck, oct_test."""

from __future__ import annotations

from pathlib import Path

from oct_mcp.tools.python.running import pyproject_tool
from oct_mcp.tools.python.test import TEST, pytest_command
from oct_mcp.tools.python.typecheck import TYPECHECK, TypecheckParams, choose_checker

__all__ = ["how_it_runs"]


def how_it_runs(root: Path, tool: str) -> str | None:
    """For `doctor`: the interpreter oct_test uses or the checker oct_typecheck picks, and why.

    Raises:
        ToolUnavailableError: The program the tool needs is missing.
    """
    if tool == TEST.name:
        command, _, notes = pytest_command(root)
        return f"runs {' '.join(command)} ({notes[0].removeprefix('ran: ')})"
    if tool == TYPECHECK.name:
        _, program, notes = choose_checker(root, TypecheckParams(), pyproject_tool(root))
        return f"runs {program} ({notes[0] if notes else 'no checker is configured'})"
    return None
