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

import hashlib
import os
import stat
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oct_mcp.backends import SecretFile
from oct_mcp.file_screen import BINARY_SNIFF_BYTES, read_at_most
from oct_mcp.redaction import redact
from oct_mcp.workspace import ENVIRONMENT_FOLDERS

__all__ = [
    "SCAN_MAX_BYTES",
    "FoundSecrets",
    "SecretFileCache",
    "history_holding",
    "masked_copies",
]

SCAN_MAX_BYTES: Final = 64 * 1_048_576
"""The largest file looked into: the most the read tools ever mask of one file (a line range is
masked as the whole file shows it, up to their scan limit). A larger file is no file a read shows
masked (it is refused whole), so it stays readable: large text files are a suite's data and logs,
which hiding would break, and no read tool can show their secrets either."""
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
Verdict = tuple[str, ...]
"""Empty: no read of the file shows a mask. Else the ids a git blob of its content has (SHA-1,
SHA-256): where the project's git objects hold one, its history holds the secret."""
_PACK_INDEX_MAGIC: Final = b"\xfftOc"
_PACK_INDEX_HEADER: Final = struct.Struct(">4sI256I")


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
    history: Path | None = None
    """The project's git object folder when it holds one of those files as it is now (committed,
    staged, stashed): `git show HEAD:.env` would print it. None when it holds none of them (an
    older value of a secret, or a deleted file's, is not looked for: see the README)."""


class SecretFileCache:
    """The verdicts of one server: whether each file, by its key, shows a mask when read.

    Shared by every run the server makes; the walk runs in a worker thread, the cache is swapped
    whole under a lock, so two runs at once each see a complete answer.
    """

    def __init__(self, max_bytes: int = SCAN_MAX_BYTES) -> None:
        self._max_bytes = max_bytes
        self._verdicts: dict[Key, Verdict] = {}
        self._elsewhere: dict[Key, tuple[str, ...]] = {}
        """The names a secret file has where files are not read, by its key: a new hard link
        changes the file's ctime, so a key seen before has no new name."""
        self._lock = threading.Lock()

    def find(self, project: Path) -> FoundSecrets:
        """Every project file a whole read would show with a mask, and each other name it has.

        Args:
            project: The project root, real and absolute.
        """
        with self._lock:
            known, known_elsewhere = self._verdicts, self._elsewhere
        verdicts: dict[Key, Verdict] = {}
        found: dict[tuple[int, int], list[str]] = {}
        blobs: set[str] = set()
        keys: dict[tuple[int, int], Key] = {}
        nlinks: dict[tuple[int, int], int] = {}
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
                keys[(info.st_dev, info.st_ino)] = key
                nlinks[(info.st_dev, info.st_ino)] = info.st_nlink
                blobs.update(verdict)
        missing = {inode for inode, names in found.items() if nlinks[inode] > len(names)}
        elsewhere = {
            keys[inode]: known_elsewhere[keys[inode]] for inode in missing if keys[inode] in known_elsewhere
        }
        searched: dict[tuple[int, int], list[str]] = {
            inode: [] for inode in missing if keys[inode] not in elsewhere
        }
        if searched:
            # Another name of a secret file in a folder whose files are not read (a hard link in
            # .venv, .git/objects), or outside the project: the folders skipped are walked for
            # those inodes alone, once for each key.
            for path, info, look_inside in _walk(project, everything=True):
                names = searched.get((info.st_dev, info.st_ino))
                if names is not None and not look_inside:
                    names.append(path)
            elsewhere |= {keys[inode]: tuple(names) for inode, names in searched.items()}
        for inode in missing:
            found[inode].extend(elsewhere[keys[inode]])
        with self._lock:
            self._verdicts = verdicts
            self._elsewhere = elsewhere
        files = sorted(Path(path) for names in found.values() for path in names)
        compiled = sorted(_bytecode_of(files))
        objects = project / GIT_FOLDER / _GIT_OBJECTS
        history = objects if blobs and _holds_any(objects, blobs) else None
        return FoundSecrets(files=tuple(files), scanned=scanned, compiled=tuple(compiled), history=history)


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


def _shows_a_mask(path: str, key: Key, max_bytes: int) -> Verdict:
    """Whether a whole read of the file would show a mask: text (no NUL where git looks), within the cap.

    Text that is not UTF-8 counts too (see `_decoded`).
    """
    if key[2] > max_bytes:
        return ()
    try:
        fd = os.open(path, _FILE_FLAGS)
    except OSError:
        return ()
    try:
        data = read_at_most(fd, max_bytes, key[2])
    except OSError:
        return ()
    finally:
        os.close(fd)
    if len(data) > max_bytes or b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return ()
    _, findings = redact(_decoded(data)[0])
    if not findings:
        return ()
    header = b"blob %d\x00" % len(data)
    return (hashlib.sha1(header + data).hexdigest(), hashlib.sha256(header + data).hexdigest())  # noqa: S324 - git's object id, not a security hash


