"""Which project files a read shows with a mask: found for each command run, rescanned only where changed.

A pattern redactor masks a secret in a run's output only in the forms it knows; code the run
executes can print the same secret reversed, encoded or a character a line. So the secret must not
reach the run at all: the sandbox shows it the file masked (bubblewrap) or not at all (landlock).
A file counts when a whole read of it would show at least one mask: the same `redact` the read
tools use, over the same text.

Every regular file of the project is looked at, but only one whose (device, inode, size, mtime,
ctime) the cache has not seen is read again: a warm run costs a walk of the project's entries.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oct_mcp.backends import SecretFile
from oct_mcp.file_screen import BINARY_SNIFF_BYTES, read_at_most
from oct_mcp.redaction import redact

__all__ = [
    "SCAN_MAX_BYTES",
    "FoundSecrets",
    "SecretFileCache",
    "masked_copies",
]

SCAN_MAX_BYTES: Final = 64 * 1_048_576
"""The largest file looked into: the most the read tools ever mask of one file (a line range is
masked as the whole file shows it, up to their scan limit). A larger file is no file a read shows
masked (it is refused whole), so it stays readable: large text files are a suite's data and logs,
which hiding would break, and no read tool can show their secrets either."""
ENVIRONMENT_FOLDERS: Final = frozenset(
    {
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
    }
)
"""Installed packages and caches: only the files directly in them are looked into (a venv's `pip.conf`
may hold an index URL's password), not the packages, whose test data are full of fake keys that
would hide library files from every run."""
GIT_FOLDER: Final = ".git"
_GIT_OBJECTS: Final = "objects"
"""Compressed (zlib) objects: no read shows them as text, so no mask; see the README's known gaps."""
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_COPIES: Final = "masked"
# How the walk treats a folder: its files read and its folders walked; its own files read only
# (an environment folder); nothing read (below those, git's objects).
_READ: Final = 0
_TOP: Final = 1
_SKIP: Final = 2

Key = tuple[int, int, int, int, int]
"""(device, inode, size, mtime_ns, ctime_ns): a file whose key is unchanged is not read again."""


@dataclass(frozen=True, slots=True)
class FoundSecrets:
    """The project's files a read shows masked, by every name they have in it."""

    files: tuple[Path, ...]
    """Absolute, sorted; hard links of one file are each named."""
    scanned: int
    """Files read for this answer (not known to the cache)."""
    compiled: tuple[Path, ...] = ()
    """Bytecode compiled from those of them that are Python (`__pycache__/<name>.*.pyc`, a
    `<name>.pyc` beside it), left by a run outside the sandbox: its constants are the secret's
    bytes, which no read shows (binary) and a run could unmarshal."""


class SecretFileCache:
    """The verdicts of one server: whether each file, by its key, shows a mask when read.

    Shared by every run the server makes; the walk runs in a worker thread, the cache is swapped
    whole under a lock, so two runs at once each see a complete answer.
    """

    def __init__(self, max_bytes: int = SCAN_MAX_BYTES) -> None:
        self._max_bytes = max_bytes
        self._verdicts: dict[Key, bool] = {}
        self._lock = threading.Lock()

    def find(self, project: Path) -> FoundSecrets:
        """Every project file a whole read would show with a mask, and each other name it has.

        Args:
            project: The project root, real and absolute.
        """
        with self._lock:
            known = self._verdicts
        verdicts: dict[Key, bool] = {}
        found: dict[tuple[int, int], list[str]] = {}
        links: dict[tuple[int, int], int] = {}
        scanned = 0
        for path, info, look_inside in _walk(project):
            key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            if not look_inside:
                continue
            verdict = verdicts.get(key)
            if verdict is None:
                verdict = known.get(key)
            if verdict is None:
                verdict = _shows_a_mask(path, key, self._max_bytes)
                scanned += 1
            verdicts[key] = verdict
            if verdict:
                found.setdefault((info.st_dev, info.st_ino), []).append(path)
                links[(info.st_dev, info.st_ino)] = info.st_nlink
        missing = {inode for inode, names in found.items() if links[inode] > len(names)}
        if missing:
            # Another name of a secret file in a folder whose files are not read (a hard link in
            # .venv, .git/objects): the folders skipped are walked for that inode alone.
            for path, info, look_inside in _walk(project, everything=True):
                inode = (info.st_dev, info.st_ino)
                if not look_inside and inode in missing:
                    found[inode].append(path)
        with self._lock:
            self._verdicts = verdicts
        files = sorted(Path(path) for names in found.values() for path in names)
        compiled = sorted(_bytecode_of(files))
        return FoundSecrets(files=tuple(files), scanned=scanned, compiled=tuple(compiled))


def masked_copies(found: FoundSecrets, folder: Path) -> tuple[SecretFile, ...]:
    """Write each file as a read shows it, owner-only and read-only, into a new folder in `folder`.

    A file read again here may have changed since it was found; it is masked as it is now. A file
    gone or no longer a regular file is left out: there is nothing of it to show. Bytecode is
    shown empty: Python finds no valid header in it and compiles the masked source instead.

    Returns:
        Each file with its masked copy; hard links of one file share one copy.
    """
    target = folder / _COPIES
    target.mkdir(mode=0o700)
    shown = list(_masked_files(found.files, target))
    if found.compiled:
        empty = target / "empty"
        os.close(os.open(empty, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o400))
        shown += [SecretFile(path=path, masked=empty) for path in found.compiled]
    return tuple(shown)


def _masked_files(files: tuple[Path, ...], target: Path) -> Iterator[SecretFile]:
    copies: dict[tuple[int, int], Path] = {}
    for path in files:
        try:
            fd = os.open(path, _FILE_FLAGS)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            inode = (info.st_dev, info.st_ino)
            if not stat.S_ISREG(info.st_mode):
                continue
            copy = copies.get(inode)
            if copy is None:
                data = read_at_most(fd, SCAN_MAX_BYTES, info.st_size)
                text, encoding = _decoded(data)
                view, _ = redact(text)
                copy = copies[inode] = target / str(len(copies))
                out = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o400)
                with os.fdopen(out, "wb") as written:
                    written.write(view.encode(encoding))
        finally:
            os.close(fd)
        yield SecretFile(path=path, masked=copy)


