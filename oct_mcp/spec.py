"""ToolSpec: what a tool is (name, params, risk, annotations) and the plan it asks the sandbox to run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Final, TypeAlias

from pydantic import BaseModel, StringConstraints

from oct_mcp.backends import EntryRights
from oct_mcp.deadline import Deadline
from oct_mcp.execution.changes import ChangePlan
from oct_mcp.execution.checkpoints import CheckpointStore
from oct_mcp.preview import TargetState
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "COMMAND_STEPS_MAX",
    "PATH_MAX_LENGTH",
    "CallRisk",
    "CommandPlan",
    "GitWrites",
    "InProcessPlan",
    "NextCommand",
    "PathArgument",
    "Plan",
    "ProjectPath",
    "Risk",
    "RunResult",
    "Then",
    "ToolEnv",
    "ToolSpec",
]

PATH_MAX_LENGTH: Final = 4_096


class Risk(StrEnum):
    """How much a tool can do: read the project, run project code, or change files."""

    READ = "read"
    EXECUTE = "execute"
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class PathArgument:
    """Marks a params field as a project path: the validator contains it inside the root."""


ProjectPath = Annotated[str, StringConstraints(min_length=1, max_length=PATH_MAX_LENGTH), PathArgument()]
"""A path relative to the project root (or absolute inside it), contained by the validator."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolEnv:
    """What a plan may use: the workspace and the limits of this server."""

    workspace: Workspace
    max_output_bytes: int
    max_jobs: int = 4
    """The most parallel jobs a tool may be asked for."""
    dry_run: bool = False
    """The safety gate's decision: a tool that can change files must not."""
    deadline: Deadline = field(default_factory=Deadline.unlimited)
    """An in-process plan checks it in its loops and claims it before it writes (`begin_writing`)."""
    approved_targets: tuple[TargetState, ...] | None = None
    """The files a human approved the change of, as the preview saw them (the sandbox has checked
    they are unchanged); a tool whose run could reach further keeps to these."""
    entry_rights: EntryRights = EntryRights.CLEAR_FOLDERS
    """Where the sandbox's backend lets a writable run make and remove entries: a plan whose
    command would do so elsewhere refuses before it starts, rather than leave its change half made.
    Unset: the narrowest of the backends."""

    checkpoints: CheckpointStore | None = None
    """This project's checkpoints (what `oct_checkpoints` lists and `oct_undo` restores); None: kept none."""
    call_id: str = ""
    """The call's id, which a checkpoint the plan records carries (as the audit record does)."""

    def dry_run_for(self, own: bool | None) -> bool:
        """Whether the call only says what it would change: its own dry_run if given, else the gate's."""
        return self.dry_run if own is None else own


@dataclass(frozen=True, slots=True)
class InProcessPlan:
    """Run `function` over the workspace, in the server's process (no subprocess).

    In a worker thread under the time limit, which the function checks through `ToolEnv.deadline`
    (a thread cannot be stopped from outside); or, with `inline`, on the event loop itself. Inline
    is for work bounded small by construction (reading a file of at most 128 KiB), where the hop to
    a thread and back costs as much as the work or more (80 us against 20 for 1 KiB, measured). An
    inline plan has no time limit, so a plan is inline only where its size is known beforehand.
    """

    function: Callable[[], ToolResult]
    inline: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """How a command ran under the sandbox: what it printed and the facts of the run."""

    exit_code: int | None
    """The exit status; negative for a signal; None if it never started."""
    stdout: bytes
    stderr: bytes
    output_bytes: int
    """Everything both pipes carried, including what was cut."""
    truncated: bool
    timed_out: bool
    duration_seconds: float
    backend: str
    degraded: tuple[str, ...] = ()
    """Guarantees this run did not have, which the profile allowed to be missing."""
    files: Mapping[str, bytes] = field(default_factory=dict)
    """What the command wrote to the output files its plan named, by file name; absent if it wrote none."""
    files_truncated: tuple[str, ...] = ()
    """Output files larger than the cap, whose content in `files` is cut."""


COMMAND_STEPS_MAX: Final = 4
"""The most commands one plan runs: its `argv` and the steps its `then` chain names."""


@dataclass(frozen=True, slots=True)
class NextCommand:
    """A step of a plan that has steps after it: the argv to run, and what decides the next one."""

    argv: tuple[str, ...]
    then: Then


