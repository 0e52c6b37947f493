"""The native backend (any POSIX): a clean environment, limits, its own session; no filesystem isolation."""

from __future__ import annotations

import os
from pathlib import Path

from oct_mcp.backends import (
    Availability,
    EntryRights,
    Prepared,
    SandboxRequest,
    SecretFileView,
    make_home_and_tmp,
    scratch_home_and_tmp,
)
from oct_mcp.backends.rlimits import limit_prefix

__all__ = ["Native"]


class Native:
    """Runs the command as the server's user, with the allowlisted environment and the limits.

    It confines nothing: the command can read and write what the server's user can,
    and reach the network. Profiles that need confinement refuse it (strict, airgapped).
    HOME and TMPDIR point into a per-run scratch folder.
    """

    name = "native"
    entry_rights = EntryRights.WRITABLE_FOLDERS
    # Nothing confines reads: a run reads every file as it is (allow_unconfined_project_code).
    secret_files = SecretFileView.REAL

    def home_and_tmp(self, scratch: Path) -> tuple[str, str]:
        return scratch_home_and_tmp(scratch)

    def probe(self) -> Availability:
        if os.name != "posix":  # pragma: no cover - oct-mcp runs on POSIX only
            return Availability(False, "native needs a POSIX system")
        return Availability(
            True, "works everywhere; confines no files and no network (limits and timeouts only)"
        )

    def prepare(self, request: SandboxRequest) -> Prepared:
        make_home_and_tmp(request.scratch)
        return Prepared(
            argv=(*limit_prefix(request.limits), *request.argv),
            env=dict(request.env),
            cwd=request.start_folder,
            guarantees=frozenset(),
        )
