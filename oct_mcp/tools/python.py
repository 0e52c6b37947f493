"""The Python tools: oct_lint and oct_fix (ruff check), oct_format (ruff format), oct_typecheck, oct_test."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from oct_mcp.context import ToolResult
from oct_mcp.spec import CommandPlan, ProjectPath, Risk, RunResult, ToolEnv, ToolSpec
from oct_mcp.tools.programs import find_program
from oct_mcp.tools.results import (
    MODEL_VIEW_BUDGET,
    MODEL_VIEW_MIN,
    BudgetField,
    OffsetField,
    json_size,
    page,
    take_within,
)

__all__ = ["FIX", "FORMAT", "LINT", "TEST", "TYPECHECK"]

MAX_PATHS: Final = 64
SUMMARY_FIRST: Final = 10
# Files whose change oct_format and oct_fix report; past this many, the report says "and more".
_SNAPSHOT_LIMIT: Final = 20_000
_SKIPPED_FOLDERS: Final = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache"})

RuleCode = Annotated[str, StringConstraints(pattern=r"^[A-Z]{1,4}[0-9]{0,4}$", max_length=8)]
# A pytest -k or -m expression: words, operators and parentheses; it can never start with '-'.
PytestExpression = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_ ()\[\].:]+$", max_length=256)]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _targets(paths: list[str]) -> list[str]:
    """Paths after `--`, so none can be read as an option; the project root when none is given."""
    return ["--", *paths] if paths else ["--", "."]


def _relative(root: Path, filename: str) -> str | None:
    path = Path(filename) if os.path.isabs(filename) else root / filename
    try:
        return Path(os.path.normpath(path)).relative_to(root).as_posix()
    except ValueError:
        return None


def _tool_failed(tool: str, run: RunResult) -> ToolResult:
    detail = (run.stderr or run.stdout).decode(errors="replace").strip()[-4_000:]
    return ToolResult(text=f"{tool} failed (exit code {run.exit_code}):\n{detail}", is_error=True)


# -- oct_lint ----------------------------------------------------------------------------------


class _PagedParams(_Params):
    summary: bool = Field(
        default=False, description=f"Counts per rule and only the first {SUMMARY_FIRST} diagnostics."
    )
    offset: int = OffsetField()
    max_chars: int = BudgetField()


class LintParams(_PagedParams):
    paths: list[ProjectPath] = Field(
        default_factory=list, max_length=MAX_PATHS, description="Files or folders; all by default."
    )
    select: list[RuleCode] = Field(
        default_factory=list, max_length=64, description="Only these rule codes or prefixes."
    )


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
    """Diagnostics per rule code, most frequent first."""
    diagnostics: list[Diagnostic]
    truncated: bool
    next_offset: int | None = None
    """The offset that shows the diagnostics after these."""


def _diagnostics_result(tool: str, diagnostics: list[Diagnostic], paging: _PagedParams) -> ToolResult:
    fixable = sum(d.fixable for d in diagnostics)
    by_rule = dict(Counter(d.code for d in diagnostics).most_common())
    # The rule counts come first in the budget; the diagnostics get what is left.
    room = paging.max_chars - json_size(by_rule)
    listed = diagnostics[: paging.offset + SUMMARY_FIRST] if paging.summary else diagnostics
    shown, next_offset = page(listed, paging.offset, max(room, MODEL_VIEW_MIN))
    lines = [f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}" for d in shown]
    summary = f"{len(diagnostics)} problem(s)" + (f", {fixable} fixable with oct_fix" if fixable else "")
    if paging.summary and diagnostics:
        summary += "; by rule: " + ", ".join(f"{code} {n}" for code, n in by_rule.items())
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
    )
    structured = output.model_dump()
    structured["diagnostics"] = [d.model_dump(exclude_defaults=True) for d in shown]
    return ToolResult(text="\n".join([*lines, summary]), structured=structured)


def _parse_ruff_check(root: Path, paging: _PagedParams) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code not in (0, 1):
            return _tool_failed("ruff", run)
        try:
            raw = json.loads(run.stdout or b"[]")
        except ValueError:
            return _tool_failed("ruff", run)
        diagnostics = [
            Diagnostic(
                path=_relative(root, item.get("filename", "")) or "(outside the project)",
                line=int((item.get("location") or {}).get("row") or 0),
                column=int((item.get("location") or {}).get("column") or 0),
                code=str(item.get("code") or "syntax"),
                message=str(item.get("message", "")),
                fixable=bool(item.get("fix")) and (item.get("fix") or {}).get("applicability") == "safe",
            )
            for item in raw
            if isinstance(item, dict)
        ]
        return _diagnostics_result("ruff", diagnostics, paging)

    return parse


def _plan_lint(params: LintParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    ruff = find_program(root, "ruff")
    select = ["--select", ",".join(params.select)] if params.select else []
    return CommandPlan(
        argv=(str(ruff), "check", "--no-fix", "--output-format", "json", *select, *_targets(params.paths)),
        parse=_parse_ruff_check(root, params),
    )


# -- oct_fix and oct_format: writes, with a diff preview ---------------------------------------


class FixParams(_Params):
    paths: list[ProjectPath] = Field(default_factory=list, max_length=MAX_PATHS)
    select: list[RuleCode] = Field(default_factory=list, max_length=64)
    dry_run: bool | None = Field(
        default=None, description="Only show the diff; the server's default when unset."
    )
    confirm: bool = False


class FormatParams(_Params):
    paths: list[ProjectPath] = Field(default_factory=list, max_length=MAX_PATHS)
    apply: bool | None = Field(default=None, description="False: only show the diff. True: format the files.")
    confirm: bool = False


class ChangeOutput(BaseModel):
    tool: str
    applied: bool
    changed_files: list[str]
    diff: str = ""


def _python_files(root: Path, paths: list[str]) -> Iterator[Path]:
    for start in [root / p for p in paths] or [root]:
        if start.is_file():
            yield start
            continue
        for folder, subfolders, files in os.walk(start):
            subfolders[:] = [s for s in subfolders if s not in _SKIPPED_FOLDERS]
            yield from (Path(folder) / f for f in files if f.endswith((".py", ".pyi")))


def _snapshot(root: Path, paths: list[str]) -> dict[Path, tuple[int, int]]:
    """(mtime, size) of the Python files a write may change: what changed is what differs after."""
    snapshot: dict[Path, tuple[int, int]] = {}
    for path in _python_files(root, paths):
        if len(snapshot) >= _SNAPSHOT_LIMIT:
            break
        try:
            info = path.stat()
        except OSError:
            continue
        snapshot[path] = (info.st_mtime_ns, info.st_size)
    return snapshot


def _changed(root: Path, before: dict[Path, tuple[int, int]]) -> list[str]:
    changed = []
    for path, fingerprint in before.items():
        try:
            info = path.stat()
        except OSError:
            continue
        if (info.st_mtime_ns, info.st_size) != fingerprint:
            changed.append(path.relative_to(root).as_posix())
    return sorted(changed)


def _diff_files(diff: str) -> list[str]:
    return sorted({line[4:].strip() for line in diff.splitlines() if line.startswith("+++ ")})


def _preview(tool: str, diff_ok: tuple[int, ...]) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code not in diff_ok:
            return _tool_failed(tool, run)
        diff = run.stdout.decode(errors="replace")
        files = _diff_files(diff)
        output = ChangeOutput(tool=tool, applied=False, changed_files=files, diff=diff)
        text = diff if diff else "nothing to change"
        return ToolResult(
            text=f"dry run, nothing changed; would change {len(files)} file(s):\n{text}",
            structured=output.model_dump(),
        )

    return parse


def _applied(
    tool: str, root: Path, before: dict[Path, tuple[int, int]], ok: tuple[int, ...]
) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        changed = _changed(root, before)
        if run.exit_code not in ok:
            failed = _tool_failed(tool, run)
            return ToolResult(
                text=f"{failed.text}\nchanged before it stopped: {changed or 'nothing'}", is_error=True
            )
        output = ChangeOutput(tool=tool, applied=True, changed_files=changed)
        listing = "\n".join(changed) if changed else "no file needed a change"
        return ToolResult(text=f"changed {len(changed)} file(s):\n{listing}", structured=output.model_dump())

    return parse


def _plan_fix(params: FixParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    ruff = find_program(root, "ruff")
    select = ["--select", ",".join(params.select)] if params.select else []
    dry_run = params.dry_run if params.dry_run is not None else env.dry_run
    if dry_run:
        # --diff implies --fix-only and writes nothing; exit 1 means "there is a diff".
        argv = (str(ruff), "check", "--diff", *select, *_targets(params.paths))
        return CommandPlan(argv=argv, parse=_preview("ruff check --fix", (0, 1)))
    before = _snapshot(root, params.paths)
    argv = (str(ruff), "check", "--fix", "--exit-zero", *select, *_targets(params.paths))
    return CommandPlan(argv=argv, parse=_applied("ruff check --fix", root, before, (0,)), writes_project=True)


def _plan_format(params: FormatParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    ruff = find_program(root, "ruff")
    # The gate decides dry_run for oct_format from `apply` (the seed's rules 3 and 4).
    if env.dry_run:
        argv = (str(ruff), "format", "--diff", *_targets(params.paths))
        return CommandPlan(argv=argv, parse=_preview("ruff format", (0, 1)))
    before = _snapshot(root, params.paths)
    argv = (str(ruff), "format", *_targets(params.paths))
    return CommandPlan(argv=argv, parse=_applied("ruff format", root, before, (0,)), writes_project=True)


# -- oct_typecheck -----------------------------------------------------------------------------


class TypecheckParams(_PagedParams):
    paths: list[ProjectPath] = Field(
        default_factory=list,
        max_length=MAX_PATHS,
        description="Files or folders; the project's mypy config or the root by default.",
    )


def _uses_pyright(root: Path) -> bool:
    if (root / "pyrightconfig.json").is_file():
        return True
    try:
        return "[tool.pyright]" in (root / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _parse_mypy(root: Path, paging: _PagedParams) -> Callable[[RunResult], ToolResult]:
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
                        path=_relative(root, str(item.get("file", ""))) or "(outside the project)",
                        line=int(item.get("line") or 0),
                        column=int(item.get("column") or 0) + 1,
                        code=str(item.get("code") or item["severity"]),
                        message=str(item.get("message", "")),
                        severity=str(item["severity"]),
                    )
                )
        if run.exit_code not in (0, 1) or (run.exit_code == 1 and not diagnostics):
            return _tool_failed("mypy", run)
        return _diagnostics_result("mypy", [d for d in diagnostics if d.severity != "note"], paging)

    return parse


def _parse_pyright(root: Path, paging: _PagedParams) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        try:
            report = json.loads(run.stdout or b"{}")
        except ValueError:
            return _tool_failed("pyright", run)
        diagnostics = [
            Diagnostic(
                path=_relative(root, str(item.get("file", ""))) or "(outside the project)",
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
            return _tool_failed("pyright", run)
        return _diagnostics_result("pyright", diagnostics, paging)

    return parse


def _plan_typecheck(params: TypecheckParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    if _uses_pyright(root):
        pyright = find_program(root, "pyright")
        return CommandPlan(
            argv=(str(pyright), "--outputjson", *params.paths), parse=_parse_pyright(root, params)
        )
    mypy = find_program(root, "mypy")
    has_config = any((root / name).is_file() for name in ("mypy.ini", ".mypy.ini", "setup.cfg")) or _mentions(
        root / "pyproject.toml", "[tool.mypy]"
    )
    targets = ["--", *params.paths] if params.paths else ([] if has_config else ["--", "."])
    argv = (str(mypy), "--output", "json", "--no-color-output", "--no-error-summary", *targets)
    return CommandPlan(argv=argv, parse=_parse_mypy(root, params))


def _mentions(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


# -- oct_test ----------------------------------------------------------------------------------


class TestParams(_Params):
    paths: list[ProjectPath] = Field(
        default_factory=list, max_length=MAX_PATHS, description="Test files, folders or node ids."
    )
    keyword: PytestExpression | None = Field(
        default=None, description="Only tests matching this -k expression."
    )
    marker: PytestExpression | None = Field(
        default=None, description="Only tests matching this -m expression."
    )
    max_failures: int | None = Field(
        default=None, ge=1, le=10_000, description="Stop after this many failures."
    )
    jobs: int | None = Field(
        default=None, ge=1, le=256, description="Parallel workers (pytest-xdist), up to max_jobs."
    )


class TestFailure(BaseModel):
    node_id: str
    kind: Literal["failed", "error"]
    message: str
    """The assertion or exception pytest reports (its `E` lines), whole up to a bound."""
    traceback: str = ""
    """The rest of pytest's short traceback for it (frames, captured output), its last characters."""


