"""The ignore rules a developer has beyond the repository: the user's global excludes file, and the
environment and cache folders no one means when they list or search a project."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from oct_mcp.workspace import ENVIRONMENT_FOLDERS, read_at_most

__all__ = ["ENVIRONMENT_FOLDERS", "user_excludes_file"]

_CONFIG_MAX_BYTES: Final = 1_048_576
_SECTION: Final = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)\s*(?:"[^"]*")?\s*\]')
_EXCLUDES: Final = re.compile(r"^\s*excludesfile\s*=\s*(.*?)\s*$", re.IGNORECASE)


def user_excludes_file(host: Mapping[str, str] | None = None) -> Path | None:
    """The user's global excludes file, as git would find it, if it exists as a regular file.

    `core.excludesFile` of the user's `~/.gitconfig` (read here as text: git never loads the
    global config for a tool), else `$XDG_CONFIG_HOME/git/ignore` or `~/.config/git/ignore`.
    Only a plain `excludesFile = path` line is understood; an include or a quoted value is not followed.
    """
    source = os.environ if host is None else host
    home = source.get("HOME", "")
    if not os.path.isabs(home):
        return None
    named = _configured(Path(home) / ".gitconfig", home)
    if named is None:
        xdg = source.get("XDG_CONFIG_HOME", "")
        base = Path(xdg) if os.path.isabs(xdg) else Path(home) / ".config"
        named = base / "git" / "ignore"
    try:
        real = Path(os.path.realpath(named))
        return real if real.is_file() else None
    except OSError:
        return None


def _configured(config: Path, home: str) -> Path | None:
    try:
        with config.open("rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode):
                # Not one read of the limit: that allocates a megabyte for a few lines, every walk.
                data = read_at_most(handle.fileno(), _CONFIG_MAX_BYTES, info.st_size)[:_CONFIG_MAX_BYTES]
            else:
                data = handle.read(_CONFIG_MAX_BYTES)
        text = data.decode("utf-8", errors="replace")
    except OSError:
        return None
    section = ""
    found: Path | None = None
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header is not None:
            section = header.group(1).lower()
            continue
        value = _EXCLUDES.match(line) if section == "core" else None
        if value is None or not value.group(1) or value.group(1)[0] in "\"'":
            continue
        raw = value.group(1).split(" #")[0].split(" ;")[0].strip()
        if raw.startswith("~/"):
            raw = str(Path(home) / raw[2:])
        if os.path.isabs(raw):
            found = Path(raw)  # git's last value wins
    return found
