"""The audit log on disk: one JSON line per record, hash-chained, rotated by size and count, owner-only."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from oct_mcp.audit.records import (
    CHAIN_BREAK,
    GENESIS,
    HEAD_BYTES,
    head_disagreement,
    head_path,
    last_byte,
    last_line,
    line_digest,
    parse_head,
    render_head,
    render_record,
    rotated_path,
    seq_of,
    timestamp,
)
from oct_mcp.diagnostics import get_logger

__all__ = ["DIRECTORY_MODE", "FILE_MODE", "LOCK_SUFFIX", "LOCK_WAIT_SECONDS", "AuditFailure", "AuditWriter"]


if TYPE_CHECKING:
    from oct_mcp.audit.checkpoint import HeadSigner
    from oct_mcp.audit.forward import SyslogForwarder
    from oct_mcp.config import McpConfig


FILE_MODE: Final = 0o600


DIRECTORY_MODE: Final = 0o700


LOCK_SUFFIX: Final = ".lock"


LOCK_WAIT_SECONDS: Final = 1.0
"""How long a record waits for another process's hold on the lock (a write takes microseconds)."""


_LOCK_RETRY_FIRST: Final = 0.001


_LOCK_RETRY_MAX: Final = 0.05


_LOCK_BUSY: Final = f"the audit lock ({LOCK_SUFFIX} file) is held by another process"


_log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class AuditFailure:
    """Records are not reaching the disk: since when, why (the latest reason), how many were lost."""

    since: datetime
    reason: str
    lost: int


class _Files:
    """The open descriptors: the log, and the lock file that serialises writers across processes."""

    __slots__ = ("head", "identity", "lock", "log")

    def __init__(self) -> None:
        self.log: int | None = None
        self.lock: int | None = None
        self.head: int | None = None
        self.identity: tuple[int, int, int] | None = None
        """(device, inode, size) of the log as this writer left it: changed means someone else wrote."""

    def close(self) -> None:
        for fd in (self.log, self.lock, self.head):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.log = self.lock = self.head = None
        self.identity = None


