"""The user's git identity (`user.name`, `user.email`), read as text from their own config files."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["IDENTITY_MAX", "user_identity"]

IDENTITY_MAX: Final = 256


_CONFIG_MAX_BYTES: Final = 1_048_576


def user_identity(host: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """The user's `user.name` and `user.email` from their own git config files, read here as text.

    `$XDG_CONFIG_HOME/git/config` (or `~/.config/git/config`), then `~/.gitconfig`, the later
    winning, as git reads them; only the `[user]` section's plain values. Includes, conditional
    includes and every other setting are not followed: the values are passed to git with `-c`,
    and git itself never reads the global config.
    """
    source = os.environ if host is None else host
    home = source.get("HOME", "")
    if not os.path.isabs(home):
        return None
    xdg = source.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(home) / ".config"
    found: dict[str, str] = {}
    for config in (base / "git" / "config", Path(home) / ".gitconfig"):
        found.update(_user_values(config))
    name, email = found.get("name"), found.get("email")
    if not name or not email:
        return None
    return name, email


_SECTION: Final = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)\s*("[^"]*")?\s*\]\s*(?:[#;].*)?$')


_ENTRY: Final = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*=\s*(.*?)\s*$")


def _user_values(config: Path) -> dict[str, str]:
    try:
        with config.open("rb") as handle:
            text = handle.read(_CONFIG_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return {}
    section: str | None = None
    values: dict[str, str] = {}
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header is not None:
            section = header.group(1).lower() if header.group(2) is None else None
            continue
        entry = _ENTRY.match(line) if section == "user" else None
        if entry is None:
            continue
        key, value = entry.group(1).lower(), _config_value(entry.group(2))
        if key in ("name", "email") and value is not None and _plain_identity(value):
            values[key] = value
    return values


def _config_value(raw: str) -> str | None:
    """A git config value: quotes removed, `#`/`;` comments cut outside them; None for an escape."""
    out: list[str] = []
    quoted = False
    for char in raw:
        if char == '"':
            quoted = not quoted
        elif char == "\\":
            return None  # escapes and continuations are not understood: better no value than a wrong one
        elif char in "#;" and not quoted:
            break
        else:
            out.append(char)
    return None if quoted else "".join(out).strip()


def _plain_identity(value: str) -> bool:
    return 0 < len(value) <= IDENTITY_MAX and value.isprintable() and not any(c in value for c in "<>")
