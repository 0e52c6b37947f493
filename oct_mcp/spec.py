"""ToolSpec: what a tool is (name, params, risk, annotations) and the plan it asks the sandbox to run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Final, TypeAlias

from pydantic import BaseModel, ConfigDict, StringConstraints

from oct_mcp.backends import EntryRights
from oct_mcp.backends.results import RunResult
from oct_mcp.base_types import Risk, ToolResult, WithheldPaths
from oct_mcp.consent import SessionGrants
from oct_mcp.deadline import Deadline
from oct_mcp.execution.changes import ChangePlan
from oct_mcp.execution.checkpoints import CheckpointStore
from oct_mcp.execution.command_plan import COMMAND_STEPS_MAX, CommandPlan, GitWrites, NextCommand, Then
from oct_mcp.preview import TargetState
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
    "StrictParams",
    "Then",
    "ToolEnv",
    "ToolSpec",
]

PATH_MAX_LENGTH: Final = 4_096


@dataclass(frozen=True, slots=True)
class PathArgument:
    """Marks a params field as a project path: the validator contains it inside the root."""


ProjectPath = Annotated[str, StringConstraints(min_length=1, max_length=PATH_MAX_LENGTH), PathArgument()]
"""A path relative to the project root (or absolute inside it), contained by the validator."""


class StrictParams(BaseModel):
    """A tool's arguments: exact types, no unknown field, frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


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
    withheld: WithheldPaths | None = None
    """The paths the rules deny this call (`CallContext.withheld`): a plan that lists, searches or
    shows project paths leaves them out."""
    session_grants: SessionGrants | None = None
    """What a human allowed for the rest of this client session (`CallContext.session_grants`):
    what `oct_grants` lists and revokes; None where the transport keeps no grants."""

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


Plan: TypeAlias = InProcessPlan | CommandPlan | ChangePlan


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
    names_only_its_paths: bool = False
    """Its output names no project path but those the call names (a read or an edit of named
    files): nothing for the deny rules to withhold from it beyond refusing the call, so the policy
    layer does not work out what they would (a listing, a search, git output and a command's run
    do need it, as would a tool whose output is not known)."""
    command_grant: Callable[[Mapping[str, Any]], str] | None = None
    """For a tool whose calls have no preview (`oct_run`): the grant a human may give for this call,
    the command exactly as asked about (`oct_mcp.consent.command_grant`), which covers the same
    command again; None: such calls are never granted."""
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
            return self.own_risk
        return self.call_risk(arguments)

    @cached_property
    def own_risk(self) -> CallRisk:
        """The risk of every call of a tool whose arguments do not change it: one value, made once."""
        return CallRisk(risk=self.risk)

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
