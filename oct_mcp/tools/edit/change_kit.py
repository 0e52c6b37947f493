"""What a file-writing tool needs to propose a change: the file as it is now, and the plan's shape.

A write tool never writes: its plan proposes `PathChange`s, and `execution.changes` checks and
applies them for every tool alike.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Final, Protocol

from oct_mcp.deadline import Deadline
from oct_mcp.errors import FileTooLargeError, PathRefusedError
from oct_mcp.execution.changes import ChangePlan, Proposal
from oct_mcp.execution.checkpoints import Checkpoint, record_paths_before
from oct_mcp.file_screen import BINARY_SNIFF_BYTES
from oct_mcp.preview import ABSENT
from oct_mcp.spec import ToolEnv
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace, read_at_most

__all__ = [
    "EDIT_READ_MAX_BYTES",
    "CommandCheckpoint",
    "ExistingFile",
    "digest_of",
    "named_if_other",
    "plan_change",
    "read_existing",
]

# Files read to diff or to patch; a larger one is refused (a patch) or replaced without a diff.
EDIT_READ_MAX_BYTES: Final = 8 * 1_048_576


class DryRunParams(Protocol):
    @property
    def dry_run(self) -> bool | None: ...


Propose = Callable[[Workspace, Any, Deadline], "Proposal | ToolResult"]


def plan_change(propose: Propose, params: DryRunParams, env: ToolEnv) -> ChangePlan:
    """The tool's plan: propose its changes in a thread; a dry run by its own dry_run, else the gate's."""
    return ChangePlan(
        partial(propose, env.workspace, params, env.deadline), dry_run=env.dry_run_for(params.dry_run)
    )


@dataclass(frozen=True, slots=True)
class ExistingFile:
    data: bytes
    mode: int

    @property
    def text(self) -> str | None:
        """The content as text, or None for a binary or non-UTF-8 file."""
        if b"\x00" in self.data[:BINARY_SNIFF_BYTES]:
            return None
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


def read_existing(workspace: Workspace, target: Path) -> ExistingFile | None:
    """What is at `target` now: None for nothing; refused for a folder or anything but a file.

    Raises:
        PathRefusedError: A folder, a device, a FIFO, a socket.
        FileTooLargeError: Over the read limit.
    """
    try:
        info = target.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PathRefusedError("the path cannot be opened") from exc
    if stat.S_ISDIR(info.st_mode):
        raise PathRefusedError("the path is a folder; only files can be written")
    if not stat.S_ISREG(info.st_mode):
        raise PathRefusedError("the path is not a regular file")
    fd = workspace.open_regular_file(str(target))
    try:
        opened = os.fstat(fd)
        mode = stat.S_IMODE(opened.st_mode)
        data = read_at_most(fd, EDIT_READ_MAX_BYTES, opened.st_size)
    finally:
        os.close(fd)
    if len(data) > EDIT_READ_MAX_BYTES:
        raise FileTooLargeError(f"the file is over the edit limit of {EDIT_READ_MAX_BYTES} bytes")
    return ExistingFile(data, mode)


def digest_of(existing: ExistingFile | None) -> str:
    """What a change and its preview pin a target to: its content's sha256, or ABSENT for no file."""
    return ABSENT if existing is None else "sha256:" + hashlib.sha256(existing.data).hexdigest()


def named_if_other(workspace: Workspace, requested: str, relative: str) -> str | None:
    """The path as the call named it, relative to the root, where a link inside made it land elsewhere.

    The protected-path rules judge that name too: `.vscode` linked to `settings/` is still `.vscode`
    to the IDE that reads it.
    """
    lexical = os.path.normpath(os.path.join(workspace.root, requested))
    named = os.path.relpath(lexical, workspace.root)
    return None if named == relative else named


class CommandCheckpoint:
    """The checkpoint of the files a command is about to change in the work tree: recorded before
    it runs (what the files were), settled after it (what it left), so oct_undo can put them back
    (what a git switch or restore replaced, what ruff rewrote). git's own state (HEAD, the index)
    is not in it."""

    def __init__(self, env: ToolEnv, tool: str) -> None:
        self._env, self._tool = env, tool
        self._recorded: Checkpoint | None = None
        self._settled: Checkpoint | None = None

    def before(self, paths: Sequence[str]) -> None:
        """Raises: ExecutionError: the checkpoint could not be written; the command has not run."""
        store = self._env.checkpoints
        if store is not None and paths:
            self._recorded = record_paths_before(
                store, self._env.workspace.root, paths, tool=self._tool, call_id=self._env.call_id
            )

    def settle(self) -> None:
        store, recorded = self._env.checkpoints, self._recorded
        if store is not None and recorded is not None:
            self._settled = store.settle(recorded, self._env.workspace.root)

    def after_failure(self) -> str | None:
        """`CommandPlan.after_failure`: settled all the same, so what the command changed can be undone."""
        try:
            self.settle()
        except OSError as exc:
            return f"its changes could not be checkpointed ({exc.strerror or type(exc).__name__})"
        if self._settled is None:
            return None
        return f"checkpoint {self._settled.id}: oct_undo can put these files back"

    def noted(self, result: ToolResult) -> ToolResult:
        if self._settled is None:
            return result
        note = f"\n(checkpoint {self._settled.id}: oct_undo can put these files back)"
        return replace(result, text=result.text + note, checkpoint=self._settled.id)
