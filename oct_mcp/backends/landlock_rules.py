"""What a landlock run may read and write, as the Landlock rules of its ruleset.

Reads: the system folders, the limits files libraries size their pools by, a few devices, the
project (around what is hidden from it) and the run's own binds. Writes: where the request lets
the run write, each rule on a real folder or file, never through a link.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final

from oct_mcp.backends import MINIMAL_ETC, SandboxRequest
from oct_mcp.backends.libc import libc

if TYPE_CHECKING:
    from landlockpy import Ruleset

__all__ = ["allow_reads", "allow_writes"]

_SYSTEM_READ: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc")
# The CPU and memory limits and the CPUs the machine has, read by libraries that size their pools
# (joblib's loky, numpy's BLAS, glibc's get_nprocs): files that exist but cannot be opened fail
# them (joblib's whole suite stopped at collection), where a missing file is expected. They tell
# the run nothing a `nproc` would not.
_LIMITS_READ: Final = (
    "/sys/fs/cgroup/cpu.max",
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/possible",
    "/sys/devices/system/cpu/present",
)
_DEVICES_READ: Final = ("/dev/zero", "/dev/random", "/dev/urandom")
_DEVICES_WRITE: Final = ("/dev/null", "/dev/full")
_DEVICES_LISTED: Final = "/dev"
"""Listed, not opened: a test that lists /dev or asks whether an entry is a block device. The right
reaches the folders below it (/dev/shm, /dev/pts): their names show, as /proc shows processes'."""
_SYS_LANDLOCK_ADD_RULE: Final = 445
"""The same number on every architecture that has Landlock."""
_RULE_PATH_BENEATH: Final = 1
_PATH_BENEATH: Final = struct.Struct("=Qi")
"""struct landlock_path_beneath_attr: allowed_access (u64), parent_fd (s32), packed."""


@cache
def _read_rights() -> int:
    from landlockpy import AccessFS

    return int(AccessFS.EXECUTE | AccessFS.READ_FILE | AccessFS.READ_DIR)


@cache
def _file_rights() -> int:
    """The rights a rule on a file (not a folder) may hold."""
    from landlockpy import AccessFS

    return int(AccessFS.EXECUTE | AccessFS.READ_FILE | AccessFS.WRITE_FILE | AccessFS.TRUNCATE)


# Cached: these flags are enum.Flag values, whose every `|` is a Python call (about a hundred a
# spawn before).
@cache
def _write_rights(*, directory: bool) -> int:
    from landlockpy import AccessFS

    file_rights = AccessFS.WRITE_FILE | AccessFS.TRUNCATE
    if not directory:
        return int(file_rights)
    return int(
        file_rights
        | AccessFS.REMOVE_DIR
        | AccessFS.REMOVE_FILE
        | AccessFS.MAKE_DIR
        | AccessFS.MAKE_REG
        | AccessFS.MAKE_SYM
        | AccessFS.MAKE_FIFO
        | AccessFS.MAKE_SOCK
        | AccessFS.REFER
    )


def allow_reads(ruleset: Ruleset, request: SandboxRequest) -> None:
    from landlockpy import AccessFS

    read = _read_rights()
    hidden = frozenset(file.path for file in request.secret_files)
    etc = [f"/etc/{name}" for name in MINIMAL_ETC] if request.strict_files else ["/etc"]
    # An install inside the project (its .venv) that holds a hidden file gets its rights entry by
    # entry with the rest of the project, below.
    binds = [str(p) for p in request.read_only_binds if not any(h.is_relative_to(p) for h in hidden)]
    for path in (*_SYSTEM_READ, *etc, *_DEVICES_READ, *binds):
        _allow_existing(ruleset, path, read)
    for path in _LIMITS_READ:
        _allow_existing(ruleset, path, int(AccessFS.READ_FILE))
    for path in _DEVICES_WRITE:
        _allow_existing(
            ruleset, path, int(AccessFS.READ_FILE) | int(AccessFS.WRITE_FILE) | int(AccessFS.TRUNCATE)
        )
    _allow_existing(ruleset, _DEVICES_LISTED, int(AccessFS.READ_DIR))
    read_write = AccessFS(read | _write_rights(directory=True))
    ruleset.allow_path(request.scratch, read_write)
    for folder in request.writable_dirs:
        ruleset.allow_path(folder, read_write)
    if hidden:
        _allow_reads_around(ruleset, request.project, hidden)
    else:
        ruleset.allow_path(request.project, AccessFS(read))