class AuditWriter:
    """Appends records to the audit log, each linked to the line before it by its SHA-256.

    Rotation as `logging.handlers.RotatingFileHandler`: before a record would take the file past
    `max_bytes`, `audit.log` becomes `audit.log.1` (`.1` becomes `.2`, ..., `.max_files` is
    dropped). The chain runs on across files. One writer per process serves every task and
    thread (a lock); writers in several processes take turns on `audit.log.lock` (flock, waited
    for at most `LOCK_WAIT_SECONDS`), and each continues the chain from the line the file
    actually ends with. After each record, `audit.log.head` seals its `seq` and hash: a writer
    that finds the log ending before what its head seals writes a `chain_break` record and goes
    on from the head's numbers. `write` never raises: a failure (the lock held too long
    included) is logged, counted and kept for `oct-mcp doctor`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_bytes: int,
        max_files: int,
        signer: HeadSigner | None = None,
        checkpoint_every: int = 1_000,
        checkpoint_seconds: float = 300.0,
        forwarder: SyslogForwarder | None = None,
    ) -> None:
        if max_bytes < 1 or max_files < 1:
            raise ValueError("max_bytes and max_files must be at least 1")
        if checkpoint_every < 1 or checkpoint_seconds <= 0:
            raise ValueError("checkpoint_every and checkpoint_seconds must be positive")
        self.path = Path(path)
        self._path_name = str(self.path)
        self.max_bytes = max_bytes
        self.max_files = max_files
        self._lock = threading.Lock()
        self._files = _Files()
        self._finalizer = weakref.finalize(self, self._files.close)
        self._prev: str | None = None
        self._seq = 0
        self._failure: AuditFailure | None = None
        self._lost_since_last_write = 0
        self._break: dict[str, Any] | None = None
        """The chain_break record the next write puts first, when the disk disagreed with the head."""
        self.signer = signer
        self.checkpoint_every = checkpoint_every
        self.checkpoint_seconds = checkpoint_seconds
        self._unsigned = 0
        """Records this writer put since its last checkpoint (or since it started)."""
        self._last_checkpoint = time.monotonic()
        self._timer: _CheckpointTimer | None = None
        self.forwarder = forwarder
        """Where each line also goes as it is written, off the machine (`audit_syslog_address`)."""

    @classmethod
    def from_config(cls, config: McpConfig, *, project: Path | None = None) -> AuditWriter:
        """A writer at the config's `audit_log_path`, rotating at `audit_log_max_size_mb`, signing
        checkpoints with `audit_signing_key` when it is set.

        Raises:
            ConfigError: The signing key is set but cannot be used (see `load_signer`), or the
                syslog address is not one.
        """
        path = Path(os.path.expanduser(config.audit_log_path))
        signer = None
        if config.audit_signing_key is not None:
            from oct_mcp.audit.checkpoint import load_signer

            forbidden = (path.parent,) if project is None else (path.parent, project)
            signer = load_signer(
                config.audit_signing_key, replica=config.replica_id or "", forbidden=forbidden
            )
        forwarder = None
        if config.audit_syslog_address is not None:
            from oct_mcp.audit.forward import SyslogForwarder, parse_syslog_address

            address = parse_syslog_address(config.audit_syslog_address)
            forwarder = SyslogForwarder(address, replica=config.replica_id)
        return cls(
            path,
            max_bytes=max(1, int(config.audit_log_max_size_mb * 1024 * 1024)),
            max_files=config.audit_log_max_files,
            signer=signer,
            checkpoint_every=config.audit_checkpoint_records,
            checkpoint_seconds=config.audit_checkpoint_seconds,
            forwarder=forwarder,
        )

    @property
    def failure(self) -> AuditFailure | None:
        """Why records are not being written, or None while they are."""
        return self._failure

    def write(self, fields: Mapping[str, Any]) -> bool:
        """Append one record: `time` first, then `fields`, then the chain's `seq` and `prev`.

        Blocks while another process holds the lock, `LOCK_WAIT_SECONDS` at most: not for use
        on an event loop (`write_async` is).

        Returns:
            True if the record reached the file; False if it was lost (the failure is kept).
        """
        written = self.try_write(fields)
        if written is not None:
            return written
        delay = _LOCK_RETRY_FIRST
        give_up = time.monotonic() + self._lock_wait()
        while time.monotonic() < give_up:
            time.sleep(delay)
            delay = min(delay * 2, _LOCK_RETRY_MAX)
            written = self.try_write(fields)
            if written is not None:
                return written
        return self._lose_to_the_lock()

    async def write_async(self, fields: Mapping[str, Any]) -> bool:
        """`write` for the event loop: waits for the lock in sleeps, so the loop runs meanwhile.

        The wait is shielded: a call cancelled (a SIGTERM) still gets its record, within the bound.
        """
        written = self.try_write(fields)
        if written is not None:
            return written
        with anyio.CancelScope(shield=True):
            delay = _LOCK_RETRY_FIRST
            give_up = anyio.current_time() + self._lock_wait()
            while anyio.current_time() < give_up:
                await anyio.sleep(delay)
                delay = min(delay * 2, _LOCK_RETRY_MAX)
                written = self.try_write(fields)
                if written is not None:
                    return written
        return self._lose_to_the_lock()

    def try_write(self, fields: Mapping[str, Any] | None) -> bool | None:
        """One attempt at `write`, without waiting: None when another process holds the lock.

        `fields` None writes no record, only a checkpoint if this writer signs and has records
        since its last one.
        """
        if self.signer is not None and self._timer is None and fields is not None:
            self._timer = _CheckpointTimer(self)
        with self._lock:
            try:
                self._append(fields)
            except _LockBusyError:
                return None
            except Exception as exc:  # noqa: BLE001 - an audit failure must never cost a call its result
                self._fail(exc)
                return False
        return True

    def _lock_wait(self) -> float:
        # Already losing records to a held lock: each call waiting out the bound again would make
        # every call that much slower while the lock stays held. One attempt each, until it frees.
        failure = self._failure
        return 0.0 if failure is not None and failure.reason == _LOCK_BUSY else LOCK_WAIT_SECONDS

    def _lose_to_the_lock(self) -> bool:
        with self._lock:
            self._count_lost(_LOCK_BUSY)
        return False

    def status(self) -> str:
        """`writable`, or what stands in the way: for `oct-mcp doctor`. Creates nothing."""
        failure = self._failure
        if failure is not None:
            since = failure.since.isoformat(timespec="seconds")
            return f"failing since {since} ({failure.reason}), {failure.lost} record(s) lost"
        problem = _probe(self.path)
        if problem is not None:
            return f"failing ({problem})"
        if _lock_held_elsewhere(self.path.with_name(self.path.name + LOCK_SUFFIX)):
            return (
                f"writable, but {_LOCK_BUSY} now: records wait {LOCK_WAIT_SECONDS:g} s for it, "
                "then are counted lost"
            )
        return "writable"

    def checkpoint(self) -> bool:
        """Sign the chain's head now if this writer has put records since its last checkpoint.

        Waits for another process's hold on the lock as `write` does. Returns False when the
        checkpoint could not be written (the failure is kept, as for a record).
        """
        if self.signer is None or not self._unsigned:
            return True
        return self._checkpoint_now()

    def _checkpoint_now(self) -> bool:
        delay = _LOCK_RETRY_FIRST
        give_up = time.monotonic() + self._lock_wait()
        while True:
            written = self.try_write(None)
            if written is not None:
                return written
            if time.monotonic() >= give_up:
                return self._lose_to_the_lock()
            time.sleep(delay)
            delay = min(delay * 2, _LOCK_RETRY_MAX)

    def close(self) -> None:
        """Sign the head (when this writer signs) and close the files; a later write opens them again."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.stop()
        self.checkpoint()
        with self._lock:
            self._files.close()
        forwarder, self.forwarder = self.forwarder, None
        if forwarder is not None:
            forwarder.close()

    def _append(self, fields: Mapping[str, Any] | None) -> None:
        try:
            self._append_once(fields)
        except _FolderRemovedError:
            # The log's folder went away while serving: made again, lock file included.
            self._files.close()
            self._append_once(fields)

    def _append_once(self, fields: Mapping[str, Any] | None) -> None:
        lock, log = self._open()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _LockBusyError from None
        try:
            log, current = self._follow_disk(log)
            if self._break is not None:
                log = self._put(log, current, self._break)
                self._break = None
                current = os.fstat(log)
            if fields is not None:
                record: dict[str, Any] = {"time": None, **fields}
                if self._lost_since_last_write:
                    record["lost_before"] = self._lost_since_last_write
                log = self._put(log, current, record)
                self._unsigned += 1
            if self.signer is not None and self._checkpoint_due(force=fields is None):
                self._put_checkpoint(log, self.signer)
            head = self._files.head
            if head is not None and self._prev is not None:
                os.pwrite(head, render_head(self._seq, self._prev), 0)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
        if fields is not None:
            self._lost_since_last_write = 0
        if self._failure is not None:
            _log.error("audit_recovered", path=str(self.path), lost=self._failure.lost)
            self._failure = None

    def _checkpoint_due(self, *, force: bool) -> bool:
        if not self._unsigned or self._prev is None:
            return False
        if force or self._unsigned >= self.checkpoint_every:
            return True
        return time.monotonic() - self._last_checkpoint >= self.checkpoint_seconds

    def _put_checkpoint(self, log: int, signer: HeadSigner) -> None:
        """Sign the head the chain has now (the record just put) as the next record."""
        digest = self._prev if self._prev is not None else GENESIS
        record = {"time": None, **signer.checkpoint_record(seq=self._seq, digest=digest, time=timestamp())}
        self._put(log, os.fstat(log), record)
        self._unsigned = 0
        self._last_checkpoint = time.monotonic()

    def _put(self, log: int, current: os.stat_result, record: dict[str, Any]) -> int:
        """Write `record` as the chain's next line, rotating first if it would not fit; returns the log."""
        record["seq"] = self._seq + 1
        record["prev"] = self._prev if self._prev is not None else GENESIS
        # `time` is stamped here, in file order; it was put first, where it is shown.
        record["time"] = timestamp()
        data = render_record(record)
        if current.st_size > 0 and current.st_size + len(data) + 1 > self.max_bytes:
            log = self._rotate(log)
            current = os.fstat(log)
        _write_all(log, data + b"\n")
        if self.forwarder is not None:
            self.forwarder.send(data)
        self._files.identity = (current.st_dev, current.st_ino, current.st_size + len(data) + 1)
        self._prev = line_digest(data)
        self._seq += 1
        return log

    def _open(self) -> tuple[int, int]:
        """The lock file's and the log's descriptors, opened (the directory made) if need be."""
        files = self._files
        if files.log is not None and files.lock is not None:
            return files.lock, files.log
        files.close()
        parent = self.path.parent
        if not parent.is_dir():
            blocker = _nearest_existing(parent)
            if not blocker.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(blocker))
            parent.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        lock = files.lock = _open_owner_only(self.path.with_name(self.path.name + LOCK_SUFFIX), os.O_RDWR)
        files.head = _open_owner_only(head_path(self.path), os.O_RDWR)
        log = files.log = _open_owner_only(self.path, os.O_WRONLY | os.O_APPEND)
        return lock, log

    def _reopen_log(self, log: int) -> int:
        self._files.log = None
        os.close(log)
        log = self._files.log = _open_owner_only(self.path, os.O_WRONLY | os.O_APPEND)
        return log

    def _follow_disk(self, log: int) -> tuple[int, os.stat_result]:
        """Continue the chain from the file's last line if anyone but this writer changed the file.

        Returns:
            The descriptor to append to (another one if the file at the path was replaced), and
            its status.
        """
        try:
            on_disk = os.stat(self._path_name)
        except FileNotFoundError:
            # Checked only here, not before each record: that stat cost 4 us a call (measured).
            if not os.path.isdir(self.path.parent):
                raise _FolderRemovedError from None
            on_disk = None
        if on_disk is not None and _identity(on_disk) == self._files.identity:
            # The path names the file this writer appends to (its descriptor keeps the inode from
            # being reused), at the size it left it: nobody else wrote. One syscall, not two.
            return log, on_disk
        current = os.fstat(log)
        if on_disk is None or (on_disk.st_dev, on_disk.st_ino) != (current.st_dev, current.st_ino):
            # Rotated or removed by another process: append to the file now at the path.
            log = self._reopen_log(log)
            current = os.fstat(log)
        if _identity(current) == self._files.identity:
            return log, current
        if current.st_size > 0 and last_byte(self.path) != b"\n":
            # A torn line (a crash mid-write): end it, so this record starts a line of its own.
            _write_all(log, b"\n")
        last = last_line(self.path) or last_line(rotated_path(self.path, 1))
        head_fd = self._files.head
        head = parse_head(os.pread(head_fd, HEAD_BYTES, 0)) if head_fd is not None else None
        if last is not None:
            self._prev = line_digest(last)
            self._seq = seq_of(last)
        # Nothing on disk: a writer that has written keeps its chain (the files may have been removed).
        problem = head_disagreement(head, last)
        if problem is not None:
            _log.error("audit_chain_break", path=str(self.path), problem=problem)
            self._break = {"time": None, "event": CHAIN_BREAK, "problem": problem}
        if head is not None:
            # Numbers are never used twice, whatever the disk now ends with.
            self._seq = max(self._seq, head.seq)
        current = os.fstat(log)
        self._files.identity = _identity(current)
        return log, current

    def _rotate(self, log: int) -> int:
        try:
            for number in range(self.max_files - 1, 0, -1):
                source = rotated_path(self.path, number)
                if source.exists():
                    os.replace(source, rotated_path(self.path, number + 1))
            os.replace(self.path, rotated_path(self.path, 1))
        except OSError as exc:
            # Better an oversized file than a lost record.
            _log.error("audit_rotation_failed", path=str(self.path), problem=_describe(exc))
            return log
        return self._reopen_log(log)

    def _fail(self, exc: Exception) -> None:
        self._files.close()
        self._count_lost(_describe(exc))

    def _count_lost(self, reason: str) -> None:
        self._lost_since_last_write += 1
        previous = self._failure
        if previous is None or previous.reason != reason:
            _log.error("audit_write_failed", path=str(self.path), problem=reason)
        since = previous.since if previous is not None else datetime.now(UTC)
        lost = previous.lost + 1 if previous is not None else 1
        self._failure = AuditFailure(since=since, reason=reason, lost=lost)


