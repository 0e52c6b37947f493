"""What every git write checks before and after git runs: the files the rules withhold, the
approved targets and commit, and entries the sandbox's backend cannot make or remove."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from oct_mcp.backends import EntryRights
from oct_mcp.errors import (
    ExecutionError,
    PolicyError,
    SandboxUnavailableError,
    TargetChangedError,
)
from oct_mcp.execution.protected_walk import SNAPSHOT_MAX_ENTRIES, ProjectTooLargeError, snapshot_protected
from oct_mcp.preview import TargetState, commit_target
from oct_mcp.spec import RunResult, ToolEnv

__all__ = [
    "approved_only",
    "bound_commit",
    "no_withheld_staged",
    "no_withheld_switched",
    "refuse_fixed_entries",
    "refuse_unreplaceable",
]


def _no_withheld(env: ToolEnv, paths: Sequence[str], *, which: str, fix: str) -> None:
    """Refuse a commit or a switch that takes files the rules withhold from the call: its question and
    result could not show them, and a human must see every file a change takes.

    Raises:
        PolicyError: Naming how many, not which.
    """
    withheld = env.withheld
    count = 0 if withheld is None else sum(1 for path in paths if withheld.hides(path))
    if count:
        raise PolicyError(
            f"{count} {which} are paths the rules keep from this call, and the change must show every "
            f"file it takes, so nothing was done; {fix}"
        )


def no_withheld_staged(env: ToolEnv, staged: Sequence[str]) -> None:
    _no_withheld(
        env,
        staged,
        which="staged file(s)",
        fix="unstage them in a terminal (git restore --staged PATH) or commit there",
    )


def no_withheld_switched(env: ToolEnv, changed: Sequence[str]) -> None:
    _no_withheld(env, changed, which="file(s) the switch would change", fix="switch in a terminal")


def approved_only(paths: Sequence[str], approved: tuple[TargetState, ...] | None, refusal: str) -> None:
    """Refuse a write to a path the preview the human approved did not show; no check without one.

    Raises:
        TargetChangedError: With `refusal`, which says what was left undone.
    """
    if approved is None:
        return
    shown = {target.path for target in approved if not target.is_commit}
    if any(path not in shown for path in paths):
        raise TargetChangedError(refusal)


def bound_commit(env: ToolEnv, ref: str, commit: str | None, refusal: str) -> None:
    """Refuse a consented write unless `ref` still names the commit the approved question showed.

    Raises:
        TargetChangedError: With `refusal`, which says what was left undone.
    """
    if env.approved_targets is not None and commit_target(ref, commit) not in env.approved_targets:
        raise TargetChangedError(refusal)


# A switch or restore whose git would make or remove an entry where the backend allows none is
# refused before git runs. git does not stop there: it warns, carries on with the other files and,
# for a switch, exits 0 and moves HEAD, leaving the files it could not replace as they were (a
# work tree neither of the old branch nor of the new). Repairing afterwards would need the very
# rights the run lacked, or writes by the server outside the sandbox, and git's exit code does not
# even say when; a right on the folder itself would, under Landlock's rules on a folder's whole
# contents, be one on every entry of the root, `.git` included, which the check of protected paths
# after the run only notices once it is done. So the backend says where it can make entries
# (`ToolEnv.entry_rights`), and the plan keeps to that.
def refuse_fixed_entries(env: ToolEnv, changed: Sequence[str], done: str) -> None:
    """Raises:
    SandboxUnavailableError: Changing one of the files needs an entry made or removed in a folder
        where the sandbox's backend lets a run only write into files; nothing has run yet.
    """
    root = env.workspace.root
    rights = env.entry_rights
    # Without CLEAR_FOLDERS only the protected paths themselves are fixed, refused by rule before this.
    protected = () if rights is EntryRights.WRITABLE_FOLDERS else _protected_paths(root)
    stuck = [
        path
        for path in changed
        if any(rights.fixed(folder, root, protected) for folder in _entry_folders(root, path))
    ]
    if stuck:
        shown = ", ".join(stuck[:20]) + (f" and {len(stuck) - 20} more" if len(stuck) > 20 else "")
        raise SandboxUnavailableError(
            f"this sandbox backend cannot replace {len(stuck)} of the files the change touches: {shown}; "
            "it makes and removes files only in folders below the project root that hold no protected "
            f"path, so nothing was {done}: use git in a terminal, or a sandbox backend that binds the "
            "project whole (bubblewrap)"
        )


def _entry_folders(root: Path, relative: str) -> list[Path]:
    """The folders git makes or removes an entry in to replace, make or delete `relative`: the one
    it lies in, and each above that git must make first (missing from the work tree, or no folder).

    A folder a deletion leaves empty is removed too, but git leaves it, unsaid, where it cannot:
    an empty folder, which git does not track, and no file half-changed.
    """
    folders: list[Path] = []
    folder = (root / relative.removesuffix("/")).parent
    while True:
        folders.append(folder)
        if folder == root or (folder.is_dir() and not folder.is_symlink()):
            return folders
        folder = folder.parent


def _protected_paths(root: Path) -> tuple[Path, ...]:
    """The protected paths the sandbox keeps read-only, as it finds them before a writable run.

    Raises:
        SandboxUnavailableError: The project is too large to walk for them, as the sandbox would say.
    """
    try:
        return snapshot_protected(root).bind_paths(root)
    except ProjectTooLargeError:
        raise SandboxUnavailableError(
            f"the project holds more than {SNAPSHOT_MAX_ENTRIES} files and folders, more than the check "
            "of protected paths around a writable run walks; use git in a terminal"
        ) from None


# What git says of a work-tree file it could not replace (entry.c, unpack-trees.c); a switch then
# still exits 0, since checkout takes only unpack_trees' -1 for a failure, and its -2 for this not.
_UNREPLACED: Final = (b"unable to unlink", b"unable to create file", b"cannot create directory")


def refuse_unreplaceable(run: RunResult, done: str) -> None:
    """Raises:
    ExecutionError: git said it could not replace a work-tree file, which `refuse_fixed_entries`
        should have foreseen; whatever git's exit code, the call says the change is incomplete.
    """
    if any(said in run.stderr for said in _UNREPLACED):
        raise ExecutionError(
            f"git could not replace a file the sandbox keeps, so the work tree is only partly {done}: "
            "oct_git_status shows what is left, and git in a terminal finishes it"
        )
