"""The check of protected paths around a writable command run: every protected path of the project
fingerprinted before the run, compared after it, and what the run created there removed again (the
run's settle step). The rules themselves are `oct_mcp.protected`'s."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from oct_mcp.protected import (
    GIT_DIRECTORY_RULE,
    GIT_RULE,
    PROTECTED_RULES,
    ProtectedRule,
    is_git_directory,
    rule_for_parts,
)

__all__ = [
    "SNAPSHOT_MAX_DEPTH",
    "SNAPSHOT_MAX_ENTRIES",
    "Fingerprint",
    "ProjectTooLargeError",
    "ProtectedChanges",
    "ProtectedSnapshot",
    "settle_protected_paths",
    "snapshot_protected",
]

# What git itself rewrites inside a repository's folder as it works (an IDE's `git status` on the
# host, a fetch): left out of the comparison after a writable run, which would otherwise fail on
# them. None of them makes git run a program.
_GIT_CHURN: Final = frozenset(
    {"objects", "logs", "lfs", "index", "FETCH_HEAD", "ORIG_HEAD", "packed-refs", "refs", "COMMIT_EDITMSG"}
)

SNAPSHOT_MAX_ENTRIES: Final = 200_000
"""Files and folders the protected-path walk visits before it gives up (and the run is refused)."""
SNAPSHOT_MAX_DEPTH: Final = 256
"""Folders deep the walk goes (it holds one descriptor per level); a folder deeper is not checked,
which fails the run as a folder it cannot list does."""
# A folder is opened without following a link, and never blocks: O_DIRECTORY refuses a FIFO
# before the kernel would wait for its writer.
_FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# What an owner needs on a folder for the check to list it (read) and look inside (search).
_LISTABLE: Final = stat.S_IRUSR | stat.S_IXUSR
_OWNER_ALL: Final = stat.S_IRWXU


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What identifies one entry and what changes when it is written, moved or replaced.

    Folders by identity only: their entries are compared one by one. Files by size and by
    both times as well: ctime moves on any write or rename and cannot be set back by a program.
    """

    kind: int
    device: int
    inode: int
    size: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    link: str | None = None
    links: int = field(default=1, compare=False)
    """Hard links to a file: a protected file with another name can be written through that name."""

    @classmethod
    def at(cls, folder: int, name: str) -> Fingerprint | None:
        """The entry `name` in the folder open as `folder`, not followed; None when it is gone.

        Raises:
            OSError: It is there, but cannot be looked at (no search right on the folder).
        """
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return cls._from(info, lambda: os.readlink(name, dir_fd=folder))

    @classmethod
    def _from(cls, info: os.stat_result, read_link: Callable[[], str]) -> Fingerprint:
        kind = stat.S_IFMT(info.st_mode)
        if kind == stat.S_IFDIR:
            return cls(kind, info.st_dev, info.st_ino)
        link = None
        if kind == stat.S_IFLNK:
            try:
                link = read_link()
            except OSError:
                link = ""
        return cls(
            kind,
            info.st_dev,
            info.st_ino,
            info.st_size,
            info.st_mtime_ns,
            info.st_ctime_ns,
            link,
            info.st_nlink,
        )

    @property
    def identity(self) -> tuple[int, int]:
        return self.device, self.inode


