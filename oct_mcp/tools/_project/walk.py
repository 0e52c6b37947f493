"""Walking the project as its developer sees it: sorted, git's ignore rules (the user's global excludes
file, .git/info/exclude, each .gitignore) respected, `.git` and environment folders skipped, symlinks
not followed, every folder and file opened relative to its parent's descriptor."""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
import os
import stat
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, TypeAlias

import pathspec
import re2  # type: ignore[import-untyped]
from pydantic import StringConstraints

from oct_mcp.deadline import Deadline
from oct_mcp.tools._project.ignores import ENVIRONMENT_FOLDERS, user_excludes_file
from oct_mcp.types import WithheldPaths
from oct_mcp.workspace import descriptor_is_inside, read_at_most

__all__ = [
    "GLOB_MAX_LENGTH",
    "FolderRun",
    "Glob",
    "ProjectWalk",
    "WalkedEntry",
    "folder_prefix",
    "glob_matcher",
]

GLOB_MAX_LENGTH: Final = 256
_IGNORE_FILE_MAX_BYTES: Final = 1_048_576
_SCREEN_MAX_MEMORY: Final = 8 * 1_048_576
_SKIPPED: Final = ENVIRONMENT_FOLDERS | {".git"}
# Each folder on the way down holds a descriptor: a deeper tree would run the process out of them.
WALK_DEPTH_MAX: Final = 128
_FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading must not hang the server.
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_NAME: Final = operator.attrgetter("name")

Glob = Annotated[str, StringConstraints(min_length=1, max_length=GLOB_MAX_LENGTH, pattern=r"^[^\x00-\x1f]*$")]
"""A pattern in .gitignore syntax ('*.py', 'src/**/*.ts'), matched against paths relative to a folder."""


def folder_prefix(relative: str) -> str:
    """What every path below a folder (given from the root, `.` for the root) starts with."""
    return "" if relative == "." else relative + "/"


def glob_matcher(glob: str | None) -> pathspec.GitIgnoreSpec | None:
    """The matcher for a `Glob` field, or None when no glob was given."""
    return pathspec.GitIgnoreSpec.from_lines([glob]) if glob else None


@dataclass(frozen=True, slots=True)
class _IgnoreFile:
    prefix: str
    """The file's folder as a path from the root ending in `/` (`` for the root)."""
    spec: pathspec.GitIgnoreSpec
    screen: Any
    """One RE2 expression over a folder's entries, a line each, that matches in every line some
    pattern of the file matches (None: each entry is checked alone). Only those lines are checked
    one by one: one call for a folder instead of one an entry, where pathspec's call is most of
    a walk's time."""

    def verdicts(self, below: str, keys: list[str], ascii_only: bool) -> Iterator[tuple[int, bool]]:
        """(index, include) for each path `below + key` some pattern matches, the last matching
        pattern deciding.

        `below` is the folder's path from this file's folder (`` or ending in `/`), `keys` its
        entries' names, a folder's with a trailing `/`.
        """
        check = self.spec.check_file
        if self.screen is None or not ascii_only:
            for index, key in enumerate(keys):
                include = check(below + key).include
                if include is not None:
                    yield index, include
            return
        # ASCII without line breaks (the caller checked): one byte a character, one line a path.
        text = (below + ("\n" + below).join(keys)).encode("ascii")
        # Matches come in order: each one's line is counted on from the last's, once over the text.
        line, counted, last = 0, 0, -1
        for match in self.screen.finditer(text):
            start = match.start()
            line += text.count(b"\n", counted, start)
            counted = start
            if line == last:
                continue
            last = line
            include = check(below + keys[line]).include
            if include is not None:
                yield line, include


def _screen(spec: pathspec.GitIgnoreSpec) -> Any:
    sources: list[str] = []
    for pattern in spec.patterns:
        if pattern.include is None:
            continue
        regex = getattr(pattern.regex, "pattern", None)
        if not isinstance(regex, str):
            return None
        # The directory marker's group, named the same in every pattern, is only a marker here.
        sources.append("(?:" + regex.replace("(?P<ps_d>", "(?:") + ")")
    options = re2.Options()
    options.log_errors = False
    # A pattern matches within one line, as it would within one path: `[^/]` never takes a line break.
    options.never_nl = True
    options.max_mem = _SCREEN_MAX_MEMORY
    try:
        return re2.compile(("(?m)" + "|".join(sources)).encode("utf-8"), options)
    except re2.error:
        return None


