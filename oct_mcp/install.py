"""`oct-mcp install HOST` and `uninstall HOST`: this server in a host's MCP config, its own tools off."""

from __future__ import annotations

import copy
import difflib
import glob
import json
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Final

from oct_mcp.atomic_write import write_atomically
from oct_mcp.errors import OctError
from oct_mcp.workspace import broad_root_problem

__all__ = [
    "DEFAULT_NAME",
    "HOSTS",
    "FileChange",
    "HostConfigError",
    "InstallPlan",
    "ProjectRootError",
    "ServerCommand",
    "apply_plan",
    "plan_install",
    "plan_uninstall",
    "render_plan",
    "server_command",
]

HOSTS: Final = ("claude-code", "claude-desktop", "cursor", "vscode", "codex")
DEFAULT_NAME: Final = "oct"
"""The server's name in the host's config: Claude Code shows its tools as `mcp__oct__oct_read_file`."""
_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

# Claude Code's built-in tools that oct's tools stand in for. "To disable a tool entirely, add its name
# to the deny array in your permission settings" (code.claude.com/docs/en/tools-reference); a bare
# name, no parentheses, matches every use of the tool (code.claude.com/docs/en/permissions).
CLAUDE_CODE_DENY: Final = ("Bash", "Read", "Edit", "Write", "Glob", "Grep", "NotebookEdit")
RECORD_NAME: Final = "installs.json"
"""Under ~/.oct-mcp: which deny rules install added to which file, so uninstall removes those only."""


class HostConfigError(OctError):
    """A host's config file cannot be read, parsed or changed safely: nothing was changed."""

    code: ClassVar[str] = "host_config"


class ProjectRootError(OctError):
    """The project root to install for does not exist, is no folder, or is too broad to serve."""

    code: ClassVar[str] = "project_root"


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """What the host runs: this environment's own program, with absolute paths only."""

    command: str
    args: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file's text before and after; None is no file."""

    path: Path
    before: str | None
    after: str | None
    what: str
    mode: int = 0o644
    """For a file this creates; a file that exists keeps its own mode."""


@dataclass(frozen=True, slots=True)
class InstallPlan:
    host: str
    changes: tuple[FileChange, ...]
    notes: tuple[str, ...] = ()
    record: FileChange | None = None
    """oct-mcp's own record of what it added (not shown by --print: it is no host's file)."""

    @property
    def changed(self) -> tuple[FileChange, ...]:
        return tuple(change for change in self.changes if change.before != change.after)


def server_command(project_root: Path, profile: str | None) -> ServerCommand:
    """The command a host starts: this venv's `oct-mcp` program, else this interpreter with `-m oct_mcp`.

    The interpreter's path is taken as it is, not resolved: a venv's `bin/python` is a link to the base
    interpreter, and the resolved path would run without the venv's packages.
    """
    scripts = Path(sys.executable).absolute().parent
    args = ["--project-root", str(project_root)]
    if profile is not None:
        args += ["--profile", profile]
    for program in ("oct-mcp", "oct-mcp.exe"):
        if (scripts / program).is_file():
            return ServerCommand(str(scripts / program), tuple(args))
    return ServerCommand(str(Path(sys.executable).absolute()), ("-m", "oct_mcp", *args))


def _project(project_root: str | os.PathLike[str], home: Path) -> Path:
    root = Path(project_root).expanduser().resolve()
    if not root.is_dir():
        raise ProjectRootError(
            f"project root {str(project_root)!r} is not an existing folder; pass --project-root with "
            "the path of your project"
        )
    problem = broad_root_problem(root, home)
    if problem is not None:
        raise ProjectRootError(
            f"refusing to install for {root}: {problem}, and the server would refuse to serve it; "
            "pass --project-root with the path of your project"
        )
    return root


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise HostConfigError(
            f"--name {name!r}: use letters, digits, - and _, starting with a letter (at most 64)"
        )


