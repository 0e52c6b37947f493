"""The per-project cache folder: warm bytecode, mypy, ruff and pytest caches that outlive one run."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Final

from oct_mcp.backends.installs import is_inside

__all__ = ["CACHE_SUBFOLDERS", "prepare_project_cache", "project_cache"]

CACHE_SUBFOLDERS: Final = ("pycache", "mypy", "ruff", "pytest", "coverage", "reports")
_APP: Final = "oct-mcp"


def project_cache(root: Path, host: dict[str, str] | None = None) -> Path:
    """Where the caches of the project at `root` live: the user's cache directory, one folder per project.

    The folder is named by a hash of the root, so two projects never share bytecode or a mypy cache,
    and nothing of the project's path shows in the name. No I/O: a plan may call it.
    """
    source = os.environ if host is None else host
    base = source.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):
        base = str(Path(source.get("HOME") or Path.home()) / ".cache")
    digest = hashlib.sha256(os.fsencode(os.path.normpath(root))).hexdigest()[:24]
    return Path(os.path.normpath(base)) / _APP / "projects" / digest


def prepare_project_cache(root: Path, host: dict[str, str] | None = None) -> Path | None:
    """Create the project's cache folder, owner-only, and return it; None where it cannot be trusted.

    None (the run then uses its scratch folder, cold) when the folder would lie inside the project,
    cannot be made, or is not a real folder owned by this user with no access for anyone else:
    a cache another user can write is code they could make this project run.
    """
    folder = project_cache(root, host)
    if is_inside(folder, root) or is_inside(root, folder):
        return None
    try:
        for path in (folder.parent.parent, folder.parent, folder):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = path.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
                return None
        for name in CACHE_SUBFOLDERS:
            (folder / name).mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder
