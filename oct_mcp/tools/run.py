"""oct_run: one program of the project's, with its arguments as a list (never a shell), in the sandbox."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from oct_mcp.consent import command_grant
from oct_mcp.display import has_hidden_characters, quote_name
from oct_mcp.errors import NotFoundError
from oct_mcp.execution.checkpoints import Checkpoint
from oct_mcp.spec import CallRisk, CommandPlan, ProjectPath, Risk, RunResult, ToolEnv, ToolSpec
from oct_mcp.tools._paging.results import ENVELOPE_RESERVE, MODEL_VIEW_BUDGET, json_size
from oct_mcp.tools._project.programs import find_program, find_python
from oct_mcp.tools.writing_runs import UNLISTED_NOTE, WritingRun
from oct_mcp.types import ToolResult

__all__ = ["ARGUMENTS_MAX", "ARGUMENT_MAX_LENGTH", "RUN", "RunOutput", "RunParams"]

ARGUMENTS_MAX: Final = 256
"""The most words an argv may have, the program's name included."""
ARGUMENT_MAX_LENGTH: Final = 4_096
TIMEOUT_MAX_SECONDS: Final = 3_600
INTERPRETER: Final = "python"
"""The name that means the project's interpreter, as a developer's terminal in the project has it."""
_COMMAND_SHOWN_CHARS: Final = 2_000
_PROGRESS_INTERVAL_SECONDS: Final = 0.5
_PROGRAM_NAME: Final = r"^[A-Za-z0-9_][A-Za-z0-9._+-]*$"

Argument = Annotated[str, StringConstraints(max_length=ARGUMENT_MAX_LENGTH, pattern=r"^[^\x00]*$")]


class RunParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    argv: list[Argument] = Field(
        min_length=1,
        max_length=ARGUMENTS_MAX,
        description="The program, then each argument: ['python', '-m', 'pkg'].",
    )
    cwd: ProjectPath = Field(default=".")
    writes: bool = Field(
        default=False,
        description="Let it change the project; lists the files changed.",
    )
    network: bool = Field(
        default=False,
    )
    timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=TIMEOUT_MAX_SECONDS,
        description="Lower than the server's limit.",
    )

    @field_validator("argv")
    @classmethod
    def _names_a_program(cls, argv: list[str]) -> list[str]:
        if not re.fullmatch(_PROGRAM_NAME, argv[0]):
            raise ValueError(
                "argv[0] must be a program's name (letters, digits, '.', '_', '+', '-'), not a path "
                "nor an option; the program is looked up in the project's .venv, then on PATH"
            )
        return argv


class RunOutput(BaseModel):
    exit_code: int | None
    """The program's exit status; negative for a signal; None if it never started."""
    duration_seconds: float
    stdout: str
    """The end of what the program printed on stdout, as much as the result's budget holds."""
    stderr: str
    """The end of what it printed on stderr."""
    truncated: bool
    """Some output is not shown: the start of a stream, or everything past max_output_bytes."""
    output_bytes: int
    """What both streams carried in all."""
    changed_files: list[str] | None = None
    """With writes=true: the project files the run created, changed or deleted (None: read-only run)."""
    notes: list[str] = Field(default_factory=list)


def _resolve(root: Path, name: str) -> tuple[Path, str | None]:
    """The program to run and, for `python`, which interpreter it is.

    Raises:
        ToolUnavailableError: No such program in the project's venv nor on PATH.
    """
    if name == INTERPRETER:
        found = find_python(root)
        if found is not None:
            python, where = found
            return python, f"python: {where}'s interpreter"
        return find_program(root, "python3"), "python: python3 from PATH (the project has no environment)"
    return find_program(root, name), None


def _shown_command(argv: object) -> str:
    """The command as a person reads it: shell-quoted words, characters no one sees escaped, bounded."""
    if not isinstance(argv, list | tuple) or not argv:
        return "(no command)"
    words = [
        quote_name(word) if has_hidden_characters(word) else shlex.quote(word)
        for word in (str(item) for item in argv)
    ]
    shown = " ".join(words)
    if len(shown) > _COMMAND_SHOWN_CHARS:
        left = len(shown) - _COMMAND_SHOWN_CHARS
        shown = f"{shown[:_COMMAND_SHOWN_CHARS]}... ({left} more characters)"
    return shown


def _call_risk(arguments: Mapping[str, Any]) -> CallRisk:
    writes = arguments.get("writes") is True
    network = arguments.get("network") is True
    cwd = arguments.get("cwd")
    where = "the project root" if cwd in (None, ".", "") else f"folder {quote_name(str(cwd))}"
    action = f"run `{_shown_command(arguments.get('argv'))}` in {where}"
    access = "writable (protected paths stay read-only)" if writes else "read-only"
    action += f", the project {access}"
    if network:
        action += ", with network access"
    if writes:
        action += "; afterwards the result lists the files it changed"
    return CallRisk(
        risk=Risk.WRITE if writes else Risk.EXECUTE,
        consent="it reaches the network (network=true)" if network else None,
        network=network,
        # A run has no dry mode: the human consents to the run itself.
        dry_run=False if writes else None,
        reason="oct_run with writes=true changes files" if writes else "oct_run runs project code",
        action=action,
    )