class TestOutput(BaseModel):
    passed: int
    failed: int
    errors: int
    skipped: int
    duration_seconds: float | None
    failures: list[TestFailure]
    failures_omitted: int = 0
    """Failures past the result's budget, counted and not shown: run fewer tests to see them."""
    exit_code: int | None


_SUMMARY_COUNT: Final = re.compile(
    r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)"
)
_SUMMARY_TIME: Final = re.compile(r" in ([0-9.]+)s")
_SHORT_SUMMARY: Final = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")
_PROGRESS: Final = re.compile(rb"\[\s*(\d{1,3})%\]\s*$")
_SECTION_TITLE: Final = re.compile(r"^_{3,} (.+?) _{3,}$")
_SECTION_END: Final = re.compile(r"^={3,} .* ={3,}$")
_ERROR_TITLE: Final = re.compile(r"^ERROR (?:at (?:setup|teardown) of|collecting) (.+)$")
# A failure's assertion text and traceback are each cut to these; the traceback keeps its end,
# where the failing line is.
FAILURE_MESSAGE_MAX_CHARS: Final = 2_000
FAILURE_TRACEBACK_MAX_CHARS: Final = 3_000


def _has_xdist(program: Path) -> bool:
    venv = program.parent.parent
    return any(venv.glob("lib/python3*/site-packages/xdist/__init__.py"))


