"""What a file-writing tool proposes: each change of a path (`PathChange`), with the state of what
the tool read, and the plan that carries its proposal to the applier (`applier.py`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Literal

from oct_mcp.base_types import ToolResult
from oct_mcp.deadline import Deadline
from oct_mcp.errors import PathRefusedError
from oct_mcp.execution.checkpoints import (
    state_at,
)
from oct_mcp.preview import ABSENT, FileChange, TargetState
from oct_mcp.workspace import Workspace

__all__ = [
    "FOLDER",
    "TREE_MAX_ENTRIES",
    "Action",
    "ChangePlan",
    "PathChange",
    "Proposal",
    "Undo",
    "path_state_at",
    "targets_of",
    "tree_state",
]


FOLDER: Final = "folder"
"""The state of a folder inside a tree (its entries are listed on their own)."""


TREE_MAX_ENTRIES: Final = 100_000
"""Entries walked inside a folder that is moved or deleted; a larger tree is refused."""


_CHECK_EVERY: Final = 256


Action = Literal["write", "delete", "move", "link", "folder"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PathChange:
    """One change a tool wants, and the state of the project it was computed from.

    Paths are relative to the project root and name where the change lands, links resolved.
    """

    action: Action
    path: str
    """The file written, the file or folder deleted, where a move lands, the link or the (empty)
    folder made (`link` and `folder` put back what an undo restores)."""
    read: str
    """What the tool found at `path` (a write or delete) or at `source` (a move): a file's
    `sha256:` digest, `absent`, or `folder` (its entries are in `tree`)."""
    named: str | None = None
    """The path as the call named it, where that differs (a link inside the project): the
    protected-path rules judge both names."""
    data: bytes | None = None
    """A write's new content; a link's target."""
    mode: int | None = None
    """A write's exact mode; None: the replaced file's mode, or `new_mode` less the umask."""
    new_mode: int = 0o666
    source: str | None = None
    """What a move takes."""
    replaces: str = ABSENT
    """A move: the digest of the file at `path` it replaces (`absent`: the place must be free)."""
    tree: tuple[tuple[str, str], ...] | None = None
    """A folder deleted or moved: every entry under it (relative to it) with its state, as
    `tree_state` gives them; the folder must still hold exactly these."""
    where: str = ""
    """How the call names this change in a refusal, where it makes several (`file 2 of the patch`);
    never the path itself, which is the call's argument."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """What a tool proposes: the changes, what a human is shown of them, and the tool's answer."""

    changes: tuple[PathChange, ...]
    files: tuple[FileChange, ...]
    """The change file by file, in words (counts) for the question a human answers."""
    diff: str
    """The whole diff a human is shown, secrets masked."""
    answer: Callable[[bool], ToolResult]
    """The tool's result, given whether the changes were applied."""


@dataclass(frozen=True, slots=True)
class ChangePlan:
    """The third kind of plan: `propose` reads the project (in a worker thread, under the call's
    deadline) and says what to change, or answers an error result when the call cannot apply."""

    propose: Callable[[], Proposal | ToolResult]
    dry_run: bool
    """The call only says what it would change (its own `dry_run`, else the safety gate's)."""


def targets_of(changes: Iterable[PathChange]) -> tuple[TargetState, ...]:
    """Every file a change reads or writes, with the state it must have: what a consent binds.

    A preview's targets and an approved call's are computed by this one function from the changes
    themselves, so an approved call applies exactly the change that was shown, or nothing.
    """
    found: list[TargetState] = []
    for change in changes:
        if change.action in ("write", "link", "folder") or (
            change.action == "delete" and change.tree is None
        ):
            found.append(TargetState(path=change.path, digest=change.read))
        elif change.action == "delete":
            found.extend(_tree_targets(change.path, change.tree or ()))
        elif change.source is not None and change.tree is None:
            found.append(TargetState(path=change.source, digest=change.read))
            found.append(TargetState(path=change.path, digest=change.replaces))
        elif change.source is not None:
            # Each entry where it is and where it lands; an empty folder's landing place itself.
            moved = list(_tree_targets(change.source, change.tree or ()))
            for start in moved:
                landing = change.path + start.path[len(change.source) :]
                found.extend((start, TargetState(path=landing, digest=ABSENT)))
            if not moved:
                found.append(TargetState(path=change.path, digest=ABSENT))
    return tuple(found)


def _tree_targets(folder: str, tree: Iterable[tuple[str, str]]) -> Iterator[TargetState]:
    """The entries of a folder's tree but its folders, each with its state."""
    return (TargetState(path=f"{folder}/{inner}", digest=state) for inner, state in tree if state != FOLDER)


def tree_state(
    workspace: Workspace, folder: str, deadline: Deadline | None = None
) -> tuple[tuple[str, str], ...]:
    """Every entry under a project folder (links not followed) with its state, sorted by path.

    A file's state is its `sha256:` digest, a link's `symlink:` and where it points, a folder's
    `folder`, anything else `special`.

    Raises:
        PathRefusedError: The folder holds more than `TREE_MAX_ENTRIES` entries, or a folder inside it
            cannot be listed (what a human approves must be all of what is changed).
        ToolTimeoutError: The deadline passed.
    """
    top = os.path.join(workspace.root, folder)
    entries: list[tuple[str, str]] = []
    for current, folders, files in os.walk(top, followlinks=False, onerror=_refuse_unlisted):
        for name in (*folders, *files):
            if deadline is not None and not len(entries) % _CHECK_EVERY:
                deadline.check()
            path = os.path.join(current, name)
            try:
                state = path_state_at(path)
            except OSError as exc:
                _refuse_unlisted(exc)
                continue
            entries.append((os.path.relpath(path, top), state))
            if len(entries) > TREE_MAX_ENTRIES:
                raise PathRefusedError(
                    f"the folder holds more than {TREE_MAX_ENTRIES} entries; move or delete less"
                )
    return tuple(sorted(entries))


def _refuse_unlisted(error: OSError) -> None:
    """A folder `tree_state` cannot list, or an entry it cannot read, is refused, never left out of
    the tree a human is shown."""
    if isinstance(error, FileNotFoundError):
        return  # gone: nothing in it to change
    raise PathRefusedError(
        f"a folder inside cannot be listed ({error.strerror}); make it readable to the server's user "
        "(chmod u+rx) and not nested past the longest path the system takes, then call again"
    ) from error


def path_state_at(path: str) -> str:
    """What stands at `path` (links not followed) as a change records it: `tree_state`'s text."""
    state = state_at(path)
    if state.kind == "file":
        return state.digest
    if state.kind == "symlink":
        return "symlink:" + state.digest
    return {"absent": ABSENT, "folder": FOLDER}.get(state.kind, "special")


Undo = Callable[[], None]
