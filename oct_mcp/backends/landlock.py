"""The landlock backend (Linux 5.13+): Landlock rules and a seccomp filter, no privilege, no namespace.

For machines where bubblewrap cannot work (user namespaces blocked by AppArmor on Ubuntu 24.04+,
most containers). The rules are applied to a fresh thread that then spawns the command
(`confined.py`), so they are in force before the command's first instruction.

Libraries: `landlockpy` (rulesets) and `seccompy` (the filter, assembled in Python, no
libseccomp needed), both dependency-free, typed and kept up to date with the kernel's ABIs.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final

from oct_mcp.backends import (
    NO_NETWORK,
    READS_CONFINED,
    WRITES_CONFINED,
    Availability,
    EntryRights,
    Limits,
    Prepared,
    SandboxRequest,
    SecretFileView,
    make_home_and_tmp,
    scratch_home_and_tmp,
)
from oct_mcp.backends.confined import kill_and_reap
from oct_mcp.backends.devices import PTYS, SHARED_MEMORY
from oct_mcp.backends.landlock_rules import allow_reads, allow_writes
from oct_mcp.backends.libc import libc
from oct_mcp.backends.loopback import LoopbackSupervisor, loopback_support
from oct_mcp.backends.project_entries import ProjectEntries
from oct_mcp.backends.ptys import allow_pty_master
from oct_mcp.backends.rlimits import limit_prefix
from oct_mcp.backends.seccomp import filter_program, load_filter
from oct_mcp.errors import SandboxUnavailableError

if TYPE_CHECKING:
    pass

__all__ = ["LandlockBackend", "LandlockSupport", "landlock_support"]

# Writes need TRUNCATE handled (ABI 3): before it, truncate(2) of any file was outside Landlock.
_WRITES_ABI: Final = 3
_TCP_ABI: Final = 4
_SCOPE_ABI: Final = 6
"""Abstract unix sockets and signals scoped to the domain; the sweep of leftovers relies on it."""
_DEVICE_GAPS: Final = "runs get no pty and no /dev/shm (bubblewrap gives each run its own)"
"""What doctor says beside the guarantees where the kernel cannot supervise a run: what a test
suite misses then (devices.py says why)."""
_CACHES: Final = (
    ("RUFF_CACHE_DIR", "ruff-cache"),
    ("MYPY_CACHE_DIR", "mypy-cache"),
    ("PYTHONPYCACHEPREFIX", "pycache"),
)
_PR_SET_CHILD_SUBREAPER: Final = 36
_PR_CAPBSET_READ: Final = 23
_PR_CAPBSET_DROP: Final = 24
_PR_SET_SECUREBITS: Final = 28
_SECBIT_NOROOT: Final = 1 << 0
_SECBIT_NOROOT_LOCKED: Final = 1 << 1
_SWEEP_SECONDS: Final = 2.0
_PROBE_PROGRAM: Final = "/usr/bin/true"
_PROBE_TIMEOUT_SECONDS: Final = 10


@dataclass(frozen=True, slots=True)
class LandlockSupport:
    """What this kernel's Landlock and seccomp give, and why not where they fall short."""

    abi: int
    seccomp: bool
    problem: str | None
    """Why the backend cannot run here at all; None when it can."""

    def missing(self) -> dict[str, str]:
        """Each guarantee this kernel cannot give, with the reason."""
        reasons: dict[str, str] = {}
        if self.problem is not None:
            return dict.fromkeys((READS_CONFINED, WRITES_CONFINED, NO_NETWORK), self.problem)
        if self.abi < _WRITES_ABI:
            reasons[WRITES_CONFINED] = (
                f"Landlock ABI {self.abi} cannot deny truncate (needs ABI 3, Linux 6.2)"
            )
        if self.abi < _TCP_ABI:
            reasons[NO_NETWORK] = f"Landlock ABI {self.abi} cannot deny TCP (needs ABI 4, Linux 6.7)"
        elif not self.seccomp:
            reasons[NO_NETWORK] = "seccomp filters are unavailable: UDP and unix sockets stay open"
        if not self.seccomp:
            # Landlock has no right for a file's mode, owner, times or attributes: the filter refuses them.
            reasons.setdefault(
                WRITES_CONFINED,
                "seccomp filters are unavailable: a run could change any file's mode, owner and times",
            )
        return reasons

    @property
    def sweeps_leftovers(self) -> bool:
        return self.abi >= _SCOPE_ABI


