"""Pinned tool definitions for an embedded server: each tool's definition as first served is kept;
a later change is withheld until the operator accepts it (`oct-mcp tools accept`).

A tool whose description or schema changes after a human approved it (a "rug pull") would
otherwise be served as if nothing happened. The pin file keeps, per tool, the definition (name,
title, description, input and output schema, annotations) with its SHA-256, and the changed
definition last seen beside it (`pending`), so the operator can review the difference without
running the server. A pin file that cannot be read or does not match its digests withholds every
tool: it fails closed.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from oct_mcp.atomic_write import write_atomically
from oct_mcp.errors import PinFileError, ToolChangedError

__all__ = [
    "PINNED_FIELDS",
    "PinFile",
    "Review",
    "ToolPins",
    "default_pin_file",
    "definition_diff",
    "definition_of",
    "digest",
    "narrows",
]

PIN_FORMAT: Final = 1
PINNED_FIELDS: Final = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
# A change of these hints toward these values only takes rights away: allowed with allow_narrowing.
_STRICTER_HINTS: Final = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
_SERVER_NAME: Final = re.compile(r"[^A-Za-z0-9._-]+")


def definition_of(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a listed tool (its wire form) that are pinned; the rest (`_meta`, icons) is not."""
    return {name: tool[name] for name in PINNED_FIELDS if tool.get(name) not in (None, {}, "")}


def _canonical(definition: Mapping[str, Any]) -> str:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def digest(definition: Mapping[str, Any]) -> str:
    """The SHA-256 of the canonical JSON of one tool's definition."""
    return hashlib.sha256(_canonical(definition).encode()).hexdigest()


def narrows(pinned: Mapping[str, Any], served: Mapping[str, Any]) -> bool:
    """True when only the annotations changed, each hint toward the side that allows less.

    Everything else (name, title, description, schemas) must be equal: a text is not narrower.
    """
    if {k: v for k, v in pinned.items() if k != "annotations"} != {
        k: v for k, v in served.items() if k != "annotations"
    }:
        return False
    before, after = dict(pinned.get("annotations") or {}), dict(served.get("annotations") or {})
    return all(
        before.get(key) == after.get(key) or _STRICTER_HINTS.get(key, object()) == after.get(key)
        for key in before.keys() | after.keys()
    )


def definition_diff(name: str, pinned: Mapping[str, Any], served: Mapping[str, Any]) -> str:
    """A unified diff of the pinned and the served definition, as indented canonical JSON."""

    def lines(definition: Mapping[str, Any]) -> list[str]:
        return json.dumps(definition, sort_keys=True, indent=2).splitlines(keepends=True)

    return "".join(difflib.unified_diff(lines(pinned), lines(served), f"pinned/{name}", f"served/{name}"))


def default_pin_file(base: Path, server_name: str) -> Path:
    """`BASE/SERVER.json`: one file per server (its name made safe for a file name)."""
    safe = _SERVER_NAME.sub("_", server_name).strip("._") or "server"
    return base / f"{safe[:100]}.json"


@dataclass
class PinFile:
    """The pins on disk: the accepted definitions, and the changed ones last served (pending)."""

    pinned: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> PinFile:
        """The pins at `path`; none when there is no file yet (trust on first use).

        Raises:
            PinFileError: Unreadable, not this format, or a definition that is not its digest's.
        """
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise PinFileError(f"the pin file {path} cannot be read ({exc.strerror})") from None
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict) or data.get("format") != PIN_FORMAT:
            raise PinFileError(f"the pin file {path} is corrupt or not in a known format")
        return cls(pinned=_entries(data.get("tools"), path), pending=_entries(data.get("pending", {}), path))

    def save(self, path: Path) -> None:
        """Write the pins atomically: a temporary file beside `path` (owner-only), then renamed over it."""
        body = {
            "format": PIN_FORMAT,
            "tools": _serialised(self.pinned),
            "pending": _serialised(self.pending),
        }
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomically(path, json.dumps(body, sort_keys=True, indent=1), 0o600)

    def accept(self, names: Iterable[str] | None = None) -> list[str]:
        """Pin the pending definitions of `names` (every pending one when None); returns those pinned."""
        chosen = sorted(self.pending if names is None else set(names) & self.pending.keys())
        for name in chosen:
            self.pinned[name] = self.pending.pop(name)
        return chosen


def _entries(raw: object, path: Path) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise PinFileError(f"the pin file {path} is corrupt")
    entries: dict[str, dict[str, Any]] = {}
    for name, entry in raw.items():
        definition = entry.get("definition") if isinstance(entry, dict) else None
        if not isinstance(definition, dict) or entry.get("sha256") != digest(definition):
            raise PinFileError(
                f"the pin of tool {name!r} in {path} does not match its digest: changed by hand"
            )
        entries[name] = definition
    return entries


def _serialised(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {name: {"sha256": digest(d), "definition": d} for name, d in sorted(entries.items())}


@dataclass(frozen=True, slots=True)
class Review:
    """What one listing held against the pins."""

    withheld: frozenset[str]
    """Tools whose definition differs from the pinned one: not listed, their calls refused."""
    first_seen: tuple[str, ...] = ()
    """Tools served for the first time, pinned now."""
    newly_changed: tuple[str, ...] = ()
    """Changed tools not seen changed this way before (to audit once, not at every listing)."""


class ToolPins:
    """The pins of one embedded server, checked at each listing of its tools."""

    def __init__(self, path: Path, *, allow_narrowing: bool = False) -> None:
        self.path = path
        self.allow_narrowing = allow_narrowing
        self._lock = threading.Lock()
        self.error: PinFileError | None = None
        try:
            self._file = PinFile.load(path)
        except PinFileError as exc:
            self.error, self._file = exc, PinFile()

    def pinned_names(self) -> list[str]:
        return sorted(self._file.pinned)

    def review(self, listed: Mapping[str, Mapping[str, Any]]) -> Review:
        """Pin first-seen tools, note changed ones as pending, and say which to withhold.

        Raises:
            PinFileError: The pin file could not be read when the guard started (every tool withheld),
                or cannot be written now.
        """
        if self.error is not None:
            raise self.error
        with self._lock:
            pins = self._file
            first = tuple(sorted(name for name in listed if name not in pins.pinned))
            withheld, changed = set(), []
            for name, definition in listed.items():
                pinned = pins.pinned.get(name)
                if pinned is None or digest(pinned) == digest(definition):
                    pins.pending.pop(name, None)
                    continue
                if self.allow_narrowing and narrows(pinned, definition):
                    continue
                withheld.add(name)
                if pins.pending.get(name) != definition:
                    pins.pending[name] = dict(definition)
                    changed.append(name)
            for name in first:
                pins.pinned[name] = dict(listed[name])
            if first or changed:
                try:
                    pins.save(self.path)
                except OSError as exc:
                    raise PinFileError(
                        f"the pin file {self.path} cannot be written ({exc.strerror})"
                    ) from None
        return Review(withheld=frozenset(withheld), first_seen=first, newly_changed=tuple(changed))

    def refusal(self, name: str) -> ToolChangedError:
        """The error a withheld tool's call is answered with: what changed, and who can let it through."""
        return ToolChangedError(
            f"the tool {name!r} is withheld: its definition (description, schema or annotations) changed "
            "since it was first served, and a changed tool could ask for what the human never approved. "
            f"The operator reviews it with `oct-mcp tools diff {name} --pins FILE` and accepts it with "
            f"`oct-mcp tools accept {name} --pins FILE` (the server's log names FILE)"
        )
