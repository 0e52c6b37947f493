"""The one applier: a tool's file changes, checked once for every tool, then made all or nothing.

A file-writing tool never writes. Its plan is a `ChangePlan`: given the project, it proposes the
changes it wants (`PathChange`: a file written, a file or folder deleted or moved, each with the
state of what the tool read), what a human is shown of them, and its answer. `ChangeApplier`
then does, in one place for every tool: containment of every path; the protected paths, with the
server's own files wherever they are; no folder made a git directory; a consent's approved
targets, which must be exactly the change's; what the tool read still what is on disk
(`[target_changed]`); and the change itself, atomic per file and undone as a whole when a step
fails, begun only while the call's deadline allows. A dry run is the proposal not applied; a
consent preview is the proposal itself.

Every write goes through a descriptor on its folder, reached from the root one component at a
time without following symlinks, into a temporary file in that folder, fsync'd, then renamed over
the target: a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from oct_mcp.base_types import ToolResult
from oct_mcp.deadline import Deadline
from oct_mcp.errors import PathRefusedError, PolicyError, TargetChangedError
from oct_mcp.execution.changes import FOLDER, ChangePlan, PathChange, path_state_at, targets_of, tree_state
from oct_mcp.execution.checkpoints import (
    ABSENT_STATE,
    FOLDER_STATE,
    CheckpointStore,
    Entry,
    PathState,
    record_or_refuse,
    state_at,
)
from oct_mcp.execution.file_ops import apply_changes
from oct_mcp.preview import Preview, TargetState
from oct_mcp.protected import GIT_DIRECTORY_RULE, ProtectedPaths, git_directory_made
from oct_mcp.workspace import Workspace

__all__ = ["ChangeApplier", "state_of"]


@dataclass(frozen=True, slots=True)
class ChangeApplier:
    """Checks and applies every tool's file changes: the one place that writes project files for a tool.

    The protected paths are the one rule table (`ProtectedPaths`), with the server's own files
    (config, policy, audit log and its seal) wherever they are: the policy layer judges the path
    arguments by the same table, built the same way (`ProtectedPaths.for_config`).
    """

    server_files: frozenset[Path] = frozenset()
    """Absolute paths of the server's config, policy and audit files."""
    checkpoints: CheckpointStore | None = None
    """Where each change's prior state is kept before it is made; None: changes are not undoable."""

    def carry_out(
        self,
        workspace: Workspace,
        plan: ChangePlan,
        *,
        tool: str,
        preview: bool = False,
        deadline: Deadline | None = None,
        approved: tuple[TargetState, ...] | None = None,
        call_id: str = "",
    ) -> ToolResult:
        """Propose, check, and unless a dry run or a preview, apply; then answer as the tool does.

        Before it changes anything, the change's checkpoint is recorded where there is a store: the
        answer names it (`ToolResult.checkpoint`).

        Args:
            workspace: The project.
            plan: The tool's plan.
            tool: The tool's name, for messages.
            preview: Answer with the `Preview` a human is shown, applying nothing.
            deadline: Claimed before the first change; none is begun after it passed.
            approved: The targets a human approved (a consent); the change must have exactly these.
            call_id: The call, for its checkpoint.

        Raises:
            PathRefusedError: A path leaves the project or goes through a link.
            PolicyError: A protected path, or a folder made a git directory.
            TargetChangedError: What the tool read is no longer on disk, or the change is not the
                one approved.
            ExecutionError: A step failed; what was done is undone, and the message says so.
            ToolTimeoutError: The deadline passed before anything was changed.
        """
        proposal = plan.propose()
        if isinstance(proposal, ToolResult):
            return proposal
        changes = proposal.changes
        _check(ProtectedPaths(root=workspace.root, server_files=self.server_files), workspace, changes, tool)
        targets = targets_of(changes)
        if preview:
            shown = Preview(files=proposal.files, diff=proposal.diff, targets=targets)
            return replace(proposal.answer(False), preview=shown)
        if plan.dry_run:
            return proposal.answer(False)
        changed = 0 if approved is None else _changed(workspace, approved)
        if changed:
            raise TargetChangedError(
                f"{changed} file(s) changed on disk after the preview the user approved, so nothing was "
                "written; call the tool again to preview the change as the files are now"
            )
        if approved is not None and sorted(_keys(approved)) != sorted(_keys(targets)):
            raise TargetChangedError(
                "the change is no longer the one the user approved (the files changed since), so nothing "
                "was written; call the tool again to preview the change as the files are now"
            )
        if not changes:
            return proposal.answer(True)
        _verify_read(workspace, changes)
        if deadline is not None:
            # Claimed before the checkpoint: a call answered `[timeout]` leaves no checkpoint either.
            deadline.begin_writing()
        checkpoint = None
        if self.checkpoints is not None:
            checkpoint = record_or_refuse(
                self.checkpoints, tool=tool, call_id=call_id, capture=partial(_entries, workspace, changes)
            )
        apply_changes(workspace, changes)
        answer = proposal.answer(True)
        if checkpoint is None:
            return answer
        note = f"\n(checkpoint {checkpoint.id}: oct_undo can take this change back)"
        return replace(answer, text=answer.text + note, checkpoint=checkpoint.id)