# -- where each host keeps its config ------------------------------------------------------------


def claude_desktop_config(home: Path, platform: str, environ: Mapping[str, str]) -> Path:
    """Claude Desktop's config file (modelcontextprotocol.io "Connect to local MCP servers"; Claude
    Desktop ships no Linux build, and its community ports read ~/.config/Claude)."""
    if platform == "darwin":
        folder = home / "Library" / "Application Support" / "Claude"
    elif platform == "win32":
        folder = Path(environ.get("APPDATA") or home / "AppData" / "Roaming") / "Claude"
    else:
        folder = Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "Claude"
    return folder / "claude_desktop_config.json"


# -- JSON files ------------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
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


def _json_server(
    path: Path, key: str, name: str, entry: dict[str, Any] | None, what: str, mode: int = 0o644
) -> FileChange:
    """The change that puts `entry` under `key`.`name` (or removes it, for None), keeping the rest."""
    before = _read(path)
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


# -- Claude Code's deny rules, and the record of which ones install added ----------------------------


def _record_path(home: Path) -> Path:
    return home / ".oct-mcp" / RECORD_NAME


def _load_record(home: Path) -> tuple[str | None, dict[str, Any]]:
    path = _record_path(home)
    text = _read(path)
    return text, _load_json(path, text)


def _deny_rules(path: Path, record: dict[str, Any], *, add: bool) -> tuple[FileChange, dict[str, Any]]:
    """Claude Code's `permissions.deny` with the rules added (those not there yet) or removed (only
    those the record says install added), and the record updated."""
    before = _read(path)
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


def _record_change(home: Path, before: str | None, record: dict[str, Any]) -> FileChange:
    after = _dump_json(record, before) if record else None
    if before is not None and after is not None and json.loads(before) == record:
        after = before
    return FileChange(_record_path(home), before, after, "oct-mcp's record of what install added", 0o600)


# -- Codex's config.toml: an appended block between marks, checked by parsing the result -----------


def _begin_mark(name: str) -> str:
    return f"# >>> oct-mcp install ({name}): `oct-mcp uninstall codex` removes the lines down to <<<"


def _end_mark(name: str) -> str:
    return f"# <<< oct-mcp install ({name})"


def _line_mark(name: str) -> str:
    return f"# oct-mcp install ({name}): Codex's shell off, oct's tools instead"


def _load_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The message names the line and column ("Invalid value (at line 3, column 9)"), except at the
        # end of the file ("Unclosed array (at end of document)"): then the last line is named.
        where = "" if "at line" in str(exc) else f", line {max(len(text.splitlines()), 1)}"
        raise HostConfigError(f"{path}{where}: not TOML: {exc}; fix it first: nothing was changed") from exc


_FEATURES_HEADER: Final = re.compile(r"\s*\[\s*features\s*\]\s*(#.*)?")


def _toml_string(value: str) -> str:
    # JSON's string escapes (\", \\, \n, \uXXXX) are all TOML basic-string escapes.
    return json.dumps(value, ensure_ascii=False)


def _without_codex_marks(text: str, name: str) -> str:
    """The text with what an earlier install added taken out: its block, and its line in [features].

    The blank line install put before its block goes too; a file that had no final newline keeps the
    one install added (TOML reads the same).
    """
    lines = text.splitlines(keepends=True)
    begin, end = _begin_mark(name), _end_mark(name)
    starts = [index for index, line in enumerate(lines) if line.rstrip("\r\n") == begin]
    if starts:
        start = starts[0]
        stops = [index for index, line in enumerate(lines) if index > start and line.rstrip("\r\n") == end]
        if not stops:
            raise HostConfigError(
                f"the block oct-mcp install added has lost its end line ({end!r}); put it back or remove "
                "the block by hand: nothing was changed"
            )
        stop = stops[0]
        if start > 0 and lines[start - 1].strip() == "":
            start -= 1
        del lines[start : stop + 1]
    mark = _line_mark(name)
    lines = [line for line in lines if not line.rstrip("\r\n").endswith(mark)]
    return "".join(lines)


