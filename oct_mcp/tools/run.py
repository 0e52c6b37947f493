"""oct_run: one program of the project's, with its arguments as a list (never a shell), in the sandbox."""

from __future__ import annotations

import os
import re
import shlex
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from oct_mcp.display import has_hidden_characters, quote_name
from oct_mcp.errors import ExecutionError, LinkedFileError, NotFoundError
from oct_mcp.execution.checkpoints import Checkpoint
from oct_mcp.spec import CallRisk, CommandPlan, ProjectPath, Risk, RunResult, ToolEnv, ToolSpec
from oct_mcp.tools.ignores import ENVIRONMENT_FOLDERS
from oct_mcp.tools.programs import find_program, find_python
from oct_mcp.tools.results import ENVELOPE_RESERVE, MODEL_VIEW_BUDGET, json_size, take_within
from oct_mcp.types import ToolResult

__all__ = ["ARGUMENTS_MAX", "ARGUMENT_MAX_LENGTH", "RUN", "RunOutput", "RunParams"]

ARGUMENTS_MAX: Final = 256
"""The most words an argv may have, the program's name included."""
ARGUMENT_MAX_LENGTH: Final = 4_096
TIMEOUT_MAX_SECONDS: Final = 3_600
INTERPRETER: Final = "python"
"""The name that means the project's interpreter, as a developer's terminal in the project has it."""
# Files a writable run may change that the result lists; past this many, it says it stopped looking.
_SNAPSHOT_LIMIT: Final = 20_000
_UNLISTED_FOLDERS: Final = ENVIRONMENT_FOLDERS | {".git"}
_CHANGED_BUDGET: Final = 8_000
_UNLISTED_SHOWN: Final = 20
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


def _runs(params: RunParams) -> tuple[str, ...]:
    return tuple(params.argv)


Snapshot = dict[str, tuple[int, int, int, int]]


@dataclass(frozen=True, slots=True)
class _Listing:
    files: Snapshot
    cut: bool
    """The walk stopped at its limit."""
    unlisted: tuple[str, ...] = ()
    """What the walk could not list or look at: changes there are unknown, never taken as none."""
    linked: tuple[str, ...] = ()
    """Files with another name (a hard link), perhaps outside the project: a run that writes one in
    place changes that other file too, where no sandbox rule sees it."""


class _Baseline:
    """The project's files as a writing run finds them, taken in a worker thread just before it runs
    (`CommandPlan.before_run`): the walk, and the first one's read of every file, take long on a
    large project."""

    def __init__(self, env: ToolEnv) -> None:
        self._env = env
        self._listing: _Listing | None = None

    @property
    def listing(self) -> _Listing:
        if self._listing is None:
            raise RuntimeError("a writing run's baseline is read before the run, never after it")
        return self._listing

    def take(self) -> None:
        """Raises:
        LinkedFileError: A file has another name; nothing ran.
        ExecutionError: The baseline could not be kept; nothing ran.
        """
        root = self._env.workspace.root
        before = _snapshot(root)
        if before.linked:
            shown = ", ".join(map(quote_name, before.linked[:_UNLISTED_SHOWN]))
            more = len(before.linked) - _UNLISTED_SHOWN
            raise LinkedFileError(
                f"{len(before.linked)} project file(s) have another name (a hard link), which may lie "
                "outside the project or be protected, and a writable run that changes one in place "
                f"changes the other too: {shown}{f' and {more} more' if more > 0 else ''}; replace each "
                "with a copy of itself (cp F F.new && mv F.new F), or run without writes; nothing ran"
            )
        if self._env.checkpoints is not None:
            try:
                self._env.checkpoints.keep_baseline(root, before.files)
            except OSError as exc:
                raise ExecutionError(
                    "the checkpoint of this run could not be prepared "
                    f"({exc.strerror or type(exc).__name__}), so nothing ran; fix the checkpoint_dir "
                    "folder, or set checkpoint_max_count to 0 to run without undo"
                ) from exc
        self._listing = before


