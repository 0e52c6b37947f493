"""Ignore files as a rule source: each a list of gitignore-style globs (like `.cursorignore` or
`.aiignore`) whose paths every tool is denied, and which listings, searches and git output leave
out, as under a deny rule of the user's.

A file inside the project is the repository's word, read only where the user trusts the
repository's config: a hostile repository could otherwise hide its own files from the model that
reviews them. A file outside it (absolute, or under `~`) is the user's, and must exist.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import ConfigError, OctError
from oct_mcp.rules import RuleSource, Tier
from oct_mcp.workspace import Workspace, read_project_file

__all__ = ["IgnoreFiles", "ignore_file_rules"]

MAX_IGNORE_BYTES: Final = 256 * 1024
_NAME_MAX: Final = 4096
_log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class IgnoreFiles:
    sources: tuple[RuleSource, ...]
    status: tuple[str, ...]
    """What became of each file named, for `doctor`."""


def ignore_file_rules(names: tuple[str, ...], workspace: Workspace, *, trust_repo: bool) -> IgnoreFiles:
    """A deny rule for each ignore file the config names, over every glob it lists.

    Raises:
        ConfigError: `names` is malformed, or a user's file is missing or unreadable: the server
            does not start without its denies. A project's file that cannot be read safely (a
            link, a FIFO, too large) is ignored, as its config would be, and `status` says why.
    """
    sources: list[RuleSource] = []
    status: list[str] = []
    for name in names:
        if not isinstance(name, str) or not name.strip() or len(name) > _NAME_MAX or "\x00" in name:
            raise ConfigError(
                "ignore_files must be a list of file names (a project file such as .aiignore, or an "
                f"absolute or ~ path), each at most {_NAME_MAX} characters",
                rule="ignore_files",
            )
        expanded = os.path.expanduser(name)
        if os.path.isabs(expanded):
            text = _read_users(Path(expanded), name)
            tier: Tier = "user"
        elif not trust_repo:
            _log.warning("ignore_file_not_trusted", file=name)
            status.append(f"{name}: not read (a project file, and trust_repo_config is off)")
            continue
        else:
            try:
                data = read_project_file(workspace, name, MAX_IGNORE_BYTES)
            except OctError as exc:
                # The repository's own word, malformed: only its own denies are lost, as with its config.
                _log.error("ignore_file_failed", file=name, problem=exc.message)
                status.append(f"{name}: ignored ({exc.message})")
                continue
            if data is None:
                status.append(f"{name}: none in this project")
                continue
            text, tier = data.decode("utf-8", errors="replace"), "repo"
        globs, skipped = _globs(text)
        if skipped:
            _log.warning("ignore_file_lines_passed_over", file=name, lines=skipped)
        if not globs:
            status.append(f"{name}: no glob in it")
            continue
        rule = {
            "name": "ignore-file",
            "effect": "deny",
            "tools": ["*"],
            "when": {"paths": list(globs)},
            # A rule's reason is at most 300 characters: a long path is shown by its end.
            "reason": f"{name if len(name) <= 200 else '...' + name[-200:]} lists it: kept from every tool",
        }
        sources.append(RuleSource(tier=tier, file=name, rules=(rule,)))
        kept = f"; {skipped} line(s) passed over (! or ..)" if skipped else ""
        status.append(f"{name}: {len(globs)} glob(s) denied to every tool ({tier} tier){kept}")
    return IgnoreFiles(tuple(sources), tuple(status))


def _globs(text: str) -> tuple[tuple[str, ...], int]:
    """The file's globs, as gitignore reads its lines, and how many lines were passed over.

    A `!` line takes a path back out of the list in gitignore; here it is passed over, so what it
    would show stays hidden (never less hidden than the file says). A line that climbs (`..`)
    names nothing in the project, and is passed over too.
    """
    globs: list[str] = []
    passed_over = 0
    for line in text.splitlines():
        line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!") or ".." in line.strip().split("/"):
            passed_over += 1
            continue
        if line.startswith(("\\#", "\\!")):
            line = line[1:]
        glob = line.strip()
        if glob.rstrip("/"):
            globs.append(glob)
    return tuple(dict.fromkeys(globs)), passed_over


def _read_users(path: Path, name: str) -> str:
    try:
        data = path.read_bytes()[: MAX_IGNORE_BYTES + 1]
    except OSError as exc:
        raise ConfigError(
            f"the ignore file {name} cannot be read ({exc.strerror or type(exc).__name__}); create it, "
            "or take it out of ignore_files",
            rule="ignore_files",
        ) from None
    if len(data) > MAX_IGNORE_BYTES:
        raise ConfigError(
            f"the ignore file {name} is larger than {MAX_IGNORE_BYTES} bytes", rule="ignore_files"
        )
    return data.decode("utf-8", errors="replace")