def _codex_change(
    path: Path, name: str, server: ServerCommand | None, *, shell_off: bool
) -> tuple[FileChange, tuple[str, ...]]:
    """Codex's `.codex/config.toml` with the server (and `features.shell_tool = false`) added or removed.

    Shapes: `[mcp_servers.NAME]` with `command` and `args` (developers.openai.com/codex/mcp); a project's
    `.codex/config.toml` is read in a trusted project only (developers.openai.com/codex/config-basic);
    `features.shell_tool` is Codex's switch for its shell tool (openai/codex#6481, "Useful when using
    Codex with tools provided exclusively by MCP servers"). Text is appended, never re-serialised, so
    comments and layout stay byte for byte; the result is parsed and compared before it is written.
    """
    if server is None:
        what = f"Codex's MCP server {name}, and the shell switch install added"
    else:
        what = f"Codex's MCP server {name}" + (" and its shell tool off" if shell_off else "")
    before = _read(path)
    text = before or ""
    _load_toml(path, text)
    base = _without_codex_marks(text, name)
    document = _load_toml(path, base)
    servers = document.get("mcp_servers", {})
    if server is None:
        if isinstance(servers, dict) and name in servers:
            raise HostConfigError(
                f"{path}: [mcp_servers.{name}] was not written by oct-mcp install (no marks around it); "
                "remove it by hand: nothing was changed"
            )
        if base == text:
            return FileChange(path, before, before, what), ()
        return FileChange(path, before, None if base == "" else base, what), ()
    if isinstance(servers, dict) and name in servers:
        raise HostConfigError(
            f"{path}: it already has [mcp_servers.{name}], not written by oct-mcp install; remove it, or "
            "pass --name with another name: nothing was changed"
        )
    notes: list[str] = []
    block = [
        _begin_mark(name),
        f"[mcp_servers.{name}]",
        f"command = {_toml_string(server.command)}",
        "args = [" + ", ".join(_toml_string(arg) for arg in server.args) + "]",
    ]
    expected = copy.deepcopy(document)
    expected.setdefault("mcp_servers", {})[name] = {"command": server.command, "args": list(server.args)}
    lines = base.splitlines(keepends=True)
    features = document.get("features")
    if shell_off:
        if isinstance(features, dict) and "shell_tool" in features:
            state = "off" if features["shell_tool"] is False else "on"
            notes.append(f"features.shell_tool is already set in {path} ({state}): left as it is")
        else:
            header = next(
                (
                    index
                    for index, line in enumerate(lines)
                    if _FEATURES_HEADER.fullmatch(line.rstrip("\r\n"))
                ),
                None,
            )
            if header is not None:
                lines.insert(header + 1, f"shell_tool = false  {_line_mark(name)}\n")
            else:
                block += ["", "[features]", "shell_tool = false"]
            expected.setdefault("features", {})["shell_tool"] = False
    block.append(_end_mark(name))
    head = "".join(lines)
    separator = "" if head == "" else ("\n" if head.endswith("\n") else "\n\n")
    after = head + separator + "\n".join(block) + "\n"
    try:
        parsed = tomllib.loads(after)
    except tomllib.TOMLDecodeError:
        parsed = None
    if parsed != expected:
        raise HostConfigError(
            f"{path}: its layout (an inline mcp_servers or features table?) leaves no place to add "
            f"[mcp_servers.{name}] safely; add it by hand (--print shows it): nothing was changed"
        )
    return FileChange(path, before, after, what), tuple(notes)


# -- the plans -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Where:
    project: Path
    home: Path
    platform: str
    environ: Mapping[str, str]


