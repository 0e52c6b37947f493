"""Resource limits put in front of a command: util-linux prlimit where it exists, else a Python trampoline."""

from __future__ import annotations

import resource
import shutil
import sys
from functools import cache
from typing import Final

from oct_mcp.backends import Limits

__all__ = ["limit_prefix"]

# Sets the limits, then execs the command: used where prlimit is missing (macOS, minimal systems).
# Not preexec_fn: it is not thread-safe, and anyio does not expose it.
_TRAMPOLINE: Final = (
    "import os,resource,sys\n"
    "a=sys.argv[1:]; i=a.index('--')\n"
    "for k in range(0,i,2):\n"
    "    n=int(a[k+1]); resource.setrlimit(getattr(resource,a[k]),(n,n))\n"
    "os.execv(a[i+1], a[i+1:])\n"
)


@cache
def _prlimit() -> str | None:
    return shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")


def limit_prefix(limits: Limits) -> tuple[str, ...]:
    """argv to put before a command so it runs under `limits`."""
    pairs = [
        ("RLIMIT_DATA", limits.memory_bytes),
        ("RLIMIT_CPU", limits.cpu_seconds),
        ("RLIMIT_FSIZE", limits.file_size_bytes),
        ("RLIMIT_NOFILE", limits.open_files),
        ("RLIMIT_CORE", 0),
        ("RLIMIT_NPROC", limits.processes),
    ]
    # A limit above the server's own hard limit cannot be set without privilege: stay under it.
    pairs = [(name, _within_hard_limit(name, value)) for name, value in pairs]
    prlimit = _prlimit()
    if prlimit is not None:
        options = {
            "RLIMIT_DATA": "--data",
            "RLIMIT_CPU": "--cpu",
            "RLIMIT_FSIZE": "--fsize",
            "RLIMIT_NOFILE": "--nofile",
            "RLIMIT_CORE": "--core",
            "RLIMIT_NPROC": "--nproc",
        }
        return (prlimit, *(f"{options[name]}={value}" for name, value in pairs if value is not None), "--")
    flat: list[str] = []
    for name, value in pairs:
        if value is not None:
            flat += [name, str(value)]
    return (sys.executable, "-I", "-S", "-c", _TRAMPOLINE, *flat, "--")


def _within_hard_limit(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    _, hard = resource.getrlimit(getattr(resource, name))
    return value if hard == resource.RLIM_INFINITY else min(value, hard)
