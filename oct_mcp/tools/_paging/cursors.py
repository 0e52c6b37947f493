"""Resuming the pages of a walk: the cursor a cut result gives, and the marks that resume an offset
the same way, so a page walks only the folders on the way to where the last one ended."""

from __future__ import annotations

import base64
import binascii
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Final

from pydantic import Field

__all__ = ["CURSOR_MAX_LENGTH", "PAGE_MARKS", "CursorField", "PageMarks", "WalkCursor", "cursor_may_not_fit"]

# A cursor holds a path of up to 4,096 characters, as UTF-8 (4 bytes each at most), in base64.
CURSOR_MAX_LENGTH: Final = 22_000
# Past any offset a caller may pass (OffsetField's bound) and any line of a searched file.
POSITION_MAX: Final = 100_000_000


@dataclass(frozen=True, slots=True)
class WalkCursor:
    """Where a page of a walk ended: a result's `next_cursor`, opaque to the caller.

    A page resumes after `path` (and, in that file, after `line`), so it walks only the folders
    on the way to it and those after: not the whole tree again, as an offset must. `position` is
    how many entries came before, so the page still says its `next_offset`.
    """

    position: int
    path: str
    """From the project root: the last entry shown."""
    line: int = 0
    """The last line shown in `path` (search's lines mode); 0: the whole file was shown."""

    def encode(self) -> str:
        raw = f"{self.position}:{self.line}:{self.path}".encode("utf-8", errors="surrogateescape")
        return base64.urlsafe_b64encode(raw).decode("ascii")

    @staticmethod
    def size(path: str) -> int:
        """Characters of a `next_cursor` field naming `path`, at most (position and line in any range)."""
        encoded = len(path) if path.isascii() else len(path.encode("utf-8", errors="surrogateescape"))
        raw = encoded + 2 * len(str(POSITION_MAX)) + 2
        return 4 * ((raw + 2) // 3) + len(',"next_cursor":""')

    @classmethod
    def decode(cls, text: str) -> WalkCursor:
        """Raises:
        ValueError: Not a cursor a result gave; the message does not repeat it.
        """
        try:
            raw = base64.urlsafe_b64decode(text.encode("ascii")).decode("utf-8", errors="surrogateescape")
            position, line, path = raw.split(":", 2)
            cursor = cls(int(position), path, int(line))
        except (binascii.Error, UnicodeError, ValueError):
            raise ValueError("cursor is not one a result gave: pass next_cursor as it came") from None
        in_range = 0 <= cursor.position <= POSITION_MAX and 0 <= cursor.line <= POSITION_MAX
        if not in_range or not cursor.path or "\x00" in cursor.path:
            raise ValueError("cursor is not one a result gave: pass next_cursor as it came")
        return cursor


def cursor_may_not_fit(room: int, path: str) -> bool:
    """Whether `WalkCursor.size(path)` may pass `room`; exact only when room is short, as it seldom is.

    A path of n characters is at most 4n bytes: its cursor field is at most 16n/3 + 47 characters.
    """
    return room < 6 * len(path) + 64 and room < WalkCursor.size(path)


class PageMarks:
    """Where recent pages ended, by what they asked: the offset a result gave resumes as its cursor
    does, without walking the pages before it again (hosts and models page by offset too).

    The same pages as walking to the offset while the tree stays as it was; after a change, the
    page goes on after the last entry shown, where an offset counted again would skip or repeat.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._marks: OrderedDict[tuple[Hashable, int], WalkCursor] = OrderedDict()
        # Tools run in worker threads, several at once.
        self._lock = threading.Lock()

    def recall(self, query: Hashable, offset: int) -> WalkCursor | None:
        with self._lock:
            mark = self._marks.get((query, offset))
            if mark is not None:
                self._marks.move_to_end((query, offset))
            return mark

    def remember(self, query: Hashable, mark: WalkCursor) -> None:
        with self._lock:
            self._marks[(query, mark.position)] = mark
            self._marks.move_to_end((query, mark.position))
            while len(self._marks) > self._size:
                self._marks.popitem(last=False)


PAGE_MARKS: Final = PageMarks(256)
"""Shared by list and search: their queries differ by their first part."""


def CursorField() -> Any:  # noqa: N802 - a Field factory, named as pydantic's
    return Field(
        default=None,
        min_length=1,
        max_length=CURSOR_MAX_LENGTH,
        description="A cut result's next_cursor.",
    )
