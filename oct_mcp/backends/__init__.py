"""Sandbox backends: each turns a request into the argv that runs it isolated; the runner does the rest."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final, Protocol

from oct_mcp.backends.confined import Confinement
from oct_mcp.backends.devices import DeviceGap

__all__ = [
    "GUARANTEES",
    "MINIMAL_ETC",
    "SCRATCH_PREFIX",
    "Availability",
    "Backend",
    "EntryRights",
    "Limits",
    "Prepared",
    "SandboxRequest",
    "SecretFile",
    "SecretFileView",
    "make_home_and_tmp",
    "scratch_home_and_tmp",
]

NO_NETWORK: Final = "no_network"
WRITES_CONFINED: Final = "writes_confined"
READS_CONFINED: Final = "reads_confined"
GUARANTEES: Final = frozenset({NO_NETWORK, WRITES_CONFINED, READS_CONFINED})
"""What a backend may guarantee, and a profile require: `no_network` also refuses an https policy_source."""
MINIMAL_ETC: Final = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "localtime",
    "ssl",
    "ca-certificates",
    "alternatives",
    "hosts",
    "resolv.conf",
    "gitconfig",
    # Interpreters' own start-up configuration (Debian's python3.X/sitecustomize.py, perl): hidden,
    # every run of the system python printed an error, or silently started otherwise.
    "python3",
    *(f"python3.{minor}" for minor in range(8, 20)),
    "perl",
)
"""The files of /etc that strict and airgapped show: enough for the loader, users, time, TLS, git and
the interpreters' start-up."""
SCRATCH_PREFIX: Final = "oct-run-"
"""How each run's scratch folder (its HOME and TMPDIR on the host) is named, in the temp folder."""


def scratch_home_and_tmp(scratch: Path) -> tuple[str, str]:
    """HOME and TMPDIR for a backend whose run sees the host's files: folders of the run's scratch
    folder (bubblewrap's are the run's own tmpfs)."""
    return str(scratch / "home"), str(scratch / "tmp")


def make_home_and_tmp(scratch: Path) -> tuple[str, str]:
    """`scratch_home_and_tmp`, made owner-only, as the backend prepares the run."""
    home, tmp = scratch_home_and_tmp(scratch)
    for folder in (home, tmp):
        Path(folder).mkdir(mode=0o700, exist_ok=True)
    return home, tmp


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Resource limits of one run; `memory_bytes` is RLIMIT_DATA (RLIMIT_AS makes ruff hang)."""

    memory_bytes: int | None
    """None: no memory limit (memory_limit_mb = 0)."""
    cpu_seconds: int
    file_size_bytes: int = 256 * 1_048_576
    open_files: int = 4_096
    processes: int | None = None
    """RLIMIT_NPROC; None for root, which the kernel does not limit anyway."""


class EntryRights(StrEnum):
    """Where a backend lets a writable run make and remove entries: create, delete, or replace a
    file (git replaces a file by removing it and making it anew), or make a folder.

    Writing into an existing file is another right, which every writable entry has.
    """

    WRITABLE_FOLDERS = "writable_folders"
    """In every folder of the project but the protected ones: the project is writable whole, and
    the protected paths are kept apart (bubblewrap's binds)."""
    CLEAR_FOLDERS = "clear_folders"
    """Only in folders below the project root with no protected path at or below them: a right on
    a folder covers all of its entries, so the root, which holds `.git`, never has one (landlock)."""

    def fixed(self, folder: Path, project: Path, protected: Collection[Path]) -> bool:
        """Whether a writable run can neither make nor remove entries directly in `folder`.

        Args:
            folder: A folder at or below `project`, absolute.
            protected: The protected paths the sandbox keeps read-only (`SandboxRequest.protected`).
        """
        if any(folder.is_relative_to(path) for path in protected):
            return True
        if self is EntryRights.WRITABLE_FOLDERS:
            return False
        return folder == project or any(path.is_relative_to(folder) for path in protected)


class SecretFileView(StrEnum):
    """What a run of a backend is shown of a project file that a read shows with a mask."""

    MASKED = "masked"
    """A copy with the masks a read shows, bound read-only over it (bubblewrap): the run reads the
    masked text, and cannot write, move or remove the file."""
    HIDDEN = "hidden"
    """Nothing: the run is given no right to read it, and opening it fails with EACCES (landlock,
    sandbox_exec, which cannot show one file in place of another)."""
    REAL = "real"
    """The real file: the backend confines no reads (native)."""


@dataclass(frozen=True, slots=True)
class SecretFile:
    """A project file a read shows with at least one mask, and the masked copy a run reads instead."""

    path: Path
    """Absolute, a real name of the file in the project (each hard link is a file of its own)."""
    masked: Path | None = None
    """The copy with the masks, owner-only in the run's scratch folder; None where the backend hides."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxRequest:
    """What to run and what it may touch."""

    argv: tuple[str, ...]
    project: Path
    writable: bool
    network: bool
    protected: tuple[Path, ...]
    """Existing paths under the project that stay read-only even when it is writable."""
    read_only_binds: tuple[Path, ...]
    """Interpreter prefixes and tool installs outside the project the command needs to read."""
    env: Mapping[str, str]
    """The command's whole environment, already built from the allowlist."""
    limits: Limits
    scratch: Path
    """A per-run folder on the host for HOME and TMPDIR where the backend has no private /tmp."""
    strict_files: bool = False
    """Only the system files a tool needs (strict, airgapped), not the whole of /etc."""
    writable_dirs: tuple[Path, ...] = ()
    """Existing folders outside the project the command may write, at the same path inside:
    the project's cache folder and the run's output folder (under `scratch`)."""
    writable_inside: tuple[Path, ...] = ()
    """Existing real folders under the project the command may write even inside a protected path
    (the data folders of the project's git folder: objects, refs, logs), at the same path."""
    cwd: Path | None = None
    """A folder inside the project the command starts in; None: the project root."""
    secret_files: tuple[SecretFile, ...] = ()
    """Project files a read shows masked: the run reads their masked copy, or cannot read them."""
    resolves_localhost: bool = True
    """Without network, `localhost` resolves as on a machine with a network card, AI_ADDRCONFIG
    included (bubblewrap: its own namespace gets a second loopback address, about 3-5 ms a spawn;
    landlock runs in the machine's own network already)."""

    @property
    def start_folder(self) -> Path:
        return self.project if self.cwd is None else self.cwd


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """A request turned into a process to spawn."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    guarantees: frozenset[str]
    """What this run is guaranteed, given the request and the backend."""
    confinement: Confinement | None = None
    """Applied to a fresh thread that then spawns the command (landlock); None: spawn as is."""
    refused_devices: tuple[DeviceGap, ...] = ()
    """Devices the run does not get: a result whose output shows the run needed one says so."""


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether a backend works on this machine, and why not."""

    usable: bool
    detail: str


class Backend(Protocol):
    name: str
    secret_files: SecretFileView
    """What a run is shown of the project files a read shows masked."""

    @property
    def entry_rights(self) -> EntryRights:
        """Where a writable run of this backend can make and remove entries."""
        ...

    def probe(self) -> Availability:
        """Run the backend once for real; a present binary is not enough (user namespaces may be blocked)."""
        ...

    def home_and_tmp(self, scratch: Path) -> tuple[str, str]:
        """HOME and TMPDIR as the command will see them, given the run's scratch folder on the host."""
        ...

    def prepare(self, request: SandboxRequest) -> Prepared: ...
