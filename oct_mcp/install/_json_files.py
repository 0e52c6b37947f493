"""The hosts' JSON config files, read and written back in their own layout; and Claude Code's deny
rules for its built-in tools, with the record of which ones install added."""

from __future__ import annotations

import copy
import glob
import json
import re
from pathlib import Path
from typing import Any

from oct_mcp.install._hosts import CLAUDE_CODE_DENY, RECORD_NAME, FileChange, HostConfigError


def config_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise HostConfigError(f"cannot read {path} ({type(exc).__name__}): nothing was changed") from exc


def _load_json(path: Path, text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        # VS Code's mcp.json may hold comments and trailing commas (JSONC): refused, never rewritten
        # without them.
        raise HostConfigError(
            f"{path}, line {exc.lineno}, column {exc.colno}: not JSON ({exc.msg}); fix it, or add the "
            "server by hand (--print shows what to add): nothing was changed"
        ) from exc
    if not isinstance(document, dict):
        raise HostConfigError(f"{path}: the file is not a JSON object; fix it first: nothing was changed")
    return document


def _object_at(path: Path, document: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The object at `keys`, made where missing; refused where something else stands there."""
    current = document
    for depth, key in enumerate(keys):
        value = current.setdefault(key, {})
        if not isinstance(value, dict):
            where = ".".join(keys[: depth + 1])
            raise HostConfigError(f"{path}: {where} is not an object; fix it first: nothing was changed")
        current = value
    return current


def _dump_json(document: dict[str, Any], like: str | None) -> str:
    """JSON in the file's own indent (two spaces for a new file), with its final newline or lack of it."""
    indent: str | int = 2
    if like is not None:
        found = re.search(r"[{\[]\r?\n([ \t]+)\S", like)
        if found is not None:
            indent = found.group(1)
    text = json.dumps(document, indent=indent, ensure_ascii=False)
    if like is None or like.endswith("\n"):
        text += "\n"
    return text


def _restored_text(path: Path, document: dict[str, Any], like: str | None) -> str:
    """`document` as text: a backup's own text where one holds just this document, else re-serialised.

    So an uninstall right after an install gives the file back byte for byte, however it was laid out.
    """
    backups = sorted(path.parent.glob(glob.escape(path.name) + ".*bak"), key=lambda p: p.stat().st_mtime)
    for backup in reversed(backups):
        try:
            text = backup.read_text(encoding="utf-8")
            if json.loads(text) == document:
                return text
        except (OSError, ValueError):
            continue
    return _dump_json(document, like)


def json_server(
    path: Path, key: str, name: str, entry: dict[str, Any] | None, what: str, mode: int = 0o644
) -> FileChange:
    """The change that puts `entry` under `key`.`name` (or removes it, for None), keeping the rest."""
    before = config_text(path)
    document = _load_json(path, before)
    if entry is None:
        servers = document.get(key)
        if not isinstance(servers, dict) or name not in servers:
            return FileChange(path, before, before, what)
        del servers[name]
        if document == {key: {}}:
            return FileChange(path, before, None, what)  # nothing left but what install made
        return FileChange(path, before, _restored_text(path, document, before), what, mode)
    servers = _object_at(path, document, key)
    if servers.get(name) == entry:
        return FileChange(path, before, before, what)
    servers[name] = entry
    return FileChange(path, before, _dump_json(document, before), what, mode)


def _record_path(home: Path) -> Path:
    return home / ".oct-mcp" / RECORD_NAME


def load_record(home: Path) -> tuple[str | None, dict[str, Any]]:
    path = _record_path(home)
    text = config_text(path)
    return text, _load_json(path, text)


def deny_rules(path: Path, record: dict[str, Any], *, add: bool) -> tuple[FileChange, dict[str, Any]]:
    """Claude Code's `permissions.deny` with the rules added (those not there yet) or removed (only
    those the record says install added), and the record updated."""
    before = config_text(path)
    document = _load_json(path, before)
    record = copy.deepcopy(record)
    key = str(path)
    mine = record.get(key, {})
    what = "Claude Code's own Bash, Read, Edit, Write, Glob, Grep and NotebookEdit denied in this project"
    if add:
        had_permissions = "permissions" in document
        permissions = _object_at(path, document, "permissions")
        had_deny = "deny" in permissions
        deny = permissions.setdefault("deny", [])
        if not isinstance(deny, list):
            raise HostConfigError(
                f"{path}: permissions.deny is not a list; fix it first: nothing was changed"
            )
        added = [rule for rule in CLAUDE_CODE_DENY if rule not in deny]
        if not added:
            return FileChange(path, before, before, what), record
        deny.extend(added)
        record[key] = {
            "rules": sorted({*mine.get("rules", []), *added}),
            "file": mine.get("file", before is None),
            "permissions": mine.get("permissions", not had_permissions),
            "deny": mine.get("deny", not had_deny),
        }
        return FileChange(path, before, _dump_json(document, before), what), record
    record.pop(key, None)
    held = document.get("permissions")
    if not mine or not isinstance(held, dict) or not isinstance(held.get("deny"), list):
        return FileChange(path, before, before, what), record
    held["deny"] = [rule for rule in held["deny"] if rule not in mine.get("rules", [])]
    if mine.get("deny") and not held["deny"]:
        del held["deny"]
    if mine.get("permissions") and not held:
        del document["permissions"]
    if mine.get("file") and not document:
        return FileChange(path, before, None, what), record
    return FileChange(path, before, _restored_text(path, document, before), what), record


def record_change(home: Path, before: str | None, record: dict[str, Any]) -> FileChange:
    after = _dump_json(record, before) if record else None
    if before is not None and after is not None and json.loads(before) == record:
        after = before
    return FileChange(_record_path(home), before, after, "oct-mcp's record of what install added", 0o600)
