"""oct_checkpoints and oct_undo: the changes oct-mcp made, listed and taken back.

Every change the applier makes is recorded first in this project's checkpoint store
(`execution.checkpoints`): each path as it was and as the change left it. oct_undo proposes the
changes that put the paths back as they were, through the same applier as every write (its own
change is a checkpoint too, so an undo can be undone); it refuses, naming the files, where a file
changed since the checkpoint, unless told to overwrite. Diffs show file contents masked, as every
diff does: the store holds real contents, which no answer carries unmasked.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import BaseModel, Field, StringConstraints

from oct_mcp.deadline import Deadline
from oct_mcp.diff_view import readable_diff
from oct_mcp.display import quote_name
from oct_mcp.execution.applier import state_of
from oct_mcp.execution.changes import ChangePlan, PathChange, Proposal, tree_state
from oct_mcp.execution.checkpoints import Checkpoint, CheckpointStore, PathState, state_at
from oct_mcp.preview import ABSENT, FileChange
from oct_mcp.spec import InProcessPlan, Risk, StrictParams, ToolEnv, ToolSpec
from oct_mcp.tools._text.diffs import Diff, truncate_diff, unified_diff
from oct_mcp.tools._text.masks import masked
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "CHECKPOINTS",
    "UNDO",
    "CheckpointsOutput",
    "CheckpointsParams",
    "UndoOutput",
    "UndoParams",
    "list_checkpoints",
    "propose_undo",
]

_SHOWN_PATHS: Final = 20
_SHOWN_PATHS_OF_ONE: Final = 1_000
_NO_STORE: Final = (
    "oct-mcp keeps no checkpoints here (checkpoint_max_count is 0 in the config), so nothing can be undone"
)
CheckpointId = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,8}$")]


class CheckpointsParams(StrictParams):
    limit: int = Field(default=20, ge=1, le=200)
    id: CheckpointId | None = Field(default=None, description="Only this one, with all its files.")


class CheckpointFile(BaseModel):
    path: str
    change: Literal["created", "modified", "deleted", "folder created", "folder deleted", "changed"]


class CheckpointInfo(BaseModel):
    id: str
    time: str
    """UTC, ISO 8601."""
    tool: str
    call_id: str
    files: list[CheckpointFile]
    """The first 20 paths the change touched."""
    file_count: int
    undoable: bool
    """Every path's earlier state is kept (a file over the size limit is not)."""
    changed_since: list[str]
    """Paths that are no longer as the change left them (the first 20): undoing would overwrite them."""


class CheckpointsOutput(BaseModel):
    checkpoints: list[CheckpointInfo]
    total: int


def _change_of(before: PathState, after: PathState) -> str:
    if before.kind == "absent":
        return "folder created" if after.kind == "folder" else "created"
    if after.kind == "absent":
        return "folder deleted" if before.kind == "folder" else "deleted"
    return "modified" if before.kind == after.kind == "file" else "changed"


def _changed_since(workspace: Workspace, checkpoints: Sequence[Checkpoint]) -> list[str]:
    """Paths whose state now is not what the newest of `checkpoints` touching them left."""
    expected: dict[str, PathState] = {}
    for checkpoint in sorted(checkpoints, key=lambda c: int(c.id)):
        for entry in checkpoint.entries:
            expected[entry.path] = entry.after
    root = str(workspace.root)
    return [path for path, after in expected.items() if not state_at(os.path.join(root, path)).same_as(after)]


def list_checkpoints(
    workspace: Workspace, params: CheckpointsParams, store: CheckpointStore | None
) -> ToolResult:
    """The newest checkpoints of this project, each with its files and whether it can be undone now;
    with `params.id`, that one with every file it touched."""
    if store is None:
        return ToolResult(text=_NO_STORE, is_error=True)
    every = store.list()
    chosen, shown_paths = every[: params.limit], _SHOWN_PATHS
    if params.id is not None:
        chosen = [c for c in every if c.id == str(int(params.id))]
        if not chosen:
            return ToolResult(
                text=f"no checkpoint {int(params.id)}; oct_checkpoints lists the ones kept", is_error=True
            )
        shown_paths = _SHOWN_PATHS_OF_ONE
    infos = []
    for checkpoint in chosen:
        infos.append(
            CheckpointInfo(
                id=checkpoint.id,
                time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(checkpoint.time)),
                tool=checkpoint.tool,
                call_id=checkpoint.call_id,
                files=[
                    CheckpointFile.model_validate({"path": e.path, "change": _change_of(e.before, e.after)})
                    for e in checkpoint.entries[:shown_paths]
                ],
                file_count=len(checkpoint.entries),
                undoable=checkpoint.undoable,
                changed_since=_changed_since(workspace, [checkpoint])[:shown_paths],
            )
        )
    output = CheckpointsOutput(checkpoints=infos, total=len(every))
    if params.id is not None:
        return ToolResult(text=_one_text(infos[0]), structured=output.model_dump())
    lines = [f"{len(every)} checkpoint(s), newest first{'' if len(every) <= params.limit else ' (cut)'}:"]
    for info in infos:
        state = "undoable" if info.undoable else "not undoable (a file was over the size limit)"
        if info.changed_since:
            state += f"; {len(info.changed_since)} path(s) changed since"
        shown = ", ".join(f"{quote_name(f.path)} ({f.change})" for f in info.files[:5])
        more = f" and {info.file_count - 5} more" if info.file_count > 5 else ""
        lines.append(f"  {info.id}  {info.time}  {info.tool}: {shown}{more}  [{state}]")
    return ToolResult(text="\n".join(lines), structured=output.model_dump())


