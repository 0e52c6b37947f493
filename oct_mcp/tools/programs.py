"""Finding the program a tool runs: project tooling from its venv first; the rest from the server's PATH."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from oct_mcp.backends.installs import is_inside
from oct_mcp.errors import ToolUnavailableError

__all__ = ["find_program", "find_python", "find_server_program", "script_interpreter"]

PROJECT_VENVS: Final = (".venv", "venv")
_INSTALL_HINTS: Final = {
    "ruff": "pip install ruff (into the project's .venv, or on PATH)",
    "pytest": "pip install pytest (into the project's .venv)",
    "mypy": "pip install mypy (into the project's .venv)",
    "pyright": "pip install pyright (into the project's .venv) or npm install -g pyright",
    "git": "install git (apt install git, brew install git)",
}


def find_program(root: Path, name: str) -> Path:
    """The project's own tooling: `<root>/.venv/bin`, `<root>/venv/bin`, then the server's PATH.

    A program found inside the project is project code: only tools of `execute` or `write`
    risk may run what this returns.

    Raises:
        ToolUnavailableError: Nowhere to be found; the message says how to install it.
    """
    for venv in PROJECT_VENVS:
        candidate = root / venv / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = _on_server_path(root, name)
    if found is not None:
        return found
    raise ToolUnavailableError(f"{name} is not installed in the project's .venv nor on PATH: {_hint(name)}")


def find_python(root: Path, host: dict[str, str] | None = None) -> tuple[Path, str] | None:
    """The project's interpreter, as a developer's terminal would have it, and where it was found.

    `<root>/.venv`, `<root>/venv`, then the server's active virtual environment (`VIRTUAL_ENV`).
    None when there is none: the caller falls back to the interpreter its program names.
    """
    for venv in PROJECT_VENVS:
        candidate = root / venv / "bin" / "python"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate, f"the project's {venv}"
    active = (os.environ if host is None else host).get("VIRTUAL_ENV", "")
    if os.path.isabs(active):
        candidate = Path(os.path.normpath(active)) / "bin" / "python"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate, "the active virtual environment (VIRTUAL_ENV)"
    return None


def script_interpreter(script: Path) -> Path | None:
    """The absolute interpreter a script's `#!` line names, if it is a Python one that exists."""
    try:
        with script.open("rb") as handle:
            first = handle.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!/"):
        return None
    words = first[2:].decode(errors="replace").split()
    if len(words) != 1 or not Path(words[0]).name.startswith("python"):
        return None
    candidate = Path(words[0])
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def find_server_program(root: Path, name: str) -> Path:
    """A program that is not the project's tooling (git): from the server's PATH only, never the project.

    PATH entries that are relative or lie inside the project are skipped: what they hold is
    the project's choice, not the server's.

    Raises:
        ToolUnavailableError: Not on the server's PATH; the message says how to install it.
    """
    found = _on_server_path(root, name)
    if found is None:
        raise ToolUnavailableError(f"{name} is not on the server's PATH: {_hint(name)}")
    return found


def _on_server_path(root: Path, name: str) -> Path | None:
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        candidate = Path(os.path.normpath(entry)) / name
        if is_inside(candidate, root):
            continue
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _hint(name: str) -> str:
    return _INSTALL_HINTS.get(name, f"install {name}")