def _command_grant(arguments: Mapping[str, Any]) -> str:
    """The command as the question names it, with its folder and options: what a grant covers."""
    cwd = arguments.get("cwd")
    where = "the project root" if cwd in (None, ".", "") else f"folder {quote_name(str(cwd))}"
    options = [
        name
        for name, on in (("writable", arguments.get("writes")), ("network", arguments.get("network")))
        if on is True
    ]
    timeout = arguments.get("timeout_seconds")
    if isinstance(timeout, int):
        options.append(f"timeout {timeout} s")
    shown = _shown_command(arguments.get("argv"))
    if len(shown) > _COMMAND_SHOWN_CHARS:
        # Cut for the eye: the digest of the whole argv keeps two commands that differ past the cut apart.
        whole = json.dumps(arguments.get("argv"), ensure_ascii=False).encode("utf-8", "surrogatepass")
        options.append(f"argv sha256 {hashlib.sha256(whole).hexdigest()[:24]}")
    return command_grant(f"`{shown}` in {where}" + "".join(f", {option}" for option in options))


def _runs(params: RunParams) -> tuple[str, ...]:
    return tuple(params.argv)


def _tail(text: str, room: int) -> tuple[str, bool]:
    """The end of `text` whose JSON fits in `room` characters, and whether any was cut."""
    size = json_size(text)
    if size <= room:
        return text, False
    keep = min(len(text), room)
    while keep > 0:
        tail = text[-keep:]
        size = json_size(tail)
        if size <= room:
            return tail, True
        keep = min(keep - 1, keep * room // size)
    return "", True


def _parse(baseline: WritingRun | None, notes: list[str]) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        notes_now = list(notes)
        changed: list[str] | None = None
        checkpoint: Checkpoint | None = None
        if baseline is not None:
            changes = baseline.changes()
            checkpoint = changes.checkpoint
            changed, cut_note = changes.shown_files()
            if cut_note is not None:
                notes_now.append(cut_note)
            notes_now += [*changes.notes, UNLISTED_NOTE]
        stdout = run.stdout.decode(errors="replace")
        stderr = run.stderr.decode(errors="replace")
        room = MODEL_VIEW_BUDGET - ENVELOPE_RESERVE - json_size([changed, notes_now]) - 400
        need_out, need_err = json_size(stdout), json_size(stderr)
        err_room = need_err if need_out + need_err <= room else max(room - need_out, min(need_err, room // 4))
        shown_err, err_cut = _tail(stderr, err_room)
        shown_out, out_cut = _tail(stdout, room - json_size(shown_err))
        if out_cut or err_cut:
            notes_now.append("the output is cut to the result's budget: its end is shown")
        if run.truncated:
            notes_now.append("the output passed max_output_bytes: the program was stopped there")
        output = RunOutput(
            exit_code=run.exit_code,
            duration_seconds=round(run.duration_seconds, 3),
            stdout=shown_out,
            stderr=shown_err,
            truncated=out_cut or err_cut or run.truncated,
            output_bytes=run.output_bytes,
            changed_files=changed,
            notes=notes_now,
        )
        lines = [f"exit code {run.exit_code} in {run.duration_seconds:.2f} s"]
        if shown_out:
            lines += ["--- stdout ---", shown_out.rstrip("\n")]
        if shown_err:
            lines += ["--- stderr ---", shown_err.rstrip("\n")]
        if changed is not None:
            lines.append(f"changed {len(changed)} file(s)" + (f": {', '.join(changed)}" if changed else ""))
        lines += notes_now
        return ToolResult(
            text="\n".join(lines),
            structured=output.model_dump(),
            truncated=output.truncated,
            checkpoint=None if checkpoint is None else checkpoint.id,
        )

    return parse


def _line_counter() -> Callable[[bytes], tuple[float, float | None, str | None] | None]:
    """Progress as lines of stdout so far, at most twice a second, never their content (which the
    redactor has not seen)."""
    lines = 0
    reported_at: float | None = None

    def progress(line: bytes) -> tuple[float, float | None, str | None] | None:
        nonlocal lines, reported_at
        lines += 1
        now = time.monotonic()
        if reported_at is not None and now - reported_at < _PROGRESS_INTERVAL_SECONDS:
            return None
        reported_at = now
        return float(lines), None, f"{lines} line(s) of output"

    return progress


def _plan(params: RunParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    program, interpreter = _resolve(root, params.argv[0])
    cwd = Path(env.workspace.contain_text(params.cwd))
    if not cwd.is_dir():
        raise NotFoundError("cwd is not a folder of the project; name an existing folder, or leave it out")
    writes = params.writes and not env.dry_run
    notes = [interpreter] if interpreter is not None else []
    baseline = WritingRun(env, "oct_run") if writes else None
    return CommandPlan(
        argv=(str(program), *params.argv[1:]),
        before_run=None if baseline is None else baseline.take,
        parse=_parse(baseline, notes),
        writes_project=writes,
        needs_network=params.network,
        cwd=None if cwd == root else cwd,
        timeout_seconds=params.timeout_seconds,
        progress=_line_counter(),
        after_failure=None if baseline is None else baseline.after_failure,
    )


RUN: Final = ToolSpec(
    name="oct_run",
    title="Run a project command",
    description=(
        "Run a project command (project code) as an argv, no shell, in the sandbox: project read-only, no "
        "network, time-limited. python is the project's; other programs must be in the profile's list. "
        "writes=true or network=true needs consent. Returns the exit code and the output's end."
    ),
    params=RunParams,
    output=RunOutput,
    risk=Risk.EXECUTE,
    plan=_plan,
    idempotent=False,
    open_world=True,
    program=INTERPRETER,
    extra_annotations={"destructiveHint": True},
    call_risk=_call_risk,
    runs=_runs,
    command_grant=_command_grant,
)