@dataclass(frozen=True, slots=True)
class _IgnoreRules:
    """The ignore files that apply in one folder, outermost first."""

    files: tuple[_IgnoreFile, ...]

    def ignored(self, prefix: str, keys: list[str]) -> list[bool]:
        """Whether each entry of the folder at `prefix` (given by its sort key, `name/` for a folder)
        is ignored or skipped."""
        if not keys:
            return []
        joined = "\n".join(keys)
        # ASCII without line breaks: checked once on the joined keys (a line break in a key adds one).
        ascii_only = joined.isascii() and joined.count("\n") == len(keys) - 1
        # A `/` ends a folder's key, and is in no name: without one, no folder to skip.
        if "/" in joined:
            ignored = [key[-1] == "/" and key[:-1] in _SKIPPED for key in keys]
        else:
            ignored = [False] * len(keys)
        # Git's precedence: a deeper file's rules override the outer ones; within one file, the last match.
        decided: dict[int, bool] = {}
        for rules in self.files:
            below = prefix[len(rules.prefix) :]
            decided.update(rules.verdicts(below, keys, ascii_only and below.isascii() and "\n" not in below))
        for index, include in decided.items():
            ignored[index] = ignored[index] or include
        return ignored

    def adding(self, prefix: str, parsed: _Parsed | None) -> _IgnoreRules:
        return self if parsed is None else _IgnoreRules((*self.files, _IgnoreFile(prefix, *parsed)))


_Parsed: TypeAlias = tuple[pathspec.GitIgnoreSpec, Any]
"""An ignore file's rules and their screen (`_IgnoreFile`)."""


def _parse_rules(data: bytes) -> _Parsed | None:
    """None for a file of comments and blank lines: it decides nothing, and costs nothing a folder."""
    spec = pathspec.GitIgnoreSpec.from_lines(data.decode("utf-8", errors="replace").splitlines())
    if all(pattern.include is None for pattern in spec.patterns):
        return None
    return spec, _screen(spec)


# Keyed by the file's bytes, so never stale: each page of a listing reads the same files again, and
# parsing and compiling them cost more than the reading. Small files only, to bound the memory.
_parse_small_rules: Final = functools.lru_cache(maxsize=512)(_parse_rules)
_CACHED_RULES_MAX_BYTES: Final = 65_536