def _check(
    protected: ProtectedPaths, workspace: Workspace, changes: tuple[PathChange, ...], tool: str
) -> None:
    """Every path of the changes contained, reached through no link, none protected; no git directory made."""
    root = workspace.root
    written: list[Path] = []
    for change in changes:
        for path in (change.path, change.source):
            if path is not None:
                _refuse_links(workspace, path)
        inside = () if change.tree is None else tuple(inner for inner, _state in change.tree)
        ends = (
            (
                (change.source, "its source"),
                (change.path, "its destination"),
                (change.named, "its destination"),
            )
            if change.action == "move"
            else ((change.path, ""), (change.named, ""))
        )
        for path, end in ends:
            if path is None:
                continue
            where = ", ".join(part for part in (change.where, end) if part)
            _refuse_protected(protected, root / path, tool, where)
            for inner in inside:
                _refuse_protected(protected, root / path / inner, tool, where or "inside the folder")
        if change.action == "write":
            written.append(root / change.path)
        elif change.action == "move":
            written.append(root / change.path)
            written.extend(root / change.path / inner for inner in inside)
    if git_directory_made(root, written) is not None:
        rule = GIT_DIRECTORY_RULE
        raise PolicyError(f"{tool} may not make a folder {rule.why} (protected path rule: {rule.name})")


def _refuse_protected(protected: ProtectedPaths, path: Path, tool: str, where: str) -> None:
    rule = protected.rule_for(path)
    if rule is not None:
        named = f"{tool} ({where})" if where else tool
        raise PolicyError(f"{named} may not change {rule.why} (protected path rule: {rule.name})")


def _keys(targets: Iterable[TargetState]) -> list[tuple[str, str]]:
    return [(target.path, target.digest) for target in targets]


def _refuse_links(workspace: Workspace, path: str) -> None:
    """A change names its paths with links resolved: one that resolves elsewhere now went through a link."""
    lexical = os.path.normpath(os.path.join(workspace.root, path))
    if workspace.contain_text(path) != lexical or lexical == str(workspace.root):
        raise PathRefusedError("a path of the change is the project root, or goes through a symlink")


def _verify_read(workspace: Workspace, changes: tuple[PathChange, ...]) -> None:
    """Refuse unless every path the changes read or replace is as the tool found it."""
    changed = 0
    for change in changes:
        start = change.source if change.action == "move" else change.path
        if start is None:
            raise RuntimeError("a move without its source")
        if change.tree is not None:
            info = _lstat(os.path.join(workspace.root, start))
            changed += (
                info is None or not stat.S_ISDIR(info.st_mode) or tree_state(workspace, start) != change.tree
            )
        else:
            changed += state_of(workspace, start) != change.read
        if change.action == "move":
            changed += state_of(workspace, change.path) != change.replaces
    if changed:
        raise TargetChangedError(
            f"{changed} file(s) changed on disk since the tool read them, so nothing was written; "
            "call the tool again to see the change as the files are now"
        )


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def state_of(workspace: Workspace, path: str) -> str:
    """The state of a path as a change records what it read: links not followed (a file swapped for a
    link to the same content is a change)."""
    try:
        return path_state_at(os.path.join(workspace.root, path))
    except OSError:
        return "unreadable"


def _changed(workspace: Workspace, targets: Iterable[TargetState]) -> int:
    """How many of `targets` no longer have their state on disk."""
    return sum(state_of(workspace, target.path) != target.digest for target in targets)


def _entries(workspace: Workspace, changes: tuple[PathChange, ...], store: CheckpointStore) -> list[Entry]:
    """Every path the changes touch, as it is now (its content kept in `store`) and as they will leave it.

    A path two changes touch keeps its first state before and its last state after; the folders a
    write or a move makes are entries too, so an undo removes them again.
    """
    root = str(workspace.root)
    found: dict[str, Entry] = {}

    def note(path: str, after: PathState) -> None:
        earlier = found.get(path)
        before = earlier.before if earlier is not None else state_at(os.path.join(root, path), keep=store)
        found[path] = Entry(path=path, before=before, after=after)

    def parents(path: str) -> None:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            if folder not in found and not os.path.lexists(os.path.join(root, folder)):
                note(folder, FOLDER_STATE)

    for change in changes:
        path = change.path
        if change.action in ("write", "link", "folder"):
            parents(path)
            data = change.data or b""
            if change.action == "write":
                note(path, PathState(kind="file", digest="sha256:" + hashlib.sha256(data).hexdigest()))
            else:
                note(
                    path,
                    PathState(kind="symlink", digest=os.fsdecode(data))
                    if change.action == "link"
                    else FOLDER_STATE,
                )
        elif change.action == "delete":
            for inner, _state in reversed(change.tree or ()):
                note(f"{path}/{inner}", ABSENT_STATE)
            note(path, ABSENT_STATE)
        elif change.source is not None:
            parents(path)
            if change.tree is None:
                moved = state_at(os.path.join(root, change.source), keep=store)
                note(path, moved)
            else:
                note(path, FOLDER_STATE)
                for inner, state in change.tree:
                    note(f"{path}/{inner}", _as_state(state))
            for inner, _state in reversed(change.tree or ()):
                note(f"{change.source}/{inner}", ABSENT_STATE)
            note(change.source, ABSENT_STATE)
    return list(found.values())


def _as_state(text: str) -> PathState:
    """A tree entry's state (`tree_state`'s text) as a checkpoint's state."""
    if text == FOLDER:
        return FOLDER_STATE
    if text.startswith("symlink:"):
        return PathState(kind="symlink", digest=text.removeprefix("symlink:"))
    if text.startswith("sha256:"):
        return PathState(kind="file", digest=text)
    return PathState(kind="other")
