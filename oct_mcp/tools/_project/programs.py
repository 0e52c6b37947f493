"""Finding the program a tool runs: project tooling from its venv first; the rest from the server's PATH."""

from __future__ import annotations

import base64
import glob
import hashlib
import os
import re
import stat
import tomllib
from collections.abc import Mapping
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
        if _is_program(candidate):
            return candidate
    found = _on_server_path(root, name)
    if found is not None:
        return found
    raise ToolUnavailableError(f"{name} is not installed in the project's .venv nor on PATH: {_hint(name)}")


def find_python(root: Path, host: Mapping[str, str] | None = None) -> tuple[Path, str] | None:
    """The project's interpreter, as a developer's terminal would have it, and where it was found.

    `<root>/.venv`, `<root>/venv` (uv's, pdm's and poetry's in-project place), the server's active
    virtual environment (`VIRTUAL_ENV`), then the environment poetry made for a project that
    declares `[tool.poetry]`. None when there is none: the caller falls back to the interpreter
    its program names.
    """
    source = os.environ if host is None else host
    for venv in PROJECT_VENVS:
        candidate = _interpreter(root / venv)
        if candidate is not None:
            return candidate, f"the project's {venv}"
    active = source.get("VIRTUAL_ENV", "")
    if os.path.isabs(active):
        candidate = _interpreter(Path(os.path.normpath(active)))
        if candidate is not None:
            return candidate, "the active virtual environment (VIRTUAL_ENV)"
    poetry = _poetry_environment(root, source)
    if poetry is not None:
        return poetry, "poetry's environment for the project"
    return None


def _interpreter(environment: Path) -> Path | None:
    candidate = environment / "bin" / "python"
    return candidate if _is_program(candidate) else None


_POETRY_UNSAFE: Final = re.compile(r'[ $`!*@"\\\r\n\t]')


def _poetry_environment(root: Path, source: Mapping[str, str]) -> Path | None:
    """`<cache>/virtualenvs/<name>-<hash>-py<version>`, named as poetry names it, for a poetry project."""
    try:
        with (root / "pyproject.toml").open("rb") as handle:
            config = tomllib.loads(handle.read(1_048_576).decode("utf-8", errors="replace"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    tool, project = config.get("tool"), config.get("project")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    if not isinstance(poetry, dict):
        return None
    name = poetry.get("name") or (project.get("name") if isinstance(project, dict) else None)
    if not isinstance(name, str) or not name:
        return None
    digest = hashlib.sha256(os.fsencode(os.path.normcase(os.path.realpath(root)))).digest()
    prefix = f"{_POETRY_UNSAFE.sub('_', name.lower())[:42]}-{base64.urlsafe_b64encode(digest).decode()[:8]}"
    folder = source.get("POETRY_VIRTUALENVS_PATH", "")
    if not os.path.isabs(folder):
        cache = source.get("POETRY_CACHE_DIR", "")
        if not os.path.isabs(cache):
            xdg = source.get("XDG_CACHE_HOME", "")
            home = source.get("HOME", "")
            if not os.path.isabs(xdg) and not os.path.isabs(home):
                return None
            cache = str(Path(xdg if os.path.isabs(xdg) else Path(home) / ".cache") / "pypoetry")
        folder = str(Path(cache) / "virtualenvs")
    found = sorted(Path(folder).glob(f"{glob.escape(prefix)}-py*"), key=lambda path: path.name, reverse=True)
    for environment in found:
        candidate = _interpreter(environment)
        if candidate is not None:
            return candidate
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
    return candidate if _is_program(candidate) else None


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
        if _is_program(candidate):
            return candidate
    return None


def _is_program(path: Path) -> bool:
    """A regular file this user may run. False where it cannot be looked at: a PATH the server
    inherited may name another user's folder (`/root/...` under `sudo -u`), which `Path.is_file`
    answers with PermissionError rather than False."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode) and os.access(path, os.X_OK)
    except OSError:
        return False


def _hint(name: str) -> str:
    return _INSTALL_HINTS.get(name, f"install {name}")