class _CheckpointTimer:
    """Signs the head every `checkpoint_seconds` while records come in slowly or not at all.

    A daemon thread, so it needs no event loop (the writer serves threads and processes alike);
    it holds the writer only weakly and ends when the writer is closed or collected.
    """

    def __init__(self, writer: AuditWriter) -> None:
        self._stopped = threading.Event()
        self._interval = writer.checkpoint_seconds
        reference = weakref.ref(writer)
        thread = threading.Thread(target=self._run, args=(reference,), name="audit-checkpoints", daemon=True)
        thread.start()

    def _run(self, reference: weakref.ref[AuditWriter]) -> None:
        while not self._stopped.wait(self._interval):
            writer = reference()
            if writer is None:
                return
            if writer._unsigned and time.monotonic() - writer._last_checkpoint >= self._interval:
                writer.try_write(None)
            del writer

    def stop(self) -> None:
        self._stopped.set()


class _FolderRemovedError(Exception):
    """The log's folder is gone: open everything again, from the folder down."""


class _LockBusyError(Exception):
    """Another process holds the lock: try again shortly, or count the record lost."""


def _identity(stat: os.stat_result) -> tuple[int, int, int]:
    return stat.st_dev, stat.st_ino, stat.st_size


def _open_owner_only(path: Path, flags: int) -> int:
    return os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _probe(path: Path) -> str | None:
    try:
        exists = path.exists()
    except OSError:
        # A folder on the way that this user may not search: nothing can be created below it.
        exists = False
    if exists:
        if not path.is_file():
            return f"{path} is not a file"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC))
        except OSError as exc:
            return _describe(exc)
        return None
    ancestor = _nearest_existing(path.parent)
    if not ancestor.is_dir():
        return f"{ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot create files in {ancestor}"
    return None


def _lock_held_elsewhere(lock: Path) -> bool:
    """True when another process holds the lock file now (probed with a shared lock, let go at once)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing it lets go of the shared lock, if it was taken
    return False


def _nearest_existing(path: Path) -> Path:
    while path != path.parent:
        try:
            if path.exists():
                break
        except OSError:
            pass  # not searchable: look further up
        path = path.parent
    return path


def _describe(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return type(exc).__name__
