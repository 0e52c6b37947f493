"""The devices a backend cannot give a run, and the note a result carries when a run needed one.

Landlock rights reach every file below the folder they are on, and no rule can tell a run's own
entries from the user's:

- a pty: glibc's `openpty` opens the terminal side with TIOCGPTPEER, and the kernel checks that
  open as one of `/dev/pts/N` (measured). A right on `/dev/pts` would let a run open every
  terminal of the user by name, read their keystrokes and write into their shells;
- shared memory and named semaphores (`multiprocessing`'s locks, Pool, Manager,
  `shared_memory`): glibc makes them in `/dev/shm` by a fixed path, beside every other process's
  segments (a browser's), which a right on `/dev/shm` would open to the run.

So a landlock run gets them from its supervisor (seccomp user notification): the terminal side of
its own pty (`ptys.py`), its segments in a folder of its own (`shm.py`). Where the kernel cannot
supervise a run (`loopback_support`), it gets neither: a run that failed for want of one is told
so by name, with what gives it. Bubblewrap gives each run its own `/dev`, with a devpts and a
`/dev/shm` of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["PTYS", "SHARED_MEMORY", "DeviceGap", "device_notes"]


@dataclass(frozen=True, slots=True)
class DeviceGap:
    """A kind of device a backend does not give its runs, and how a run's output shows it."""

    symptoms: tuple[bytes, ...]
    """Any of these in the output: the run needed it (an error naming it, a library's fallback)."""
    note: str


PTYS: Final = DeviceGap(
    # In a traceback: the failing line's call, or Python's last fallback when every pty failed.
    symptoms=(b"openpty()", b"forkpty()", b"out of pty devices", b"/dev/ptmx", b"/dev/pts/"),
    note=(
        "ptys (/dev/ptmx: pty.openpty, os.forkpty, pexpect) are not available under the landlock "
        "backend on this kernel, which cannot supervise a run (oct-mcp doctor says why): a Landlock "
        "right that opens the run's own pty opens the user's terminals too; the "
        "bubblewrap backend gives each run a pty device of its own (sandbox_backend set to bubblewrap, "
        "where oct-mcp doctor shows it usable)"
    ),
)
SHARED_MEMORY: Final = DeviceGap(
    symptoms=(
        b"/dev/shm",
        b"multiprocessing/synchronize.py",
        b"multiprocessing/shared_memory.py",
        b"SemLock",
        b"/psm_",
        b"will operate in serial mode",  # joblib, which then skips its parallel tests
    ),
    note=(
        "POSIX shared memory and semaphores (/dev/shm: multiprocessing's locks, Pool, Manager, "
        "shared_memory) are not available under the landlock backend on this kernel, which cannot "
        "supervise a run (oct-mcp doctor says why): a Landlock right on /dev/shm "
        "opens every other process's segments too; the bubblewrap backend gives each run a /dev/shm "
        "of its own (sandbox_backend set to bubblewrap, where oct-mcp doctor shows it usable)"
    ),
)


def device_notes(gaps: tuple[DeviceGap, ...], output: bytes) -> list[str]:
    """The note of each gap whose symptoms show in `output`, in the order of `gaps`."""
    return [gap.note for gap in gaps if any(symptom in output for symptom in gap.symptoms)]