def _entry(host: str, server: ServerCommand) -> dict[str, Any]:
    if host == "vscode":
        # VS Code: a top-level "servers" object, "type": "stdio" required (code.visualstudio.com/docs/
        # copilot/reference/mcp-configuration).
        return {"type": "stdio", "command": server.command, "args": list(server.args)}
    if host == "claude-code":
        # What `claude mcp add --scope project` writes to .mcp.json (code.claude.com/docs/en/mcp).
        return {"type": "stdio", "command": server.command, "args": list(server.args), "env": {}}
    # Claude Desktop and Cursor: "mcpServers" with command, args (cursor.com/docs/mcp).
    return {"command": server.command, "args": list(server.args)}


def _notes(host: str, shell_off: bool) -> tuple[str, ...]:
    """What the person who ran install should know next: how the host picks the server up, and what
    happened to the host's own tools (only what the host offers a setting for is claimed)."""
    if host == "claude-code":
        denied = (
            "its own Bash, Read, Edit, Write, Glob, Grep and NotebookEdit are denied for you in this project "
            "(.claude/settings.local.json); --keep-host-tools leaves them on"
        )
        first = (
            "Claude Code asks once, when it starts in this project, whether to use the servers of .mcp.json"
        )
        return (first, denied) if shell_off else (first,)
    if host == "claude-desktop":
        return ("restart Claude Desktop to start the server; it has no shell or file tools of its own",)
    if host == "cursor":
        return (
            "Cursor lists the server in its MCP settings; its agent's own tools stay on (this command knows "
            "no Cursor project setting that turns them off)",
        )
    if host == "vscode":
        return (
            "VS Code starts the server from .vscode/mcp.json; untick its own tools in the chat's tool picker",
        )
    trusted = "Codex reads a project's .codex/config.toml only once you trust the project"
    shell = (
        "Codex's shell tool is off in this project (features.shell_tool = false); its apply_patch edits stay "
        "on; --keep-host-tools leaves the shell on"
    )
    return (trusted, shell) if shell_off else (trusted,)


def _host_files(host: str, where: _Where) -> tuple[Path, str]:
    """The host's MCP config file for this project, and the key its servers sit under."""
    if host == "claude-code":
        return where.project / ".mcp.json", "mcpServers"
    if host == "claude-desktop":
        return claude_desktop_config(where.home, where.platform, where.environ), "mcpServers"
    if host == "cursor":
        return where.project / ".cursor" / "mcp.json", "mcpServers"
    if host == "vscode":
        return where.project / ".vscode" / "mcp.json", "servers"
    if host == "codex":
        return where.project / ".codex" / "config.toml", "mcp_servers"
    raise HostConfigError(f"unknown host {host!r}: one of {', '.join(HOSTS)}")


def plan_install(
    host: str,
    project_root: str | os.PathLike[str],
    *,
    home: Path,
    profile: str | None = None,
    name: str = DEFAULT_NAME,
    keep_host_tools: bool = False,
    platform: str = sys.platform,
    environ: Mapping[str, str] | None = None,
) -> InstallPlan:
    """What `oct-mcp install HOST` changes: every file's text before and after, nothing written yet.

    Raises:
        HostConfigError: A file does not parse or has a shape this cannot change safely.
        ProjectRootError: The project root is missing, no folder, or too broad.
    """
    _check_name(name)
    where = _Where(
        _project(project_root, home), home, platform, dict(os.environ if environ is None else environ)
    )
    server = server_command(where.project, profile)
    path, key = _host_files(host, where)
    shell_off = not keep_host_tools
    record = None
    if host == "codex":
        change, notes = _codex_change(path, name, server, shell_off=shell_off)
        # A shell switch the user set is theirs: its note replaces the one that says install turned it off.
        return InstallPlan(host, (change,), (*_notes(host, shell_off and not notes), *notes))
    mode = 0o600 if host == "claude-desktop" else 0o644
    changes = [_json_server(path, key, name, _entry(host, server), f"{host}'s MCP server {name}", mode)]
    if host == "claude-code" and shell_off:
        record_before, record_document = _load_record(home)
        settings = where.project / ".claude" / "settings.local.json"
        deny, updated = _deny_rules(settings, record_document, add=True)
        changes.append(deny)
        record = _record_change(home, record_before, updated)
    return InstallPlan(host, tuple(changes), _notes(host, shell_off), record)


