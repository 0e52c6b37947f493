"""The hosts `oct-mcp install` knows, where each keeps its config, and what a plan is made of."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Final

from oct_mcp.errors import OctError
from oct_mcp.workspace import broad_root_problem

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


def project_folder(project_root: str | os.PathLike[str], home: Path) -> Path:
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


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise HostConfigError(
            f"--name {name!r}: use letters, digits, - and _, starting with a letter (at most 64)"
        )


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