@cache
def landlock_support() -> LandlockSupport:
    """Probe the kernel once: Landlock's ABI and whether seccomp filters load."""
    if not sys.platform.startswith("linux"):
        return LandlockSupport(0, False, "Landlock is Linux only")
    try:
        import landlockpy
        import seccompy
    except ImportError:
        return LandlockSupport(0, False, "the landlockpy and seccompy packages are not installed")
    abi = landlockpy.abi_version()
    if abi < 1:
        return LandlockSupport(
            0,
            False,
            "the kernel has no Landlock (Linux 5.13+ with landlock in the lsm= boot list)",
        )
    return LandlockSupport(abi, seccompy.supported(), None)


@cache
def _become_subreaper() -> None:
    """Orphans of a run (a `setsid` daemon) come back to the server, so the run's end can find them."""
    libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


class LandlockBackend:
    """Confines each command with Landlock (files, TCP, scopes) and seccomp (sockets, file metadata).

    Reads: the system folders, `/etc` (only the files a tool needs for strict profiles), the
    interpreter and tool installs, the project, the run's scratch folder and a few devices.
    Writes: the scratch folder, and for write tools every project entry but the protected
    ones; Landlock only adds rights, so no right is ever given on the project root itself, nor on a
    folder that holds a protected path: there the supervisor makes and removes entries for the run
    (`project_entries.py`). On a kernel that cannot supervise, a file there can be written, not
    made, removed or replaced (`EntryRights.CLEAR_FOLDERS`).
    """

    name = "landlock"
    # Landlock can only give rights, not show another file in one's place: such a file is kept out.
    secret_files = SecretFileView.HIDDEN

    @property
    def entry_rights(self) -> EntryRights:
        if landlock_support().seccomp and loopback_support() is None:
            return EntryRights.WRITABLE_FOLDERS
        return EntryRights.CLEAR_FOLDERS

    def home_and_tmp(self, scratch: Path) -> tuple[str, str]:
        return scratch_home_and_tmp(scratch)

    def probe(self) -> Availability:
        support = landlock_support()
        if support.problem is not None:
            return Availability(False, support.problem)
        failure = _run_true_confined(support)
        # Probed once here, at start-up, rather than on the first run's spawn.
        supervised = support.seccomp and loopback_support() is None
        if failure is not None:
            return Availability(
                False, f"Landlock ABI {support.abi} is there, but a confined run failed: {failure}"
            )
        missing = support.missing()
        gaps = "; ".join(f"no {name}: {why}" for name, why in sorted(missing.items()))
        detail = f"Landlock ABI {support.abi}, seccomp {'on' if support.seccomp else 'off'}"
        if not support.sweeps_leftovers:
            gaps = "; ".join(
                filter(None, [gaps, "a setsid daemon can outlive its call (needs ABI 6, Linux 6.12)"])
            )
        held = f"{detail}; {gaps}" if gaps else f"{detail}; every guarantee holds"
        return Availability(True, held if supervised else f"{held}; {_DEVICE_GAPS}")

    def prepare(self, request: SandboxRequest) -> Prepared:
        support = landlock_support()
        if support.problem is not None:
            raise SandboxUnavailableError(f"the landlock backend cannot run here: {support.problem}")
        _home, tmp = make_home_and_tmp(request.scratch)
        missing = support.missing()
        guarantees = {READS_CONFINED, WRITES_CONFINED, NO_NETWORK} - set(missing)
        if request.network:
            guarantees.discard(NO_NETWORK)
        if support.sweeps_leftovers:
            _become_subreaper()
        supervised = support.seccomp and loopback_support() is None
        env = dict(request.env)
        if request.writable:
            # No new entry can be made in the project root itself (see allow_writes): caches go to TMPDIR.
            for name, folder in _CACHES:
                env.setdefault(name, f"{tmp}/{folder}")
        return Prepared(
            argv=(*limit_prefix(request.limits), *request.argv),
            env=env,
            cwd=request.start_folder,
            guarantees=frozenset(guarantees),
            confinement=_Domain(request=request, support=support, supervised=supervised),
            # Without a supervisor (a kernel that cannot), the run's ptys and /dev/shm stay refused.
            refused_devices=() if supervised else (PTYS, SHARED_MEMORY),
        )


