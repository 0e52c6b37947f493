"""The install and uninstall plans: each file's change, shown before it is made, each file backed up first."""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oct_mcp.atomic_write import write_atomically
from oct_mcp.install._codex import codex_change
from oct_mcp.install._hosts import (
    DEFAULT_NAME,
    HOSTS,
    HostConfigError,
    InstallPlan,
    ProjectRootError,
    ServerCommand,
    check_name,
    claude_desktop_config,
    project_folder,
    server_command,
)
from oct_mcp.install._json_files import config_text, deny_rules, json_server, load_record, record_change


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
    check_name(name)
    where = _Where(
        project_folder(project_root, home), home, platform, dict(os.environ if environ is None else environ)
    )
    server = server_command(where.project, profile)
    path, key = _host_files(host, where)
    shell_off = not keep_host_tools
    record = None
    if host == "codex":
        change, notes = codex_change(path, name, server, shell_off=shell_off)
        # A shell switch the user set is theirs: its note replaces the one that says install turned it off.
        return InstallPlan(host, (change,), (*_notes(host, shell_off and not notes), *notes))
    mode = 0o600 if host == "claude-desktop" else 0o644
    changes = [json_server(path, key, name, _entry(host, server), f"{host}'s MCP server {name}", mode)]
    if host == "claude-code" and shell_off:
        record_before, record_document = load_record(home)
        settings = where.project / ".claude" / "settings.local.json"
        deny, updated = deny_rules(settings, record_document, add=True)
        changes.append(deny)
        record = record_change(home, record_before, updated)
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
    check_name(name)
    root = Path(project_root).expanduser().resolve()
    if not root.is_dir():
        raise ProjectRootError(f"project root {str(project_root)!r} is not an existing folder")
    where = _Where(root, home, platform, dict(os.environ if environ is None else environ))
    path, key = _host_files(host, where)
    if host == "codex":
        change, _ = codex_change(path, name, None, shell_off=False)
        return InstallPlan(host, (change,))
    changes = [json_server(path, key, name, None, f"{host}'s MCP server {name}")]
    record = None
    if host == "claude-code":
        record_before, record_document = load_record(home)
        settings = where.project / ".claude" / "settings.local.json"
        deny, updated = deny_rules(settings, record_document, add=False)
        changes.append(deny)
        record = record_change(home, record_before, updated)
    return InstallPlan(host, tuple(changes), (), record)


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
        if config_text(change.path) != change.before:
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
