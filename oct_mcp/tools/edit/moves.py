"""oct_move and oct_delete: a file or folder moved or removed inside the project, never through a link.

Each proposes one change (`execution.changes`) with the state of what it takes, a folder's every
entry included; the applier checks both ends and everything inside a folder against the protected
paths before anything changes (moving `ci/` to `.github/` must not create a workflow, deleting
`src/` must not take a `.git` inside it along), refuses a folder that gained or changed an entry
since, and renames or removes through descriptors that never follow a symlink.
"""

from __future__ import annotations

import os
import stat
from functools import partial
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, Field

from oct_mcp.deadline import Deadline
from oct_mcp.diff_view import readable_diff
from oct_mcp.errors import PathRefusedError
from oct_mcp.execution.changes import FOLDER, PathChange, Proposal, tree_state
from oct_mcp.preview import ABSENT, FileChange, content_digest, diff_counts
from oct_mcp.spec import ProjectPath, Risk, StrictParams, ToolSpec
from oct_mcp.tools._text.diffs import truncate_diff, unified_diff
from oct_mcp.tools._text.masks import masked
from oct_mcp.tools.edit.change_kit import plan_change, read_existing
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "DELETE",
    "MOVE",
    "DeleteOutput",
    "DeleteParams",
    "MoveOutput",
    "MoveParams",
    "propose_delete",
    "propose_move",
]

_SHOWN_FILES: Final = 50


class MoveParams(StrictParams):
    source: ProjectPath = Field()
    destination: ProjectPath = Field()
    overwrite: bool = Field(default=False)
    dry_run: bool | None = Field(default=None, description="Unset: the server's default.")


class MoveOutput(BaseModel):
    source: str
    destination: str
    kind: Literal["file", "folder"]
    files: int
    """Files moved: 1 for a file, every file inside for a folder."""
    replaced: bool
    """A file at the destination was replaced."""
    applied: bool


class DeleteParams(StrictParams):
    path: ProjectPath = Field()
    recursive: bool = Field(default=False)
    dry_run: bool | None = Field(default=None, description="Unset: the server's default.")


class DeleteOutput(BaseModel):
    path: str
    kind: Literal["file", "folder"]
    files: list[str]
    """The files that go (the first 50 of a folder's), relative to the project root."""
    file_count: int
    applied: bool
    diff: str
    """For a file: the diff that removes every line of it."""
    diff_cut: bool


def _unlinked(workspace: Workspace, requested: str, what: str) -> Path:
    """`requested` contained, reached through no symlink, itself no symlink.

    Raises:
        PathRefusedError: Outside the project, through a symlink, or a symlink itself.
    """
    resolved = workspace.contain(requested)
    lexical = Path(os.path.normpath(workspace.root / requested))
    if lexical != resolved:
        raise PathRefusedError(f"the {what} is or goes through a symlink; give the path it leads to")
    if resolved == workspace.root:
        raise PathRefusedError(f"the {what} is the project root itself")
    return resolved


def _kind(path: Path, what: str) -> Literal["file", "folder"] | None:
    """What is at `path`: a file, a folder, nothing (None); refused for anything else."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PathRefusedError(f"the {what} cannot be examined") from exc
    if stat.S_ISLNK(mode):
        raise PathRefusedError(f"the {what} is a symlink; links are neither moved nor deleted")
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISREG(mode):
        return "file"
    raise PathRefusedError(f"the {what} is not a regular file or folder")


def _files_in(tree: tuple[tuple[str, str], ...]) -> list[str]:
    """The regular files of a folder's tree, relative to the folder."""
    return [inner for inner, state in tree if state.startswith("sha256:")]


def propose_move(
    workspace: Workspace, params: MoveParams, deadline: Deadline | None = None
) -> Proposal | ToolResult:
    """The move or rename of a file or folder inside the project, as one change.

    Raises:
        PathRefusedError: An end outside the project, through a symlink, or a symlink itself; a
            folder too large to move.
        ToolTimeoutError: The deadline passed.
    """
    source = _unlinked(workspace, params.source, "source")
    destination = _unlinked(workspace, params.destination, "destination")
    kind = _kind(source, "source")
    if kind is None:
        return _refused("oct_move", "the source does not exist")
    if destination == source or destination.is_relative_to(source):
        return _refused("oct_move", "the destination is the source or inside it")
    taken = _kind(destination, "destination")
    if taken == "folder":
        return _refused(
            "oct_move", "a folder is at the destination; give the full new path, such as that folder/name"
        )
    if taken == "file" and (kind == "folder" or not params.overwrite):
        why = "a folder never replaces a file" if kind == "folder" else "set overwrite=true to replace it"
        return _refused("oct_move", f"a file is at the destination; {why}")
    before, after = workspace.relative(source), workspace.relative(destination)
    tree = tree_state(workspace, before, deadline) if kind == "folder" else None
    change = PathChange(
        action="move",
        path=after,
        source=before,
        read=FOLDER if tree is not None else content_digest(workspace, before),
        replaces=content_digest(workspace, after) if taken == "file" else ABSENT,
        tree=tree,
    )
    moved = (
        [(f"{before}/{inner}", f"{after}/{inner}") for inner in _files_in(tree)] if tree is not None else []
    )
    if tree is None:
        moved = [(before, after)]
    files = len(moved)
    output = MoveOutput(
        source=before, destination=after, kind=kind, files=files, replaced=taken == "file", applied=False
    )
    what = f"the {kind} {before} to {after}"
    if kind == "folder":
        what += f" ({files} file(s))"
    if output.replaced:
        what += ", replacing the file there"
    summary = tuple(
        FileChange(path=landing, action="rename", added=0, removed=0, original_path=start)
        for start, landing in moved
    ) or (FileChange(path=after, action="rename", added=0, removed=0, original_path=before),)
    diff = "".join(
        f"diff --git a/{start} b/{landing}\nrename from {start}\nrename to {landing}\n"
        for start, landing in moved
    )

    def answer(applied: bool) -> ToolResult:
        head = f"moved {what}" if applied else f"dry run, nothing changed: would move {what}"
        return ToolResult(text=head, structured=output.model_copy(update={"applied": applied}).model_dump())

    return Proposal(changes=(change,), files=summary, diff=diff, answer=answer)