def plan_uninstall(
    host: str,
    project_root: str | os.PathLike[str],
    *,
    home: Path,
    name: str = DEFAULT_NAME,
    platform: str = sys.platform,
    environ: Mapping[str, str] | None = None,
) -> InstallPlan:
    """What `oct-mcp uninstall HOST` changes: the server entry and what install added, nothing else.

    Raises:
        HostConfigError: A file does not parse or has a shape this cannot change safely.
        ProjectRootError: The project root is missing or no folder.
    """
    _check_name(name)
    root = Path(project_root).expanduser().resolve()
    if not root.is_dir():
        raise ProjectRootError(f"project root {str(project_root)!r} is not an existing folder")
    where = _Where(root, home, platform, dict(os.environ if environ is None else environ))
    path, key = _host_files(host, where)
    if host == "codex":
        change, _ = _codex_change(path, name, None, shell_off=False)
        return InstallPlan(host, (change,))
    changes = [_json_server(path, key, name, None, f"{host}'s MCP server {name}")]
    record = None
    if host == "claude-code":
        record_before, record_document = _load_record(home)
        settings = where.project / ".claude" / "settings.local.json"
        deny, updated = _deny_rules(settings, record_document, add=False)
        changes.append(deny)
        record = _record_change(home, record_before, updated)
    return InstallPlan(host, tuple(changes), (), record)


# -- showing and writing ---------------------------------------------------------------------------


def render_plan(plan: InstallPlan) -> str:
    """Each file the plan changes as a unified diff, for --print and for the report after a write."""
    parts: list[str] = []
    for change in plan.changed:
        if change.after is None:
            parts.append(f"remove {change.path} ({change.what})\n")
            continue
        verb = "create" if change.before is None else "change"
        parts.append(f"{verb} {change.path} ({change.what}):\n")
        parts.extend(
            difflib.unified_diff(
                (change.before or "").splitlines(keepends=True),
                change.after.splitlines(keepends=True),
                fromfile=str(change.path) if change.before is not None else "/dev/null",
                tofile=str(change.path),
            )
        )
        if not parts[-1].endswith("\n"):
            parts.append("\n")
    return "".join(parts)


def _backup_path(path: Path) -> Path:
    candidate = path.with_name(path.name + ".bak")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    count = 0
    while candidate.exists():
        count += 1
        candidate = path.with_name(f"{path.name}.{stamp}{'' if count == 1 else f'-{count}'}.bak")
    return candidate


def apply_plan(plan: InstallPlan) -> list[Path]:
    """Write the plan's changes, each file backed up first; returns the backups made.

    A file is changed only if it still holds the text the plan was made from.

    Raises:
        HostConfigError: A file changed since the plan was made.
    """
    changes = [*plan.changed, *([plan.record] if plan.record is not None else [])]
    for change in changes:
        if _read(change.path) != change.before:
            raise HostConfigError(f"{change.path} changed while this ran; run the command again")
    backups: list[Path] = []
    for change in changes:
        # A link (a dotfiles checkout) stays a link: its target is what changes.
        target = change.path.resolve() if change.path.is_symlink() else change.path
        if change.before is not None and change.before != change.after:
            mode = target.stat().st_mode & 0o7777
            if change is not plan.record:
                backup = _backup_path(change.path)
                write_atomically(backup, change.before, mode)
                backups.append(backup)
        else:
            mode = change.mode
        if change.after is None:
            if change.before is not None:
                target.unlink()
        elif change.after != change.before:
            write_atomically(target, change.after, mode)
    return backups
