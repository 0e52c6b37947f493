"""Where a project's repository is: its git folder, checked to be the project's own (no discovery
upwards, no `core.worktree` or `commondir` elsewhere)."""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oct_mcp.errors import GitLayoutRefusedError, NotFoundError
from oct_mcp.tools._project.programs import find_server_program

__all__ = ["NOT_A_REPOSITORY", "GitLayout", "git_layout", "worktree_git_folders"]

_LINK_FILE_MAX_BYTES: Final = 4_096


_CONFIG_READ_TIMEOUT_SECONDS: Final = 10


NOT_A_REPOSITORY: Final = (
    "the project is not a git repository (no .git at the project root); git init makes one"
)


_NOT_A_CHECKOUT_OF_IT: Final = (
    "the project's .git file names a git folder outside the project that is no linked worktree or "
    "submodule of this checkout (it must sit under worktrees/ or modules/ of a repository and name "
    "this checkout back); git was not run"
)


@dataclass(frozen=True, slots=True)
class GitLayout:
    """This checkout's repository as the server found it: git is told where it is, never left to look."""

    git_dir: Path
    """Passed as `--git-dir`: the `.git` folder, or the folder a `.git` file names."""
    common_dir: Path
    """Passed as GIT_COMMON_DIR, so git follows no `commondir` file of its own accord."""
    binds: tuple[Path, ...]
    """Git folders outside the project that the sandbox shows, read-only."""


def git_layout(root: Path) -> GitLayout:
    """Where the repository of the checkout at `root` is, checked before git runs.

    A `.git` folder, or a `.git` file naming a folder inside the project, is the project's own
    repository: its `commondir`, if any, must stay inside the project. A `.git` file naming a
    folder outside the project is accepted only as a real linked worktree (a folder under
    `<common>/worktrees/` whose `gitdir` names this `.git` back and whose `commondir` names
    `<common>`) or a real submodule (its own repository under a git folder's `modules/`, whose
    `core.worktree` names this checkout).

    Raises:
        NotFoundError: No `.git` at the project root, or a symlink there.
        GitLayoutRefusedError: Any other layout: git is not run.
    """
    project = Path(os.path.realpath(root))
    git = _dot_git(root)
    folder = Path(os.path.realpath(git)) if git.is_dir() else _gitfile_target(git)
    common = _common_dir(folder)
    if folder.is_relative_to(project):
        if not common.is_relative_to(project):
            raise GitLayoutRefusedError(
                "the project's git folder names a common git folder outside the project (commondir), "
                "which would make git read another repository; git was not run"
            )
        return GitLayout(git_dir=folder, common_dir=common, binds=())
    if common != folder:
        is_worktree = folder.parent.name == "worktrees" and folder.parent.parent == common
        if not is_worktree or _named_back(folder) != project / ".git" or not _is_repository(common):
            raise GitLayoutRefusedError(_NOT_A_CHECKOUT_OF_IT)
        return GitLayout(git_dir=folder, common_dir=common, binds=(common,))
    is_submodule = any(
        parent.name == "modules" and _is_repository(parent.parent) for parent in folder.parents
    )
    if not is_submodule or not _is_repository(folder) or _core_worktree(project, folder) != project:
        raise GitLayoutRefusedError(_NOT_A_CHECKOUT_OF_IT)
    return GitLayout(git_dir=folder, common_dir=folder, binds=(folder,))


def worktree_git_folders(root: Path) -> tuple[Path, ...]:
    """The git folders outside the project that git must read: a linked worktree's or a submodule's.

    Raises:
        NotFoundError, GitLayoutRefusedError: As `git_layout`.
    """
    return git_layout(root).binds


def _dot_git(root: Path) -> Path:
    """The `.git` at the project root: a folder, or a file naming one (worktrees, submodules).

    Raises:
        NotFoundError: There is none, or it is a symlink (which could lead anywhere).
    """
    git = root / ".git"
    try:
        info = git.lstat()
    except OSError:
        raise NotFoundError(NOT_A_REPOSITORY) from None
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        raise NotFoundError("the .git at the project root is neither a folder nor a file; git was not run")
    return git


def _gitfile_target(git: Path) -> Path:
    """The folder a `.git` file names (`gitdir: <path>`, relative to the file's folder), resolved."""
    text = _link_file(git)
    if text is None or not text.startswith("gitdir: "):
        raise GitLayoutRefusedError("the project's .git file names no git folder; git was not run")
    return Path(os.path.realpath(git.parent / text.removeprefix("gitdir: ")))


def _common_dir(folder: Path) -> Path:
    """The common git folder a git folder's `commondir` names, resolved; without one, the folder itself."""
    path = folder / "commondir"
    if not os.path.lexists(path):
        return folder
    text = _link_file(path)
    if not text:
        raise GitLayoutRefusedError("a git folder's commondir file cannot be read; git was not run")
    return Path(os.path.realpath(folder / text))


def _named_back(folder: Path) -> Path | None:
    """The `.git` file a linked worktree's folder names back (`gitdir`: absolute, or relative to it)."""
    text = _link_file(folder / "gitdir")
    return Path(os.path.realpath(folder / text)) if text else None


def _link_file(path: Path) -> str | None:
    """A one-path file as git reads it (trailing CR and LF cut); None if unreadable or not one clean path."""
    try:
        # Non-blocking, regular files only: a FIFO or a link to /dev/stdin must not hang the server.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        raw = os.read(descriptor, _LINK_FILE_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    text = os.fsdecode(raw.rstrip(b"\r\n"))
    if len(raw) > _LINK_FILE_MAX_BYTES or any(char in text for char in "\0\n\r"):
        return None
    return text


def _is_repository(folder: Path) -> bool:
    return (folder / "HEAD").is_file() and (folder / "objects").is_dir()


def _core_worktree(project: Path, folder: Path) -> Path | None:
    """Where a submodule's git folder says its checkout is (`core.worktree`), as git itself reads it."""
    try:
        completed = subprocess.run(  # fixed argv, no shell; a config file outside the project, no includes
            [
                str(find_server_program(project, "git")),
                "config",
                "--file",
                str(folder / "config"),
                "--get",
                "core.worktree",
            ],
            env={"PATH": os.defpath, "HOME": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"},
            cwd="/",
            capture_output=True,
            timeout=_CONFIG_READ_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = os.fsdecode(completed.stdout.rstrip(b"\n"))
    if completed.returncode != 0 or not value:
        return None
    return Path(os.path.realpath(folder / value))
