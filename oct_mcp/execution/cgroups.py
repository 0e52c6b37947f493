"""A cgroup v2 per run, where the server's cgroup is delegated to it: memory and process caps per run."""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from functools import cache
from pathlib import Path
from typing import Final

__all__ = ["RunCgroup", "delegated_cgroup"]

NEEDED_CONTROLLERS: Final = frozenset({"memory", "pids"})
_REMOVE_TRIES: Final = 50
_REMOVE_PAUSE: Final = 0.01
# Moves itself into the run's cgroup (writing 0 to cgroup.procs moves the writer), then execs the
# command: every process the command starts is born inside it, with no window to fork outside.
_JOIN: Final = (
    "import os,sys\n"
    "f=os.open(sys.argv[1],os.O_WRONLY); os.write(f,b'0'); os.close(f)\n"
    "os.execv(sys.argv[3],sys.argv[3:])\n"
)


@cache
def delegated_cgroup() -> Path | None:
    """The server's own cgroup v2 folder, if it may make runs' cgroups there with memory and pids caps.

    That holds where the folder is writable and its `cgroup.subtree_control` already enables the
    memory and pids controllers (a systemd unit with `Delegate=yes` that moved its processes to a
    leaf, a container runtime's delegated cgroup). Nothing is enabled or moved here: the server
    changes no cgroup it did not make.
    """
    if not sys.platform.startswith("linux"):
        return None  # pragma: no cover - cgroups are Linux only
    try:
        mount = _cgroup2_mount()
        own = _own_cgroup()
    except OSError:
        return None
    if mount is None or own is None:
        return None
    folder = mount / own.lstrip("/")
    try:
        enabled = set((folder / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None
    if not enabled.issuperset(NEEDED_CONTROLLERS) or not os.access(folder, os.W_OK | os.X_OK):
        return None
    return folder


def _cgroup2_mount() -> Path | None:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
        for line in mounts:
            before, _, after = line.partition(" - ")
            if after.split(" ", 1)[0] == "cgroup2":
                return Path(before.split(" ")[4])
    return None


def _own_cgroup() -> str | None:
    with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as groups:
        for line in groups:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


class RunCgroup:
    """One run's cgroup: `memory.max` and `pids.max` over all its processes; `cgroup.kill` at its end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def create(cls, parent: Path, *, memory_bytes: int | None, processes: int) -> RunCgroup:
        """Make a run's cgroup under `parent` with its caps.

        Raises:
            OSError: It could not be made or capped (it is removed again).
        """
        folder = parent / f"oct-run-{secrets.token_hex(6)}"
        folder.mkdir(mode=0o755)
        made = cls(folder)
        try:
            _write(folder / "pids.max", str(processes))
            if memory_bytes is not None:
                _write(folder / "memory.max", str(memory_bytes))
                if (folder / "memory.swap.max").exists():
                    _write(folder / "memory.swap.max", "0")
        except OSError:
            made.close()
            raise
        return made

    def join_prefix(self) -> tuple[str, ...]:
        """argv to put before a command so that it, and all it starts, runs in this cgroup."""
        return (sys.executable, "-I", "-S", "-c", _JOIN, str(self.folder / "cgroup.procs"), "--")

    def close(self) -> None:
        """Kill whatever of the run is left (escaped daemons included), then remove the cgroup."""
        kill = self.folder / "cgroup.kill"
        with contextlib.suppress(OSError):
            if kill.exists():
                _write(kill, "1")
        for _ in range(_REMOVE_TRIES):
            try:
                self.folder.rmdir()
            except FileNotFoundError:
                return
            except OSError:
                # EBUSY until the killed processes are reaped; bounded, then left for the next run.
                time.sleep(_REMOVE_PAUSE)
            else:
                return


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)
