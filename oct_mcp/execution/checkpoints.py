"""Checkpoints: the state of every path a change touches, before and after, kept outside the project.

The applier records a checkpoint before it changes anything, so every change it makes can be
undone (`oct_undo`). The store is one folder per project under the server's own folder,
owner-only: file contents as zlib-compressed blobs named by their sha256 (a content seen twice is
kept once), and one JSON document per checkpoint. It holds real contents, secrets included:
nothing reads it but the undo tools, whose diffs are masked like every other diff.

A checkpoint costs what the change touches, not the project's size: the contents of the files a
change replaces or removes (the new ones are not kept: undo needs only the state before, and the
digest of the state after tells whether a file changed since). The store keeps at most
`max_count` checkpoints and `max_bytes` of blobs, dropping the oldest first; a file over
`file_max_bytes` is recorded as not undoable rather than copied.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import orjson

from oct_mcp.errors import ExecutionError

if TYPE_CHECKING:
    from oct_mcp.config import McpConfig

__all__ = [
    "ABSENT_STATE",
    "FOLDER_STATE",
    "PENDING_STATE",
    "Checkpoint",
    "CheckpointStore",
    "Entry",
    "PathState",
    "StatKey",
    "StoreUsage",
    "project_key",
    "record_or_refuse",
    "record_paths_before",
    "state_at",
]

_CHUNK: Final = 1_048_576
_MIB: Final = 1_048_576
_DOCUMENT_SUFFIX: Final = ".json"
_ID_WIDTH: Final = 8

StatKey = tuple[int, ...]
"""A file's stat fields a change moves (times, size, inode): an unchanged key, an unchanged file."""
Kind = Literal["absent", "file", "symlink", "folder", "other", "unrecorded", "pending"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PathState:
    """What stands at a path: nothing, a file (its content's digest and mode), a link, a folder."""

    kind: Kind
    digest: str = ""
    """A file's `sha256:<hex>`; a link's target."""
    mode: int | None = None

    def same_as(self, other: PathState) -> bool:
        """The same thing stands there (a file's mode aside: a change of mode alone is no conflict)."""
        return self.kind == other.kind and self.digest == other.digest


ABSENT_STATE: Final = PathState(kind="absent")
PENDING_STATE: Final = PathState(kind="pending")
"""The state after a command's change, until the command has run and the checkpoint is settled: it
matches nothing, so a checkpoint a crash left unsettled undoes only with overwrite."""
FOLDER_STATE: Final = PathState(kind="folder")


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One path a change touched: what stood there before it, and what it left."""

    path: str
    before: PathState
    after: PathState


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """The paths one call changed, as they were before it and as it left them."""

    id: str
    time: float
    """Seconds since the epoch."""
    tool: str
    call_id: str
    entries: tuple[Entry, ...]

    @property
    def undoable(self) -> bool:
        """Every path's state before the change is kept (none was over the size limit)."""
        return all(entry.before.kind != "unrecorded" for entry in self.entries)


@dataclass(frozen=True, slots=True)
class StoreUsage:
    folder: Path
    checkpoints: int
    blob_bytes: int


def project_key(root: Path) -> str:
    """The store folder's name for a project: a digest of its root, so two projects never share one."""
    return hashlib.sha256(os.fsencode(root)).hexdigest()[:24]


def state_at(path: str, *, keep: CheckpointStore | None = None) -> PathState:
    """What stands at `path` (links not followed); with `keep`, a file's content goes into its blobs.

    A file over the store's size limit is `unrecorded` when it must be kept.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ABSENT_STATE
    if stat.S_ISDIR(info.st_mode):
        return FOLDER_STATE
    if stat.S_ISLNK(info.st_mode):
        return PathState(kind="symlink", digest=os.readlink(path))
    if not stat.S_ISREG(info.st_mode):
        return PathState(kind="other")
    mode = stat.S_IMODE(info.st_mode)
    if keep is not None and info.st_size > keep.file_max_bytes:
        return PathState(kind="unrecorded", mode=mode)
    data = _read_file(path)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if keep is not None:
        keep.put_blob(digest, data)
    return PathState(kind="file", digest=digest, mode=mode)


@dataclass(eq=False)
class CheckpointStore:
    """The checkpoints of one project, in a folder only the server's user can read."""

    folder: Path
    max_count: int = 200
    max_bytes: int = 256 * 1_048_576
    file_max_bytes: int = 8 * 1_048_576
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _baseline: dict[str, tuple[StatKey, PathState]] = field(default_factory=dict, repr=False)
    """What each project file was when a command that may change anything last looked: its stat
    key and state, with a file's content kept under `baseline/` (see `keep_baseline`)."""
    _baseline_uses: Counter[str] = field(default_factory=Counter, repr=False)
    """How many baseline files have each content: one no file has is deleted."""
    _baseline_swept: bool = field(default=False, repr=False)

    @classmethod
    def for_project(
        cls, base: str | os.PathLike[str], root: Path, *, max_count: int, max_bytes: int, file_max_bytes: int
    ) -> CheckpointStore:
        folder = Path(os.path.expanduser(base)) / project_key(root)
        return cls(folder, max_count=max_count, max_bytes=max_bytes, file_max_bytes=file_max_bytes)

    @classmethod
    def for_config(cls, config: McpConfig, root: Path) -> CheckpointStore | None:
        """The project's store as the config sets it; None where checkpoints are off."""
        if not config.checkpoint_max_count:
            return None
        return cls.for_project(
            config.checkpoint_dir,
            root,
            max_count=config.checkpoint_max_count,
            max_bytes=int(config.checkpoint_max_size_mb * _MIB),
            file_max_bytes=int(config.checkpoint_file_max_mb * _MIB),
        )

    @property
    def _objects(self) -> Path:
        return self.folder / "objects"

    @property
    def _documents(self) -> Path:
        return self.folder / "checkpoints"

    @property
    def _baseline_blobs(self) -> Path:
        return self.folder / "baseline"

    def _prepare(self) -> None:
        self.folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in (self.folder, self._objects, self._documents, self._baseline_blobs):
            folder.mkdir(mode=0o700, exist_ok=True)
            # Made by an older umask or by hand: the store holds secrets, so owner-only whatever it was.
            if stat.S_IMODE(folder.stat().st_mode) & 0o077:
                folder.chmod(0o700)

    def put_blob(self, digest: str, data: bytes) -> None:
        """Keep `data` under its digest (once: a content kept already is not written again)."""
        path = self._objects / digest.removeprefix("sha256:")
        if path.exists():
            return
        _write_private(path, zlib.compress(data, 6))

    def keep_baseline(self, root: Path, files: Mapping[str, StatKey]) -> None:
        """Keep what each of `files` (relative to `root`, with their stat keys) is now, before a
        command that may change any of them runs: only those whose key this store has not seen
        are read, so a warm call costs a comparison of keys.

        A command's changes are known only after it ran; what it replaced is then taken from here
        (`record_command`). Contents live under `baseline/`, owner-only like the rest, compressed
        fast (level 1: the first call reads the whole project), outside the checkpoints' size limit;
        a file over `file_max_bytes` is kept as not undoable.

        Raises:
            OSError: The store could not be written.
        """
        with self._lock:
            self._prepare()
            known, uses = self._baseline, self._baseline_uses
            for gone in known.keys() - files.keys():
                self._forget_baseline(known.pop(gone)[1])
            for path, key in files.items():
                seen = known.get(path)
                if seen is None or seen[0] != key:
                    state = self._baseline_state(os.path.join(root, path))
                    if state.kind == "file":
                        uses[state.digest] += 1
                    known[path] = (key, state)
                    if seen is not None:
                        self._forget_baseline(seen[1])
            if not self._baseline_swept:
                # Left by an earlier server of this project: what no file is now, goes.
                for blob in _files(self._baseline_blobs):
                    if f"sha256:{blob.name}" not in uses:
                        with contextlib.suppress(FileNotFoundError):
                            blob.unlink()
                self._baseline_swept = True

    def _forget_baseline(self, state: PathState) -> None:
        """One file less is `state`: its content goes when no file of the baseline has it."""
        if state.kind != "file":
            return
        self._baseline_uses[state.digest] -= 1
        if self._baseline_uses[state.digest] <= 0:
            del self._baseline_uses[state.digest]
            with contextlib.suppress(FileNotFoundError):
                (self._baseline_blobs / state.digest.removeprefix("sha256:")).unlink()

    def _baseline_state(self, path: str) -> PathState:
        """What stands at `path`, a file's content kept under `baseline/`; through no link."""
        if _through_linked_folder(path):
            return PathState(kind="unrecorded")
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return ABSENT_STATE
        except OSError:
            return PathState(kind="unrecorded")
        if not stat.S_ISREG(info.st_mode):
            return state_at(path)
        if info.st_size > self.file_max_bytes:
            return PathState(kind="unrecorded", mode=stat.S_IMODE(info.st_mode))
        try:
            data = _read_file(path)
        except OSError:
            # A file the server cannot read (mode 0000, gone meanwhile) is not undoable; the run is
            # not refused for it: only a store that cannot be written refuses.
            return PathState(kind="unrecorded", mode=stat.S_IMODE(info.st_mode))
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        kept = self._baseline_blobs / digest.removeprefix("sha256:")
        if not kept.exists():
            # Not synced: a baseline lost in a crash is read again; a checkpoint that adopts one syncs it.
            _write_private(kept, zlib.compress(data, 1), durable=False)
        return PathState(kind="file", digest=digest, mode=stat.S_IMODE(info.st_mode))

    def record_command(
        self, root: Path, changed: Sequence[str], *, tool: str, call_id: str
    ) -> Checkpoint | None:
        """A checkpoint of `changed` (relative to `root`) as a command left them, each as it was
        before from the baseline kept before the command ran (absent where it was not there).

        Returns:
            The checkpoint; None where nothing changed.

        Raises:
            OSError: The store could not be written (the command has run: its changes stay).
        """
        if not changed:
            return None

        def capture(kept: CheckpointStore) -> list[Entry]:
            entries = []
            for path in changed:
                seen = kept._baseline.get(path)
                before = ABSENT_STATE if seen is None else seen[1]
                if before.kind == "file":
                    kept._adopt_baseline_blob(before.digest)
                full = os.path.join(root, path)
                after = PathState(kind="unrecorded") if _through_linked_folder(full) else state_at(full)
                entries.append(Entry(path=path, before=before, after=after))
            return entries

        return self.record(tool=tool, call_id=call_id, capture=capture)

    def _adopt_baseline_blob(self, digest: str) -> None:
        """Make a baseline content a checkpoint's: the same file under a second name (no copy; the
        baseline may then drop its own), or a copy where the file system has no hard links."""
        name = digest.removeprefix("sha256:")
        if (self._objects / name).exists():
            return
        try:
            os.link(self._baseline_blobs / name, self._objects / name)
        except FileExistsError:
            return
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP):
                raise
            self.put_blob(digest, zlib.decompress((self._baseline_blobs / name).read_bytes()))
            return
        # The baseline wrote it without a sync; a checkpoint's content must outlive a crash.
        fd = os.open(self._objects / name, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def blob(self, digest: str) -> bytes:
        """The content kept under `digest`.

        Raises:
            FileNotFoundError: It is not kept (dropped with an old checkpoint).
            ValueError: What is kept does not have that digest (the store was changed).
        """
        data = zlib.decompress((self._objects / digest.removeprefix("sha256:")).read_bytes())
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise ValueError("a kept content does not match its digest")
        return data

    def record(
        self, *, tool: str, call_id: str, capture: Callable[[CheckpointStore], Sequence[Entry]]
    ) -> Checkpoint:
        """Write a checkpoint of what `capture` finds (keeping contents through `state_at(keep=store)`),
        then drop the oldest past the limits.

        Under the store's lock from capture to record: a blob kept for this checkpoint cannot be
        collected as unused by another call's pruning before the checkpoint names it.
        """
        with self._lock:
            self._prepare()
            entries = capture(self)
            number = max((int(name) for name in self._ids()), default=0) + 1
            checkpoint = Checkpoint(
                id=str(number), time=time.time(), tool=tool, call_id=call_id, entries=tuple(entries)
            )
            _write_private(self._documents / f"{number:0{_ID_WIDTH}d}{_DOCUMENT_SUFFIX}", _encode(checkpoint))
            self._prune()
        return checkpoint

    def settle(self, checkpoint: Checkpoint, root: Path) -> Checkpoint | None:
        """Write what a command left at each path of `checkpoint` (recorded before it ran, its states
        after `PENDING_STATE`): the states now, so a later change to them shows as one.

        Returns:
            The settled checkpoint; None where the command changed none of its paths (it failed,
            or found them as they were): then there is nothing to undo, and it is dropped.
        """
        entries = tuple(
            replace(entry, after=state_at(os.path.join(root, entry.path))) for entry in checkpoint.entries
        )
        changed = any(not entry.after.same_as(entry.before) for entry in entries)
        settled = replace(checkpoint, entries=entries)
        with self._lock:
            path = self._documents / f"{int(checkpoint.id):0{_ID_WIDTH}d}{_DOCUMENT_SUFFIX}"
            if not path.exists():  # dropped meanwhile by newer ones past the limits
                return None
            if not changed:
                self._drop(checkpoint.id)
                self._collect()
                return None
            _write_private(path, _encode(settled))
        return settled

    def list(self) -> list[Checkpoint]:
        """Every checkpoint kept, newest first."""
        found = []
        for name in sorted(self._ids(), key=int, reverse=True):
            checkpoint = self.get(name)
            if checkpoint is not None:
                found.append(checkpoint)
        return found

    def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint by its id, or None when there is none (or it cannot be read)."""
        if not checkpoint_id.isdigit() or len(checkpoint_id) > _ID_WIDTH:
            return None
        path = self._documents / f"{int(checkpoint_id):0{_ID_WIDTH}d}{_DOCUMENT_SUFFIX}"
        try:
            return _decode(path.read_bytes())
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def usage(self) -> StoreUsage:
        """How many checkpoints, and the bytes their blobs take."""
        blobs = sum(path.stat().st_size for path in _files(self._objects))
        return StoreUsage(self.folder, len(list(self._ids())), blobs)

    def _ids(self) -> Iterator[str]:
        for path in _files(self._documents):
            stem = path.name.removesuffix(_DOCUMENT_SUFFIX)
            if path.name.endswith(_DOCUMENT_SUFFIX) and stem.isdigit():
                yield str(int(stem))

    def _prune(self) -> None:
        """Drop the oldest checkpoints past `max_count` or `max_bytes`, then the blobs none uses."""
        kept = sorted(self._ids(), key=int)
        while len(kept) > self.max_count:
            self._drop(kept.pop(0))
        # The newest stays, whatever its size: the change it records is about to be made.
        while len(kept) > 1 and self.usage().blob_bytes > self.max_bytes:
            self._drop(kept.pop(0))
            self._collect()
        self._collect()

    def _drop(self, checkpoint_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self._documents / f"{int(checkpoint_id):0{_ID_WIDTH}d}{_DOCUMENT_SUFFIX}").unlink()

    def _collect(self) -> None:
        used = {
            state.digest.removeprefix("sha256:")
            for checkpoint in self.list()
            for entry in checkpoint.entries
            for state in (entry.before,)
            if state.kind == "file"
        }
        for path in _files(self._objects):
            if path.name not in used:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


def record_or_refuse(
    store: CheckpointStore, *, tool: str, call_id: str, capture: Callable[[CheckpointStore], Sequence[Entry]]
) -> Checkpoint:
    """`store.record`, or a refusal of the change when the checkpoint cannot be written.

    Raises:
        ExecutionError: The store could not be written; nothing was changed (a change that could
            not be undone is not made unasked).
    """
    try:
        return store.record(tool=tool, call_id=call_id, capture=capture)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ExecutionError(
            f"the checkpoint of this change could not be written ({reason}), so nothing was "
            "changed; fix the checkpoint_dir folder, or set checkpoint_max_count to 0 to change "
            "files without undo"
        ) from exc


def record_paths_before(
    store: CheckpointStore, root: Path, paths: Sequence[str], *, tool: str, call_id: str
) -> Checkpoint:
    """A checkpoint of `paths` (relative to `root`) as they are before a command changes them; its
    states after are pending until `settle`. A path reached through a link is kept as not undoable.

    Raises:
        ExecutionError: The store could not be written.
    """

    def capture(kept: CheckpointStore) -> list[Entry]:
        entries = []
        for path in paths:
            full = os.path.join(root, path)
            # The command's git or tool never writes through a linked folder; the store never reads
            # through one either (it could lead out of the project).
            before = (
                PathState(kind="unrecorded") if _through_linked_folder(full) else state_at(full, keep=kept)
            )
            entries.append(Entry(path=path, before=before, after=PENDING_STATE))
        return entries

    return record_or_refuse(store, tool=tool, call_id=call_id, capture=capture)


def _through_linked_folder(path: str) -> bool:
    """Whether a folder on the way to `path` is a link: what stands there may lie outside the project."""
    parent = os.path.dirname(path)
    return os.path.realpath(parent) != os.path.normpath(parent)


def _read_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        chunks = []
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _files(folder: Path) -> Iterable[Path]:
    try:
        return list(folder.iterdir())
    except FileNotFoundError:
        return []


def _write_private(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write owner-only through a temporary file renamed over `path`: never half a document;
    `durable`: synced to disk before the rename."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


def _state_document(state: PathState) -> dict[str, object]:
    return {"kind": state.kind, "digest": state.digest, "mode": state.mode}


def _encode(checkpoint: Checkpoint) -> bytes:
    return orjson.dumps(
        {
            "id": checkpoint.id,
            "time": checkpoint.time,
            "tool": checkpoint.tool,
            "call_id": checkpoint.call_id,
            "entries": [
                {"path": e.path, "before": _state_document(e.before), "after": _state_document(e.after)}
                for e in checkpoint.entries
            ],
        }
    )


def _state(document: dict[str, object]) -> PathState:
    kind = document["kind"]
    if kind not in ("absent", "file", "symlink", "folder", "other", "unrecorded", "pending"):
        raise ValueError("an unknown state")
    mode = document.get("mode")
    return PathState(
        kind=kind, digest=str(document.get("digest", "")), mode=mode if isinstance(mode, int) else None
    )


def _decode(data: bytes) -> Checkpoint:
    document = orjson.loads(data)
    return Checkpoint(
        id=str(document["id"]),
        time=float(document["time"]),
        tool=str(document["tool"]),
        call_id=str(document["call_id"]),
        entries=tuple(
            Entry(path=str(e["path"]), before=_state(e["before"]), after=_state(e["after"]))
            for e in document["entries"]
        ),
    )
