"""Resource limits put in front of a command: util-linux prlimit where it exists, else a Python trampoline."""

from __future__ import annotations

import os
import resource
import shutil
import sys
from functools import cache
from typing import Final

from oct_mcp.backends import Limits

__all__ = ["limit_prefix", "process_budget"]

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


def process_budget(margin: int) -> int | None:
    """An RLIMIT_NPROC that lets one run start `margin` more tasks than this user has now.

    RLIMIT_NPROC counts every task (threads too) of the user, not of one run: the budget is the
    user's current count plus the margin, so a fork bomb stops there. None for root, whom the
    kernel does not limit, and where /proc cannot be read.

    Args:
        margin: How many processes and threads one run may add.
    """
    if os.geteuid() == 0:
        return None
    try:
        tasks = _tasks_of(os.getuid())
    except OSError:
        return None
    return tasks + margin


def _tasks_of(uid: int) -> int:
    """The tasks (processes and their threads) whose real user is `uid`, as the kernel counts them."""
    count = 0
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/status", "rb") as status:
                    fields = dict(_status_fields(status.read()))
            except OSError:
                continue  # gone meanwhile, or hidden (hidepid)
            real_uid = fields.get(b"Uid", b"").split()[:1]
            if real_uid == [str(uid).encode()]:
                count += int(fields.get(b"Threads", b"1") or b"1")
    return count


def _status_fields(text: bytes) -> list[tuple[bytes, bytes]]:
    pairs = []
    for line in text.splitlines():
        name, _, value = line.partition(b":")
        if name in (b"Uid", b"Threads"):
            pairs.append((name, value.strip()))
    return pairs