@dataclass(frozen=True, slots=True)
class ProtectedSnapshot:
    """The protected paths of a project at one moment, at any depth, and everything inside them."""

    roots: Mapping[str, ProtectedRule]
    """Each protected path not inside another one (project-relative, POSIX), and its rule."""
    entries: Mapping[str, Fingerprint]
    """The roots and every entry below them (git's own churn left out), by project-relative path."""
    unlisted: Mapping[str, str] = field(default_factory=dict)
    """Folders the walk could not list or look into (`.` for the root), and why: what they hold is
    unknown, so a protected path may hide in them."""
    unlocked: tuple[str, ...] = ()
    """Folders the walk made readable again (owner rwx) to list them: only a walk asked to unlock."""

    @property
    def linked(self) -> tuple[str, ...]:
        """Protected files with another name (a hard link), which a run could write them through:
        a read-only bind keeps a path, not the file behind every name it has."""
        return tuple(
            sorted(
                name for name, entry in self.entries.items() if entry.kind == stat.S_IFREG and entry.links > 1
            )
        )

    def bind_paths(self, root: Path) -> tuple[Path, ...]:
        """The roots a sandbox keeps read-only, symlinks (which lead elsewhere) left out.

        Repositories first, then the shallowest: a sandbox that can mount only so many keeps
        those whose config git runs from.
        """
        git_rules = (GIT_RULE, GIT_DIRECTORY_RULE)
        return tuple(
            root / name
            for name in sorted(
                self.roots, key=lambda name: (self.roots[name] not in git_rules, name.count("/"))
            )
            if self.entries[name].kind != stat.S_IFLNK
        )


class ProjectTooLargeError(Exception):
    """The walk met more entries than SNAPSHOT_MAX_ENTRIES."""


def snapshot_protected(
    root: Path, limit: int = SNAPSHOT_MAX_ENTRIES, *, unlock: bool = False
) -> ProtectedSnapshot:
    """Every protected path in the project, at any depth, by the rules of PROTECTED_RULES.

    One readdir per folder and no stat for an entry that is no protected path (the entry's type
    comes with readdir), so the walk costs little more than listing the tree; inside a protected
    folder each entry is fingerprinted. Every folder is opened from its parent's descriptor,
    never through a link and never by a path (no name is too long); symlinks are recorded, never
    followed. A folder it cannot open, list or look into is never skipped in silence: it is in
    `unlisted`, and the caller fails closed on it.

    Args:
        unlock: After a run: a folder of the server's user that lacks the owner's read or search
            right (a run took it away to hide what is inside) gets the owner's rights back and is
            listed; it is in `unlocked`.

    Raises:
        ProjectTooLargeError: The project holds more than `limit` entries.
    """
    walk = _Walk(limit, unlock)
    walk.run(str(root))
    return ProtectedSnapshot(
        roots=walk.roots, entries=walk.entries, unlisted=walk.unlisted, unlocked=tuple(walk.unlocked)
    )


_BY_COMPONENT: Final = {name: rule for rule in reversed(PROTECTED_RULES) for name in rule.components}
_LONGEST_PREFIX: Final = max(len(prefix) for rule in PROTECTED_RULES for prefix in rule.prefixes)


@dataclass(frozen=True, slots=True)
class _Pending:
    """A subfolder still to visit: its name, its fingerprint inside a protected root, how to walk it."""

    name: str
    expected: Fingerprint | None
    inside: bool
    git: bool


@dataclass(slots=True)
class _Frame:
    """A folder open in the walk, and its subfolders still to visit."""

    fd: int
    parts: tuple[str, ...]
    inside: bool
    """Inside a protected root: every entry is fingerprinted."""
    git: bool
    """Inside a git folder: git's churn is left out."""
    pending: list[_Pending] = field(default_factory=list)


