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

import contextlib
import errno
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Final, Literal

from oct_mcp.deadline import Deadline
from oct_mcp.errors import ExecutionError, OctError, PathRefusedError, PolicyError, TargetChangedError
from oct_mcp.execution.checkpoints import (
    ABSENT_STATE,
    FOLDER_STATE,
    CheckpointStore,
    Entry,
    PathState,
    record_or_refuse,
    state_at,
)
from oct_mcp.preview import ABSENT, FileChange, Preview, TargetState
from oct_mcp.protected import GIT_DIRECTORY_RULE, ProtectedPaths, git_directory_made
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "FOLDER",
    "TREE_MAX_ENTRIES",
    "ChangeApplier",
    "ChangePlan",
    "PathChange",
    "Proposal",
    "state_of",
    "targets_of",
    "tree_state",
]

FOLDER: Final = "folder"
"""The state of a folder inside a tree (its entries are listed on their own)."""
TREE_MAX_ENTRIES: Final = 100_000
"""Entries walked inside a folder that is moved or deleted; a larger tree is refused."""
_FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK: Final = 1_048_576
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
                state = _state_at(path)
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


def _state_at(path: str) -> str:
    """What stands at `path` (links not followed) as a change records it: `tree_state`'s text."""
    state = state_at(path)
    if state.kind == "file":
        return state.digest
    if state.kind == "symlink":
        return "symlink:" + state.digest
    return {"absent": ABSENT, "folder": FOLDER}.get(state.kind, "special")


Undo = Callable[[], None]


@dataclass(frozen=True, slots=True)
class ChangeApplier:
    """Checks and applies every tool's file changes: the one place that writes project files for a tool.

    The protected paths are the one rule table (`ProtectedPaths`), with the server's own files
    (config, policy, audit log and its seal) wherever they are: the policy layer judges the path
    arguments by the same table, built the same way (`ProtectedPaths.for_runtime`).
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
        _apply(workspace, changes)
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
        return _state_at(os.path.join(workspace.root, path))
    except OSError:
        return "unreadable"


def _changed(workspace: Workspace, targets: Iterable[TargetState]) -> int:
    """How many of `targets` no longer have their state on disk."""
    return sum(state_of(workspace, target.path) != target.digest for target in targets)


def _apply(workspace: Workspace, changes: tuple[PathChange, ...]) -> None:
    """Make every change, or none: on a failure, undo what was done, newest first.

    The deadline is claimed already: once claimed, every change follows whatever the time.

    Raises:
        ExecutionError: A step failed; the message says whether everything was put back.
    """
    undo: list[Undo] = []
    try:
        for change in changes:
            undo.extend(_make(workspace, change))
    except (OSError, OctError) as exc:
        problems = 0
        for step in reversed(undo):
            try:
                step()
            except (OSError, OctError):
                problems += 1
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        if isinstance(exc, OSError) and exc.errno == errno.EXDEV:
            reason = "the two paths are on different file systems"
        if isinstance(exc, OctError):
            reason = exc.message
        state = (
            "nothing was changed"
            if not problems
            else f"{problems} change(s) could not be undone; check the files with oct_git_status"
        )
        raise ExecutionError(f"the change could not be made ({reason}); {state}") from exc


def _make(workspace: Workspace, change: PathChange) -> list[Undo]:
    """Make one change; returns how to undo it."""
    root = workspace.root
    target = root / change.path
    if change.action == "write":
        if change.data is None:
            raise RuntimeError("a planned write without content")
        old = _existing(workspace, change)
        return [
            _write_atomically(workspace, target, change.data, old, mode=change.mode, new_mode=change.new_mode)
        ]
    if change.action in ("link", "folder"):
        return [_make_entry(workspace, target, None if change.data is None else os.fsdecode(change.data))]
    if change.action == "delete":
        if change.tree is not None:
            # A folder's removal is not undone within the call: it is the call's one change.
            _remove_entry(workspace, target, tree=True)
            return []
        old = _existing(workspace, change)
        _remove_entry(workspace, target)
        return [] if old is None else [lambda: _put_back(workspace, target, old)]
    if change.source is None:
        raise RuntimeError("a move without its source")
    source = root / change.source
    replaced = None if change.replaces == ABSENT else _read_file(target)
    _rename(workspace, source, target, replace=change.replaces != ABSENT)

    def move_back() -> None:
        _rename(workspace, target, source, replace=False)
        if replaced is not None:
            _put_back(workspace, target, replaced)

    return [move_back]


@dataclass(frozen=True, slots=True)
class _Old:
    data: bytes
    mode: int


def _existing(workspace: Workspace, change: PathChange) -> _Old | None:
    return None if change.read == ABSENT else _read_file(workspace.root / change.path)


def _read_file(path: Path) -> _Old:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        chunks = []
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return _Old(b"".join(chunks), mode)


def _open_folder(workspace: Workspace, folder: Path, created: list[Path]) -> int:
    """A descriptor on `folder`, reached from the root one component at a time, never through a symlink.

    Missing folders are made, and appended to `created`.

    Raises:
        PathRefusedError: A component is a symlink or a file.
    """
    fd = os.open(workspace.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        current = workspace.root
        for part in folder.relative_to(workspace.root).parts:
            current = current / part
            try:
                inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o777, dir_fd=fd)
                created.append(current)
                inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            except PermissionError:
                raise
            except OSError as exc:
                # ENOTDIR: a file; ELOOP: a symlink, perhaps swapped in since the path was contained.
                raise PathRefusedError("a folder on the path is a symlink or a file") from exc
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _replace_in(folder_fd: int, name: str, data: bytes, mode: int | None, new_mode: int) -> None:
    """Write `data` to a temporary file in the folder, fsync it, and rename it over `name`.

    `mode` is the replaced file's, kept exactly; for a new file, `new_mode` less the umask.
    """
    temp = f".oct-write-{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o600 if mode is not None else new_mode, dir_fd=folder_fd)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder_fd)
        raise
    # The rename itself is durable only once the folder is.
    with contextlib.suppress(OSError):
        os.fsync(folder_fd)


def _write_atomically(
    workspace: Workspace,
    target: Path,
    data: bytes,
    old: _Old | None,
    *,
    mode: int | None = None,
    new_mode: int = 0o666,
) -> Undo:
    """Atomically put `data` at `target`; returns how to put back what was there.

    The file gets `mode` when given, else the replaced file's mode, else `new_mode` less the umask.
    """
    created: list[Path] = []
    exact = mode if mode is not None else (None if old is None else old.mode)
    try:
        folder_fd = _open_folder(workspace, target.parent, created)
        try:
            _replace_in(folder_fd, target.name, data, exact, new_mode)
        finally:
            os.close(folder_fd)
    except BaseException:
        _remove_folders(created)
        raise
    if old is not None:
        return lambda: _put_back(workspace, target, old)

    def undo_create() -> None:
        _remove_entry(workspace, target)
        _remove_folders(created)

    return undo_create


def _put_back(workspace: Workspace, target: Path, old: _Old) -> None:
    """Write `old` back at `target` with its mode: an undo, which itself is never undone."""
    _write_atomically(workspace, target, old.data, None, mode=old.mode)


def _remove_entry(workspace: Workspace, target: Path, *, tree: bool = False) -> None:
    """Remove the file at `target` (with `tree`, the folder and all in it) through its folder's descriptor."""
    folder_fd = _open_folder(workspace, target.parent, [])
    try:
        if tree:
            # On descriptors, never following a link inside (shutil's safe variant on Linux).
            shutil.rmtree(target.name, dir_fd=folder_fd)
        else:
            os.unlink(target.name, dir_fd=folder_fd)
        with contextlib.suppress(OSError):
            os.fsync(folder_fd)
    finally:
        os.close(folder_fd)