def _run_true_confined(support: LandlockSupport) -> str | None:
    """Run /usr/bin/true under a real domain, from a fresh thread: what failed, or None."""
    failure: list[str] = []

    def confined_true(folder: Path) -> None:
        request = SandboxRequest(
            argv=(_PROBE_PROGRAM,),
            project=folder,
            writable=False,
            network=False,
            protected=(),
            read_only_binds=(),
            env={},
            limits=Limits(memory_bytes=None, cpu_seconds=_PROBE_TIMEOUT_SECONDS),
            scratch=folder,
            strict_files=True,
        )
        try:
            _Domain(request=request, support=support).restrict_current_thread()
            completed = subprocess.run(  # fixed argv, no shell
                [_PROBE_PROGRAM], env={}, cwd=folder, capture_output=True,
                timeout=_PROBE_TIMEOUT_SECONDS, check=False,
            )  # fmt: skip
        except SandboxUnavailableError as exc:
            failure.append(exc.message)
        except (OSError, subprocess.SubprocessError) as exc:
            failure.append(type(exc).__name__)
        else:
            if completed.returncode != 0:
                failure.append(f"{_PROBE_PROGRAM} exited with {completed.returncode}")

    # Made and removed out here: the confined thread may not write where the folder sits.
    with tempfile.TemporaryDirectory(prefix="oct-landlock-probe-") as scratch:
        thread = threading.Thread(
            target=confined_true, args=(Path(scratch),), name="oct-landlock-probe", daemon=True
        )
        thread.start()
        thread.join()
    return failure[0] if failure else None