def _allow_reads_around(ruleset: Ruleset, project: Path, hidden: frozenset[Path]) -> None:
    """Read rights on the project entry by entry, leaving out the hidden files.

    A right on a folder reaches everything below it, so the folders on the way to a hidden file
    get only the right to list them, and each of their other entries its own read right. Rights
    belong to inodes: a hidden file renamed or linked elsewhere in the run stays unreadable (and
    Landlock refuses a move or link that would give it rights it did not have).
    """
    from landlockpy import AccessFS

    read = _read_rights()
    on_the_way: set[Path] = set()
    for path in hidden:
        on_the_way.update(folder for folder in path.parents if folder.is_relative_to(project))
    for folder in on_the_way:
        _allow_real_folder(ruleset, folder, int(AccessFS.READ_DIR))
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            # A symlink's target has its own rules where it really lies (a link to a hidden file
            # reaches it through its real name, which has none).
            if path in hidden or path in on_the_way or entry.is_symlink():
                continue
            _allow_entry(ruleset, path, read)


def _allow_entry(ruleset: Ruleset, path: Path, rights: int) -> None:
    """`rights` on the entry `path`, opened without following a link and named through /proc; a
    file gets only the rights a file can have."""
    from landlockpy import AccessFS

    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            granted = AccessFS(rights)
        else:
            granted = AccessFS(rights) & (AccessFS.EXECUTE | AccessFS.READ_FILE)
        ruleset.allow_path(f"/proc/self/fd/{fd}", granted)
    finally:
        os.close(fd)


def _allow_existing(ruleset: Ruleset, path: str, rights: int) -> None:
    """A rule for `path` if it exists; a file gets only the rights a file can have (else EINVAL).

    Made here with the kernel's call, not `Ruleset.allow_path`: every run adds about 25 of these,
    and the library's flag arithmetic (enum.Flag) and its own open and close made each cost 9 us
    where one open, one fstat and the call cost 3 (measured, benchmarks/sandbox_spawn.py).

    Raises:
        OSError: The kernel refused the rule (handled as the library's refusals are).
    """
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (OSError, ValueError):
        return  # absent here: nothing to allow
    try:
        granted = rights if stat.S_ISDIR(os.fstat(fd).st_mode) else rights & _file_rights()
        granted &= int(ruleset.handled_fs)
        if not granted:
            return
        attr = _PATH_BENEATH.pack(granted, fd)
        done = libc().syscall(
            ctypes.c_long(_SYS_LANDLOCK_ADD_RULE),
            ctypes.c_int(ruleset.fileno()),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.c_char_p(attr),
            ctypes.c_uint32(0),
        )
        if done != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"landlock_add_rule on {path}: {os.strerror(error)}")
    finally:
        os.close(fd)


def allow_writes(ruleset: Ruleset, request: SandboxRequest) -> None:
    """Write rights entry by entry below the project root, around the protected paths; and on each
    folder the request names inside it (`writable_inside`), whatever protects it."""
    from landlockpy import AccessFS

    for folder in request.writable_inside:
        _allow_real_folder(ruleset, folder, AccessFS(_write_rights(directory=True)))
    if not request.writable:
        return

    protected = frozenset(request.protected)
    for entry, directory in _writable_entries(request.project, protected):
        # Opened without following links, then named through /proc: a link in the project that
        # points at ~/.ssh is never the folder a right lands on.
        try:
            fd = os.open(entry, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode) == directory and (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                ruleset.allow_path(f"/proc/self/fd/{fd}", AccessFS(_write_rights(directory=directory)))
        finally:
            os.close(fd)


def _allow_real_folder(ruleset: Ruleset, folder: Path, rights: int) -> None:
    """A rule on `folder` if it is a real folder: opened without following a link, named through /proc."""
    from landlockpy import AccessFS

    try:
        fd = os.open(folder, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        ruleset.allow_path(f"/proc/self/fd/{fd}", AccessFS(rights))
    finally:
        os.close(fd)


def _writable_entries(folder: Path, protected: frozenset[Path]) -> Iterable[tuple[Path, bool]]:
    """Each entry of `folder` to grant write on: whole where nothing protected lies below it."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        if path in protected or entry.is_symlink():
            continue
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir and any(p.is_relative_to(path) for p in protected):
            yield from _writable_entries(path, protected)
        elif is_dir or entry.is_file(follow_symlinks=False):
            yield path, is_dir