Then: TypeAlias = Callable[[RunResult], "tuple[str, ...] | NextCommand"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandPlan:
    """Run `argv` in a subprocess under the sandbox backend, then `parse` what it printed."""

    argv: tuple[str, ...]
    """argv[0] is an absolute path to the program: nothing is looked up on PATH at run time."""
    parse: Callable[[RunResult], ToolResult]
    writes_project: bool = False
    """The project is writable (protected paths stay read-only); otherwise read-only."""
    needs_network: bool = False
    long_running: bool = False
    """Uses timeout_test_seconds instead of timeout_default_seconds (test runs)."""
    tool_env: tuple[tuple[str, str], ...] = ()
    """Tool settings for the environment; names that look like secrets or hijacks are dropped."""
    progress: Callable[[bytes], tuple[float, float | None, str | None] | None] | None = None
    """Reads one line of the tool's stdout as (progress, total, message), or None for no news."""
    read_only_paths: tuple[Path, ...] = ()
    """Folders outside the project the tool must read (a worktree's git folders), bound read-only.
    The plan checks them: nothing a call's arguments name ever lands here."""
    output_files: tuple[tuple[str, str], ...] = ()
    """(environment name, file name): the name is set to a path in a folder of the run that only
    this command writes, and the file's content comes back in `RunResult.files` (a report the tool
    writes there instead of a pipe, or a file a plugin would otherwise write into the project)."""
    project_cache: bool = False
    """Bytecode, mypy and ruff caches go to the project's cache folder (`project_cache`), kept
    between runs, instead of the run's scratch folder."""
    cwd: Path | None = None
    """The folder inside the project the command starts in; None: the project root. The plan
    contains it (a folder a call names passes the validator's containment first)."""
    timeout_seconds: float | None = None
    """A time limit lower than the configured one (a call asked for less); never raises it."""
    reports_when_interrupted: bool = False
    """The program prints its report when interrupted (SIGINT), as pytest does: past the time limit
    the runner interrupts it first and gives it a few seconds, and `parse` reads that run
    (`RunResult.timed_out` set) instead of the call failing with a timeout."""
    then: Then | None = None
    """A next command: `argv` runs first, in the same sandbox, and what it printed decides the
    argv run next (the same program); a `NextCommand` carries its own `then`, so each step's
    output can decide the one after it (git lists its config, then checks a ref, then runs).
    `parse` reads the last step's output; a step raises to refuse the call (in a worker thread: it
    may read files). Of a plan that `writes_project`, only the last command may write the project:
    the earlier ones run with it read-only. At most `COMMAND_STEPS_MAX` commands run. A runner that
    ignored it would run `argv` only, never a later command unchecked."""
    git_writes: GitWrites | None = None
    """The git folder writes the command makes (git's own argv must not name `--git-dir`: the
    sandbox sets GIT_DIR to the run's private git folder)."""
    before_run: Callable[[], None] | None = None
    """Reads the project before the command runs (a writing run's baseline, the files a format may
    change), in a worker thread so that a large project holds up no other call; raises to refuse
    the call, nothing run. A plan's own function stays on the event loop: it must read little."""
    after_failure: Callable[[], str | None] | None = None
    """Called, in a worker thread, where the last command ran but the call fails without `parse`
    (a refusal of what it did to protected paths, its time limit, a cancellation): a writing plan
    records the checkpoint of what the run changed, so oct_undo can take it back. Returns a note
    for the error (the checkpoint's id, or why there is none; never a value of the call), or None."""
    masks_secret_files: bool = True
    """The run reads the project's files that a read shows masked as a read shows them (bubblewrap)
    or not at all (landlock), unless the profile's `show_secrets_to_runs` says otherwise. False only
    for the server's own programs run with fixed arguments that need the files as they are and
    print nothing a pattern redactor cannot see (git: a commit of a masked copy would commit the
    masks, a status would call the file changed)."""


Plan: TypeAlias = InProcessPlan | CommandPlan | ChangePlan


@dataclass(frozen=True, slots=True, kw_only=True)
class GitWrites:
    """What a git command may change in the project's own git folder, which stays read-only itself.

    The sandbox copies `files` into a private git folder of the run (with a `commondir` naming
    `git_dir`) and points GIT_DIR at it, so the lock files git makes beside HEAD and the index land
    there; the data folders `folders` of `git_dir` are writable. After a run whose every command
    exited 0, the sandbox installs each copy that changed back into `git_dir`, refusing when the
    original changed meanwhile. No right on `git_dir` itself is ever given: its config, hooks and
    info stay read-only under every backend.
    """

    git_dir: Path
    files: tuple[str, ...]
    """Per-worktree files: `HEAD`, `index`, `logs/HEAD`."""
    folders: tuple[str, ...]
    """Data folders of the git folder: `objects`, `refs`, `logs`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRisk:
    """What one call of a tool can do, as its arguments decide: what the gate and the policy judge."""

    risk: Risk
    consent: str | None = None
    """Why this call needs consent whatever its risk's rule says (it reaches the network), or None."""
    dry_run: bool | None = None
    """Decided by the call's own arguments once confirmed: True a dry run, False it changes files;
    None: the configured default for writes applies (or the tool's own `dry_run` field)."""
    honours_dry_run: bool = False
    """The tool runs the gate's dry run as one (its plan reads `ToolEnv.dry_run`), so a dry run
    changes nothing and nobody need be asked; a tool with a `dry_run` field is known to anyway."""
    network: bool = False
    """The call asks to reach the network: a profile that requires `no_network` refuses it."""
    reason: str = ""
    """Why the call has this risk, for the gate's decision and the audit record; empty: its tool's."""
    action: str | None = None
    """What the call does, in words for the human asked about it (the command it runs)."""


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """One tool of the catalog."""

    name: str
    title: str
    description: str
    params: type[BaseModel]
    output: type[BaseModel] | None
    risk: Risk
    """The risk of a call whose arguments do not change it (`call_risk`), and what the listing's
    annotations say."""
    plan: Callable[[Any, ToolEnv], Plan]
    """Builds the plan from validated params; does no I/O itself."""
    idempotent: bool = True
    open_world: bool = False
    program: str | None = None
    """The program the tool runs (found in the project's venv, then PATH); None: it runs in-process."""
    preview: Callable[[Any, ToolEnv], Plan] | None = None
    """Builds the plan of a dry run whose result carries a `Preview` (files, diff, each target's
    digest), or is an error saying why the call cannot run: what a human is shown before a write.
    Like `plan`, given validated params and does no I/O itself; the sandbox runs it as it runs
    `plan`. A tool without one is asked about by its path fields and `targets` alone."""
    targets: Callable[[Mapping[str, Any]], Sequence[str]] | None = None
    """The paths a call would change that are no path field (a patch names its files inside), for
    the question a human answers before a write; given the validated arguments, may raise."""
    extra_annotations: dict[str, Any] = field(default_factory=dict)
    session_grants: bool = True
    """A human may allow the tool's writes in a change's folders for the session (where the profile
    offers it); False: every call is asked about, as a commit is, whose message a grant would not show."""
    max_result_chars: int | None = None
    """Declared to hosts (`anthropic/maxResultSizeChars`) where a legitimate result passes the
    default budget."""
    call_risk: Callable[[Mapping[str, Any]], CallRisk] | None = None
    """What one call can do, given its validated arguments (`model_dump()`), where arguments change
    it (oct_run's `writes`, oct_format's `apply`); None: every call has `risk`. Must not raise."""
    runs: Callable[[Any], tuple[str, ...]] | None = None
    """The command a call runs as the caller named it (the program's name, then its arguments),
    given validated params: what the policy checks against the profile's `programs`; None: the
    tool runs only what its own plan names."""

    def risk_of(self, arguments: Mapping[str, Any]) -> CallRisk:
        """The risk of one call: `call_risk`'s answer, or the tool's own `risk`.

        Args:
            arguments: The validated params' dump.
        """
        if self.call_risk is None:
            return CallRisk(risk=self.risk)
        return self.call_risk(arguments)

    @cached_property
    def path_fields(self) -> frozenset[str]:
        """Names of the params fields marked as project paths (a string or a list of strings)."""
        return frozenset(
            name
            for name, info in self.params.model_fields.items()
            if any(isinstance(m, PathArgument) for m in _all_metadata(info.annotation, info.metadata))
        )

    def given_paths(self, arguments: BaseModel | Mapping[str, Any]) -> list[tuple[str, str]]:
        """(field, path) for each path a call gives in the path fields, field by field in name order.

        Args:
            arguments: The validated params, or their dump.
        """
        found: list[tuple[str, str]] = []
        for name in sorted(self.path_fields):
            value = arguments.get(name) if isinstance(arguments, Mapping) else getattr(arguments, name, None)
            for path in value if isinstance(value, list | tuple) else (value,):
                if isinstance(path, str):
                    found.append((name, path))
        return found

    @cached_property
    def annotations(self) -> dict[str, Any]:
        """MCP tool annotations that match the risk (readOnlyHint, destructiveHint, ...)."""
        read_only = self.risk is Risk.READ
        return {
            "title": self.title,
            "readOnlyHint": read_only,
            "destructiveHint": self.risk is Risk.WRITE,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
            **self.extra_annotations,
        }


def _all_metadata(annotation: Any, metadata: list[Any]) -> list[Any]:
    """Field metadata, plus that of `Annotated` items inside list/Optional annotations."""
    found = list(metadata)
    stack = [annotation]
    while stack:
        current = stack.pop()
        found.extend(getattr(current, "__metadata__", ()))
        stack.extend(getattr(current, "__args__", ()))
        origin = getattr(current, "__origin__", None)
        if origin is not None and origin is not current:
            stack.append(origin)
    return found