def _one_text(info: CheckpointInfo) -> str:
    state = "undoable" if info.undoable else "not undoable (a file was over the size limit)"
    lines = [f"checkpoint {info.id}, {info.time}, {info.tool} (call {info.call_id}), {state}:"]
    lines += [f"  {quote_name(f.path)}: {f.change}" for f in info.files]
    if info.file_count > len(info.files):
        lines.append(f"  and {info.file_count - len(info.files)} more")
    if info.changed_since:
        lines.append(f"changed since (undoing would overwrite): {_listed(info.changed_since)}")
    return "\n".join(lines)


class UndoParams(StrictParams):
    id: CheckpointId = Field()
    and_later: bool = Field(default=False)
    overwrite: bool = Field(
        default=False,
        description="Even over changes made since (lost).",
    )
    dry_run: bool | None = Field(
        default=None,
        description="Unset: the server's default.",
    )


class UndoFile(BaseModel):
    path: str
    action: Literal["restore", "create", "delete"]


class UndoOutput(BaseModel):
    checkpoints: list[str]
    applied: bool
    files: list[UndoFile]
    diff: str
    diff_cut: bool


@dataclass(frozen=True, slots=True)
class _Restore:
    path: str
    target: PathState
    """What the path held before the earliest checkpoint undone."""
    now: str
    """Its state now, as the applier compares it."""
    now_state: PathState


def propose_undo(
    workspace: Workspace, params: UndoParams, deadline: Deadline, store: CheckpointStore | None
) -> Proposal | ToolResult:
    """The changes that put back every path the checkpoint (and with `and_later` every later one) touched.

    Raises:
        ToolTimeoutError: The deadline passed.
    """
    if store is None:
        return ToolResult(text=_NO_STORE, is_error=True)
    every = store.list()
    chosen = [
        c for c in every if (int(c.id) >= int(params.id) if params.and_later else c.id == str(int(params.id)))
    ]
    if not any(c.id == str(int(params.id)) for c in chosen):
        return _refused(f"no checkpoint {int(params.id)}; oct_checkpoints lists the ones kept")
    lost = [e.path for c in chosen for e in c.entries if e.before.kind == "unrecorded"]
    if lost:
        return _refused(f"files over the size limit were not kept, so this cannot be undone: {_listed(lost)}")
    changed = _changed_since(workspace, chosen)
    if changed and not params.overwrite:
        return _refused(
            f"{len(changed)} path(s) changed since the change was made: {_listed(changed)}; undoing would "
            "overwrite that; call again with overwrite=true to put them back anyway"
        )
    # The earliest checkpoint's state before is the one to restore.
    targets: dict[str, PathState] = {}
    for checkpoint in sorted(chosen, key=lambda c: int(c.id), reverse=True):
        for entry in checkpoint.entries:
            targets[entry.path] = entry.before
    root = str(workspace.root)
    restores = []
    for path, target in targets.items():
        deadline.check()
        now_state = state_at(os.path.join(root, path))
        if not now_state.same_as(target):
            restores.append(_Restore(path, target, state_of(workspace, path), now_state))
    try:
        changes = _changes(workspace, restores, store, deadline)
    except (FileNotFoundError, ValueError):
        return _refused("the store no longer holds a content this undo needs (it was dropped or changed)")
    ids = sorted((c.id for c in chosen), key=int)
    diff_parts, files, summary = [], [], []
    for restore in sorted(restores, key=lambda r: r.path):
        if restore.target.kind == "folder" or restore.now_state.kind == "folder":
            continue
        action: Literal["restore", "create", "delete"] = "restore"
        if restore.target.kind == "absent":
            action = "delete"
        elif restore.now_state.kind == "absent":
            action = "create"
        diff = _diff(workspace, restore, store, deadline)
        diff_parts.append(diff.text)
        files.append(UndoFile(path=restore.path, action=action))
        summary.append(FileChange(path=restore.path, action=action, added=diff.added, removed=diff.removed))
    whole = "".join(diff_parts)
    shown, cut = truncate_diff(whole)
    named = ", ".join(ids) if len(ids) <= 5 else f"{ids[0]} to {ids[-1]}"

    def answer(applied: bool) -> ToolResult:
        output = UndoOutput(checkpoints=ids, applied=applied, files=files, diff=shown, diff_cut=cut)
        if not restores:
            head = f"the files are already as before checkpoint(s) {named}; nothing to undo"
        elif applied:
            head = f"undid checkpoint(s) {named}: {len(restores)} path(s) put back"
        else:
            count = len(restores)
            head = f"dry run, nothing changed: undoing checkpoint(s) {named} would put back {count} path(s)"
        return ToolResult(text=f"{head}\n{readable_diff(shown)}".rstrip("\n"), structured=output.model_dump())

    return Proposal(changes=changes, files=tuple(summary), diff=whole, answer=answer)