def _snapshot(root: Path) -> _Listing:
    """Each project file's (mtime, ctime, size, inode), skipping git and environment folders."""
    found: Snapshot = {}
    unlisted: list[str] = []
    linked: list[str] = []

    def not_listed(error: OSError) -> None:
        unlisted.append(_relative(root, os.fsdecode(error.filename or root)))

    for folder, subfolders, files in os.walk(root, onerror=not_listed):
        subfolders[:] = sorted(s for s in subfolders if s not in _UNLISTED_FOLDERS)
        for name in sorted(files):
            if len(found) >= _SNAPSHOT_LIMIT:
                return _Listing(found, True, tuple(unlisted), tuple(linked))
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue  # gone since the folder was listed: absent, as the comparison takes it
            except OSError:
                unlisted.append(_relative(root, path))
                continue
            found[_relative(root, path)] = (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino)
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                linked.append(_relative(root, path))
    return _Listing(found, False, tuple(unlisted), tuple(linked))


def _relative(root: Path, path: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")


def _changed(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


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


def _parse(
    root: Path, baseline: _Baseline | None, notes: list[str], env: ToolEnv
) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        notes_now = list(notes)
        changed: list[str] | None = None
        checkpoint: Checkpoint | None = None
        if baseline is not None:
            before = baseline.listing
            after = _snapshot(root)
            every = _changed(before.files, after.files)
            checkpoint, failure = _checkpoint(env, every)
            if checkpoint is not None:
                notes_now.append(f"checkpoint {checkpoint.id}: oct_undo can put these files back")
            elif failure is not None:
                notes_now.append(failure)
            changed, cut = take_within(every, _CHANGED_BUDGET)
            if cut:
                notes_now.append(f"{len(every)} files changed; the first {len(changed)} are listed")
            unlisted = sorted(set(before.unlisted) | set(after.unlisted))
            if unlisted:
                shown = ", ".join(map(quote_name, unlisted[:_UNLISTED_SHOWN]))
                more = (
                    f" and {len(unlisted) - _UNLISTED_SHOWN} more" if len(unlisted) > _UNLISTED_SHOWN else ""
                )
                notes_now.append(
                    f"these could not be listed, so what changed in them is unknown: {shown}{more}"
                )
            if before.cut or after.cut:
                notes_now.append(
                    f"the project holds more than {_SNAPSHOT_LIMIT} files: changes past them are not listed"
                )
            notes_now.append(
                "changes inside .git/ and environment folders (.venv/, node_modules/) are not listed"
            )
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


def _checkpoint(env: ToolEnv, changed: list[str]) -> tuple[Checkpoint | None, str | None]:
    """The checkpoint of what a writing run changed, or why there is none it could write."""
    store = env.checkpoints
    if store is None:
        return None, None
    try:
        return store.record_command(env.workspace.root, changed, tool="oct_run", call_id=env.call_id), None
    except OSError as exc:
        return None, (
            f"its changes could not be checkpointed ({exc.strerror or type(exc).__name__}): oct_undo "
            "cannot take them back"
        )


def _kept_after_failure(root: Path, baseline: _Baseline, env: ToolEnv) -> Callable[[], str | None]:
    """Where the run fails without its result (a protected path written, its time limit, a
    cancellation): what it changed is a checkpoint all the same, which the error names."""

    def keep() -> str | None:
        checkpoint, failure = _checkpoint(env, _changed(baseline.listing.files, _snapshot(root).files))
        if checkpoint is None:
            return failure
        return f"checkpoint {checkpoint.id}: oct_undo can put the files it changed back"

    return keep


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
    baseline = _Baseline(env) if writes else None
    return CommandPlan(
        argv=(str(program), *params.argv[1:]),
        before_run=None if baseline is None else baseline.take,
        parse=_parse(root, baseline, notes, env),
        writes_project=writes,
        needs_network=params.network,
        cwd=None if cwd == root else cwd,
        timeout_seconds=params.timeout_seconds,
        progress=_line_counter(),
        after_failure=None if baseline is None else _kept_after_failure(root, baseline, env),
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
)