_HASHED_FILES_MAX: Final = 10_000
_CHUNK: Final = 1 << 20


def history_holding(project: Path, entries: tuple[Path, ...]) -> Path | None:
    """The project's git object folder where it holds a file among `entries` (or under a folder
    among them) as it is now; None where it holds none, or the project has no git folder.

    Every regular file is hashed whole, as git would store it. Past 10,000 files the answer is the
    folder: a run is kept from git's history rather than left to read one of them there.
    """
    objects = project / GIT_FOLDER / _GIT_OBJECTS
    if not objects.is_dir():
        return None
    blobs: set[str] = set()
    for hashed, path in enumerate(_files_among(entries), start=1):
        if hashed > _HASHED_FILES_MAX:
            return objects
        ids = _blob_ids(path)
        if ids is None:
            return objects  # changed while hashed: it may be held as it was, or as it is
        blobs.update(ids)
    return objects if blobs and _holds_any(objects, blobs) else None


def _files_among(entries: tuple[Path, ...]) -> Iterator[Path]:
    """The regular files among `entries` and below the folders among them, links not followed."""
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            for folder, _folders, names in os.walk(entry):
                yield from (Path(folder) / name for name in names)
        else:
            yield entry


def _blob_ids(path: Path) -> tuple[str, ...] | None:
    """The ids (SHA-1, SHA-256) of a git blob of the file's content; none for what is no regular file
    or is gone; None where the file changed while it was read."""
    try:
        fd = os.open(path, _FILE_FLAGS)
    except OSError:
        return ()
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ()
        header = b"blob %d\x00" % info.st_size
        sha1 = hashlib.sha1(header)  # noqa: S324 - git's object id, not a security hash
        sha256 = hashlib.sha256(header)
        read = 0
        while chunk := os.read(fd, _CHUNK):
            sha1.update(chunk)
            sha256.update(chunk)
            read += len(chunk)
        if read != info.st_size:
            return None
    except OSError:
        return ()
    finally:
        os.close(fd)
    return sha1.hexdigest(), sha256.hexdigest()


def _holds_any(objects: Path, blobs: set[str]) -> bool:
    """Whether the git object folder `objects` holds an object named by any of `blobs`: loose, or
    in a pack (found through its index by binary search, a few reads however large the pack)."""
    for blob in blobs:
        if os.path.isfile(objects / blob[:2] / blob[2:]):
            return True
    try:
        indexes = [entry.path for entry in os.scandir(objects / "pack") if entry.name.endswith(".idx")]
    except OSError:
        return False
    wanted = [bytes.fromhex(blob) for blob in blobs]
    return any(_index_holds(index, wanted) for index in indexes)


def _index_holds(index: str, wanted: list[bytes]) -> bool:
    """Whether the pack index (version 2) at `index` names any of `wanted`: unreadable means no."""
    try:
        with open(index, "rb") as opened:
            header = opened.read(_PACK_INDEX_HEADER.size)
            if len(header) < _PACK_INDEX_HEADER.size:
                return False
            magic, version, *fanout = _PACK_INDEX_HEADER.unpack(header)
            if magic != _PACK_INDEX_MAGIC or version != 2:
                return False
            size = os.fstat(opened.fileno()).st_size
            for name in wanted:
                # The names are sorted; the fan-out table bounds those starting with each byte.
                low = fanout[name[0] - 1] if name[0] else 0
                high = fanout[name[0]]
                width = len(name)
                if _PACK_INDEX_HEADER.size + fanout[255] * width > size:
                    continue  # a SHA-256 name against a SHA-1 index, or the other way round
                while low < high:
                    middle = (low + high) // 2
                    opened.seek(_PACK_INDEX_HEADER.size + middle * width)
                    found = opened.read(width)
                    if found == name:
                        return True
                    if found < name:
                        low = middle + 1
                    else:
                        high = middle
    except OSError:
        return False
    return False


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
    # Installed packages and caches: their own files are looked into (a venv's `pip.conf` may hold
    # an index URL's password), not the packages, whose test data are full of fake keys that would
    # hide library files from every run.
    return _TOP if name in ENVIRONMENT_FOLDERS and not in_git else _READ
