"""The bubblewrap backend (Linux): namespaces, a read-only minimal system, the project bound as needed."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from functools import cached_property, partial
from pathlib import Path
from typing import Final

from oct_mcp.backends import (
    MINIMAL_ETC,
    NO_NETWORK,
    READS_CONFINED,
    WRITES_CONFINED,
    Availability,
    EntryRights,
    Prepared,
    SandboxRequest,
    SecretFileView,
)
from oct_mcp.backends.private_network import make_private_network, private_network_works
from oct_mcp.backends.rlimits import limit_prefix
from oct_mcp.backends.seccomp import RunFilter, seccomp_loads
from oct_mcp.errors import SandboxUnavailableError

__all__ = ["Bubblewrap"]

SANDBOX_HOME: Final = "/home/oct"
SANDBOX_TMP: Final = "/tmp"  # noqa: S108 - the sandbox's own private tmpfs, not the host's /tmp
# Top-level system folders: on merged-/usr systems they are symlinks into /usr, elsewhere real folders.
_SYSTEM_TOPS: Final = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_PROBE_TIMEOUT_SECONDS: Final = 10
MAX_PROTECTED_MOUNTS: Final = 64
"""Mounts for protected paths in a writable run: the read-only paths and the folders on their way."""


class Bubblewrap:
    """Runs each command in new user, PID, IPC, UTS and (unless allowed) network namespaces.

    No bind of `/`: read-only `/usr` and the few top-level system folders, private
    `/tmp`, `/run` and `/home`, the interpreter and the tool's install read-only,
    the project read-only or writable with its protected paths kept read-only.
    """

    name = "bubblewrap"
    entry_rights = EntryRights.WRITABLE_FOLDERS
    secret_files = SecretFileView.MASKED

    @cached_property
    def executable(self) -> str | None:
        # The distribution's bwrap first: AppArmor profiles on Ubuntu are bound to /usr/bin/bwrap.
        if os.access("/usr/bin/bwrap", os.X_OK):
            return "/usr/bin/bwrap"
        return shutil.which("bwrap")

    def home_and_tmp(self, scratch: Path) -> tuple[str, str]:
        return SANDBOX_HOME, SANDBOX_TMP

    def probe(self) -> Availability:
        """Run `true` in the namespaces a real run uses: a present binary is not enough."""
        if self.executable is None:
            return Availability(
                False, "not installed: install the bubblewrap package (apt install bubblewrap)"
            )
        argv = [
            self.executable,
            *self._namespaces(unshare_network=True),
            *self._system_binds(strict_files=True),
            "--",
            "/usr/bin/true",
        ]
        try:
            completed = _run_as_a_run_would(argv)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Availability(False, f"{self.executable} could not run: {type(exc).__name__}")
        if completed.returncode == 0:
            network = (
                "a run without network has `lo` with a second loopback address (`localhost` resolves)"
                if seccomp_loads() and private_network_works()
                else "a run without network has `lo` with 127.0.0.1 only (AI_ADDRCONFIG finds no IPv4)"
            )
            return Availability(True, f"{self.executable}: namespaces work; {network}")
        return Availability(
            False, _explain_failure(self.executable, completed.stderr.decode(errors="replace"))
        )

    def prepare(self, request: SandboxRequest) -> Prepared:
        """The argv that runs the request under bubblewrap.

        Raises:
            SandboxUnavailableError: bubblewrap was removed after start-up; nothing runs
                unsandboxed in its place.
        """
        if self.executable is None or not os.access(self.executable, os.X_OK):
            raise SandboxUnavailableError(
                f"bubblewrap is no longer at {self.executable}: reinstall it (apt install bubblewrap), "
                "or restart the server to choose the backend again"
            )
        project = str(request.project)
        # Without network, the child that execs bubblewrap makes the run's network namespace, with
        # a second loopback address so `localhost` resolves (private_network.py), for runs that may
        # need it; where it cannot, or for git, bubblewrap unshares the network itself (3-5 ms less
        # a spawn). Never neither: the filter that carries the setup is what the argv relies on.
        filtered = seccomp_loads()
        private_network = (
            not request.network and request.resolves_localhost and filtered and private_network_works()
        )
        argv: list[str] = [
            *limit_prefix(request.limits),
            self.executable,
            *self._namespaces(unshare_network=not request.network and not private_network),
            *self._system_binds(strict_files=request.strict_files),
        ]
        for path in request.read_only_binds:
            argv += ["--ro-bind", str(path), str(path)]
        for path in request.writable_dirs:
            argv += ["--bind", str(path), str(path)]
        argv += ["--bind" if request.writable else "--ro-bind", project, project]
        if request.writable:
            # A mount point cannot be renamed or removed (EBUSY), but the folders above one can,
            # taking it along: each folder on the way to a protected path is bound onto itself,
            # writable still, so none can be renamed away for a new one to take its place.
            pinned, shielded = _protected_mounts(request.project, request.protected)
            for path in pinned:
                argv += ["--bind", str(path), str(path)]
            # Bound after the project, so these mounts cover its writable ones.
            for path in shielded:
                argv += ["--ro-bind", str(path), str(path)]
        # Last, so they cover the read-only project or protected git folder around them.
        for path in request.writable_inside:
            argv += ["--bind", str(path), str(path)]
        # Last of all, so nothing bound later uncovers them: each file a read shows masked is
        # replaced by its masked copy, read-only (a writable run cannot write, move or remove it).
        # Without a copy, an empty device stands in for a file, an empty read-only folder for a
        # folder (git's objects holding a secret): the run reads nothing of either.
        for secret in request.secret_files:
            target = str(secret.path)
            if secret.masked is not None:
                argv += ["--ro-bind", str(secret.masked), target]
            elif secret.path.is_dir() and not secret.path.is_symlink():
                argv += ["--tmpfs", target, "--remount-ro", target]
            else:
                argv += ["--ro-bind", "/dev/null", target]
        argv += ["--chdir", str(request.start_folder), "--clearenv"]
        for name, value in request.env.items():
            argv += ["--setenv", name, value]
        argv += ["--", *request.argv]
        guarantees = {WRITES_CONFINED, READS_CONFINED}
        if not request.network:
            guarantees.add(NO_NETWORK)
        # The outer environment is empty: bwrap sets the command's own with --setenv. Mounts keep
        # what is not bound out of reach and what is bound read-only unchanged (EROFS), not the
        # bits a run sets on what it may write: the filter, inherited through bwrap, refuses
        # those (a root server's run made a setuid-root file in a writable project).
        return Prepared(
            argv=tuple(argv),
            env={},
            cwd=request.start_folder,
            guarantees=frozenset(guarantees),
            confinement=(
                RunFilter(
                    child_setup=partial(make_private_network, request.limits.processes)
                    if private_network
                    else None
                )
                if filtered
                else None
            ),
        )

    @staticmethod
    def _namespaces(*, unshare_network: bool) -> list[str]:
        argv = [
            "--die-with-parent",
            "--new-session",
            "--unshare-user",
            "--disable-userns",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
            "--hostname",
            "oct-sandbox",
        ]
        if unshare_network:
            argv.append("--unshare-net")
        return argv

    @staticmethod
    def _system_binds(*, strict_files: bool) -> list[str]:
        argv = ["--ro-bind", "/usr", "/usr"]
        for top in _SYSTEM_TOPS:
            path = Path("/") / top
            if path.is_symlink():
                argv += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                argv += ["--ro-bind", str(path), str(path)]
        if strict_files:
            for name in MINIMAL_ETC:
                argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        else:
            argv += ["--ro-bind", "/etc", "/etc"]
        # tmpfs before any bind below them: a project or venv under /tmp or /home is bound on top.
        argv += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            SANDBOX_TMP,
            "--tmpfs",
            "/run",
            "--tmpfs",
            "/home",
        ]
        argv += ["--dir", SANDBOX_HOME]
        return argv


def _run_as_a_run_would(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run `argv` from a fresh thread under the runs' filter, which bwrap's own set-up passes
    through too: a bwrap that cannot work under it fails here, not on the first call."""
    outcome: list[subprocess.CompletedProcess[bytes] | OSError | subprocess.TimeoutExpired] = []

    def filtered_run() -> None:
        try:
            if seccomp_loads():
                RunFilter().restrict_current_thread()
            outcome.append(
                subprocess.run(  # fixed argv, no shell
                    argv, env={}, capture_output=True, timeout=_PROBE_TIMEOUT_SECONDS, check=False
                )
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            outcome.append(exc)

    thread = threading.Thread(target=filtered_run, name="oct-bubblewrap-probe", daemon=True)
    thread.start()
    thread.join()
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _explain_failure(executable: str, stderr: str) -> str:
    """What went wrong, and what to do about it."""
    text = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
    if "uid map" in stderr or "Permission denied" in stderr:
        return (
            f"{executable} is present but user namespaces are blocked ({text}); on Ubuntu 24.04+ install "
            "the AppArmor profile for bwrap, elsewhere enable unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1), or set sandbox_backend to native"
        )
    if "No space left" in stderr or "ENOSPC" in stderr:
        return f"{executable} cannot create namespaces ({text}): raise user.max_user_namespaces"
    return f"{executable} failed its probe ({text})"


def _protected_mounts(project: Path, protected: tuple[Path, ...]) -> tuple[list[Path], list[Path]]:
    """The folders to bind onto themselves and the protected paths to bind read-only, within budget.

    Each mount costs bubblewrap more the more there are (600 took 0.95 s to set up, measured):
    past MAX_PROTECTED_MOUNTS, the deeper protected paths (vendored packages' own configs, in
    `protected` shallowest first) are left to the sandbox's check after the run.

    Returns:
        The real folders between the project and the paths kept, shallowest first; those paths.
    """
    folders: set[Path] = set()
    kept: list[Path] = []
    for path in protected:
        try:
            parts = path.relative_to(project).parts
        except ValueError:
            continue
        on_the_way = {project.joinpath(*parts[:depth]) for depth in range(1, len(parts))} - folders
        on_the_way = {folder for folder in on_the_way if folder.is_dir() and not folder.is_symlink()}
        if len(folders) + len(kept) + len(on_the_way) + 1 > MAX_PROTECTED_MOUNTS:
            continue
        folders |= on_the_way
        kept.append(path)
    return sorted(folders, key=lambda folder: (len(folder.parts), folder)), kept