def _parse_pytest(run: RunResult) -> ToolResult:
    text = run.stdout.decode(errors="replace")
    counts = dict.fromkeys(("passed", "failed", "errors", "skipped"), 0)
    duration = None
    lines = text.splitlines()
    for line in reversed(lines):
        if _SUMMARY_TIME.search(line) and _SUMMARY_COUNT.search(line):
            for number, word in _SUMMARY_COUNT.findall(line):
                key = "errors" if word.startswith("error") else word
                if key in counts:
                    counts[key] = int(number)
            found = _SUMMARY_TIME.search(line)
            duration = float(found.group(1)) if found else None
            break
    sections = _failure_sections(lines)
    every = [
        _failure(m.group(2), "failed" if m.group(1) == "FAILED" else "error", m.group(3) or "", sections)
        for m in map(_SHORT_SUMMARY.match, lines)
        if m is not None
    ]
    failures, _ = take_within(every, MODEL_VIEW_BUDGET)
    omitted = len(every) - len(failures)
    # pytest's exit codes: 0 passed, 1 failures, 5 no tests collected; others: it could not run.
    if run.exit_code not in (0, 1, 5):
        return _tool_failed("pytest", run)
    output = TestOutput(
        **counts,
        duration_seconds=duration,
        failures=failures,
        failures_omitted=omitted,
        exit_code=run.exit_code,
    )
    return ToolResult(text=text[-MODEL_VIEW_BUDGET:], structured=output.model_dump(), is_error=False)


