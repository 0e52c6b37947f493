"""Screening a search's files in the walk's order, on two cores: chunks go to the screening helper
while it has room and are screened here meanwhile; what is given out keeps the walk's order.

A chunk screened here keeps only its verdicts, and every match is read again as it is given out,
so what is held ahead is a byte a file. The helper process itself is `screen_helper`.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeAlias

from oct_mcp.deadline import Deadline
from oct_mcp.file_screen import (
    MATCH,
    NO_MATCH,
    SKIPPED,
    UNREACHED,
    ScreenQuery,
    screen_file_at,
    screen_files,
)
from oct_mcp.tools.screen_helper import CHUNK_FILES, IN_FLIGHT_MAX, SCREEN_HELPER, ScreenHelper

__all__ = ["FileRun", "ScreenCounts", "Screened", "screen_in_order"]

CHUNK_FOLDERS_MAX: Final = 8
"""Folders a request: each is a descriptor the chunk holds until its files are given out."""
PENDING_MAX: Final = 16
"""Chunks walked ahead of the one given out next: with CHUNK_FOLDERS_MAX, at most about 150
descriptors held at once, far under the usual limit of 1,024."""

FileRun: TypeAlias = tuple[int, str, list[str]]
"""Files of one folder that follow each other in the walk: the folder's open descriptor (open only
until the walk moves on), its path from the root ending in `/` (`` for the root), their names."""


@dataclass(frozen=True, slots=True)
class Screened:
    """A file of the walk the pattern matches in: its path and its bytes."""

    path: str
    data: bytes


@dataclass(slots=True)
class ScreenCounts:
    """The files given out so far, matching or not: searched, and skipped (file_screen's SKIPPED); and
    whether the search's time was up before every file was screened."""

    searched: int = 0
    skipped: int = 0
    stopped_early: bool = False
    all_given_out: bool = False
    """Every file of the walk was given out: a page that ended before did not reach where the walk
    stopped, if it stopped at its limit."""

    def add(self, verdicts: bytes) -> None:
        self.searched += verdicts.count(NO_MATCH) + verdicts.count(MATCH)
        self.skipped += verdicts.count(SKIPPED)


@dataclass(slots=True)
class _Chunk:
    """Up to `files_max` files in walk order, with descriptors of their folders that are the chunk's own
    (the walk closes its own as it moves on). Unassigned, then at the helper (`request`) until its
    verdicts come; or screened here, part or whole, ahead of its turn or as it is given out."""

    files_max: int = CHUNK_FILES
    folders: list[int] = field(default_factory=list)
    """-1 for a folder that could not be held (no descriptor left): opening below it fails (EBADF), so
    its files are SKIPPED, as files the walk could not open."""
    prefixes: list[str] = field(default_factory=list)
    names: list[tuple[int, str]] = field(default_factory=list)
    """Each file's folder, by its index in `folders`, and its name."""
    request: int | None = None
    """Set while the helper has it."""
    verdicts: bytes | None = None
    """The first files' verdicts, or all of them."""

    def add(self, folder_fd: int, prefix: str, names: list[str]) -> None:
        try:
            held = os.dup(folder_fd)
        except OSError:
            held = -1
        index = len(self.folders)
        self.folders.append(held)
        self.prefixes.append(prefix)
        self.names += [(index, name) for name in names]

    @property
    def full(self) -> bool:
        return len(self.names) >= self.files_max or len(self.folders) == CHUNK_FOLDERS_MAX

    @property
    def unassigned(self) -> bool:
        return self.request is None and self.verdicts is None

    @property
    def sendable(self) -> bool:
        return -1 not in self.folders

    @property
    def screened(self) -> bool:
        return self.verdicts is not None and len(self.verdicts) == len(self.names)

    def screen_some(self, files: int, matcher: Any, file_max_bytes: int, deadline: Deadline) -> None:
        """Screen here its next `files` files, until `deadline`."""
        done = self.verdicts or b""
        names = self.names[len(done) : len(done) + files]
        self.verdicts = done + screen_files(self.folders, names, matcher, file_max_bytes, deadline.passed)

    def give_out(
        self, matcher: Any, file_max_bytes: int, deadline: Deadline, counts: ScreenCounts
    ) -> Iterator[Screened]:
        """The matching files, each read (again) here and counted with the files before it as it is
        given out; screened here file by file when the chunk has no verdicts yet."""
        verdicts = self.verdicts or b""
        if len(verdicts) > len(self.names):
            raise RuntimeError("a chunk's verdicts do not match its files")
        # The files without a verdict yet are screened as they come, as a match is screened again.
        verdicts += bytes((MATCH,)) * (len(self.names) - len(verdicts))
        folders = self.folders
        start = 0
        # Most files do not match: those are counted a run at a time, not one by one.
        while (index := verdicts.find(MATCH, start)) != -1:
            if self._stop_at(verdicts[start:index], counts):
                return
            start = index + 1
            if deadline.passed():
                counts.stopped_early = True
                return
            folder, name = self.names[index]
            # The helper's word decides only what is not shown: a match is read and screened again here.
            verdict, data = screen_file_at(folders[folder], name, matcher, file_max_bytes)
            counts.add(bytes((verdict,)))
            if verdict == MATCH and data is not None:
                yield Screened(self.prefixes[folder] + name, data)
        self._stop_at(verdicts[start:], counts)

    @staticmethod
    def _stop_at(verdicts: bytes, counts: ScreenCounts) -> bool:
        """Count a run of verdicts with no match among them, up to the first UNREACHED if any."""
        unreached = verdicts.find(UNREACHED)
        if unreached == -1:
            counts.add(verdicts)
            return False
        counts.add(verdicts[:unreached])
        counts.stopped_early = True
        return True

    def close(self) -> None:
        for fd in self.folders:
            if fd != -1:
                os.close(fd)
        self.folders.clear()


@dataclass
class _OrderedScreen:
    """The chunks of one search between the walk and its results: which the helper screens, which this
    process screens while it waits for the helper, and when to wait."""

    query: ScreenQuery
    helper: ScreenHelper | None
    counts: ScreenCounts
    deadline: Deadline
    matcher: Any = None
    pending: deque[_Chunk] = field(default_factory=deque)
    """Chunks not given out yet, in walk order."""
    given_out: int = 0
    held_since: float | None = None
    """When the first chunk began to wait for the walk to go ahead (see `_holds_back`)."""

    def __post_init__(self) -> None:
        self.matcher = self.query.matcher()

    def add(self, chunk: _Chunk) -> None:
        self.pending.append(chunk)
        self._feed()

    def _helper_has_room(self) -> bool:
        return self.helper is not None and self.helper.has_room()

    def _feed(self) -> None:
        """Send the helper unassigned chunks behind the first, while it has room (`ScreenHelper.has_room`)."""
        for index, chunk in enumerate(self.pending):
            helper = self.helper
            if helper is None or not self._helper_has_room():
                return
            if index == 0 or not chunk.unassigned or not chunk.sendable:
                continue
            # The helper is sent the time the search's own clock (a test's, maybe) has left, as a
            # deadline on the machine's monotonic clock, which every process shares.
            helper_deadline = time.monotonic() + self.deadline.left()
            chunk.request = helper.send(self.query, chunk.folders, chunk.names, helper_deadline)
            if chunk.request is None:
                self._helper_gone()
                return

    def give_out(self, *, walk_done: bool) -> Iterator[Screened]:
        """The results of the chunks in order, as far as they can be given without waiting on a walk
        that can go on (with `walk_done`, all of them)."""
        file_max_bytes = self.query.file_max_bytes
        while self.pending and not self.counts.stopped_early:
            head = self.pending[0]
            if head.request is not None and not self._collect(wait=False):
                # The helper has the first chunk: screen a few files behind it meanwhile (looking for its
                # reply between them), or walk on, or wait.
                spare = next(
                    (chunk for chunk in self.pending if chunk.request is None and not chunk.screened), None
                )
                if spare is not None:
                    spare.screen_some(SPARE_FILES, self.matcher, file_max_bytes, self.deadline)
                elif walk_done or len(self.pending) > PENDING_MAX:
                    self._collect(wait=True)
                else:
                    return
                continue
            if head.unassigned and not walk_done and self._holds_back():
                return
            self.held_since = None
            self.pending.popleft()
            self.given_out += 1
            try:
                yield from head.give_out(self.matcher, file_max_bytes, self.deadline, self.counts)
            finally:
                head.close()
            self._feed()

    def _holds_back(self) -> bool:
        """Walk on before screening the first chunk here, so the helper, which has room, gets the chunks
        behind it: not for the search's first chunk (a page that fills there waits for no one), nor
        once enough are walked, nor for longer than HOLD_BACK_SECONDS (a slow walk is not waited on)."""
        if not self.given_out or len(self.pending) > IN_FLIGHT_MAX or not self._helper_has_room():
            return False
        now = time.monotonic()
        if self.held_since is None:
            self.held_since = now
        return now - self.held_since < HOLD_BACK_SECONDS

    def _collect(self, *, wait: bool) -> bool:
        """Take the helper's replies that are there (with `wait`, until the first chunk's, at most until
        the search's time is up); True once the first chunk is no longer at the helper."""
        head = self.pending[0]
        while head.request is not None:
            helper = self.helper
            if helper is None:
                return True  # unreachable: a chunk at the helper implies one
            timeout = self.deadline.left() + _DEADLINE_GRACE_SECONDS if wait else 0
            reply = helper.receive(timeout)
            if reply is None:
                if not helper.ready():
                    self._helper_gone()
                    return True
                if wait:
                    # Its time is up and the helper is still on a file of it: nothing after that is shown.
                    self.counts.stopped_early = True
                    return True
                return False
            request, verdicts = reply
            sent = next(chunk for chunk in self.pending if chunk.request is not None)
            if request != sent.request or len(verdicts) != len(sent.names):
                self._helper_gone()
                return True
            sent.verdicts, sent.request = verdicts, None
        return True

    def _helper_gone(self) -> None:
        """The helper failed: what it held goes back to this process, and it is not used again here."""
        if self.helper is not None:
            self.helper.stop()
            self.helper = None
        for chunk in self.pending:
            chunk.request = None


_DEADLINE_GRACE_SECONDS: Final = 0.05
"""How long past the search's time a reply is waited for: the helper stops at the same time."""
SPARE_FILES: Final = 8
"""Files screened here at a time while the helper has the first chunk, its reply looked for between."""
HOLD_BACK_SECONDS: Final = 0.005
"""At most this long the first chunk waits for the walk to go ahead (see `_OrderedScreen._holds_back`)."""


def screen_in_order(
    runs: Iterable[FileRun],
    query: ScreenQuery,
    counts: ScreenCounts,
    project: Path,
    deadline: Deadline,
    helper: ScreenHelper | None = SCREEN_HELPER,
) -> Generator[Screened, None, None]:
    """The files of `runs` that `query` matches in, in their order, screened by the helper and by this
    process until `deadline`; `counts` counts every file given out, matching or not, up to
    the last match given, and says when the time ran out first and when every file was given out.

    Without a helper (None, another search has it, or it cannot run), all here, a file at a time.
    Stopping early (closing the iterator) wastes at most the chunks the helper holds, which it stops
    screening a few files later, and a few files screened here meanwhile.
    """
    own = helper is not None and helper.acquire(project)
    screen = _OrderedScreen(query, helper if own else None, counts, deadline)
    chunk_files = helper.chunk_files if own and helper is not None else CHUNK_FILES
    chunk = _Chunk(chunk_files)
    try:
        for folder_fd, prefix, names in runs:
            start = 0
            while start < len(names):
                end = start + chunk_files - len(chunk.names)
                chunk.add(folder_fd, prefix, names[start:end])
                start = end
                if chunk.full:
                    screen.add(chunk)
                    chunk = _Chunk(chunk_files)
                    yield from screen.give_out(walk_done=False)
                    if counts.stopped_early:
                        return
        if chunk.names:
            screen.add(chunk)
            chunk = _Chunk(chunk_files)
        yield from screen.give_out(walk_done=True)
        counts.all_given_out = not counts.stopped_early
    finally:
        chunk.close()
        for pending in screen.pending:
            pending.close()
        if own and helper is not None:
            helper.release()