@dataclass(frozen=True, slots=True)
class _Domain:
    """The rules of one run, applied to the thread that spawns it."""

    request: SandboxRequest
    support: LandlockSupport
    supervised: bool = False
    """A supervisor answers the run's ptys and /dev/shm, and without network its loopback and unix
    sockets (a kernel that can: `loopback_support`)."""

    def restrict_current_thread(self) -> None:
        # Before any confinement: the supervisor's thread takes this thread's credentials as they are.
        request = self.request
        entries = (
            ProjectEntries.for_project(
                request.project, request.protected, (file.path for file in request.secret_files)
            )
            if request.writable and self.supervised
            else None
        )
        supervisor = LoopbackSupervisor(request.scratch, entries) if self.supervised else None
        try:
            self._restrict(supervisor)
        finally:
            if supervisor is not None:
                supervisor.abandon()  # a no-op once the filter loaded

    def _restrict(self, supervisor: LoopbackSupervisor | None) -> None:
        from landlockpy import AccessNet, LandlockError, Ruleset, Scope

        request = self.request
        if os.geteuid() == 0 and _thread_has_capabilities():
            _drop_root_capabilities()
        try:
            # handled_net None: every network right this kernel knows is handled, and none granted.
            handled_net = AccessNet.NONE if request.network else None
            scoped = Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL
            with Ruleset(handled_net=handled_net, scoped=scoped) as ruleset:
                allow_reads(ruleset, request)
                allow_writes(ruleset, request)
                if supervisor is not None:
                    # /dev/ptmx only: the terminal side comes from the supervisor (ptys.py). No
                    # right on /dev/shm: the supervisor makes the run's segments (shm.py).
                    allow_pty_master(ruleset)
                # No port rule: with TCP handled, every bind and connect the run makes itself is
                # refused; the supervisor makes them for it from outside the domain.
                ruleset.restrict(no_new_privs=True)
                enforced = ruleset.enforced
            if supervisor is not None:
                program = filter_program(
                    sockets=True, network=request.network, writes=request.writable, supervised=True
                )
                supervisor.load(program)
            elif self.support.seccomp:
                load_filter(filter_program(sockets=True, network=request.network, writes=request.writable))
        except (LandlockError, OSError, ValueError) as exc:
            raise SandboxUnavailableError(
                f"the kernel refused the run's Landlock rules ({type(exc).__name__}); "
                "`oct-mcp doctor` shows what this kernel supports"
            ) from exc
        if not enforced:
            raise SandboxUnavailableError("the kernel did not enforce the run's Landlock rules")

    def end_domain(self, leader: int) -> None:
        # Only signals scoped to the domain say which processes are this run's: without them, leave all.
        if not self.support.sweeps_leftovers:
            return
        deadline = time.monotonic() + _SWEEP_SECONDS
        server = os.getpid()
        while time.monotonic() < deadline:
            # Orphans come back to the server (a subreaper); a refused signal means another run's.
            killed = [kill_and_reap(pid) for pid in _children(server) if pid != leader]
            if not any(killed):
                return
            time.sleep(0.001)


def _thread_has_capabilities() -> bool:
    """Whether an exec from this thread as root could grant a capability: its bounding set is not
    empty (root in a container may have none left to drop, and no right to drop them).

    Asked of the kernel capability by capability, which stops at the first one held (root's usual
    case: one call) where reading /proc/thread-self/status cost a spawn 25 to 70 us."""
    capability = 0
    while (held := libc().prctl(_PR_CAPBSET_READ, capability, 0, 0, 0)) == 0:
        capability += 1
    # -1 past the last capability this kernel knows (EINVAL): none held. Any other error: unknown,
    # so drop them, or fail trying.
    return held == 1 or ctypes.get_errno() != errno.EINVAL


def _drop_root_capabilities() -> None:
    """As root, the command would keep every capability, and with them (measured) read the
    server's /proc/<pid>/environ despite Landlock. The thread drops them all from its bounding
    set and locks SECBIT_NOROOT, so exec grants none: the command is uid 0 without privilege."""
    capability = 0
    while libc().prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) == 0:
        capability += 1
    if ctypes.get_errno() != errno.EINVAL or capability == 0:
        raise SandboxUnavailableError("the run's thread could not drop root's capabilities")
    if libc().prctl(_PR_SET_SECUREBITS, _SECBIT_NOROOT | _SECBIT_NOROOT_LOCKED, 0, 0, 0) != 0:
        raise SandboxUnavailableError("the run's thread could not lock out root's capabilities")


def _children(pid: int) -> set[int]:
    """The children of `pid`, from each thread's `children` list, or a scan of /proc without them."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            listed = _read_proc_file(f"/proc/{pid}/task/{task}/children")
        except FileNotFoundError:
            return _children_by_scan(pid)  # a kernel without CONFIG_PROC_CHILDREN
        except OSError:
            continue
        found.update(int(child) for child in listed.split())
    return found


def _read_proc_file(path: str) -> bytes:
    """A /proc file whole, without a text layer: a run's end reads one per server thread, and
    `Path.read_text` cost four times as much each."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65_536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _children_by_scan(pid: int) -> set[int]:
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The name in `stat` may hold spaces and parentheses: the fields start after the last ")".
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.add(int(entry))
    return found
