"""Where a program's install lives, so a sandbox can show it read-only (and never more than that)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = ["install_roots"]

_SHEBANG_LIMIT: Final = 512
# Already visible in every sandbox, read-only.
_SYSTEM: Final = (Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib64"))


def install_roots(executable: Path, project: Path) -> tuple[Path, ...]:
    """Folders a program needs to read to run: its venv, the venv's base Python, its interpreter's.

    Never the user's home as a whole, nor `/`, nor anything inside the project (bound anyway).
    """
    candidates: list[Path] = []
    for program in (executable, _shebang_interpreter(executable)):
        if program is None:
            continue
        candidates.append(program.parent.parent)
        real = program.resolve()
        candidates.append(real.parent.parent)
        venv = _venv_of(program)
        if venv is not None:
            candidates.append(venv)
            home = _venv_home(venv)
            if home is not None:
                candidates += [home.parent, home.resolve().parent]
    home_dir = Path.home().resolve()
    roots: list[Path] = []
    for candidate in candidates:
        path = Path(os.path.normpath(candidate))
        if (
            path == Path("/")
            or home_dir.is_relative_to(path)
            or path.is_relative_to(project)
            or any(path.is_relative_to(system) for system in _SYSTEM)
            or not path.is_dir()
            or path in roots
        ):
            continue
        roots.append(path)
    return tuple(roots)


def _venv_of(program: Path) -> Path | None:
    venv = program.parent.parent
    return venv if (venv / "pyvenv.cfg").is_file() else None


def _venv_home(venv: Path) -> Path | None:
    try:
        lines = (venv / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return Path(value.strip())
    return None


def _shebang_interpreter(executable: Path) -> Path | None:
    """A script's interpreter (`#!/path/to/python`), which the sandbox must see too."""
    try:
        with executable.open("rb") as handle:
            first = handle.read(_SHEBANG_LIMIT).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode(errors="replace").split()
    if not parts or not parts[0].startswith("/"):
        return None
    return Path(parts[0])
