"""A writable landlock run makes and removes entries where Landlock can give it no right to.

Landlock only adds rights, and a right on a folder reaches everything below it: the project root
(which holds `.git`) and each folder that holds a protected path get no right to make or remove
entries, so a writable run could write into their files but not create, delete or replace one
(`git switch` replaces a file by removing it and making it anew, an editor by a rename). Here the
supervisor makes those calls for the run: the filter hands it every open, mkdir, unlink, rmdir,
rename, link and symlink of a writable run.

For each call the supervisor reads the paths once out of the run's memory and opens the folder
each names as the kernel would (from the run's working folder or descriptor, following links on
the way), then judges the folder it holds, not the spelling:

- in none of the closed folders (the project root, a folder holding a protected path, a folder
  the supervisor made for the run): the kernel makes the call as the run asked
  (SECCOMP_USER_NOTIF_FLAG_CONTINUE), under the run's Landlock rules. Rewriting the path after the
  check gains nothing: whatever the kernel then reads, Landlock checks. Most calls are decided so
  on their spelling alone (`_may_be_closed`), without opening anything.
- in a closed folder: the supervisor makes the call itself on its copy, through the folder's
  descriptor, never following a link at the last name, after checking that every entry the call
  makes, removes or moves is inside the project, is no protected path and holds none (the same
  rules as every write: `protected.rule_for_parts` and the request's protected paths), and is no
  file the run may not read (a secret's or a denied file: renamed or linked elsewhere, it would be
  readable there). An open's descriptor is installed in the run.

An entry the supervisor made has no Landlock rule of its own: a file it made is opened by the
supervisor whenever the run opens it again (for writing, or for reading where the project has
files the run may not read, which gives its folder rights entry by entry), and a folder it made is
closed like the root, so `os.makedirs` and `shutil.rmtree` work below it. Every open of a writable
run goes to the supervisor for that: measured, a writable pytest run of a real suite takes about
7% longer than with no supervision of its entries (`benchmarks/project_entries.py` for one call).
The check of protected paths after a writable run stays: this is the way in, that is the backstop.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final

from oct_mcp.backends.run_memory import caller_umask, read_path
from oct_mcp.protected import rule_for_parts

if TYPE_CHECKING:
    from collections.abc import Iterable

    from seccompy import Filter
    from seccompy.notify import Listener, Notification

__all__ = ["ENTRY_CALLS", "ProjectEntries", "notify_entry_calls"]

_OPENS: Final = {"open": (None, 0, 1, 2), "openat": (0, 1, 2, 3), "creat": (None, 0, None, 1)}
"""Each open: where its folder descriptor, path, flags and mode are (None: none, AT_FDCWD)."""
_MAKES: Final = {"mkdir": (None, 0, 1), "mkdirat": (0, 1, 2)}
_REMOVES: Final = {"unlink": (None, 0), "rmdir": (None, 0), "unlinkat": (0, 1)}
_MOVES: Final = {
    "rename": ((None, 0), (None, 1)),
    "renameat": ((0, 1), (2, 3)),
    "renameat2": ((0, 1), (2, 3)),
    "link": ((None, 0), (None, 1)),
    "linkat": ((0, 1), (2, 3)),
}
_SYMLINKS: Final = {"symlink": (None, 1), "symlinkat": (1, 2)}
ENTRY_CALLS: Final = (*_OPENS, *_MAKES, *_REMOVES, *_MOVES, *_SYMLINKS)
_AT_FDCWD: Final = -100
_LOW_32: Final = 0xFFFFFFFF
_AT_REMOVEDIR: Final = 0x200
_AT_SYMLINK_FOLLOW: Final = 0x400
_RENAME_NOREPLACE: Final = 1
_RENAME_EXCHANGE: Final = 2
_O_LARGEFILE: Final = 0o100000
"""Set by the kernel itself on 64-bit: no meaning to check."""
_O_TMPFILE: Final = 0o20000000 | os.O_DIRECTORY
_CREAT_FLAGS: Final = os.O_CREAT | os.O_WRONLY | os.O_TRUNC
_MOST_ENTRIES_LOOKED_AT: Final = 10_000
"""Entries of a folder the supervisor moves that it looks through for a hidden file; past them, refused."""


def notify_entry_calls(rules: Filter) -> None:
    """Hand the supervisor each open of a writable run, and each call that makes or removes an entry.

    After the rules that refuse the mode bits no run sets, so those never reach the supervisor.
    Other ways to make an entry (openat2, mknod, io_uring) stay Landlock's alone: refused in a
    closed folder, as before.
    """
    from seccompy import syscall_nr

    for name in ENTRY_CALLS:
        try:
            syscall_nr(name)
        except ValueError:
            continue  # arm64 has no open, creat, mkdir, unlink, rmdir, rename, link or symlink
        rules.notify(name)


class _ContinueError(Exception):
    """No entry in a closed folder: the kernel makes the call as asked, under the run's Landlock rules."""


