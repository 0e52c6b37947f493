"""Finding the program a tool runs: the project's own venv first, then the system PATH."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Final

from oct_mcp.errors import ToolUnavailableError

__all__ = ["find_program"]

PROJECT_VENVS: Final = (".venv", "venv")
_INSTALL_HINTS: Final = {
    "ruff": "pip install ruff (into the project's .venv, or on PATH)",
    "pytest": "pip install pytest (into the project's .venv)",
    "mypy": "pip install mypy (into the project's .venv)",
    "pyright": "pip install pyright (into the project's .venv) or npm install -g pyright",
    "git": "install git (apt install git, brew install git)",
}


def find_program(root: Path, name: str) -> Path:
    """The absolute path of `name`: `<root>/.venv/bin`, `<root>/venv/bin`, then the server's PATH.

    Raises:
        ToolUnavailableError: Nowhere to be found; the message says how to install it.
    """
    for venv in PROJECT_VENVS:
        candidate = root / venv / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found is not None:
        return Path(found).absolute()
    hint = _INSTALL_HINTS.get(name, f"install {name}")
    raise ToolUnavailableError(f"{name} is not installed in the project's .venv nor on PATH: {hint}")
