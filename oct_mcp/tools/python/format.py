"""oct_fix (ruff check --fix) and oct_format (ruff format): writes, shown first as a diff."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, Field

from oct_mcp.diff_view import diff_files, readable_diff
from oct_mcp.errors import OctError
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
)
from oct_mcp.tools._paging.results import BudgetField, cut_lines, json_size
from oct_mcp.tools._project.programs import find_program
from oct_mcp.tools.files import LINE_RANGE_SCAN_LIMIT
from oct_mcp.tools.git.masks import masked_hunks
from oct_mcp.tools.python.lint import runs_project_code
from oct_mcp.tools.python.running import (
    MAX_PATHS,
    RuleCode,
    path_arguments,
    project_relative,
    python_tool_spec,
    tool_failed,
)
from oct_mcp.tools.writing_runs import RunChanges, WritingRun
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace, read_at_most

__all__ = ["FIX", "FORMAT", "ChangeOutput", "FixParams", "FormatParams"]


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
        relative = project_relative(workspace.root, name)
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
            return tool_failed(tool, run)
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
        failed = tool_failed(tool, run)
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
            if (relative := project_relative(root, name)) is not None
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
        masks_secret_files=runs_project_code(Path(diff[0]), root),
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
        argv = (str(ruff), "check", "--diff", *select, *path_arguments(params.paths))
        return CommandPlan(
            argv=argv,
            parse=_preview("ruff check --fix", (0, 1), env.workspace, (params.offset, params.max_chars)),
            masks_secret_files=runs_project_code(ruff, root),
        )
    paths = _approved_paths(params.paths, env)
    if env.approved_targets is not None and not paths:
        return _nothing_approved("ruff check --fix")
    return _checkpointed_apply(
        "ruff check --fix",
        "oct_fix",
        env,
        diff=(str(ruff), "check", "--diff", *select, *path_arguments(paths)),
        apply=(str(ruff), "check", "--fix", "--exit-zero", *select),
    )


def _preview_fix(params: FixParams, env: ToolEnv) -> CommandPlan:
    ruff = find_program(env.workspace.root, "ruff")
    select = ["--select", ",".join(params.select)] if params.select else []
    argv = (str(ruff), "check", "--diff", *select, *path_arguments(params.paths))
    return CommandPlan(
        argv=argv,
        parse=_previewed("ruff check --fix", "fix", env.workspace, (0, 1)),
        masks_secret_files=runs_project_code(ruff, env.workspace.root),
    )


def _plan_format(params: FormatParams, env: ToolEnv) -> Plan:
    root = env.workspace.root
    ruff = find_program(root, "ruff")
    # The gate decides dry_run from `apply` by this spec's own rule (`_format_risk`).
    if env.dry_run:
        argv = (str(ruff), "format", "--diff", *path_arguments(params.paths))
        return CommandPlan(
            argv=argv,
            parse=_preview("ruff format", (0, 1), env.workspace, (params.offset, params.max_chars)),
            masks_secret_files=runs_project_code(ruff, root),
        )
    paths = _approved_paths(params.paths, env)
    if env.approved_targets is not None and not paths:
        return _nothing_approved("ruff format")
    return _checkpointed_apply(
        "ruff format",
        "oct_format",
        env,
        diff=(str(ruff), "format", "--diff", *path_arguments(paths)),
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
    argv = (str(ruff), "format", "--diff", *path_arguments(params.paths))
    return CommandPlan(
        argv=argv,
        parse=_previewed("ruff format", "format", env.workspace, (0, 1)),
        masks_secret_files=runs_project_code(ruff, env.workspace.root),
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
            relative = project_relative(workspace.root, name)
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


FIX: Final = python_tool_spec(
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


FORMAT: Final = python_tool_spec(
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
