"""The Python tools: oct_lint and oct_fix (ruff check), oct_format (ruff format), oct_typecheck, oct_test."""

from __future__ import annotations

import configparser
import json
import os
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, Field, StringConstraints

from oct_mcp.backends.installs import install_roots, is_inside
from oct_mcp.diff_view import diff_files, readable_diff
from oct_mcp.errors import InstallRefusedError, OctError, ToolUnavailableError
from oct_mcp.execution.caches import project_cache
from oct_mcp.preview import FileChange, Preview, TargetState, content_digest, diff_counts
from oct_mcp.spec import (
    CallRisk,
    CommandPlan,
    InProcessPlan,
    Plan,
    ProjectPath,
    Risk,
    RunResult,
    StrictParams,
    ToolEnv,
    ToolSpec,
)
from oct_mcp.tools.files import LINE_RANGE_SCAN_LIMIT
from oct_mcp.tools.git.masks import masked_hunks
from oct_mcp.tools.ignores import ENVIRONMENT_FOLDERS
from oct_mcp.tools.programs import find_program, find_python, script_interpreter
from oct_mcp.tools.pytest_report import PytestReport, SkipReason, TestFailure, read_report, report_chars
from oct_mcp.tools.refusals import refusal_notes
from oct_mcp.tools.results import (
    MODEL_VIEW_BUDGET,
    MODEL_VIEW_MIN,
    BudgetField,
    OffsetField,
    cut_lines,
    json_size,
    page,
    take_within,
)
from oct_mcp.tools.unseen import hidden_links
from oct_mcp.tools.writing_runs import RunChanges, WritingRun
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace, read_at_most

__all__ = ["FIX", "FORMAT", "LINT", "TEST", "TYPECHECK", "how_it_runs"]

MAX_PATHS: Final = 64
SUMMARY_FIRST: Final = 10
_SKIPPED_FOLDERS: Final = ENVIRONMENT_FOLDERS | {".git"}
_TAIL_CHARS: Final = 4_000
_NEXT_STEP: Final = (
    "run the same command in a terminal in the project to see all of it; `oct-mcp doctor` shows "
    "which program ran"
)
_RUFF_REPORT: Final = "ruff.json"
_IGNORED_MAX: Final = 200
_HIDDEN_NAMED: Final = 10

RuleCode = Annotated[str, StringConstraints(pattern=r"^[A-Z]{1,4}[0-9]{0,4}$", max_length=8)]
# A pytest -k or -m expression: words, operators and parentheses; it can never start with '-'.
PytestExpression = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_ ()\[\].:]+$", max_length=256)]


def _targets(paths: list[str]) -> list[str]:
    """Paths after `--`, so none can be read as an option; the project root when none is given."""
    return ["--", *paths] if paths else ["--", "."]


def _relative(root: Path, filename: str) -> str | None:
    path = Path(filename) if os.path.isabs(filename) else root / filename
    try:
        return Path(os.path.normpath(path)).relative_to(root).as_posix()
    except ValueError:
        return None


def _tool_failed(tool: str, run: RunResult, next_step: str = _NEXT_STEP) -> ToolResult:
    """An error result: the code, what happened, the next step, then the ends of stderr and stdout."""
    parts = [f"[tool_failed] {tool} failed (exit code {run.exit_code}); {next_step}"]
    for name, stream in (("stderr", run.stderr), ("stdout", run.stdout)):
        tail = stream.decode(errors="replace").strip()[-_TAIL_CHARS:]
        if tail:
            parts.append(f"--- end of {name} ---\n{tail}")
    return ToolResult(text="\n".join(parts), is_error=True)


def _warnings(run: RunResult) -> list[str]:
    """The warnings a tool printed on stderr ("No Python files found" is not "no problems")."""
    lines = run.stderr.decode(errors="replace").splitlines()
    return [line.strip()[:500] for line in lines if line.lower().startswith("warning:")][:20]


# -- oct_lint ----------------------------------------------------------------------------------