def _parse_ignore_file(fd: int) -> _Parsed | None:
    """The rules of an open ignore file, which this closes; None unless it is a regular file of sane size."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _IGNORE_FILE_MAX_BYTES:
            return None
        # Not one read of the limit: that allocates a megabyte for a file of a few lines, every page.
        data = read_at_most(fd, _IGNORE_FILE_MAX_BYTES, info.st_size)[:_IGNORE_FILE_MAX_BYTES]
    except OSError:
        return None
    finally:
        os.close(fd)
    return _parse_small_rules(data) if len(data) <= _CACHED_RULES_MAX_BYTES else _parse_rules(data)


def _read_ignore_file_at(folder_fd: int, *names: str) -> _Parsed | None:
    """The rules of the ignore file at `names` below an open folder, none of them followed as a symlink
    (a symlinked .gitignore could point anywhere on the machine)."""
    opened: list[int] = []
    try:
        current = folder_fd
        for name in names[:-1]:
            current = os.open(name, _FOLDER_FLAGS, dir_fd=current)
            opened.append(current)
        fd = os.open(names[-1], _FILE_FLAGS, dir_fd=current)
    except OSError:
        return None
    finally:
        for fd_opened in opened:
            os.close(fd_opened)
    return _parse_ignore_file(fd)


def _user_rules() -> _Parsed | None:
    user_file = user_excludes_file()
    if user_file is None:
        return None
    try:
        fd = os.open(user_file, _FILE_FLAGS)
    except OSError:
        return None
    return _parse_ignore_file(fd)


def _sorted_entries(
    folder_fd: int, prefix: str, start_at: str | None
) -> tuple[list[str], list[os.DirEntry[str]]]:
    """A folder's entries in the order git sorts paths, and their sort keys (a folder's is `name/`).

    In a folder on the way to `start_at`, the entries whose paths all sort before it are left out.
    """
    try:
        with os.scandir(folder_fd) as scan:
            keyed = [
                (entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name, entry)
                for entry in scan
            ]
    except OSError:
        return [], []
    keyed.sort(key=operator.itemgetter(0))
    keys = list(map(operator.itemgetter(0), keyed))
    entries = list(map(operator.itemgetter(1), keyed))
    if start_at is not None and start_at.startswith(prefix):
        # Before the name on the way to `start_at`: a file before it, or a folder whose `name/` is.
        first = bisect.bisect_left(keys, start_at[len(prefix) :].split("/", 1)[0])
        del keys[:first], entries[:first]
    return keys, entries


def _open_folder_at(parent_fd: int, name: str, root: Path) -> int | None:
    """A folder opened below an open one, not through a symlink; None if that cannot be done safely."""
    try:
        fd = os.open(name, _FOLDER_FLAGS, dir_fd=parent_fd)
    except OSError:
        # ELOOP, ENOTDIR: swapped for a symlink or a file since it was listed; EACCES: unreadable.
        return None
    # Cheap, once a folder: a folder moved out of the tree while the walk held its parent is not read.
    # (Moving one out needs write access outside the project, which no sandboxed tool has.)
    if not descriptor_is_inside(fd, root):
        os.close(fd)
        return None
    return fd


_Segment: TypeAlias = "list[os.DirEntry[str]] | os.DirEntry[str]"
"""What a folder holds, in order: a run of entries that are not folders, or one folder."""
_Folder: TypeAlias = tuple[int, str, _IgnoreRules, list[_Segment]]
FolderRun: TypeAlias = tuple[int, str, list[os.DirEntry[str]]]
"""Entries of one folder that follow each other in the walk, none a folder: the folder's open
descriptor (open only until the walk moves on), its path prefix from the root (`folder_prefix`),
and the entries."""


@dataclass(slots=True)
class WalkedEntry:
    """One entry the walk found that is not a folder, and the open folder it sits in.

    Not frozen, to be built fast (one an entry: a frozen dataclass takes four times as long).
    """

    path: str
    """From the project root, POSIX."""
    entry: os.DirEntry[str]
    folder_fd: int
    """Open only until the walk moves on. The walk reached it from the root one name at a time without
    following a symlink, so what `file_screen.open_regular_at` opens below it is inside the project
    whatever was swapped on the way."""


@dataclass
class ProjectWalk:
    """Files under a folder in sorted path order, skipping ignored paths and `.git`, never following symlinks.

    Environment and cache folders (`.venv`, `node_modules`, `__pycache__`, ...) below `folder` are
    skipped, ignored by git or not: a listing of them drowns the project. Starting in one lists it.

    Yields a `WalkedEntry` for every entry that is not a folder (files, symlinks, and the rest), in
    the order of their paths as strings. With `start_at` (a path from the root), only paths that
    sort at or after it: the folders wholly before it are not read again, so a page resumes where
    the last stopped. Stops after `limit` entries of any kind, ignored ones included, or once `deadline`
    has passed, or below `depth_max` folders, and says so in `stopped_early`.
    """

    root: Path
    folder: Path
    limit: int
    deadline: Deadline | None = None
    start_at: str | None = None
    withheld: WithheldPaths | None = None
    """The paths the rules deny the call: left out, as ignored ones are (`oct_mcp.rules`)."""
    depth_max: int = WALK_DEPTH_MAX
    """The deepest folder the walk enters; a deeper one stops it early."""
    stopped_early: bool = False
    _seen: int = field(default=0, init=False, repr=False)

    def __iter__(self) -> Iterator[WalkedEntry]:
        runs = self._runs()
        try:
            for fd, prefix, run in runs:
                for entry in run:
                    self._seen += 1
                    if self._seen > self.limit or (self.deadline is not None and self.deadline.passed()):
                        self.stopped_early = True
                        return
                    yield WalkedEntry(prefix + entry.name, entry, fd)
        finally:
            runs.close()

    def runs(self) -> Generator[FolderRun, None, None]:
        """The entries `__iter__` gives, a folder's run of them at a time: a caller's loop over a run
        is tighter than one an entry. The same limit; the deadline is checked once a run."""
        runs = self._runs()
        try:
            for fd, prefix, run in runs:
                room = self.limit - self._seen
                if room <= 0 or (self.deadline is not None and self.deadline.passed()):
                    self.stopped_early = True
                    return
                self._seen += len(run)
                if len(run) <= room:
                    yield fd, prefix, run
                    continue
                yield fd, prefix, run[:room]
                self.stopped_early = True
                return
        finally:
            runs.close()

    def _runs(self) -> Generator[FolderRun, None, None]:
        try:
            root_fd = os.open(self.root, _FOLDER_FLAGS)
        except OSError:
            return
        # The folders held open, the start folder first: (descriptor, path prefix, rules, segments left,
        # last first). The walk closes each folder it leaves; what is still open when it ends, here.
        stack: list[_Folder] = []
        try:
            start = self._start(root_fd)
            if start is not None:
                stack.append(start)
                yield from self._walk(stack)
        finally:
            for fd, *_ in stack:
                if fd != root_fd:
                    os.close(fd)
            os.close(root_fd)

    def _start(self, root_fd: int) -> _Folder | None:
        """Open `folder` from the root one name at a time, gathering the rules in force there, as git
        orders them: the user's global excludes file, .git/info/exclude, then each .gitignore down."""
        rules = _IgnoreRules(()).adding("", _user_rules())
        rules = rules.adding("", _read_ignore_file_at(root_fd, ".git", "info", "exclude"))
        rules = rules.adding("", _read_ignore_file_at(root_fd, ".gitignore"))
        fd, prefix = root_fd, ""
        for part in self.folder.relative_to(self.root).parts:
            child = _open_folder_at(fd, part, self.root)
            if fd != root_fd:
                os.close(fd)
            if child is None:
                return None
            fd, prefix = child, f"{prefix}{part}/"
            rules = rules.adding(prefix, _read_ignore_file_at(fd, ".gitignore"))
        # Its entries are checked against `start_at` even when it is not on the way there (a cursor of
        # another listing): then they all sort before it, or all after.
        segments = self._listing(fd, prefix, rules, self.start_at is not None)
        if segments is None:
            if fd != root_fd:
                os.close(fd)
            return None
        return fd, prefix, rules, segments

    def _listing(self, fd: int, prefix: str, rules: _IgnoreRules, check_start: bool) -> list[_Segment] | None:
        """What the walk visits in a folder, last first; None when the walk stops there.

        With `check_start`, the entries that sort before `start_at` are left out: only in the start
        folder and the folders on the way to `start_at` can some. The entries left out count as
        seen: those before `start_at` stop the walk when they pass the limit, as if each had been
        visited; ignored ones are only counted.
        """
        keys, entries = _sorted_entries(fd, prefix, self.start_at)
        ignored = rules.ignored(prefix, keys)
        if self.withheld is not None:
            ignored = self._withholding(prefix, entries, ignored, self.withheld)
        if any(ignored):
            self._seen += sum(ignored)
            kept = [not left_out for left_out in ignored]
            keys = list(itertools.compress(keys, kept))
            entries = list(itertools.compress(entries, kept))
        start_at = self.start_at
        if start_at is not None and check_start and keys:
            # The entries before it lead the folder's: past the first after it, all are after it.
            skipped = 0
            while skipped < len(keys) and _sorts_before(prefix + keys[skipped], start_at):
                skipped += 1
            if skipped:
                del keys[:skipped], entries[:skipped]
                self._seen += skipped
                if self._seen > self.limit or (self.deadline is not None and self.deadline.passed()):
                    self.stopped_early = True
                    return None
        # A `/` ends a folder's key, and is in no name: without one, the folder is one run.
        if "/" not in "".join(keys):
            return [entries] if entries else []
        segments: list[_Segment] = []
        start = 0
        for index in [index for index, key in enumerate(keys) if key[-1] == "/"]:
            if index > start:
                segments.append(entries[start:index])
            segments.append(entries[index])
            start = index + 1
        if start < len(entries):
            segments.append(entries[start:] if start else entries)
        segments.reverse()
        return segments

    def _withholding(
        self,
        prefix: str,
        entries: list[os.DirEntry[str]],
        ignored: list[bool],
        withheld: WithheldPaths,
    ) -> list[bool]:
        """`ignored` (changed in place), with the entries the rules deny marked too: a folder whole,
        and a symlink by where it leads as well (a link to a denied file names it under another name)."""
        marked = ignored
        for index in withheld.hidden_among(prefix, list(map(_NAME, entries))):
            marked[index] = True
        links = [index for index, entry in enumerate(entries) if entry.is_symlink() and not marked[index]]
        if links:
            inside = str(self.root).rstrip("/") + "/"
            for index in links:
                target = os.path.realpath(inside + prefix + entries[index].name)
                if target.startswith(inside) and withheld.hides(target[len(inside) :]):
                    marked[index] = True
        return marked

    def _walk(self, stack: list[_Folder]) -> Iterator[FolderRun]:
        while True:
            fd, prefix, rules, segments = stack[-1]
            if not segments:
                if len(stack) == 1:
                    return
                stack.pop()
                os.close(fd)
                continue
            segment = segments.pop()
            if isinstance(segment, list):
                yield fd, prefix, segment
                continue
            self._seen += 1
            if self._seen > self.limit or (self.deadline is not None and self.deadline.passed()):
                self.stopped_early = True
                return
            if len(stack) >= self.depth_max:
                self.stopped_early = True
                continue
            child = _open_folder_at(fd, segment.name, self.root)
            if child is None:
                continue
            # Depth first, in name order: the listing comes out sorted by path, as git sorts it.
            below = prefix + segment.name + "/"
            child_rules = rules.adding(below, _read_ignore_file_at(child, ".gitignore"))
            on_the_way = self.start_at is not None and self.start_at.startswith(below)
            child_segments = self._listing(child, below, child_rules, on_the_way)
            if child_segments is None:
                os.close(child)
                return
            stack.append((child, below, child_rules, child_segments))


def _sorts_before(key_path: str, start_at: str) -> bool:
    """Whether every path at `key_path` (a folder's ending in `/`) sorts before `start_at`."""
    if key_path[-1] == "/":
        # Every path under it sorts before `start_at` unless `start_at` is under it.
        return key_path < start_at and not start_at.startswith(key_path)
    return key_path < start_at
