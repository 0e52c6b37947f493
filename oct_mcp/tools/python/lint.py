"""oct_lint: ruff check's findings, each with its rule, place and message."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Final

from pydantic import BaseModel, Field

from oct_mcp.backends.installs import is_inside
from oct_mcp.spec import (
    CommandPlan,
    ProjectPath,
    Risk,
    RunResult,
    StrictParams,
    ToolEnv,
)
from oct_mcp.tools._paging.results import MODEL_VIEW_MIN, BudgetField, OffsetField, json_size, page
from oct_mcp.tools._project.programs import find_program
from oct_mcp.tools.python.running import (
    MAX_PATHS,
    RUFF_REPORT,
    SUMMARY_FIRST,
    RuleCode,
    path_arguments,
    project_relative,
    python_tool_spec,
    tool_failed,
    warning_lines,
)
from oct_mcp.types import ToolResult

__all__ = [
    "LINT",
    "Diagnostic",
    "DiagnosticsOutput",
    "LintParams",
    "PagedParams",
    "diagnostics_result",
    "runs_project_code",
]


class PagedParams(StrictParams):
    summary: bool = Field(default=False, description=f"Counts per rule and the first {SUMMARY_FIRST} only.")
    offset: int = OffsetField()
    max_chars: int = BudgetField()


class LintParams(PagedParams):
    paths: list[ProjectPath] = Field(default_factory=list, max_length=MAX_PATHS)
    select: list[RuleCode] = Field(default_factory=list, max_length=64, description="Rule codes or prefixes.")


class Diagnostic(BaseModel):
    path: str
    line: int
    column: int
    code: str
    message: str
    fixable: bool = False
    severity: str = "error"


class DiagnosticsOutput(BaseModel):
    tool: str
    count: int
    """Diagnostics in all, on every page."""
    fixable: int
    by_rule: dict[str, int]
    """Diagnostics per rule or error code, over all of them, most frequent first."""
    diagnostics: list[Diagnostic]
    truncated: bool
    next_offset: int | None = None
    """The offset that shows the diagnostics after these."""
    warnings: list[str] = Field(default_factory=list)
    """What the tool warned about on stderr."""
    notes: list[str] = Field(default_factory=list)
    """What oct chose for this run (which checker, which targets), and why."""


def diagnostics_result(
    tool: str,
    diagnostics: list[Diagnostic],
    paging: PagedParams,
    *,
    warnings: list[str] | None = None,
    notes: list[str] | None = None,
) -> ToolResult:
    fixable = sum(d.fixable for d in diagnostics)
    by_rule = dict(Counter(d.code for d in diagnostics).most_common())
    # The rule counts, warnings and notes come first in the budget; the diagnostics get what is left.
    room = paging.max_chars - json_size([by_rule, warnings or [], notes or []])
    listed = diagnostics[: paging.offset + SUMMARY_FIRST] if paging.summary else diagnostics
    shown, next_offset = page(listed, paging.offset, max(room, MODEL_VIEW_MIN))
    lines = [f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}" for d in shown]
    summary = f"{len(diagnostics)} problem(s)" + (f", {fixable} fixable with oct_fix" if fixable else "")
    if diagnostics and (paging.summary or len(by_rule) > 1):
        summary += "; by rule: " + ", ".join(f"{code} {n}" for code, n in list(by_rule.items())[:30])
    if next_offset is not None:
        summary += f"; {len(shown)} shown, the rest with offset={next_offset}"
    if not diagnostics:
        summary = "no problems found"
    output = DiagnosticsOutput(
        tool=tool,
        count=len(diagnostics),
        fixable=fixable,
        by_rule=by_rule,
        diagnostics=shown,
        truncated=paging.offset + len(shown) < len(diagnostics),
        next_offset=next_offset,
        warnings=warnings or [],
        notes=notes or [],
    )
    structured = output.model_dump()
    structured["diagnostics"] = [d.model_dump(exclude_defaults=True) for d in shown]
    extra = [*(notes or []), *(warnings or [])]
    return ToolResult(text="\n".join([*lines, summary, *extra]), structured=structured)


def _parse_ruff_check(root: Path, params: LintParams) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code not in (0, 1):
            return tool_failed("ruff", run)
        if RUFF_REPORT in run.files_truncated:
            return ToolResult(
                text="[output_limit] ruff's report is larger than oct reads back; lint fewer paths "
                "or select fewer rules (`select`)",
                is_error=True,
            )
        # The report comes from a file, so no pipe cap can cut it; stdout only for a ruff that
        # ignores RUFF_OUTPUT_FILE.
        report = run.files.get(RUFF_REPORT, run.stdout)
        try:
            raw = json.loads(report or b"[]")
        except ValueError:
            return tool_failed("ruff", run)
        if not isinstance(raw, list):
            return tool_failed("ruff", run)
        diagnostics = [
            Diagnostic(
                path=project_relative(root, item.get("filename", "")) or "(outside the project)",
                line=int((item.get("location") or {}).get("row") or 0),
                column=int((item.get("location") or {}).get("column") or 0),
                code=str(item.get("code") or "syntax"),
                message=str(item.get("message", "")),
                fixable=bool(item.get("fix")) and (item.get("fix") or {}).get("applicability") == "safe",
            )
            for item in raw
            if isinstance(item, dict)
        ]
        return diagnostics_result("ruff", diagnostics, params, warnings=warning_lines(run))

    return parse


def _plan_lint(params: LintParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    ruff = find_program(root, "ruff")
    select = ["--select", ",".join(params.select)] if params.select else []
    return CommandPlan(
        argv=(
            str(ruff),
            "check",
            "--no-fix",
            "--output-format",
            "json",
            *select,
            *path_arguments(params.paths),
        ),
        parse=_parse_ruff_check(root, params),
        output_files=(("RUFF_OUTPUT_FILE", RUFF_REPORT),),
        project_cache=True,
        masks_secret_files=runs_project_code(ruff, root),
    )


def runs_project_code(ruff: Path, root: Path) -> bool:
    """Whether `ruff` is the project's own (project code), so the run must not read the files that
    hold secrets as they are. The server's ruff has no plugins and fixed arguments: it reads a secret
    file as it is (a masked copy would be formatted into the file, or fail to be written), and what it
    prints is masked with the whole file as context."""
    return is_inside(ruff, root)


LINT: Final = python_tool_spec(
    "oct_lint",
    "Lint with ruff",
    (
        "Run the project's ruff linter (project code, project read-only): each problem with file, line, "
        "column, code, message, and whether oct_fix fixes it. Paged."
    ),
    LintParams,
    DiagnosticsOutput,
    Risk.EXECUTE,
    _plan_lint,
    program="ruff",
)