class _PagedParams(StrictParams):
    summary: bool = Field(default=False, description=f"Counts per rule and the first {SUMMARY_FIRST} only.")
    offset: int = OffsetField()
    max_chars: int = BudgetField()


class LintParams(_PagedParams):
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


def _diagnostics_result(
    tool: str,
    diagnostics: list[Diagnostic],
    paging: _PagedParams,
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
            return _tool_failed("ruff", run)
        if _RUFF_REPORT in run.files_truncated:
            return ToolResult(
                text="[output_limit] ruff's report is larger than oct reads back; lint fewer paths "
                "or select fewer rules (`select`)",
                is_error=True,
            )
        # The report comes from a file, so no pipe cap can cut it; stdout only for a ruff that
        # ignores RUFF_OUTPUT_FILE.
        report = run.files.get(_RUFF_REPORT, run.stdout)
        try:
            raw = json.loads(report or b"[]")
        except ValueError:
            return _tool_failed("ruff", run)
        if not isinstance(raw, list):
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
        return _diagnostics_result("ruff", diagnostics, params, warnings=_warnings(run))

    return parse


def _plan_lint(params: LintParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    ruff = find_program(root, "ruff")
    select = ["--select", ",".join(params.select)] if params.select else []
    return CommandPlan(
        argv=(str(ruff), "check", "--no-fix", "--output-format", "json", *select, *_targets(params.paths)),
        parse=_parse_ruff_check(root, params),
        output_files=(("RUFF_OUTPUT_FILE", _RUFF_REPORT),),
        project_cache=True,
        masks_secret_files=_runs_project_code(ruff, root),
    )


def _runs_project_code(ruff: Path, root: Path) -> bool:
    """Whether `ruff` is the project's own (project code), so the run must not read the files that
    hold secrets as they are. The server's ruff has no plugins and fixed arguments: it reads a secret
    file as it is (a masked copy would be formatted into the file, or fail to be written), and what it
    prints is masked with the whole file as context."""
    return is_inside(ruff, root)


# -- oct_fix and oct_format: writes, with a diff preview ---------------------------------------


class FixParams(StrictParams):
    paths: list[ProjectPath] = Field(default_factory=list, max_length=MAX_PATHS)
    select: list[RuleCode] = Field(default_factory=list, max_length=64)
    dry_run: bool | None = Field(default=None, description="Unset: the server's default.")
    offset: int = Field(default=0, ge=0, le=10_000_000, description="A cut result's next_offset.")
    max_chars: int = BudgetField()


class FormatParams(StrictParams):
    paths: list[ProjectPath] = Field(default_factory=list, max_length=MAX_PATHS)
    apply: bool | None = Field(default=None, description="Unset: the server's default.")
    offset: int = Field(default=0, ge=0, le=10_000_000, description="A cut result's next_offset.")
    max_chars: int = BudgetField()


class ChangeOutput(BaseModel):
    tool: str
    applied: bool
    changed_files: list[str]
    diff: str = ""
    next_offset: int | None = None
    """A dry run's diff was cut: pass this as offset for the rest (the same call otherwise)."""
    notes: list[str] = Field(default_factory=list)
    """What an apply could not look at, where what changed is unknown."""


def _diff_files(diff: str) -> list[str]:
    return sorted({file.name.strip() for file in diff_files(diff)})


_HUNK_LINE: Final = ("@@ ", " ", "+", "-", "\\")


def _masked_diff(diff: str, workspace: Workspace) -> str:
    """ruff's diff with each file's lines masked as the whole file shows them, before and after.

    A hunk alone may hold a private key's body without its BEGIN line. A file whose hunks cannot be
    placed in it as it is now (it changed since ruff read it) shows its names only, and says so.
    """
    # Lines end at \n only, as ruff wrote them: a form feed in a file's content splits nothing.
    every = diff.split("\n")
    first = next(
        (i for i in range(len(every) - 1) if every[i].startswith("--- ") and every[i + 1].startswith("+++ ")),
        None,
    )
    if first is None:
        return diff
    pieces = ["".join(line + "\n" for line in every[:first])]
    summary: list[str] = []
    # By name: ruff checks files in parallel, so its order changes from run to run, and a dry run's
    # pages are cut by line from separate runs.
    for name, chunk in sorted(_file_diffs(diff), key=lambda file: file[0]):
        lines = chunk.split("\n")
        # The hunks end at ruff's blank line after them; its summary ("Would fix 1 error.") may
        # follow, and goes last.
        end = next((i for i in range(2, len(lines)) if not lines[i].startswith(_HUNK_LINE)), len(lines))
        lines, after = lines[:end], [""] * (end < len(lines))
        summary += [line for line in chunk.split("\n")[end:] if line]
        masked = None
        relative = _relative(workspace.root, name)
        if relative is not None:
            try:
                fd, _resolved = workspace.open_contained_file(relative)
            except OctError:
                fd = None
            if fd is not None:
                try:
                    data = read_at_most(fd, LINE_RANGE_SCAN_LIMIT, os.fstat(fd).st_size)
                finally:
                    os.close(fd)
                if len(data) <= LINE_RANGE_SCAN_LIMIT:
                    masked = masked_hunks(lines[2:], data.decode("utf-8", errors="replace"))
        if masked is None:
            masked = ["[oct-mcp: this file's diff is not shown: the file changed since ruff read it]"]
        pieces.append("\n".join([*lines[:2], *masked, *after]))
    if summary:
        pieces.append("\n" + "".join(line + "\n" for line in summary))
    return "".join(pieces)


def _preview(
    tool: str, diff_ok: tuple[int, ...], workspace: Workspace, paging: tuple[int, int] | None = None
) -> Callable[[RunResult], ToolResult]:
    """A dry run's answer: the masked diff, whole or (with `paging`, an offset in lines and a budget in
    characters) the page of it that fits, cut before a file's or a hunk's header."""

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code not in diff_ok:
            return _tool_failed(tool, run)
        diff = _masked_diff(run.stdout.decode(errors="replace"), workspace)
        files = _diff_files(diff)
        shown, next_offset = diff, None
        if paging is not None:
            offset, budget = paging
            shown, next_offset = cut_lines(diff, offset, budget - json_size(files), _DIFF_STARTS)
        output = ChangeOutput(
            tool=tool, applied=False, changed_files=files, diff=shown, next_offset=next_offset
        )
        text = readable_diff(shown) if shown else "nothing to change"
        if next_offset is not None:
            text += f"\n[the diff is cut here: the rest with offset={next_offset}]"
        return ToolResult(
            text=f"dry run, nothing changed; would change {len(files)} file(s):\n{text}",
            structured=output.model_dump(),
            truncated=next_offset is not None,
        )

    return parse


_DIFF_STARTS: Final = ("--- ", "@@ ")
"""Where a page of ruff's diff may end: before a file's header or a hunk's."""


def _applied(tool: str, run: RunResult, changes: RunChanges, ok: tuple[int, ...]) -> ToolResult:
    """The answer of an apply step: what it changed in the whole project (ruff may be the project's
    own, and change files it was not asked to), with its checkpoint."""
    changed, cut_note = changes.shown_files()
    notes = list(changes.unseen)
    if cut_note is not None:
        notes.insert(0, cut_note)
    if changes.not_kept is not None:
        notes.insert(0, changes.not_kept)
    checkpoint = None if changes.checkpoint is None else changes.checkpoint.id
    kept = "" if checkpoint is None else f"\n(checkpoint {checkpoint}: oct_undo can put these files back)"
    if run.exit_code not in ok:
        failed = _tool_failed(tool, run)
        text = f"{failed.text}\nchanged before it stopped: {changed or 'nothing'}{kept}"
        return ToolResult(text="\n".join([text, *notes]), is_error=True, checkpoint=checkpoint)
    output = ChangeOutput(tool=tool, applied=True, changed_files=changed, notes=notes)
    listing = "\n".join(changed) if changed else "no file needed a change"
    return ToolResult(
        text="\n".join([f"changed {len(changes.files)} file(s):\n{listing}{kept}", *notes]),
        structured=output.model_dump(),
        checkpoint=checkpoint,
    )


def _checkpointed_apply(
    tool: str,
    checkpoint_name: str,
    env: ToolEnv,
    *,
    diff: tuple[str, ...],
    apply: tuple[str, ...],
) -> CommandPlan:
    """ruff asked first for its diff, with the project read-only (a project's ruff is project code:
    nothing it does may land before its changes can be undone), then run over exactly the files that
    diff names. The project is listed, and its files kept for undo, before either runs, and listed
    again after: every file the apply step changed, named by the diff or not, is in the answer and
    in the checkpoint oct_undo puts back.

    A diff that ruff ends with an error (a file it cannot parse) still names the files it would
    change: those are changed, and the answer is ruff's error with what changed.
    """
    root = env.workspace.root
    writing = WritingRun(env, checkpoint_name)
    failed: list[RunResult] = []

    def apply_to_what_the_diff_names(run: RunResult) -> tuple[str, ...]:
        if run.exit_code not in (0, 1):
            failed.append(run)
        files = [
            relative
            for name in _diff_files(run.stdout.decode(errors="replace"))
            if (relative := _relative(root, name)) is not None
        ]
        if not files:
            # A plan's steps end in a command of their program; this one changes nothing.
            return (diff[0], "--version")
        return (*apply, "--", *files)

    def parse(run: RunResult) -> ToolResult:
        # The diff's error is the answer, with what the run over the files it named changed.
        return _applied(tool, failed[0] if failed else run, writing.changes(), (0,))

    return CommandPlan(
        argv=diff,
        before_run=writing.take,
        then=apply_to_what_the_diff_names,
        parse=parse,
        writes_project=True,
        after_failure=writing.after_failure,
        project_cache=True,
        masks_secret_files=_runs_project_code(Path(diff[0]), root),
    )


def _approved_paths(params_paths: list[str], env: ToolEnv) -> list[str]:
    """The files a run may change: after a human approved a preview, exactly the files it showed
    (so a file that needs a change only now is not changed unseen); else what the call names."""
    if env.approved_targets is None:
        return params_paths
    return [target.path for target in env.approved_targets]


def _nothing_approved(tool: str) -> InProcessPlan:
    """An approved preview that changed no file: ruff over no path would run over the whole project."""
    output = ChangeOutput(tool=tool, applied=True, changed_files=[])
    return InProcessPlan(
        lambda: ToolResult(
            text="changed 0 file(s):\nno file needed a change", structured=output.model_dump()
        ),
        inline=True,
    )


def _plan_fix(params: FixParams, env: ToolEnv) -> Plan:
    root = env.workspace.root
    ruff = find_program(root, "ruff")
    select = ["--select", ",".join(params.select)] if params.select else []
    dry_run = env.dry_run_for(params.dry_run)
    if dry_run:
        # --diff implies --fix-only and writes nothing; exit 1 means "there is a diff".
        argv = (str(ruff), "check", "--diff", *select, *_targets(params.paths))
        return CommandPlan(
            argv=argv,
            parse=_preview("ruff check --fix", (0, 1), env.workspace, (params.offset, params.max_chars)),
            masks_secret_files=_runs_project_code(ruff, root),
        )
    paths = _approved_paths(params.paths, env)
    if env.approved_targets is not None and not paths:
        return _nothing_approved("ruff check --fix")
    return _checkpointed_apply(
        "ruff check --fix",
        "oct_fix",
        env,
        diff=(str(ruff), "check", "--diff", *select, *_targets(paths)),
        apply=(str(ruff), "check", "--fix", "--exit-zero", *select),
    )


def _preview_fix(params: FixParams, env: ToolEnv) -> CommandPlan:
    ruff = find_program(env.workspace.root, "ruff")
    select = ["--select", ",".join(params.select)] if params.select else []
    argv = (str(ruff), "check", "--diff", *select, *_targets(params.paths))
    return CommandPlan(
        argv=argv,
        parse=_previewed("ruff check --fix", "fix", env.workspace, (0, 1)),
        masks_secret_files=_runs_project_code(ruff, env.workspace.root),
    )


def _plan_format(params: FormatParams, env: ToolEnv) -> Plan:
    root = env.workspace.root
    ruff = find_program(root, "ruff")
    # The gate decides dry_run from `apply` by this spec's own rule (`_format_risk`).
    if env.dry_run:
        argv = (str(ruff), "format", "--diff", *_targets(params.paths))
        return CommandPlan(
            argv=argv,
            parse=_preview("ruff format", (0, 1), env.workspace, (params.offset, params.max_chars)),
            masks_secret_files=_runs_project_code(ruff, root),
        )
    paths = _approved_paths(params.paths, env)
    if env.approved_targets is not None and not paths:
        return _nothing_approved("ruff format")
    return _checkpointed_apply(
        "ruff format",
        "oct_format",
        env,
        diff=(str(ruff), "format", "--diff", *_targets(paths)),
        apply=(str(ruff), "format"),
    )


def _format_risk(arguments: Mapping[str, Any]) -> CallRisk:
    """The seed's rules 3 and 4: once confirmed, `apply` decides; unset, the dry-run default does."""
    apply = arguments.get("apply")
    if apply is True:
        return CallRisk(risk=Risk.WRITE, dry_run=False, reason="oct_format with apply=true")
    if apply is False:
        return CallRisk(risk=Risk.WRITE, dry_run=True, reason="oct_format with apply=false")
    return CallRisk(risk=Risk.WRITE, honours_dry_run=True, reason="oct_format without apply")


def _preview_format(params: FormatParams, env: ToolEnv) -> CommandPlan:
    ruff = find_program(env.workspace.root, "ruff")
    argv = (str(ruff), "format", "--diff", *_targets(params.paths))
    return CommandPlan(
        argv=argv,
        parse=_previewed("ruff format", "format", env.workspace, (0, 1)),
        masks_secret_files=_runs_project_code(ruff, env.workspace.root),
    )


def _previewed(
    tool: str, action: str, workspace: Workspace, diff_ok: tuple[int, ...]
) -> Callable[[RunResult], ToolResult]:
    """The dry run's answer with its `Preview`: each file ruff would change, its counts, its content now."""
    shown = _preview(tool, diff_ok, workspace)

    def parse(run: RunResult) -> ToolResult:
        result = shown(run)
        if result.is_error:
            return result
        # The diff as the answer shows it: masked in context.
        diff = ChangeOutput.model_validate(result.structured).diff
        files: list[FileChange] = []
        targets: list[TargetState] = []
        for name, chunk in _file_diffs(diff):
            relative = _relative(workspace.root, name)
            if relative is None:
                return ToolResult(
                    text=f"{tool} named a file outside the project; nothing was changed", is_error=True
                )
            added, removed = diff_counts(chunk)
            files.append(FileChange(path=relative, action=action, added=added, removed=removed))
            targets.append(TargetState(path=relative, digest=content_digest(workspace, relative)))
        return replace(result, preview=Preview(files=tuple(files), diff=diff, targets=tuple(targets)))

    return parse


def _file_diffs(diff: str) -> Iterator[tuple[str, str]]:
    """(the file's name, its part of the diff) for each file of a diff as ruff writes it.

    Read by the hunks' counts, at `\n` only: a form feed or a `+++ ` in a file's content starts no
    file of its own in the question.
    """
    for file in diff_files(diff):
        yield file.name.rstrip("\r"), file.text


# -- oct_typecheck -----------------------------------------------------------------------------


class TypecheckParams(_PagedParams):
    paths: list[ProjectPath] = Field(
        default_factory=list,
        max_length=MAX_PATHS,
    )
    checker: Literal["mypy", "pyright"] | None = Field(
        default=None,
    )


_CONFIG_READ_BYTES: Final = 1_048_576


def _read_config(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(_CONFIG_READ_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def _pyproject_tool(root: Path) -> dict[str, Any]:
    text = _read_config(root / "pyproject.toml")
    if text is None:
        return {}
    try:
        tool = tomllib.loads(text).get("tool")
    except tomllib.TOMLDecodeError:
        return {}
    return tool if isinstance(tool, dict) else {}


def _ini_mypy_section(path: Path) -> dict[str, str] | None:
    """The [mypy] section of an ini file, or None: setup.cfg and tox.ini are mypy config only with one."""
    text = _read_config(path)
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
        and entry.name not in _SKIPPED_FOLDERS
        and (entry / "__init__.py").is_file()
    )
    modules = sorted(entry.name for entry in root.glob("*.py") if entry.is_file())
    return [*packages, *modules] or ["."]


def _choose_checker(root: Path, params: TypecheckParams, tool: dict[str, Any]) -> tuple[str, Path, list[str]]:
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


def _parse_mypy(root: Path, paging: _PagedParams, notes: list[str]) -> Callable[[RunResult], ToolResult]:
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
        errors = [d for d in diagnostics if d.severity != "note"]
        return _diagnostics_result("mypy", errors, paging, warnings=_warnings(run), notes=notes)

    return parse


def _parse_pyright(root: Path, paging: _PagedParams, notes: list[str]) -> Callable[[RunResult], ToolResult]:
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
        return _diagnostics_result("pyright", diagnostics, paging, notes=notes)

    return parse


def _plan_typecheck(params: TypecheckParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    tool = _pyproject_tool(root)
    checker, program, notes = _choose_checker(root, params, tool)
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


# -- oct_test ----------------------------------------------------------------------------------


class TestParams(StrictParams):
    paths: list[ProjectPath] = Field(
        default_factory=list, max_length=MAX_PATHS, description="Files, folders or node ids."
    )
    keyword: PytestExpression | None = Field(default=None, description="A -k expression.")
    marker: PytestExpression | None = Field(default=None, description="A -m expression.")
    max_failures: int | None = Field(default=None, ge=1, le=10_000)
    jobs: int | None = Field(default=None, ge=1, le=256, description="pytest-xdist workers.")
    last_failed: bool = Field(default=False)


class TestOutput(BaseModel):
    passed: int
    failed: int
    errors: int
    skipped: int
    duration_seconds: float | None
    failures: list[TestFailure]
    failures_omitted: int = 0
    """Failures past the result's budget, counted and not shown: run fewer tests to see them."""
    skips: list[SkipReason] = Field(default_factory=list)
    """Why tests were skipped, as pytest reported it, one entry per reason and file."""
    ended: Literal["finished", "timed_out", "crashed"] = "finished"
    """`timed_out` or `crashed`: pytest stopped early; the counts and failures are those it reported
    until then (from its progress characters when it printed no counts line)."""
    exit_code: int | None
    notes: list[str] = Field(default_factory=list)
    """How oct ran the tests (which interpreter, serial instead of parallel), and why; what stopped a
    run early."""


_PROGRESS: Final = re.compile(rb"\[\s*(\d{1,3})%\]\s*$")
_COVERAGE_FILE: Final = "coverage/.coverage"


def _has_xdist(python: Path) -> bool:
    prefix = python.parent.parent
    return any(
        any(prefix.glob(f"lib/python3*/{folder}/xdist/__init__.py"))
        for folder in ("site-packages", "dist-packages")
    )


def _parse_pytest(notes: list[str], root: Path) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        text = run.stdout.decode(errors="replace")
        report = read_report(text)
        ended: Literal["finished", "timed_out", "crashed"] = "finished"
        stopped: list[str] = []
        if run.timed_out:
            ended = "timed_out"
            stopped.append(
                f"[timeout] the run reached its time limit after {run.duration_seconds:.0f} s and was "
                f"stopped: {_what_was_reported(report)}; raise timeout_test_seconds, or run fewer tests "
                "(paths, keyword)"
            )
        elif run.exit_code == 3 and report.internal_error is not None:
            # pytest's exit codes: 0 passed, 1 failures, 5 no tests collected, 3 an internal error,
            # which it prints as INTERNALERROR lines after the tests it ran.
            ended = "crashed"
            stopped.append(
                f"[tool_failed] pytest crashed with an internal error (exit code 3: "
                f"{report.internal_error}); {_what_was_reported(report)}; the tests after it did not "
                "run: run them with paths, or run `python -m pytest` in a terminal to see the whole error"
            )
        elif run.exit_code not in (0, 1, 5) or (run.exit_code == 1 and not report.summarised):
            # Others: it could not run (2 interrupted or a usage error, 4 a bad command line). A 1 with
            # no summary line is a crash on the way out (a plugin that could not write its report).
            return _tool_failed(
                "pytest",
                run,
                "pytest could not run the tests (the end of its output says why); fix that, or run "
                "`python -m pytest` in a terminal in the project to compare",
            )
        every = report.failures
        failures, _ = take_within(every, MODEL_VIEW_BUDGET)
        all_notes = [*stopped, *notes, *refusal_notes(every, run.backend, root)]
        output = TestOutput(
            **report.counts,
            duration_seconds=report.duration if report.summarised else run.duration_seconds,
            failures=failures,
            failures_omitted=len(every) - len(failures),
            skips=report.skips,
            ended=ended,
            exit_code=run.exit_code,
            notes=all_notes,
        )
        body = text[-MODEL_VIEW_BUDGET:]
        return ToolResult(
            text="\n".join([*all_notes, body]) if all_notes else body, structured=output.model_dump()
        )

    return parse


def _what_was_reported(report: PytestReport) -> str:
    counts = ", ".join(f"{n} {word}" for word, n in report.counts.items())
    if report.summarised:
        return f"the counts ({counts}) and failures are those pytest reported until then"
    return f"pytest printed no counts; these ({counts}) are read from its progress line"


def _pytest_progress(line: bytes) -> tuple[float, float | None, str | None] | None:
    """A `[ 45%]` at the end of pytest's progress line becomes 45 of 100."""
    found = _PROGRESS.search(line)
    return (float(found.group(1)), 100.0, None) if found else None


def _pytest_command(root: Path) -> tuple[list[str], Path | None, list[str]]:
    """How to start pytest as the developer does: `python -m pytest` with the project's interpreter.

    `-m` puts the root on sys.path as a terminal run does, so a flat layout that is not installed
    imports. Returns the argv's start, the interpreter (None: the script runs as it is) and a note.
    """
    found = find_python(root)
    if found is not None:
        python, where = found
        return [str(python), "-m", "pytest"], python, [f"ran: python -m pytest, with {where}'s interpreter"]
    script = find_program(root, "pytest")
    interpreter = script_interpreter(script)
    if interpreter is not None:
        return (
            [str(interpreter), "-m", "pytest"],
            interpreter,
            ["ran: python -m pytest, with pytest's interpreter"],
        )
    return [str(script)], None, ["ran: the pytest script (no Python interpreter found for it)"]


_PYTEST_CONFIGS: Final = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def _asks_for_junit(root: Path) -> bool:
    """Whether the project's pytest config writes a JUnit report (`--junitxml` in addopts)."""
    return any("--junit" in (_read_config(root / name) or "") for name in _PYTEST_CONFIGS)


def _report_chars(root: Path) -> str:
    """pytest's -r: failures, errors and skip reasons, plus what the project's config asks for, which
    the last -r on the command line would otherwise replace."""
    asked = report_chars("\n".join(_read_config(root / name) or "" for name in _PYTEST_CONFIGS))
    return "".join(dict.fromkeys("fEs" + asked.replace("N", "")))


def _hidden_from_run(root: Path, program: Path) -> list[str]:
    """The project's links to places the run does not see, which pytest would fail to collect."""
    try:
        roots = install_roots(program, root)
    except InstallRefusedError:
        return []  # the sandbox refuses the run itself, and says why
    return hidden_links(root, roots)


def _plan_test(params: TestParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    command, python, notes = _pytest_command(root)
    cache = project_cache(root)
    argv: list[str] = [
        *command,
        "-q",
        f"-r{_report_chars(root)}",
        "--color=no",
        "--tb=short",
        "-o",
        f"cache_dir={cache}/pytest",
    ]
    if _asks_for_junit(root):
        # The last --junitxml wins over the one in addopts, which would write into the read-only project.
        argv.append(f"--junitxml={cache}/reports/junit.xml")
        notes.append("the JUnit report the config asks for went to oct's cache folder, not the project")
    if params.last_failed:
        argv.append("--last-failed")
    if params.keyword:
        argv += ["-k", params.keyword]
    if params.marker:
        argv += ["-m", params.marker]
    if params.max_failures:
        argv.append(f"--maxfail={params.max_failures}")
    if params.jobs and params.jobs > 1:
        if python is not None and _has_xdist(python):
            argv += ["-n", str(min(params.jobs, env.max_jobs))]
        else:
            notes.append("ran serially: jobs needs pytest-xdist, which the project's environment lacks")
    hidden = _hidden_from_run(root, Path(command[0]))
    if hidden:
        argv += [f"--ignore={link}" for link in hidden[:_IGNORED_MAX]]
        more = len(hidden) - _HIDDEN_NAMED
        shown = ", ".join(hidden[:_HIDDEN_NAMED]) + (f" and {more} more" if more > 0 else "")
        notes.append(
            f"hidden from the run: {shown}: links to what lies outside the project and the sandbox "
            "does not show, so pytest was told to ignore them (--ignore), as if they were absent; run "
            "the tests under them in a terminal"
        )
    argv += ["--", *params.paths] if params.paths else []
    return CommandPlan(
        argv=tuple(argv),
        parse=_parse_pytest(notes, root),
        long_running=True,
        reports_when_interrupted=True,
        progress=_pytest_progress,
        # Plugins that write (coverage) write into the cache folder, not the read-only project.
        tool_env=(("COVERAGE_FILE", f"{cache}/{_COVERAGE_FILE}"),),
        project_cache=True,
    )


def how_it_runs(root: Path, tool: str) -> str | None:
    """For `doctor`: the interpreter oct_test uses or the checker oct_typecheck picks, and why.

    Raises:
        ToolUnavailableError: The program the tool needs is missing.
    """
    if tool == TEST.name:
        command, _, notes = _pytest_command(root)
        return f"runs {' '.join(command)} ({notes[0].removeprefix('ran: ')})"
    if tool == TYPECHECK.name:
        _, program, notes = _choose_checker(root, TypecheckParams(), _pyproject_tool(root))
        return f"runs {program} ({notes[0] if notes else 'no checker is configured'})"
    return None


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


LINT: Final = _spec(
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
FIX: Final = _spec(
    "oct_fix",
    "Fix lint problems with ruff",
    (
        "Apply ruff's safe fixes (project code). A dry run returns the diff, paged; otherwise it writes and "
        "lists the changed files."
    ),
    FixParams,
    ChangeOutput,
    Risk.WRITE,
    _plan_fix,
    idempotent=False,
    program="ruff",
    preview=_preview_fix,
)
FORMAT: Final = _spec(
    "oct_format",
    "Format with ruff",
    (
        "Format with ruff format (project code): apply=false returns the diff, paged; apply=true formats and "
        "lists the changed files."
    ),
    FormatParams,
    ChangeOutput,
    Risk.WRITE,
    _plan_format,
    idempotent=False,
    program="ruff",
    preview=_preview_format,
    call_risk=_format_risk,
)
TYPECHECK: Final = _spec(
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
TEST: Final = _spec(
    "oct_test",
    "Run tests with pytest",
    (
        "Run the project's tests with pytest (project code, project read-only): counts, duration, and each "
        "failure's node id, message and traceback."
    ),
    TestParams,
    TestOutput,
    Risk.EXECUTE,
    _plan_test,
    program="pytest",
)