class _Walk:
    """One walk over a project: a stack of folder descriptors, one per level, each from its parent's."""

    def __init__(self, limit: int, unlock: bool) -> None:
        self.limit = limit
        self.unlock = unlock
        self.seen = 0
        self.roots: dict[str, ProtectedRule] = {}
        self.entries: dict[str, Fingerprint] = {}
        self.unlisted: dict[str, str] = {}
        self.unlocked: list[str] = []

    def run(self, top: str) -> None:
        fd = self._open_root(top)
        if fd is None:
            return
        stack = [_Frame(fd, (), inside=False, git=False)]
        try:
            self._visit(stack[0])
            while stack:
                frame = stack[-1]
                if not frame.pending:
                    os.close(stack.pop().fd)
                    continue
                pending = frame.pending.pop()
                parts = (*frame.parts, pending.name)
                if len(parts) > SNAPSHOT_MAX_DEPTH:
                    self.unlisted["/".join(parts)] = f"more than {SNAPSHOT_MAX_DEPTH} folders deep"
                    continue
                child = self._open(frame, pending.name, "/".join(parts), pending.expected)
                if child is None:
                    continue
                stack.append(_Frame(child, parts, inside=pending.inside, git=pending.git))
                self._visit(stack[-1])
        finally:
            for frame in stack:
                os.close(frame.fd)

    def _open_root(self, top: str) -> int | None:
        for attempt in range(2):
            try:
                return os.open(top, _FOLDER_FLAGS & ~os.O_NOFOLLOW)
            except PermissionError as exc:
                if attempt or not self._unlock_root(top):
                    self.unlisted["."] = exc.strerror or "permission denied"
                    return None
            except OSError as exc:
                self.unlisted["."] = exc.strerror or "cannot be opened"
                return None
        return None

    def _open(self, frame: _Frame, name: str, relative: str, expected: Fingerprint | None) -> int | None:
        """The subfolder `name` of `frame`, opened without following a link; None when it is gone
        or cannot be opened (then it is in `unlisted`)."""
        for attempt in range(2):
            try:
                fd = os.open(name, _FOLDER_FLAGS, dir_fd=frame.fd)
            except FileNotFoundError:
                return None
            except PermissionError as exc:
                if attempt == 0 and self._unlock_entry(frame, name, relative):
                    continue
                self.unlisted[relative] = exc.strerror or "permission denied"
                return None
            except OSError as exc:
                # ELOOP, ENOTDIR: listed as a folder, now a link or a file: something changed it
                # during the walk.
                self.unlisted[relative] = exc.strerror or "cannot be opened"
                return None
            info = os.fstat(fd)
            if expected is not None and (info.st_dev, info.st_ino) != expected.identity:
                os.close(fd)
                self.unlisted[relative] = "replaced while the check read it"
                return None
            return fd
        return None

    def _visit(self, frame: _Frame) -> None:
        """List the folder open in `frame`: note its protected paths, queue the subfolders to walk."""
        relative = "/".join(frame.parts) or "."
        try:
            with os.scandir(frame.fd) as listing:
                found = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in listing]
        except OSError as exc:
            self.unlisted[relative] = exc.strerror or "cannot be listed"
            return
        self.seen += len(found)
        if self.seen > self.limit:
            raise ProjectTooLargeError
        if frame.inside:
            self._fingerprint_all(frame, found)
            return
        if frame.parts and is_git_directory(name for name, _ in found):
            info = os.fstat(frame.fd)
            self.roots[relative] = GIT_DIRECTORY_RULE
            self.entries[relative] = Fingerprint(stat.S_IFDIR, info.st_dev, info.st_ino)
            frame.inside = frame.git = True
            self._fingerprint_all(frame, found)
            return
        # The folders on the way hold no protected name (the walk stops at one): only the entry's own
        # name is looked up, and the prefixes only this near the root.
        near_root = len(frame.parts) < _LONGEST_PREFIX
        for name, is_folder in found:
            rule = _BY_COMPONENT.get(name.casefold())
            if rule is None and near_root:
                folded = (*(part.casefold() for part in frame.parts), name.casefold())
                rule = rule_for_parts(folded, is_folder=is_folder)
            if rule is None:
                if is_folder:
                    frame.pending.append(_Pending(name, None, inside=False, git=False))
                continue
            child = "/".join((*frame.parts, name))
            fingerprint = self._fingerprint(frame, name, child)
            if fingerprint is None:
                continue
            self.roots[child] = rule
            self.entries[child] = fingerprint
            if fingerprint.kind == stat.S_IFDIR:
                frame.pending.append(_Pending(name, fingerprint, inside=True, git=rule is GIT_RULE))

    def _fingerprint_all(self, frame: _Frame, found: list[tuple[str, bool]]) -> None:
        for name, _ in found:
            if frame.git and (name in _GIT_CHURN or name.endswith(".lock")):
                continue
            child = "/".join((*frame.parts, name))
            fingerprint = self._fingerprint(frame, name, child)
            if fingerprint is None:
                continue
            self.entries[child] = fingerprint
            if fingerprint.kind == stat.S_IFDIR:
                frame.pending.append(_Pending(name, fingerprint, inside=True, git=frame.git))

    def _fingerprint(self, frame: _Frame, name: str, relative: str) -> Fingerprint | None:
        for attempt in range(2):
            try:
                return Fingerprint.at(frame.fd, name)
            except PermissionError as exc:
                # The folder can be listed but not looked into (no search right).
                if attempt == 0 and self._unlock_open(frame):
                    continue
                self.unlisted["/".join(frame.parts) or "."] = exc.strerror or "permission denied"
                return None
            except OSError as exc:
                self.unlisted[relative] = exc.strerror or "cannot be looked at"
                return None
        return None

    def _unlock_root(self, top: str) -> bool:
        if not self.unlock:
            return False
        try:
            info = os.lstat(top)
        except OSError:
            return False
        if not _unlockable(info):
            return False
        os.chmod(top, stat.S_IMODE(info.st_mode) | _OWNER_ALL)
        self.unlocked.append(".")
        return True

    def _unlock_open(self, frame: _Frame) -> bool:
        """Give the folder open in `frame` its owner's rights back, when the walk may and they lack."""
        if not self.unlock:
            return False
        info = os.fstat(frame.fd)
        if not _unlockable(info):
            return False
        os.fchmod(frame.fd, stat.S_IMODE(info.st_mode) | _OWNER_ALL)
        self.unlocked.append("/".join(frame.parts) or ".")
        return True

    def _unlock_entry(self, frame: _Frame, name: str, relative: str) -> bool:
        """Give the subfolder `name` its owner's rights back, never through a link: the parent itself
        first, when it is the one that cannot be looked into."""
        if not self.unlock:
            return False
        try:
            info = os.stat(name, dir_fd=frame.fd, follow_symlinks=False)
        except PermissionError:
            return self._unlock_open(frame)
        except OSError:
            return False
        if not stat.S_ISDIR(info.st_mode) or not _unlockable(info):
            return False
        # A descriptor that names the folder without reading it (O_PATH), then its /proc entry: Linux
        # has no chmod that refuses to follow a link. Elsewhere lchmod does just that.
        if hasattr(os, "O_PATH"):
            handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=frame.fd)
            try:
                if os.fstat(handle).st_ino != info.st_ino:
                    return False
                os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(info.st_mode) | _OWNER_ALL)
            finally:
                os.close(handle)
        else:  # pragma: no cover - macOS: lchmod
            os.chmod(name, stat.S_IMODE(info.st_mode) | _OWNER_ALL, dir_fd=frame.fd, follow_symlinks=False)
        self.unlocked.append(relative)
        return True