def _remove_folders(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _rename(workspace: Workspace, source: Path, destination: Path, *, replace: bool) -> None:
    """Rename through descriptors on both folders, the destination's made if missing."""
    created: list[Path] = []
    try:
        source_fd = _open_folder(workspace, source.parent, [])
        try:
            target_fd = _open_folder(workspace, destination.parent, created)
            try:
                # Checked again on the descriptors, just before the rename: the target still free.
                if not replace and _present(destination.name, target_fd):
                    raise ExecutionError("something appeared at the destination")
                os.rename(source.name, destination.name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
                for fd in (source_fd, target_fd):
                    with contextlib.suppress(OSError):
                        os.fsync(fd)
            finally:
                os.close(target_fd)
        finally:
            os.close(source_fd)
    except BaseException:
        _remove_folders(created)
        raise


def _make_entry(workspace: Workspace, target: Path, link: str | None) -> Undo:
    """Make the link to `link` (or with None the empty folder) at `target`; returns how to remove it."""
    created: list[Path] = []
    folder_fd = _open_folder(workspace, target.parent, created)
    try:
        if link is None:
            os.mkdir(target.name, 0o777, dir_fd=folder_fd)
        else:
            os.symlink(link, target.name, dir_fd=folder_fd)
        with contextlib.suppress(OSError):
            os.fsync(folder_fd)
    except BaseException:
        _remove_folders(created)
        raise
    finally:
        os.close(folder_fd)

    def remove() -> None:
        remove_fd = _open_folder(workspace, target.parent, [])
        try:
            os.rmdir(target.name, dir_fd=remove_fd) if link is None else os.unlink(
                target.name, dir_fd=remove_fd
            )
        finally:
            os.close(remove_fd)
        _remove_folders(created)

    return remove


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


def _present(name: str, folder_fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=folder_fd)
    except FileNotFoundError:
        return False
    return True