def propose_delete(
    workspace: Workspace, params: DeleteParams, deadline: Deadline | None = None
) -> Proposal | ToolResult:
    """The removal of a file, an empty folder, or with `recursive` a folder and all in it, as one change.

    Raises:
        PathRefusedError: Outside the project, through a symlink, or a symlink itself; a folder too
            large to delete.
        ToolTimeoutError: The deadline passed.
    """
    target = _unlinked(workspace, params.path, "path")
    kind = _kind(target, "path")
    if kind is None:
        return _refused("oct_delete", "the path does not exist")
    relative = workspace.relative(target)
    tree = tree_state(workspace, relative, deadline) if kind == "folder" else None
    if tree and not params.recursive:
        return _refused(
            "oct_delete",
            f"the folder is not empty ({len(tree)} entries); set recursive=true to delete it all",
        )
    listed = [relative] if tree is None else [f"{relative}/{inner}" for inner in _files_in(tree)]
    change = PathChange(
        action="delete",
        path=relative,
        read=FOLDER if tree is not None else content_digest(workspace, relative),
        tree=tree,
    )
    summary: list[FileChange] = []
    diffs: list[str] = []
    for path in listed:
        diff = _deletion_diff(workspace, workspace.root / path, deadline)
        summary.append(FileChange(path=path, action="delete", added=0, removed=diff_counts(diff)[1]))
        diffs.append(diff)
    if not listed:
        summary.append(FileChange(path=relative, action="delete", added=0, removed=0))
    shown, cut = truncate_diff(diffs[0] if tree is None else "")
    what = f"the {kind} {relative}" + (f" and the {len(listed)} file(s) in it" if kind == "folder" else "")

    def answer(applied: bool) -> ToolResult:
        output = DeleteOutput(
            path=relative,
            kind=kind,
            files=listed[:_SHOWN_FILES],
            file_count=len(listed),
            applied=applied,
            diff=shown,
            diff_cut=cut,
        )
        head = f"deleted {what}" if applied else f"dry run, nothing changed: would delete {what}"
        return ToolResult(text=f"{head}\n{readable_diff(shown)}".rstrip("\n"), structured=output.model_dump())

    return Proposal(changes=(change,), files=tuple(summary), diff="".join(diffs), answer=answer)


def _deletion_diff(workspace: Workspace, path: Path, deadline: Deadline | None) -> str:
    """The diff that removes every line of a file, as the model reads it: secrets masked."""
    existing = read_existing(workspace, path)
    text = None if existing is None else existing.text
    relative = workspace.relative(path)
    if existing is not None and text is None:
        return f"Binary or non-UTF-8 file {relative} deleted ({len(existing.data)} bytes)\n"
    if text is None:
        return ""
    return unified_diff(masked(text).view, None, f"a/{relative}", "", deadline).text


def _refused(tool: str, reason: str) -> ToolResult:
    return ToolResult(text=f"{tool} refused; nothing was changed: {reason}", is_error=True)


MOVE: Final = ToolSpec(
    name="oct_move",
    title="Move or rename a file or folder",
    description=(
        "Move or rename a file or folder; destination is the full new path. overwrite=true replaces a file "
        "there, never a folder."
    ),
    params=MoveParams,
    output=MoveOutput,
    risk=Risk.WRITE,
    plan=partial(plan_change, propose_move),
    preview=partial(plan_change, propose_move),
    idempotent=False,
)

DELETE: Final = ToolSpec(
    name="oct_delete",
    title="Delete a file or folder",
    description="Delete a file or an empty folder (recursive=true: a full one, with everything in it).",
    params=DeleteParams,
    output=DeleteOutput,
    risk=Risk.WRITE,
    plan=partial(plan_change, propose_delete),
    preview=partial(plan_change, propose_delete),
    idempotent=False,
)