@dataclass(slots=True)
class _Place:
    """Where a call makes, removes or moves an entry: the folder it is in (a descriptor of it, as
    the kernel found it, and its real name) and the last name."""

    folder: int
    real_folder: str
    name: str
    caller: int
    """The calling thread's id: whose permissions the folder is judged by."""

    @property
    def path(self) -> str:
        return os.path.join(self.real_folder, self.name)


@dataclass(slots=True)
class ProjectEntries:
    """Answers one writable run's calls that make or remove entries; see the module's docstring."""

    project: str
    """The project's real name."""
    protected: tuple[str, ...]
    """Real names of the protected paths the request keeps read-only (the server's files among them)."""
    hidden: tuple[str, ...]
    """Real names of the files the run may not read (secrets, denied paths)."""
    fixed: frozenset[str]
    """The folders Landlock gives no right to make entries in: the root, each one above a protected path."""
    closed_names: frozenset[str]
    """The fixed folders by their real names and as the request spelt the project."""
    made: set[tuple[int, int]] = field(default_factory=set)
    """Device and inode of each entry the supervisor made: the run has no Landlock rule for them."""
    made_names: set[str] = field(default_factory=set)
    """The real names of the folders the supervisor made, where they were made (or moved to)."""
    hidden_identities: frozenset[tuple[int, int]] = frozenset()
    """Device and inode of each hidden file and folder when the run started: a name can change
    (the kernel lets the run rename or link a hidden file inside its own folder), the inode not."""

    @classmethod
    def for_project(cls, project: Path, protected: Iterable[Path], hidden: Iterable[Path]) -> ProjectEntries:
        root = os.path.realpath(project)
        kept = tuple(os.path.realpath(path) for path in protected)
        fixed = {root}
        for path in kept:
            folder = os.path.dirname(path)
            while folder.startswith(root + "/"):
                fixed.add(folder)
                folder = os.path.dirname(folder)
        spelt = os.path.abspath(project)
        names = fixed | {spelt + folder[len(root) :] for folder in fixed}
        hidden_names = tuple(os.path.realpath(path) for path in hidden)
        identities = set()
        for path in hidden_names:
            with contextlib.suppress(OSError):
                identities.add(_identity(os.stat(path, follow_symlinks=False)))
        return cls(
            root,
            kept,
            hidden_names,
            frozenset(fixed),
            frozenset(names),
            hidden_identities=frozenset(identities),
        )

    def answer(self, listener: Listener, notification: Notification, name: str) -> None:
        """Answer one notification of `ENTRY_CALLS`; the caller gone, nothing to answer."""
        from seccompy import SeccompError
        from seccompy.notify import RespFlag

        opened: list[_Place] = []
        try:
            result = self._act(listener, notification, name, opened)
        except _ContinueError:
            with contextlib.suppress(SeccompError, RuntimeError):
                listener.respond(notification.id, flags=RespFlag.CONTINUE)
            return
        except (OSError, SeccompError) as exc:
            result = -(exc.errno or errno.EACCES)
        finally:
            for place in opened:
                os.close(place.folder)
        if result is None:
            return  # answered with the descriptor itself, or the caller is gone
        with contextlib.suppress(SeccompError, RuntimeError):
            if result < 0:
                listener.respond(notification.id, error=-result)
            else:
                listener.respond(notification.id, val=result)

    def _act(
        self, listener: Listener, notification: Notification, name: str, opened: list[_Place]
    ) -> int | None:
        args = notification.args
        if name in _OPENS:
            at, path_at, flags_at, mode_at = _OPENS[name]
            flags = _CREAT_FLAGS if flags_at is None else args[flags_at] & _LOW_32 & ~_O_LARGEFILE
            if flags & _O_TMPFILE == _O_TMPFILE:
                raise _ContinueError  # an unnamed file: Landlock's to judge
            place = self._closed_place(notification, at, path_at, opened)
            if _names_a_folder(notification, path_at):
                raise _ContinueError  # `name/`: the kernel's own EISDIR or ENOTDIR
            if not listener.valid(notification.id):
                return None
            return self._open(listener, notification, place, flags, args[mode_at] & 0o777)
        if name in _MAKES:
            at, path_at, mode_at = _MAKES[name]
            place = self._closed_place(notification, at, path_at, opened)
            self._check_made(place, is_folder=True)
            if not listener.valid(notification.id):
                return None
            mode = args[mode_at] & 0o777 & ~caller_umask(notification.pid)
            os.mkdir(place.name, mode, dir_fd=place.folder)
            self._remember(place)
            return 0
        if name in _REMOVES:
            at, path_at = _REMOVES[name]
            place = self._closed_place(notification, at, path_at, opened)
            removes_folder = name == "rmdir" or (name == "unlinkat" and args[2] & _AT_REMOVEDIR)
            if not removes_folder and _names_a_folder(notification, path_at):
                raise _ContinueError  # `unlink("file/")`: the kernel's own ENOTDIR
            self._check_taken(place)
            if not listener.valid(notification.id):
                return None
            gone = os.stat(place.name, dir_fd=place.folder, follow_symlinks=False)
            if _identity(gone) in self.hidden_identities:
                return -errno.EACCES
            if removes_folder:
                os.rmdir(place.name, dir_fd=place.folder)
            else:
                os.unlink(place.name, dir_fd=place.folder)
            if gone.st_nlink <= 1 or stat.S_ISDIR(gone.st_mode):
                self.made.discard(_identity(gone))  # its number may be given to another file
            return 0
        if name in _SYMLINKS:
            at, path_at = _SYMLINKS[name]
            place = self._closed_place(notification, at, path_at, opened)
            if _names_a_folder(notification, path_at):
                raise _ContinueError
            target = read_path(notification.pid, args[0])
            self._check_made(place, is_folder=False)
            if not listener.valid(notification.id):
                return None
            os.symlink(target, place.name, dir_fd=place.folder)
            return 0
        return self._move(listener, notification, name, opened)

    def _move(
        self, listener: Listener, notification: Notification, name: str, opened: list[_Place]
    ) -> int | None:
        """A rename or a hard link with an end in a closed folder; both ends in the project."""
        args = notification.args
        spelt = [(at, _spelt(notification, path_at)) for at, path_at in _MOVES[name]]
        if not any(self._may_be_closed(notification, at, path) for at, path in spelt):
            raise _ContinueError
        places = [self._place(notification, at, path, opened) for at, path in spelt]
        if not any(place is not None and self._closed(place) for place in places):
            raise _ContinueError
        source, target = places
        if source is None or target is None or not self._inside(source) or not self._inside(target):
            return -errno.EXDEV  # one end outside the project: another file system, as it would be
        flags = args[4] & _LOW_32 if name in ("renameat2", "linkat") else 0
        found = os.stat(source.name, dir_fd=source.folder, follow_symlinks=False)
        self._check_taken(source)
        self._check_holds_no_hidden(source, found)
        if name in ("link", "linkat"):
            if flags & ~_AT_SYMLINK_FOLLOW or stat.S_ISDIR(found.st_mode):
                return -errno.EPERM
            if flags & _AT_SYMLINK_FOLLOW and stat.S_ISLNK(found.st_mode):
                return -errno.EPERM  # a link through a link: not made for a run
            self._check_made(target, is_folder=False)
            if not listener.valid(notification.id):
                return None
            os.link(
                source.name,
                target.name,
                src_dir_fd=source.folder,
                dst_dir_fd=target.folder,
                follow_symlinks=False,
            )
            return 0
        if flags & ~(_RENAME_NOREPLACE | _RENAME_EXCHANGE):
            return -errno.EINVAL  # RENAME_WHITEOUT: an overlay's, never a run's
        if flags & _RENAME_EXCHANGE:
            self._check_taken(target)
            self._check_holds_no_hidden(
                target, os.stat(target.name, dir_fd=target.folder, follow_symlinks=False)
            )
        else:
            self._check_made(target, is_folder=stat.S_ISDIR(found.st_mode))
            with contextlib.suppress(FileNotFoundError):
                replaced = os.stat(target.name, dir_fd=target.folder, follow_symlinks=False)
                self._check_taken(target)  # replaced: removed as much as made
                self._check_holds_no_hidden(target, replaced)
        if not listener.valid(notification.id):
            return None
        _rename(source, target, flags)
        self._moved(source, target)
        return 0

    def _open(
        self, listener: Listener, notification: Notification, place: _Place, flags: int, mode: int
    ) -> int | None:
        from seccompy import SeccompError
        from seccompy.notify import AddFdFlag

        try:
            found = os.stat(place.name, dir_fd=place.folder, follow_symlinks=False)
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                raise _ContinueError from None  # the kernel's own ENOENT
            self._check_made(place, is_folder=False)
            mode &= ~caller_umask(notification.pid)
            # O_EXCL: whatever appeared there meanwhile (a link to a secret, a FIFO) is not opened.
            expected = None
            opening = flags | os.O_EXCL
        else:
            if _identity(found) not in self.made or not stat.S_ISREG(found.st_mode):
                raise _ContinueError from None  # a file the run has its own rule for, or none
            if flags & os.O_CREAT and flags & os.O_EXCL:
                return -errno.EEXIST
            # Made, and yet what the rules keep (an inode number used again): never opened here.
            self._check_made(place, is_folder=False)
            expected = _identity(found)
            # Truncated only once it is known to be that file (below).
            opening = flags & ~(os.O_CREAT | os.O_TRUNC)
        # Never through a link at the last name (ELOOP), never waiting (a FIFO, a lease): what is
        # opened is checked to be the file judged before it reaches the run.
        try:
            fd = os.open(
                place.name, opening | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=place.folder
            )
        except FileExistsError:
            if flags & os.O_EXCL:
                raise
            raise _ContinueError from None  # made meantime by someone else: Landlock's to judge
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode) or (expected is not None and _identity(opened) != expected):
                return -errno.EACCES
            if not flags & os.O_NONBLOCK:
                os.set_blocking(fd, True)
            if expected is not None and flags & os.O_TRUNC:
                os.ftruncate(fd, 0)
            self.made.add(_identity(opened))
            with contextlib.suppress(SeccompError, RuntimeError):
                listener.addfd(notification.id, fd, flags=AddFdFlag.SEND, newfd_flags=flags & os.O_CLOEXEC)
        finally:
            os.close(fd)
        return None

    def _closed_place(
        self, notification: Notification, at: int | None, path_at: int, opened: list[_Place]
    ) -> _Place:
        spelt = _spelt(notification, path_at)
        if not self._may_be_closed(notification, at, spelt):
            raise _ContinueError
        place = self._place(notification, at, spelt, opened)
        if place is None or not self._closed(place):
            raise _ContinueError
        return place

    def _may_be_closed(self, notification: Notification, at: int | None, spelt: str) -> bool:
        """Whether the folder `spelt` names is, by its spelling, a closed one.

        Most calls of a writable run (its temporary files, its files in open folders) are not in
        one: they go back to the kernel on a look at the name alone, without opening anything
        (measured: benchmarks/project_entries.py). The spelling may mislead only one way: a folder
        spelt through a link into a closed one is left to Landlock, which refuses the call; a
        folder the supervisor acts on is always judged by what it opened (`_place`).
        """
        head = os.path.dirname(spelt)
        if not head.startswith("/"):
            try:
                head = os.path.join(os.readlink(f"/proc/{notification.pid}/{_base(notification, at)}"), head)
            except OSError:
                return False
        folder = os.path.normpath(head)
        return folder in self.closed_names or folder in self.made_names

    def _place(
        self, notification: Notification, at: int | None, spelt: str, opened: list[_Place]
    ) -> _Place | None:
        """The folder and last name a path argument names, as the kernel would find the folder;
        None where there is none to judge (no such folder, `.` or `..` last, an empty path)."""
        head, name = os.path.split(spelt)
        if not name or name in (".", ".."):
            return None
        base = _base(notification, at)
        try:
            # The run's folder through /proc: the object it holds, not a name it could swap meanwhile.
            start = os.open(f"/proc/{notification.pid}/{base}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            folder = os.open(head or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=start)
        except OSError:
            return None
        finally:
            os.close(start)
        place = _Place(folder, "", name, notification.pid)
        opened.append(place)  # closed by the caller, whatever happens next
        try:
            place.real_folder = os.readlink(f"/proc/self/fd/{folder}")
        except OSError:
            return None  # a name past PATH_MAX: nothing the supervisor acts on
        return place

    def _closed(self, place: _Place) -> bool:
        if place.real_folder in self.fixed:
            return True
        return self._inside(place) and _identity(os.fstat(place.folder)) in self.made

    def _inside(self, place: _Place) -> bool:
        return place.real_folder == self.project or place.real_folder.startswith(self.project + "/")

    def _check_made(self, place: _Place, *, is_folder: bool) -> None:
        """Raises OSError (EACCES) where the entry to make is protected or may not be there."""
        path = place.path
        if not self._inside(place) or self._kept(path):
            raise OSError(errno.EACCES, "")
        parts = tuple(part.casefold() for part in Path(path).relative_to(self.project).parts)
        if rule_for_parts(parts, is_folder=is_folder) is not None:
            raise OSError(errno.EACCES, "")
        _check_folder_permits(place, removing=False)

    def _check_taken(self, place: _Place) -> None:
        """Raises OSError (EACCES) where the entry to remove or move is protected, holds a protected
        path, or is (or holds) a file the run may not read."""
        path = place.path
        if not self._inside(place) or self._kept(path):
            raise OSError(errno.EACCES, "")
        parts = tuple(part.casefold() for part in Path(path).relative_to(self.project).parts)
        if rule_for_parts(parts) is not None:
            raise OSError(errno.EACCES, "")
        _check_folder_permits(place, removing=True)

    def _check_holds_no_hidden(self, place: _Place, found: os.stat_result) -> None:
        """Raises OSError (EACCES) where the entry is a hidden file by its inode, whatever its name
        now, or a folder holding one (looked through without following links, failing closed past
        `_MOST_ENTRIES_LOOKED_AT`)."""
        if _identity(found) in self.hidden_identities:
            raise OSError(errno.EACCES, "")
        if not stat.S_ISDIR(found.st_mode) or not self.hidden_identities:
            return
        top = os.open(
            place.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=place.folder
        )
        try:
            looked_at = 0
            for _root, folders, files, root_fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
                for entry in (*folders, *files):
                    looked_at += 1
                    if looked_at > _MOST_ENTRIES_LOOKED_AT:
                        raise OSError(errno.EACCES, "")
                    with contextlib.suppress(FileNotFoundError):
                        if (
                            _identity(os.stat(entry, dir_fd=root_fd, follow_symlinks=False))
                            in self.hidden_identities
                        ):
                            raise OSError(errno.EACCES, "")
        finally:
            os.close(top)

    def _kept(self, path: str) -> bool:
        """Whether `path` is, holds or lies in a protected path, or is or holds a hidden file."""
        below = path + "/"
        return any(
            kept == path or kept.startswith(below) or path.startswith(kept + "/") for kept in self.protected
        ) or any(
            hidden == path or hidden.startswith(below) or path.startswith(hidden + "/")
            for hidden in self.hidden
        )

    def _remember(self, place: _Place) -> None:
        """A folder the supervisor made: closed like the root (its inode), and by its name."""
        with contextlib.suppress(OSError):
            self.made.add(_identity(os.stat(place.name, dir_fd=place.folder, follow_symlinks=False)))
            self.made_names.add(place.path)

    def _moved(self, source: _Place, target: _Place) -> None:
        """The names of made folders at or below a moved entry follow it."""
        old, new = source.path, target.path
        for name in [name for name in self.made_names if name == old or name.startswith(old + "/")]:
            self.made_names.discard(name)
            self.made_names.add(new + name[len(old) :])


def _check_folder_permits(place: _Place, *, removing: bool) -> None:
    """Raises OSError (EACCES) where the folder's mode would refuse the caller the change.

    A server running as root acts with every capability, which the run has dropped: the kernel
    would let the supervisor write in a folder whose mode refuses the run. So the mode is judged
    as the kernel judges a caller without capabilities (ACLs aside); any other server acts with
    the run's own credentials, and the kernel judges its call itself.
    """
    if os.geteuid() != 0:
        return
    uid, gid, groups, capable = _credentials(place.caller)
    if capable:
        return
    folder = os.fstat(place.folder)
    if folder.st_uid == uid:
        allowed = folder.st_mode & 0o300 == 0o300
    elif folder.st_gid == gid or folder.st_gid in groups:
        allowed = folder.st_mode & 0o030 == 0o030
    else:
        allowed = folder.st_mode & 0o003 == 0o003
    if allowed and removing and folder.st_mode & stat.S_ISVTX and folder.st_uid != uid:
        # A sticky folder: only the entry's owner removes it.
        allowed = os.stat(place.name, dir_fd=place.folder, follow_symlinks=False).st_uid == uid
    if not allowed:
        raise OSError(errno.EACCES, "")


def _credentials(pid: int) -> tuple[int, int, frozenset[int], bool]:
    """The caller's file-system uid and gid, its supplementary groups, and whether it holds any
    effective capability (a run never does: landlock.py drops them)."""
    uid = gid = -1
    groups: frozenset[int] = frozenset()
    capable = False
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Uid:"):
                uid = int(line.split()[4])
            elif line.startswith("Gid:"):
                gid = int(line.split()[4])
            elif line.startswith("Groups:"):
                groups = frozenset(int(group) for group in line.split()[1:])
            elif line.startswith("CapEff:"):
                capable = int(line.split()[1], 16) != 0
    return uid, gid, groups, capable


def _spelt(notification: Notification, path_at: int) -> str:
    """A path argument as the run spelt it, copied once; a trailing `/` (`mkdir("build/")`) dropped."""
    spelt = os.fsdecode(read_path(notification.pid, notification.args[path_at]))
    return spelt.rstrip("/") if spelt.strip("/") else spelt


def _names_a_folder(notification: Notification, path_at: int) -> bool:
    """Whether the run spelt the path with a trailing `/`: only a folder may be meant."""
    return os.fsdecode(read_path(notification.pid, notification.args[path_at])).endswith("/")


def _base(notification: Notification, at: int | None) -> str:
    """Where a relative path starts, below `/proc/PID/`: the run's working folder or its descriptor."""
    descriptor = _AT_FDCWD if at is None else ctypes.c_int(notification.args[at] & _LOW_32).value
    return "cwd" if descriptor == _AT_FDCWD else f"fd/{descriptor}"


def _identity(found: os.stat_result) -> tuple[int, int]:
    return found.st_dev, found.st_ino


def _rename(source: _Place, target: _Place, flags: int) -> None:
    if not flags:
        os.rename(source.name, target.name, src_dir_fd=source.folder, dst_dir_fd=target.folder)
        return
    from seccompy import syscall_nr

    result = _libc().syscall(
        ctypes.c_long(syscall_nr("renameat2")),
        ctypes.c_int(source.folder),
        os.fsencode(source.name),
        ctypes.c_int(target.folder),
        os.fsencode(target.name),
        ctypes.c_uint(flags),
    )
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
