"""What a sandboxed run cannot see in the project: links out of it to what the sandbox does not show."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

__all__ = ["SYSTEM_SHOWN", "hidden_links"]

SYSTEM_SHOWN: Final = (
    Path("/usr"),
    Path("/bin"),
    Path("/sbin"),
    Path("/lib"),
    Path("/lib32"),
    Path("/lib64"),
    Path("/libx32"),
    Path("/etc"),
)
"""The system folders every backend shows a run (`/etc` whole or in part): a link into them is no
one's to hide, so none is ignored for it."""
_WALK_LIMIT: Final = 20_000
# pytest's own default norecursedirs: it never looks into these, so neither does the walk.
_NOT_COLLECTED: Final = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")


def hidden_links(root: Path, shown: Iterable[Path]) -> list[str]:
    """The links inside the project whose target lies outside it and outside `shown`, as relative paths.

    A run cannot read where they lead (Landlock answers permission denied, bubblewrap shows
    nothing there), so a test runner that collects them fails on them. Links into the project
    itself, or below a folder the run sees, are left alone. The walk stops after 20,000 entries.

    Args:
        root: The project root, resolved.
        shown: The folders outside the project a run sees (its tool's installation).

    Returns:
        The links' paths relative to `root`, sorted.
    """
    visible = (root, *SYSTEM_SHOWN, *shown)
    hidden: list[str] = []
    pending = [root]
    seen = 0
    # scandir's entries know a link from their directory listing: no stat per entry.
    while pending and seen <= _WALK_LIMIT:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        seen += len(entries)
        for entry in entries:
            if entry.is_symlink():
                target = Path(os.path.realpath(entry.path))
                # A link to nothing is nothing in a terminal too: pytest passes it by.
                if target.exists() and not any(target.is_relative_to(place) for place in visible):
                    hidden.append(Path(entry.path).relative_to(root).as_posix())
            elif entry.is_dir(follow_symlinks=False) and not _skipped(entry.name):
                pending.append(Path(entry.path))
    return sorted(hidden)


def _skipped(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in _NOT_COLLECTED) or name == "__pycache__"
