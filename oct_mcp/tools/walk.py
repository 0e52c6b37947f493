"""Walking the project as its developer sees it: sorted, git's ignore rules (the user's global excludes
file, .git/info/exclude, each .gitignore) respected, `.git` and environment folders skipped, symlinks
not followed."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final

import pathspec
from pydantic import StringConstraints

from oct_mcp.tools.ignores import ENVIRONMENT_FOLDERS, user_excludes_file

__all__ = ["GLOB_MAX_LENGTH", "Glob", "ProjectWalk", "glob_matcher"]

GLOB_MAX_LENGTH: Final = 256
_IGNORE_FILE_MAX_BYTES: Final = 1_048_576
_SKIPPED: Final = ENVIRONMENT_FOLDERS | {".git"}

Glob = Annotated[str, StringConstraints(min_length=1, max_length=GLOB_MAX_LENGTH, pattern=r"^[^\x00-\x1f]*$")]
"""A pattern in .gitignore syntax ('*.py', 'src/**/*.ts'), matched against paths relative to a folder."""


def glob_matcher(glob: str | None) -> pathspec.GitIgnoreSpec | None:
    """The matcher for a `Glob` field, or None when no glob was given."""
    return pathspec.GitIgnoreSpec.from_lines([glob]) if glob else None


@dataclass(frozen=True, slots=True)
class _IgnoreRules:
    """The .gitignore files that apply in one folder, outermost first, each with its own base."""

    specs: tuple[tuple[str, pathspec.GitIgnoreSpec], ...]
    """Each file's folder as a string prefix ending in `/`, and its rules."""

    def ignores(self, path: str, is_dir: bool) -> bool:
        # Git's precedence: a deeper file's rules override the outer ones; within one file, the last match.
        # Paths are cut as strings: pathlib's relative_to took most of a big tree's walk.
        verdict: bool | None = None
        for prefix, spec in self.specs:
            relative = path[len(prefix) :] + ("/" if is_dir else "")
            include = spec.check_file(relative).include
            if include is not None:
                verdict = include
        return bool(verdict)

    def entering(self, folder: Path) -> _IgnoreRules:
        spec = _read_ignore_file(folder / ".gitignore")
        return self if spec is None else _IgnoreRules((*self.specs, (_prefix(folder), spec)))


def _prefix(folder: Path) -> str:
    return str(folder).rstrip("/") + "/"


def _read_ignore_file(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        info = path.lstat()
        # Only a regular file: a symlinked .gitignore could point anywhere on the machine.
        if not stat.S_ISREG(info.st_mode) or info.st_size > _IGNORE_FILE_MAX_BYTES:
            return None
        return pathspec.GitIgnoreSpec.from_lines(
            path.read_text(encoding="utf-8", errors="replace").splitlines()
        )
    except OSError:
        return None


def _root_rules(root: Path, folder: Path) -> _IgnoreRules:
    """The rules in force in `folder`, lowest precedence first, as git orders them: the user's global
    excludes file, .git/info/exclude, then each .gitignore from the root down."""
    rules = _IgnoreRules(())
    user_file = user_excludes_file()
    for source in (user_file, root / ".git" / "info" / "exclude"):
        spec = None if source is None else _read_ignore_file(source)
        if spec is not None:
            rules = _IgnoreRules((*rules.specs, (_prefix(root), spec)))
    current = root
    rules = rules.entering(root)
    for part in folder.relative_to(root).parts:
        current = current / part
        rules = rules.entering(current)
    return rules


def _sorted_entries(folder: Path) -> Iterator[os.DirEntry[str]]:
    """A folder's entries in the order git sorts paths: a folder's name counts as `name/`."""
    try:
        with os.scandir(folder) as scan:
            entries = list(scan)
    except OSError:
        return iter(())
    return iter(sorted(entries, key=lambda e: e.name + "/" if e.is_dir(follow_symlinks=False) else e.name))


@dataclass
class ProjectWalk:
    """Files under a folder in sorted path order, skipping ignored paths and `.git`, never following symlinks.

    Environment and cache folders (`.venv`, `node_modules`, `__pycache__`, ...) below `folder` are
    skipped, ignored by git or not: a listing of them drowns the project. Starting in one lists it.

    Yields `(path, entry)` for every entry that is not a folder (files, symlinks, and the rest).
    Stops after `limit` entries of any kind, ignored ones included, or at `deadline` (a
    `time.monotonic()` value), and says so in `stopped_early`.
    """

    root: Path
    folder: Path
    limit: int
    deadline: float | None = None
    stopped_early: bool = False

    def __iter__(self) -> Iterator[tuple[Path, os.DirEntry[str]]]:
        stack = [(_sorted_entries(self.folder), _root_rules(self.root, self.folder))]
        seen = 0
        while stack:
            entries, rules = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            seen += 1
            if seen > self.limit or (self.deadline is not None and time.monotonic() > self.deadline):
                self.stopped_early = True
                return
            is_dir = entry.is_dir(follow_symlinks=False)
            if (is_dir and entry.name in _SKIPPED) or rules.ignores(entry.path, is_dir):
                continue
            path = Path(entry.path)
            if is_dir:
                # Depth first, in name order: the listing comes out sorted by path, as git sorts it.
                stack.append((_sorted_entries(path), rules.entering(path)))
            else:
                yield path, entry