def _failure_sections(lines: list[str]) -> dict[str, list[str]]:
    """pytest's FAILURES and ERRORS sections, by their title (`test_x`, `TestA.test_x[1]`, `ERROR ...`)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        title = _SECTION_TITLE.match(line)
        if title is not None:
            current = sections.setdefault(title.group(1), [])
        elif _SECTION_END.match(line):
            current = None
        elif current is not None:
            current.append(line)
    return sections


def _failure(
    node_id: str, kind: Literal["failed", "error"], summary: str, sections: dict[str, list[str]]
) -> TestFailure:
    test = node_id.split("::", 1)[1].replace("::", ".") if "::" in node_id else node_id
    body = sections.get(test)
    for title, lines in sections.items():
        error = _ERROR_TITLE.match(title)
        if body is None and error is not None and error.group(1) in (test, node_id):
            body = lines
    if body is None:
        return TestFailure(node_id=node_id, kind=kind, message=summary)
    message = "\n".join(line[4:] for line in body if line.startswith("E   ") or line == "E")
    traceback = "\n".join(line for line in body if not (line.startswith("E   ") or line == "E")).strip("\n")
    return TestFailure(
        node_id=node_id,
        kind=kind,
        message=(message or summary)[:FAILURE_MESSAGE_MAX_CHARS],
        traceback=traceback[-FAILURE_TRACEBACK_MAX_CHARS:],
    )


def _pytest_progress(line: bytes) -> tuple[float, float | None, str | None] | None:
    """A `[ 45%]` at the end of pytest's progress line becomes 45 of 100."""
    found = _PROGRESS.search(line)
    return (float(found.group(1)), 100.0, None) if found else None