def _changes(
    workspace: Workspace, restores: list[_Restore], store: CheckpointStore, deadline: Deadline
) -> tuple[PathChange, ...]:
    """Removals first (files, then folders, deepest first), then folders made, then files and links."""
    going = {r.path for r in restores if r.target.kind == "absent"}
    removed_folders = [r for r in restores if r.target.kind == "absent" and r.now_state.kind == "folder"]
    # A folder the undo removes goes with what is in it, when all of that goes too; else it stays.
    removable = []
    for r in removed_folders:
        tree = tree_state(workspace, r.path, deadline)
        if all(f"{r.path}/{inner}" in going for inner, _state in tree):
            removable.append((r, tree))
    inside = {r.path for r, _tree in removable}

    def within_removed(path: str) -> bool:
        return any(path.startswith(folder + "/") for folder in inside)

    changes: list[PathChange] = []
    for r in sorted(restores, key=lambda r: r.path.count("/"), reverse=True):
        if r.target.kind == "absent" and r.now_state.kind != "folder" and not within_removed(r.path):
            changes.append(PathChange(action="delete", path=r.path, read=r.now))
    for r, tree in sorted(removable, key=lambda item: item[0].path.count("/"), reverse=True):
        if not within_removed(r.path):
            changes.append(PathChange(action="delete", path=r.path, read="folder", tree=tree))
    for r in sorted(restores, key=lambda r: r.path.count("/")):
        if r.target.kind == "folder" and r.now_state.kind == "absent":
            changes.append(PathChange(action="folder", path=r.path, read=ABSENT))
    for r in restores:
        if r.target.kind == "file":
            data = store.blob(r.target.digest)
            changes.append(PathChange(action="write", path=r.path, read=r.now, data=data, mode=r.target.mode))
        elif r.target.kind == "symlink":
            if r.now_state.kind != "absent":
                changes.append(PathChange(action="delete", path=r.path, read=r.now))
            changes.append(
                PathChange(action="link", path=r.path, read=ABSENT, data=os.fsencode(r.target.digest))
            )
    return tuple(changes)


def _diff(workspace: Workspace, restore: _Restore, store: CheckpointStore, deadline: Deadline) -> Diff:
    """The diff from the file now to the file put back, both sides masked as the model reads them."""
    now = _text(os.path.join(workspace.root, restore.path), restore.now_state, None)
    back = _text("", restore.target, store)
    name = restore.path
    if now is False or back is False:
        return unified_diff(f"(binary or non-UTF-8 file {name})\n", None, f"a/{name}", f"b/{name}", deadline)
    old = None if now is None else masked(now).view
    new = None if back is None else masked(back).view
    return unified_diff(old, new, f"a/{name}", f"b/{name}", deadline)


def _text(path: str, state: PathState, store: CheckpointStore | None) -> str | Literal[False] | None:
    """A file's text (None: no file; False: not text), from the project or from the store."""
    if state.kind == "symlink":
        return f"(symlink to {state.digest})\n"
    if state.kind != "file":
        return None
    if store is not None:
        data = store.blob(state.digest)
    else:
        with open(path, "rb") as opened:
            data = opened.read()
    try:
        return None if b"\x00" in data[:8_192] else data.decode("utf-8")
    except UnicodeDecodeError:
        return False


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(quote_name(path) for path in paths[:_SHOWN_PATHS])
    return shown if len(paths) <= _SHOWN_PATHS else f"{shown} and {len(paths) - _SHOWN_PATHS} more"


def _refused(reason: str) -> ToolResult:
    return ToolResult(text=f"oct_undo refused; nothing was changed: {reason}", is_error=True)


def _plan_checkpoints(params: CheckpointsParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(lambda: list_checkpoints(env.workspace, params, env.checkpoints))


def _plan_undo(params: UndoParams, env: ToolEnv) -> ChangePlan:
    return ChangePlan(
        lambda: propose_undo(env.workspace, params, env.deadline, env.checkpoints),
        dry_run=env.dry_run_for(params.dry_run),
    )


CHECKPOINTS: Final = ToolSpec(
    name="oct_checkpoints",
    title="List checkpoints",
    description=(
        "List the changes oct-mcp made, newest first: id, time, tool, files, whether undoable, files "
        "changed since. oct_undo takes one back."
    ),
    params=CheckpointsParams,
    output=CheckpointsOutput,
    risk=Risk.READ,
    plan=_plan_checkpoints,
)

UNDO: Final = ToolSpec(
    name="oct_undo",
    title="Undo a change",
    description=(
        "Put back the files a checkpoint changed (and_later=true: later ones too); refuses where a file "
        "changed since, unless overwrite=true. The undo is a checkpoint too."
    ),
    params=UndoParams,
    output=UndoOutput,
    risk=Risk.WRITE,
    plan=_plan_undo,
    preview=_plan_undo,
    idempotent=False,
)