def _bytecode_of(files: list[Path]) -> Iterator[Path]:
    """The bytecode files Python compiled from the Python files among `files`, where they lie."""
    for path in files:
        if path.suffix != ".py":
            continue
        beside = path.with_suffix(".pyc")
        if beside.is_file() and not beside.is_symlink():
            yield beside
        try:
            with os.scandir(path.parent / "__pycache__") as entries:
                for entry in entries:
                    name = entry.name
                    ours = name.startswith(f"{path.stem}.") and name.endswith(".pyc")
                    if ours and entry.is_file(follow_symlinks=False):
                        yield Path(entry.path)
        except OSError:
            continue


def _shows_a_mask(path: str, key: Key, max_bytes: int) -> bool:
    """Whether a whole read of the file would show a mask: text (no NUL where git looks), within the cap.

    Text that is not UTF-8 counts too (see `_decoded`).
    """
    if key[2] > max_bytes:
        return False
    try:
        fd = os.open(path, _FILE_FLAGS)
    except OSError:
        return False
    try:
        data = read_at_most(fd, max_bytes, key[2])
    except OSError:
        return False
    finally:
        os.close(fd)
    if len(data) > max_bytes or b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return False
    _, findings = redact(_decoded(data)[0])
    return bool(findings)


def _decoded(data: bytes) -> tuple[str, str]:
    """The text as a read shows it (UTF-8), or else byte for byte (Latin-1), and its encoding.

    A read refuses text that is not UTF-8, but a run reads every byte: a secret in a Latin-1
    `.env` must count too. Latin-1 maps each byte to one character, so the copy keeps every byte
    that no mask replaced.
    """
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def _walk(project: Path, *, everything: bool = False) -> Iterator[tuple[str, os.stat_result, bool]]:
    """Each regular file under `project` (links not followed), its lstat, and whether to read it.

    Not read: what lies below an environment folder's own files, and git's objects. With
    `everything` those are walked too, their files yielded as not to read; otherwise skipped.
    """
    root = str(project)
    stack: list[tuple[str, int, bool]] = [(root, _READ, False)]
    while stack:
        folder, mode, in_git = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    inner = _mode_below(mode, entry.name, in_git=in_git)
                    if inner != _SKIP or everything:
                        git = in_git or (folder == root and entry.name == GIT_FOLDER)
                        stack.append((entry.path, inner, git))
                elif entry.is_file(follow_symlinks=False) and (mode != _SKIP or everything):
                    # A str, not a Path: building 10,000 Paths was most of a warm walk's time.
                    yield entry.path, entry.stat(follow_symlinks=False), mode != _SKIP
            except OSError:
                continue


def _mode_below(mode: int, name: str, *, in_git: bool) -> int:
    """How the walk treats a folder named `name` in a folder it treats as `mode`."""
    if mode != _READ or (in_git and name == _GIT_OBJECTS):
        return _SKIP
    return _TOP if name in ENVIRONMENT_FOLDERS and not in_git else _READ
