"""A run's output folder: files a command writes instead of a pipe, read back without following links."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

__all__ = ["OUTPUT_FILE_MAX_BYTES", "OutputFolder"]

OUTPUT_FILE_MAX_BYTES: Final = 64 * 1_048_576
"""The most of one output file that is read back: a lint report of every problem fits many times over."""
_CHUNK: Final = 1_048_576


class OutputFolder:
    """`<scratch>/out`, created empty and held open by descriptor for the run.

    The command is project code and may replace the folder or plant links in it: the files are
    read through the descriptor taken before the run, and a link or anything but a regular file
    is never read.
    """

    def __init__(self, scratch: Path) -> None:
        self.path = scratch / "out"
        self.path.mkdir(mode=0o700)
        self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)

    def environment(self, files: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """(name, path) for each (environment name, file name) a plan asks for."""
        return [(name, str(self.path / Path(file_name).name)) for name, file_name in files]

    def read(
        self, file_names: Iterable[str], limit: int = OUTPUT_FILE_MAX_BYTES
    ) -> tuple[dict[str, bytes], list[str]]:
        """What the command wrote, by file name, and the names of the files cut at `limit` bytes."""
        found: dict[str, bytes] = {}
        cut: list[str] = []
        for file_name in file_names:
            name = Path(file_name).name
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self._fd)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    continue
                content = handle.read(limit + 1)
            if len(content) > limit:
                cut.append(name)
                content = content[:limit]
            found[name] = content
        return found, cut

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)
