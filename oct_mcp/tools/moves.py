"""oct_move and oct_delete: a file or folder moved or removed inside the project, never through a link.

Both ends of a move, and everything inside a folder that is moved or deleted, are contained and
checked against the protected paths before anything changes: moving `ci/` to `.github/` must not
create a workflow, and deleting `src/` must not take a `.git` inside it along. The change itself
goes through descriptors on the parent folders, reached from the root one component at a time
without following a symlink (as every write does), so a folder swapped for a link after the
checks is refused, not followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from functools import partial
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, Field

from oct_mcp.deadline import Deadline
from oct_mcp.errors import ExecutionError, PathRefusedError, PolicyError, TargetChangedError
from oct_mcp.preview import ABSENT, FileChange, Preview, TargetState, content_digest, diff_counts
from oct_mcp.protected import ProtectedPaths
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.tools.diffs import truncate_diff, unified_diff
from oct_mcp.tools.file_writes import (
    StrictParams,
    open_folder,
    preview_write,
    read_existing,
    refuse_git_directory,
    refuse_protected,
    remove_entry,
)
from oct_mcp.tools.masks import masked
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "DELETE",
    "MOVE",
    "DeleteOutput",
    "DeleteParams",
    "MoveOutput",
    "MoveParams",
    "delete_path",
    "move_path",
]

# Entries walked inside a folder that is moved or deleted; a larger tree is refused.
TREE_MAX_ENTRIES: Final = 100_000
_SHOWN_FILES: Final = 50
_CHECK_EVERY: Final = 256


class MoveParams(StrictParams):
    source: ProjectPath = Field(description="The file or folder to move, relative to the project root.")
    destination: ProjectPath = Field(
        description="Its new path (the full path, not a folder to move it into); missing folders are made."
    )
    overwrite: bool = Field(
        default=False, description="Replace a file already at the destination (never a folder)."
    )
    dry_run: bool | None = Field(
        default=None, description="True: only check and show what would change. Unset: the server's default."
    )


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
    path: ProjectPath = Field(description="The file or folder to delete, relative to the project root.")
    recursive: bool = Field(
        default=False, description="Needed to delete a folder that is not empty, with everything in it."
    )
    dry_run: bool | None = Field(
        default=None, description="True: only check and show what would go. Unset: the server's default."
    )


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


def _tree(folder: Path, deadline: Deadline | None) -> list[Path]:
    """Every entry under `folder` (folders and files, links not followed), or refused past the limit."""
    entries: list[Path] = []
    for top, folders, files in os.walk(folder, followlinks=False):
        if deadline is not None and not len(entries) % _CHECK_EVERY:
            deadline.check()
        entries.extend(Path(top, name) for name in (*folders, *files))
        if len(entries) > TREE_MAX_ENTRIES:
            raise PathRefusedError(
                f"the folder holds more than {TREE_MAX_ENTRIES} entries; move or delete less"
            )
    return entries


def _refuse_protected_inside(
    workspace: Workspace, entries: list[Path], where: str, moved_to: tuple[Path, Path] | None = None
) -> None:
    """Refuse when an entry of a tree, where it is or where it would land, is protected."""
    protected = ProtectedPaths(root=workspace.root)
    for entry in entries:
        landing = [entry] if moved_to is None else [entry, moved_to[1] / entry.relative_to(moved_to[0])]
        for path in landing:
            rule = protected.rule_for(path)
            if rule is not None:
                raise PolicyError(
                    f"{where}: the folder holds or would make {rule.why} (protected path rule: {rule.name})"
                )


def move_path(
    workspace: Workspace,
    params: MoveParams,
    *,
    dry_run: bool,
    deadline: Deadline | None = None,
    preview: bool = False,
    approved: tuple[TargetState, ...] | None = None,
) -> ToolResult:
    """Move or rename a file or folder inside the project; or only check that it can be.

    `preview`: a dry run whose result carries what moves, each file at both ends a target.
    `approved`: the targets a human approved; a file inside the folder they did not see is refused.

    Raises:
        TargetChangedError: The moved folder holds a file the approved preview did not show.
        PathRefusedError: An end outside the project, through a symlink, or a symlink itself.
        PolicyError: An end is protected, or a moved folder holds or would make a protected path.
        ExecutionError: The move failed; nothing moved.
        ToolTimeoutError: The deadline passed; nothing moved.
    """
    source = _unlinked(workspace, params.source, "source")
    destination = _unlinked(workspace, params.destination, "destination")
    refuse_protected(workspace, params.source, source, "oct_move (its source)")
    refuse_protected(workspace, params.destination, destination, "oct_move (its destination)")
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
    entries = _tree(source, deadline) if kind == "folder" else []
    _refuse_protected_inside(workspace, entries, "oct_move", (source, destination))
    landing = [destination / entry.relative_to(source) for entry in entries] or [destination]
    refuse_git_directory(workspace, landing, "oct_move")
    files = sum(entry.is_file() and not entry.is_symlink() for entry in entries) if entries else 1
    if kind == "folder" and not entries:
        files = 0
    moved = [entry for entry in entries if _regular(entry)] if kind == "folder" else [source]
    _refuse_unapproved(workspace, moved, approved)
    dry_run = dry_run or preview
    if not dry_run:
        _rename(workspace, source, destination, replace=taken == "file", deadline=deadline)
    output = MoveOutput(
        source=workspace.relative(source),
        destination=workspace.relative(destination),
        kind=kind,
        files=files,
        replaced=taken == "file",
        applied=not dry_run,
    )
    what = f"the {kind} {output.source} to {output.destination}"
    if kind == "folder":
        what += f" ({files} file(s))"
    if output.replaced:
        what += ", replacing the file there"
    head = f"dry run, nothing changed: would move {what}" if dry_run else f"moved {what}"
    shown = _move_preview(workspace, source, destination, kind, moved) if preview else None
    return ToolResult(text=head, structured=output.model_dump(), preview=shown)


def _regular(entry: Path) -> bool:
    return entry.is_file() and not entry.is_symlink()


def _refuse_unapproved(
    workspace: Workspace, files: list[Path], approved: tuple[TargetState, ...] | None
) -> None:
    """Refuse a consented move or delete that would take a file the human was not shown.

    The sandbox has checked every approved target is as it was; a file added inside the folder
    since is no target, so only this can see it.
    """
    if approved is None:
        return
    shown = {target.path for target in approved}
    if any(workspace.relative(path) not in shown for path in files):
        raise TargetChangedError(
            "the folder holds files that were not in the change the user approved, so nothing was "
            "changed; call the tool again to preview the change as the files are now"
        )


def _move_preview(
    workspace: Workspace, source: Path, destination: Path, kind: str, moved: list[Path]
) -> Preview:
    """Every file moved, at both ends: where it is (its content) and where it lands (absent, or the
    file an overwrite replaces)."""
    changes: list[FileChange] = []
    targets: list[TargetState] = []
    diff: list[str] = []
    for path in moved:
        before = workspace.relative(path)
        after = (
            workspace.relative(destination / path.relative_to(source))
            if kind == "folder"
            else (workspace.relative(destination))
        )
        changes.append(FileChange(path=after, action="rename", added=0, removed=0, original_path=before))
        targets.append(TargetState(path=before, digest=content_digest(workspace, before)))
        targets.append(TargetState(path=after, digest=content_digest(workspace, after)))
        diff.append(f"diff --git a/{before} b/{after}\nrename from {before}\nrename to {after}\n")
    if not moved:
        # An empty folder: the change is the folder itself, its new place a target that must stay free.
        before, after = workspace.relative(source), workspace.relative(destination)
        changes.append(FileChange(path=after, action="rename", added=0, removed=0, original_path=before))
        targets.append(TargetState(path=after, digest=ABSENT))
    return Preview(files=tuple(changes), diff="".join(diff), targets=tuple(targets))


def _rename(
    workspace: Workspace, source: Path, destination: Path, *, replace: bool, deadline: Deadline | None
) -> None:
    if deadline is not None:
        deadline.begin_writing()
    created: list[Path] = []
    try:
        source_fd = open_folder(workspace, source.parent, [])
        try:
            target_fd = open_folder(workspace, destination.parent, created)
            try:
                # Checked again on the descriptors, just before the rename: the target still free.
                if not replace and _present(destination.name, target_fd):
                    raise ExecutionError("something appeared at the destination; nothing was moved")
                os.rename(source.name, destination.name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
                for fd in (source_fd, target_fd):
                    with contextlib.suppress(OSError):
                        os.fsync(fd)
            finally:
                os.close(target_fd)
        finally:
            os.close(source_fd)
    except OSError as exc:
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                folder.rmdir()
        reason = "the two paths are on different file systems" if exc.errno == errno.EXDEV else exc.strerror
        raise ExecutionError(f"the move failed ({reason or type(exc).__name__}); nothing was moved") from exc


def _present(name: str, folder_fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=folder_fd)
    except FileNotFoundError:
        return False
    return True


def delete_path(
    workspace: Workspace,
    params: DeleteParams,
    *,
    dry_run: bool,
    deadline: Deadline | None = None,
    preview: bool = False,
    approved: tuple[TargetState, ...] | None = None,
) -> ToolResult:
    """Delete a file, an empty folder, or with `recursive` a folder and all in it; or only show what would go.

    `preview`: a dry run whose result carries every file that goes as a target, with its diff.
    `approved`: the targets a human approved; a file inside the folder they did not see is refused.

    Raises:
        TargetChangedError: The folder holds a file the approved preview did not show.
        PathRefusedError: Outside the project, through a symlink, or a symlink itself.
        PolicyError: The path is protected, or a folder holding one.
        ExecutionError: The delete failed.
        ToolTimeoutError: The deadline passed; nothing was deleted.
    """
    target = _unlinked(workspace, params.path, "path")
    refuse_protected(workspace, params.path, target, "oct_delete")
    kind = _kind(target, "path")
    if kind is None:
        return _refused("oct_delete", "the path does not exist")
    entries = _tree(target, deadline) if kind == "folder" else []
    if entries and not params.recursive:
        return _refused(
            "oct_delete",
            f"the folder is not empty ({len(entries)} entries); set recursive=true to delete it all",
        )
    _refuse_protected_inside(workspace, entries, "oct_delete")
    files = [entry for entry in entries if _regular(entry)] if entries else []
    if kind == "file":
        files = [target]
    _refuse_unapproved(workspace, files, approved)
    diff_text = _deletion_diff(workspace, target, deadline) if kind == "file" else ""
    shown_preview = _delete_preview(workspace, target, files, deadline) if preview else None
    dry_run = dry_run or preview
    if not dry_run:
        _remove(workspace, target, kind, deadline)
    shown, cut = truncate_diff(diff_text)
    listed = sorted(workspace.relative(path) for path in files)
    output = DeleteOutput(
        path=workspace.relative(target),
        kind=kind,
        files=listed[:_SHOWN_FILES],
        file_count=len(listed),
        applied=not dry_run,
        diff=shown,
        diff_cut=cut,
    )
    what = f"the {kind} {output.path}" + (f" and the {len(listed)} file(s) in it" if kind == "folder" else "")
    head = f"dry run, nothing changed: would delete {what}" if dry_run else f"deleted {what}"
    return ToolResult(
        text=f"{head}\n{shown}".rstrip("\n"), structured=output.model_dump(), preview=shown_preview
    )


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


def _delete_preview(
    workspace: Workspace, target: Path, files: list[Path], deadline: Deadline | None
) -> Preview:
    """Every file that goes, each a target with its content now and its diff; an empty folder itself."""
    changes: list[FileChange] = []
    targets: list[TargetState] = []
    diffs: list[str] = []
    for path in files:
        relative = workspace.relative(path)
        diff = _deletion_diff(workspace, path, deadline)
        _added, removed = diff_counts(diff)
        changes.append(FileChange(path=relative, action="delete", added=0, removed=removed))
        targets.append(TargetState(path=relative, digest=content_digest(workspace, relative)))
        diffs.append(diff)
    if not files:
        changes.append(FileChange(path=workspace.relative(target), action="delete", added=0, removed=0))
    return Preview(files=tuple(changes), diff="".join(diffs), targets=tuple(targets))


def _remove(workspace: Workspace, target: Path, kind: str, deadline: Deadline | None) -> None:
    try:
        remove_entry(workspace, target, tree=kind != "file", deadline=deadline)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ExecutionError(f"the delete failed ({reason}); check what is left with oct_list_files") from exc


def _refused(tool: str, reason: str) -> ToolResult:
    return ToolResult(text=f"{tool} refused; nothing was changed: {reason}", is_error=True)


def _plan_move(params: MoveParams, env: ToolEnv) -> InProcessPlan:
    dry_run = env.dry_run_for(params.dry_run)
    return InProcessPlan(
        partial(
            move_path,
            env.workspace,
            params,
            dry_run=dry_run,
            deadline=env.deadline,
            approved=env.approved_targets,
        )
    )


def _plan_delete(params: DeleteParams, env: ToolEnv) -> InProcessPlan:
    dry_run = env.dry_run_for(params.dry_run)
    return InProcessPlan(
        partial(
            delete_path,
            env.workspace,
            params,
            dry_run=dry_run,
            deadline=env.deadline,
            approved=env.approved_targets,
        )
    )


MOVE: Final = ToolSpec(
    name="oct_move",
    title="Move or rename a file or folder",
    description=(
        "Move or rename one file or folder inside the project: destination is the full new path (missing "
        "folders are made). A file already there is replaced only with overwrite=true; a folder there is "
        "never replaced. dry_run=true (the server's default when unset) only checks and says what would "
        "move. Refuses paths outside the project, protected paths at either end or inside a moved folder, "
        "and symlinks (neither followed nor moved). Needs the user's confirmation."
    ),
    params=MoveParams,
    output=MoveOutput,
    risk=Risk.WRITE,
    plan=_plan_move,
    preview=partial(preview_write, move_path),
    idempotent=False,
)

DELETE: Final = ToolSpec(
    name="oct_delete",
    title="Delete a file or folder",
    description=(
        "Delete one project file, or an empty folder; a folder with anything in it only with "
        "recursive=true, and everything in it goes. dry_run=true (the server's default when unset) lists "
        "what would go, with the diff for a file. Refuses paths outside the project, protected paths (or a "
        "folder holding one), the project root and symlinks. Needs the user's confirmation."
    ),
    params=DeleteParams,
    output=DeleteOutput,
    risk=Risk.WRITE,
    plan=_plan_delete,
    preview=partial(preview_write, delete_path),
    idempotent=False,
)