def _plan_test(params: TestParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    pytest = find_program(root, "pytest")
    argv: list[str] = [str(pytest), "-q", "-rfE", "--color=no", "--tb=short", "-p", "no:cacheprovider"]
    if params.keyword:
        argv += ["-k", params.keyword]
    if params.marker:
        argv += ["-m", params.marker]
    if params.max_failures:
        argv.append(f"--maxfail={params.max_failures}")
    if params.jobs and params.jobs > 1 and _has_xdist(pytest):
        argv += ["-n", str(min(params.jobs, env.max_jobs))]
    argv += ["--", *params.paths] if params.paths else []
    return CommandPlan(argv=tuple(argv), parse=_parse_pytest, long_running=True, progress=_pytest_progress)


def _spec(
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
) -> ToolSpec:
    return ToolSpec(
        name=name,
        title=title,
        description=description,
        params=params,
        output=output,
        risk=risk,
        plan=plan,
        idempotent=idempotent,
        program=program,
    )


LINT: Final = _spec(
    "oct_lint",
    "Lint with ruff",
    "Run the project's ruff linter (its own config) and return each problem with file, line, column, rule "
    "code, message and whether oct_fix can fix it. Prefer it to running ruff in a shell: the output is "
    "structured and the run is sandboxed, the project read-only. The project's own ruff (its .venv first) "
    "is project code: this tool counts as running project code.",
    LintParams,
    DiagnosticsOutput,
    Risk.EXECUTE,
    _plan_lint,
    program="ruff",
)
FIX: Final = _spec(
    "oct_fix",
    "Fix lint problems with ruff",
    "Apply ruff's safe fixes to the project (ruff check --fix). With dry_run (the default unless the server "
    "says otherwise) it only returns the diff it would make; otherwise it writes and lists the changed "
    "files. Runs the project's own ruff (its .venv first), which is project code. Needs your confirmation.",
    FixParams,
    ChangeOutput,
    Risk.WRITE,
    _plan_fix,
    idempotent=False,
    program="ruff",
)
FORMAT: Final = _spec(
    "oct_format",
    "Format with ruff",
    "Format Python files with ruff format (the project's config). apply=false returns the diff applying "
    "would make and changes nothing; apply=true formats and lists the changed files. Runs the project's own "
    "ruff (its .venv first), which is project code. Needs your confirmation.",
    FormatParams,
    ChangeOutput,
    Risk.WRITE,
    _plan_format,
    idempotent=False,
    program="ruff",
)
TYPECHECK: Final = _spec(
    "oct_typecheck",
    "Type-check",
    "Type-check the project with mypy (or pyright, when the project configures pyright) and return each "
    "diagnostic with file, line, column, code and message. Sandboxed, the project read-only. The project's "
    "own mypy or pyright (its .venv first) and its plugins are project code: this tool counts as running it.",
    TypecheckParams,
    DiagnosticsOutput,
    Risk.EXECUTE,
    _plan_typecheck,
    program="mypy",
)
TEST: Final = _spec(
    "oct_test",
    "Run tests with pytest",
    "Run the project's tests with pytest: optional paths or node ids, a -k keyword expression, a -m marker "
    "expression, a maximum number of failures, and parallel jobs (pytest-xdist, when the project has it). "
    "Returns counts (passed, failed, errors, skipped), the duration and each failure's node id and message, "
    "and sends progress notifications when the client asks for them. Runs project code in the sandbox with "
    "the project read-only.",
    TestParams,
    TestOutput,
    Risk.EXECUTE,
    _plan_test,
    program="pytest",
)
