"""The sandbox_exec backend (macOS): a deny-by-default Seatbelt profile, paths passed as -D parameters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

from oct_mcp.backends import (
    NO_NETWORK,
    READS_CONFINED,
    WRITES_CONFINED,
    Availability,
    EntryRights,
    Prepared,
    SandboxRequest,
    SecretFileView,
    make_home_and_tmp,
    scratch_home_and_tmp,
)
from oct_mcp.backends.rlimits import limit_prefix

__all__ = ["SandboxExec", "seatbelt_profile"]

SANDBOX_EXEC: Final = "/usr/bin/sandbox-exec"
_SYSTEM_READS: Final = ("/System", "/usr", "/Library", "/private/etc", "/dev", "/bin", "/sbin")


def seatbelt_profile(
    *,
    reads: int,
    protected: int,
    writable: bool,
    network: bool,
    strict_files: bool,
    caches: int = 0,
    secrets: int = 0,
) -> str:
    """The profile text. It names parameters only (`READ_0`, `PROTECTED_0`, `CACHE_0`, `SECRET_0`,
    `PROJECT`, `TMP`):

    every path reaches sandbox-exec with `-D NAME=path`, never spliced into this text,
    so no path can change the profile's meaning.
    """
    rules = [
        "(version 1)",
        "(deny default)",
        "(allow process-exec process-fork)",
        "(allow signal (target same-sandbox))",
        "(allow process-info* (target same-sandbox))",
        "(allow sysctl-read)",
        '(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))',
        "(allow ipc-posix-sem)",
        '(allow file-write-data (literal "/dev/null"))',
        '(allow file-write* (subpath (param "TMP")))',
    ]
    rules += [f'(allow file-write* (subpath (param "CACHE_{index}")))' for index in range(caches)]
    if strict_files:
        allowed = [f'(subpath "{path}")' for path in _SYSTEM_READS]
        allowed += [f'(subpath (param "READ_{index}"))' for index in range(reads)]
        allowed += ['(subpath (param "PROJECT"))', '(subpath (param "TMP"))']
        allowed += [f'(subpath (param "CACHE_{index}"))' for index in range(caches)]
        rules.append(f"(allow file-read* {' '.join(allowed)})")
    else:
        rules.append("(allow file-read*)")
    if writable:
        carve_outs = " ".join(
            f'(require-not (subpath (param "PROTECTED_{index}")))' for index in range(protected)
        )
        rules.append(f'(allow file-write* (require-all (subpath (param "PROJECT")) {carve_outs}))')
    if network:
        rules.append("(allow network*)")
    # Last: a later rule wins over the allows above. The files a read shows masked cannot be read,
    # nor what lies below a folder kept whole (git's objects); their metadata can (a listing works).
    rules += [f'(deny file-read-data (subpath (param "SECRET_{index}")))' for index in range(secrets)]
    return "\n".join(rules)


class SandboxExec:
    """macOS: the command under sandbox-exec with oct-mcp's own profile."""

    name = "sandbox_exec"
    entry_rights = EntryRights.WRITABLE_FOLDERS
    secret_files = SecretFileView.HIDDEN

    def home_and_tmp(self, scratch: Path) -> tuple[str, str]:
        return scratch_home_and_tmp(scratch)

    def probe(self) -> Availability:
        if sys.platform != "darwin":
            return Availability(False, "macOS only")
        try:  # pragma: no cover - macOS only
            completed = subprocess.run(  # fixed argv, no shell
                [SANDBOX_EXEC, "-p", "(version 1)(allow default)", "/usr/bin/true"],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:  # pragma: no cover - macOS only
            return Availability(False, f"{SANDBOX_EXEC} could not run: {type(exc).__name__}")
        if completed.returncode == 0:  # pragma: no cover - macOS only
            return Availability(True, f"{SANDBOX_EXEC} works")
        return Availability(False, f"{SANDBOX_EXEC} failed its probe")  # pragma: no cover - macOS only

    def prepare(self, request: SandboxRequest) -> Prepared:
        make_home_and_tmp(request.scratch)
        profile = seatbelt_profile(
            reads=len(request.read_only_binds),
            protected=len(request.protected),
            writable=request.writable,
            network=request.network,
            strict_files=request.strict_files,
            caches=len(request.writable_dirs),
            secrets=len(request.secret_files),
        )
        # Seatbelt compares real paths: /tmp is /private/tmp on macOS.
        params = {"PROJECT": request.project.resolve(), "TMP": request.scratch.resolve()}
        params.update({f"READ_{i}": path.resolve() for i, path in enumerate(request.read_only_binds)})
        params.update({f"PROTECTED_{i}": path.resolve() for i, path in enumerate(request.protected)})
        params.update({f"CACHE_{i}": path.resolve() for i, path in enumerate(request.writable_dirs)})
        params.update({f"SECRET_{i}": file.path.resolve() for i, file in enumerate(request.secret_files)})
        definitions = [item for name, path in params.items() for item in ("-D", f"{name}={path}")]
        guarantees = {WRITES_CONFINED}
        if request.strict_files:
            guarantees.add(READS_CONFINED)
        if not request.network:
            guarantees.add(NO_NETWORK)
        return Prepared(
            argv=(SANDBOX_EXEC, "-p", profile, *definitions, *limit_prefix(request.limits), *request.argv),
            env=dict(request.env),
            cwd=request.start_folder,
            guarantees=frozenset(guarantees),
        )
