"""oct_typecheck: mypy's or pyright's findings, the checker and its config read as the project sets them."""

from __future__ import annotations

import configparser
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field

from oct_mcp.errors import ToolUnavailableError
from oct_mcp.spec import (
    CommandPlan,
    ProjectPath,
    Risk,
    RunResult,
    ToolEnv,
)
from oct_mcp.tools._project.programs import find_program
from oct_mcp.tools.python.lint import Diagnostic, DiagnosticsOutput, PagedParams, diagnostics_result
from oct_mcp.tools.python.running import (
    MAX_PATHS,
    SKIPPED_FOLDERS,
    project_relative,
    pyproject_tool,
    python_tool_spec,
    read_config,
    tool_failed,
    warning_lines,
)
from oct_mcp.types import ToolResult

__all__ = ["TYPECHECK", "TypecheckParams", "choose_checker"]


class TypecheckParams(PagedParams):
    paths: list[ProjectPath] = Field(
        default_factory=list,
        max_length=MAX_PATHS,
    )
    checker: Literal["mypy", "pyright"] | None = Field(
        default=None,
    )


def _ini_mypy_section(path: Path) -> dict[str, str] | None:
    """The [mypy] section of an ini file, or None: setup.cfg and tox.ini are mypy config only with one."""
    text = read_config(path)
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return dict(parser["mypy"]) if parser.has_section("mypy") else None


def _mypy_config(root: Path, tool: dict[str, Any]) -> dict[str, Any] | None:
    """mypy's settings in the file mypy itself reads first, or None when none of its files configures it."""
    for name in ("mypy.ini", ".mypy.ini"):
        if (root / name).is_file():
            return _ini_mypy_section(root / name) or {}
    mypy = tool.get("mypy")
    if isinstance(mypy, dict):
        return mypy
    return _ini_mypy_section(root / "setup.cfg")


def _mypy_configured(root: Path, tool: dict[str, Any]) -> bool:
    # mypy never reads tox.ini, but a [mypy] section there says the project means to use it.
    return _mypy_config(root, tool) is not None or _ini_mypy_section(root / "tox.ini") is not None


def _pyright_configured(root: Path, tool: dict[str, Any]) -> bool:
    return (root / "pyrightconfig.json").is_file() or isinstance(tool.get("pyright"), dict)


def _installed(root: Path, name: str) -> Path | None:
    try:
        return find_program(root, name)
    except ToolUnavailableError:
        return None


def _default_targets(root: Path) -> list[str]:
    """What `mypy` checks when nothing names a target: the project's packages, else the root."""
    if (root / "src").is_dir():
        return ["src"]
    packages = sorted(
        entry.name
        for entry in root.iterdir()
        if entry.is_dir()
        and not entry.name.startswith(".")
        and entry.name not in SKIPPED_FOLDERS
        and (entry / "__init__.py").is_file()
    )
    modules = sorted(entry.name for entry in root.glob("*.py") if entry.is_file())
    return [*packages, *modules] or ["."]


def choose_checker(root: Path, params: TypecheckParams, tool: dict[str, Any]) -> tuple[str, Path, list[str]]:
    """The checker to run, its program, and what oct says about the choice.

    Raises:
        ToolUnavailableError: The chosen checker, or every checker, is missing.
    """
    if params.checker is not None:
        return params.checker, find_program(root, params.checker), [f"checker: {params.checker}, as asked"]
    pyright_configured = _pyright_configured(root, tool)
    mypy_configured = _mypy_configured(root, tool)
    pyright, mypy = _installed(root, "pyright"), _installed(root, "mypy")
    if pyright_configured and pyright is not None:
        also = "; mypy is configured too: pass checker='mypy' to run it" if mypy_configured else ""
        return "pyright", pyright, [f"checker: pyright, which the project configures{also}"]
    if mypy is not None:
        if pyright_configured:
            why = "the project configures pyright too, but pyright is not installed"
        elif mypy_configured:
            why = "which the project configures"
        else:
            why = "no checker is configured"
        return "mypy", mypy, [f"checker: mypy ({why})"]
    if pyright is not None:
        return "pyright", pyright, ["checker: pyright (mypy is not installed)"]
    return "mypy", find_program(root, "pyright" if pyright_configured else "mypy"), []


def _parse_mypy(root: Path, paging: PagedParams, notes: list[str]) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        diagnostics: list[Diagnostic] = []
        for line in run.stdout.decode(errors="replace").splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict) and item.get("severity") in ("error", "warning", "note"):
                diagnostics.append(
                    Diagnostic(
                        path=project_relative(root, str(item.get("file", ""))) or "(outside the project)",
                        line=int(item.get("line") or 0),
                        column=int(item.get("column") or 0) + 1,
                        code=str(item.get("code") or item["severity"]),
                        message=str(item.get("message", "")),
                        severity=str(item["severity"]),
                    )
                )
        if run.exit_code not in (0, 1) or (run.exit_code == 1 and not diagnostics):
            return tool_failed("mypy", run)
        errors = [d for d in diagnostics if d.severity != "note"]
        return diagnostics_result("mypy", errors, paging, warnings=warning_lines(run), notes=notes)

    return parse


def _parse_pyright(root: Path, paging: PagedParams, notes: list[str]) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        try:
            report = json.loads(run.stdout or b"{}")
        except ValueError:
            return tool_failed("pyright", run)
        diagnostics = [
            Diagnostic(
                path=project_relative(root, str(item.get("file", ""))) or "(outside the project)",
                line=int(((item.get("range") or {}).get("start") or {}).get("line", -1)) + 1,
                column=int(((item.get("range") or {}).get("start") or {}).get("character", -1)) + 1,
                code=str(item.get("rule") or item.get("severity", "error")),
                message=str(item.get("message", "")),
                severity=str(item.get("severity", "error")),
            )
            for item in report.get("generalDiagnostics", [])
            if isinstance(item, dict) and item.get("severity") in ("error", "warning")
        ]
        if run.exit_code not in (0, 1):
            return tool_failed("pyright", run)
        return diagnostics_result("pyright", diagnostics, paging, notes=notes)

    return parse


def _plan_typecheck(params: TypecheckParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    tool = pyproject_tool(root)
    checker, program, notes = choose_checker(root, params, tool)
    if checker == "pyright":
        targets = ["--", *params.paths] if params.paths else []
        return CommandPlan(
            argv=(str(program), "--outputjson", *targets),
            parse=_parse_pyright(root, params, notes),
            project_cache=True,
        )
    config = _mypy_config(root, tool) or {}
    if params.paths:
        targets = ["--", *params.paths]
    elif any(config.get(key) for key in ("files", "packages", "modules")):
        targets = []
        notes.append("checked: what the project's mypy config names")
    else:
        found = _default_targets(root)
        targets = ["--", *found]
        notes.append(f"checked: {', '.join(found)} (the mypy config names no files; pass paths to choose)")
    argv = (str(program), "--output", "json", "--no-color-output", "--no-error-summary", *targets)
    return CommandPlan(argv=argv, parse=_parse_mypy(root, params, notes), project_cache=True)


TYPECHECK: Final = python_tool_spec(
    "oct_typecheck",
    "Type-check",
    (
        "Type-check with the project's mypy or pyright (project code, project read-only): each diagnostic "
        "with file, line, column, code, message. Paged."
    ),
    TypecheckParams,
    DiagnosticsOutput,
    Risk.EXECUTE,
    _plan_typecheck,
    program="mypy",
)