def _unlockable(info: os.stat_result) -> bool:
    """A folder of the server's own user that lacks the owner's read or search right."""
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and stat.S_IMODE(info.st_mode) & _LISTABLE != _LISTABLE
    )


@dataclass(frozen=True, slots=True)
class ProtectedChanges:
    """What a writable run did to protected paths, by project-relative path."""

    removed: tuple[str, ...] = ()
    """Created by the run, and removed again."""
    left: tuple[str, ...] = ()
    """Created by the run, but left: removing it was not safe (a link on the way, a moved original
    inside, a folder made a git directory) or failed."""
    changed: tuple[str, ...] = ()
    """There before, and written, replaced, moved away or deleted by the run."""
    unchecked: bool = False
    """The project grew past the walk's limit during the run: nothing could be compared."""
    unlisted: tuple[tuple[str, str], ...] = ()
    """Folders the check could not list or look into after the run, and why: a protected path may
    hide in each."""
    unlocked: tuple[str, ...] = ()
    """Folders the run had made unreadable, which the check made readable again (owner rwx) to list."""

    def __bool__(self) -> bool:
        return bool(
            self.removed or self.left or self.changed or self.unchecked or self.unlisted or self.unlocked
        )


def settle_protected_paths(root: Path, before: ProtectedSnapshot) -> ProtectedChanges:
    """Compare the protected paths after a writable run with `before`; remove those the run created.

    A sandbox can shield only the protected paths that exist (it binds them read-only; it
    cannot bind what is not there without creating it in the user's project), and on a backend
    that confines nothing it shields none: this is the backstop. What the run created is removed
    before anything (git, an IDE) reads it, never through a link and never with anything that was
    there before inside it; what it changed, moved or deleted is named. A folder the run made
    unreadable to hide what it planted is made readable again and checked, and named; one that
    still cannot be listed is named, never passed over.

    Raises:
        ProjectTooLargeError: The project grew past the walk's limit during the run.
    """
    after = snapshot_protected(root, unlock=True)
    known = {fingerprint.identity for fingerprint in before.entries.values()}
    # Each before root whose path now holds something else: the run put that there.
    replaced = {
        name
        for name in before.roots
        if name in after.entries and after.entries[name].identity != before.entries[name].identity
    }
    created = {name: rule for name, rule in after.roots.items() if name not in before.roots}
    created.update((name, before.roots[name]) for name in replaced)
    hidden = tuple(after.unlisted)
    # What sits in a folder the check could not list is unknown, not gone: named as unlisted (the
    # whole project, when the root itself is one).
    changed = sorted(
        name
        for name in before.entries.keys() | after.entries.keys()
        if _inside(name, before.roots)
        and before.entries.get(name) != after.entries.get(name)
        and not _inside(name, hidden)
        and "." not in after.unlisted
    )
    removed: list[str] = []
    left: list[str] = []
    for name, rule in sorted(created.items()):
        if rule is GIT_DIRECTORY_RULE or any(
            entry.identity in known for path, entry in after.entries.items() if _inside(path, (name,))
        ):
            left.append(name)
            continue
        (removed if _remove(root, name) else left).append(name)
    return ProtectedChanges(
        removed=tuple(removed),
        left=tuple(left),
        changed=_outermost(changed),
        unlisted=tuple(sorted(after.unlisted.items())),
        unlocked=tuple(sorted(after.unlocked)),
    )


def _remove(root: Path, name: str) -> bool:
    """Remove `name` (project-relative) and all inside it, reached from the root one folder at a time
    through no link; False when a folder on the way is a link (or gone) or removing fails."""
    *folders, last = name.split("/")
    try:
        fd = os.open(root, _FOLDER_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        for part in folders:
            inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        if stat.S_ISDIR(os.stat(last, dir_fd=fd, follow_symlinks=False).st_mode):
            # On descriptors, never following a link inside (shutil's safe variant on Linux).
            shutil.rmtree(last, dir_fd=fd)
        else:
            os.unlink(last, dir_fd=fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _inside(name: str, roots: Collection[str]) -> bool:
    """`name` is one of `roots` or below one: each folder on its way looked up, not each root."""
    if name in roots:
        return True
    cut = name.rfind("/")
    while cut > 0:
        if name[:cut] in roots:
            return True
        cut = name.rfind("/", 0, cut)
    return False


def _outermost(names: list[str]) -> tuple[str, ...]:
    """The names, less those inside another one of them: `.git` changed, not each file in it."""
    kept: list[str] = []
    for name in sorted(names):
        if not kept or not name.startswith(kept[-1] + "/"):
            kept.append(name)
    return tuple(kept)
