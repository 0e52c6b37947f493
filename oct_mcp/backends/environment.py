"""The environment of a sandboxed command: built from an allowlist, never by removing names."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = ["NEVER_PASSED", "is_never_passed", "sandbox_environment"]

# Names that look like secrets, and names that hijack loaders, interpreters or git: never passed,
# whoever asks for them.
_SECRET_LOOKING: Final = re.compile(
    r"TOKEN|SECRET|KEY|PASSW|CREDENTIAL|AUTH|SESSION|COOKIE|PRIVATE", re.IGNORECASE
)
_PREFIXES: Final = (
    "AWS_",
    "GITHUB_",
    "GH_",
    "AZURE_",
    "GOOGLE_",
    "GCP_",
    "NPM_",
    "PYPI_",
    "DOCKER_",
    "SSH_",
    "GPG_",
)
NEVER_PASSED: Final = frozenset(
    {
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "DYLD_INSERT_LIBRARIES",
        "DYLD_LIBRARY_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONBREAKPOINT",
        "PYTHONWARNINGS",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "PERL5OPT",
        "RUBYOPT",
        "NODE_OPTIONS",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
        "GIT_EXTERNAL_DIFF",
        "GIT_PAGER",
        "GIT_EDITOR",
        "PAGER",
        "EDITOR",
        "VISUAL",
    }
)
_LOCALE: Final = "C.UTF-8"


def is_never_passed(name: str) -> bool:
    """True for a name no sandboxed command gets: a secret's look, or a hijack."""
    return name in NEVER_PASSED or name.startswith(_PREFIXES) or bool(_SECRET_LOOKING.search(name))


def sandbox_environment(
    *,
    path_dirs: Iterable[str],
    home: str,
    tmpdir: str,
    read_only_project: bool,
    threads: int,
    tool_env: Iterable[tuple[str, str]] = (),
    host: Mapping[str, str] | None = None,
    cache: str | None = None,
) -> dict[str, str]:
    """The whole environment of one command.

    Args:
        path_dirs: PATH, in order (the tool's venv first).
        home: HOME inside the sandbox.
        tmpdir: TMPDIR inside the sandbox.
        read_only_project: Point tool caches at TMPDIR, since the project cannot take them.
        threads: Cap for tools that start one thread per core (ruff's rayon).
        tool_env: Settings a tool asks for; any name `is_never_passed` refuses is dropped.
        host: The server's environment, from which only TZ is taken; `os.environ` when None.
        cache: The project's cache folder, kept between runs: bytecode, mypy and ruff caches go
            there, and Python writes bytecode again.

    Returns:
        The environment, and nothing else: no name of the server's own environment leaks in.
    """
    source = os.environ if host is None else host
    env = {
        "PATH": os.pathsep.join(path_dirs),
        "HOME": home,
        "TMPDIR": tmpdir,
        "LANG": _LOCALE,
        "LC_ALL": _LOCALE,
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8",
        "RAYON_NUM_THREADS": str(threads),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_OPTIONAL_LOCKS": "0",
    }
    if "TZ" in source:
        env["TZ"] = source["TZ"]
    if cache is not None:
        del env["PYTHONDONTWRITEBYTECODE"]
        env["RUFF_CACHE_DIR"] = f"{cache}/ruff"
        env["MYPY_CACHE_DIR"] = f"{cache}/mypy"
        env["PYTHONPYCACHEPREFIX"] = f"{cache}/pycache"
    elif read_only_project:
        env["RUFF_CACHE_DIR"] = f"{tmpdir}/ruff-cache"
        env["MYPY_CACHE_DIR"] = f"{tmpdir}/mypy-cache"
        env["PYTHONPYCACHEPREFIX"] = f"{tmpdir}/pycache"
    for name, value in tool_env:
        if not is_never_passed(name) and name not in ("PATH", "HOME", "TMPDIR"):
            env[name] = value
    return env
