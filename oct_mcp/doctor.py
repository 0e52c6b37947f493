"""`oct-mcp doctor`: what this server would run with here, where each setting came from, and what works."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from oct_mcp import __version__
from oct_mcp.backends.apparmor import RESTRICT_SYSCTL, apparmor_profile_command, blocked_by_apparmor
from oct_mcp.errors import ConfigError, ToolUnavailableError
from oct_mcp.execution.checkpoints import CheckpointStore
from oct_mcp.telemetry import telemetry_status
from oct_mcp.tools._project.programs import find_program
from oct_mcp.tools.python import how_it_runs
from oct_mcp.tools.screen_helper import helper_status
from oct_mcp.workspace import broad_root_problem, user_home

if TYPE_CHECKING:
    from oct_mcp.app import App
    from oct_mcp.spec import ToolSpec

__all__ = ["bubblewrap_advice", "print_doctor"]


def _checkpoint_status(app: App) -> str:
    """Where this project's checkpoints are kept, how many, and the room their contents take."""
    config = app.loaded.config
    store = CheckpointStore.for_config(config, app.workspace.root)
    if store is None:
        return "off (checkpoint_max_count is 0): changes cannot be undone"
    usage = store.usage()
    return (
        f"{usage.folder}: {usage.checkpoints} of at most {config.checkpoint_max_count}, "
        f"{usage.blob_bytes / 1_048_576:.1f} MiB of at most {config.checkpoint_max_size_mb:g} MiB"
    )


def print_doctor(app: App, out: TextIO) -> None:
    """Print what this server would run with, and where each setting came from."""
    loaded = app.loaded
    config = loaded.config
    write = out.write
    write(f"oct-mcp {__version__} (Python {sys.version.split()[0]}, {sys.platform})\n")
    broad = broad_root_problem(app.workspace.root, user_home())
    caveat = "" if broad is None else f" ({broad}: served only with --allow-broad-root)"
    write(f"project root: {app.workspace.root}{caveat}\n")
    write(f"config file: {loaded.path} ({loaded.file_status})\n")
    write(f"policy source: {loaded.policy_status}\n")
    write(f"repo config: {loaded.repo_status}\n")
    for line in loaded.ignore_status:
        write(f"ignore file {line}\n")
    write("\n")
    write("configuration (value, source):\n")
    for name, source in loaded.sources.items():
        value = f"{len(config.rules)} rule(s), below" if name == "rules" else repr(getattr(config, name))
        write(f"  {name:<28} {value:<40} {source}\n")
    write(f"\nprofile: {app.profile.name} ({app.profile.origin}) {app.profile.description}\n")
    write("chain, outermost first: " + " > ".join(app.chain.layer_names) + "\n")
    write("layers a profile may name (where each came from):\n")
    for name in app.registry:
        used = ", in this chain" if name in app.chain.layer_names else ""
        write(f"  {name:<16} {app.registry.origin(name)}{used}\n")
    from oct_mcp.policy_command import print_rules

    print_rules(app, out)
    write(f"audit: {audit_status(app)}\n")
    write(f"checkpoints: {_checkpoint_status(app)}\n")
    write(f"opentelemetry: {telemetry_status().reason}\n\n")
    write("sandbox backends:\n")
    for name, status in sandbox_backend_status(config.sandbox_backend):
        write(f"  {name:<14} {status}\n")
    advice = bubblewrap_advice()
    if advice is not None:
        write(advice)
    write(f"run limits: {run_limits_status(config.memory_limit_mb)}\n")
    write(f"secret files: {secret_files_status(app)}\n")
    write(f"search: {helper_status(app.workspace.root)}\n")
    write("landlock guarantees:\n")
    for name, status in landlock_guarantee_status():
        write(f"  {name:<16} {status}\n")
    if config.allow_unconfined_project_code:
        write(
            "WARNING: allow_unconfined_project_code is on: where the backend confines nothing (native), "
            "command tools run project code with this user's full rights\n"
        )
    write("\ntools:\n")
    for spec in app.catalog.values():
        shown = "listed" if app.chain.is_visible(spec) else "hidden by the profile"
        write(f"  {spec.name:<18} {spec.risk.value:<8} {_availability(app, spec)}, {shown}\n")


def audit_status(app: App) -> str:
    """Where the audit log goes and whether records reach it."""
    path = app.loaded.config.audit_log_path
    if "audit" not in app.chain.layer_names:
        return f"off: the profile has no audit layer ({path} unused)"
    if app.audit is None:
        return f"{path}: status unknown (this app has no audit sink)"
    writer = app.audit.writer
    status = f"{path}: {writer.status()}"
    if writer.signer is not None:
        status += (
            f"; checkpoints signed by key {writer.signer.key_id} every {writer.checkpoint_every} records "
            f"or {writer.checkpoint_seconds:g} s"
        )
    if writer.forwarder is not None:
        status += f"; each record also sent to syslog over {writer.forwarder.address.scheme}"
    return status


def run_limits_status(memory_limit_mb: int) -> str:
    """Which caps hold over one command run here: a cgroup per run, RLIMIT_NPROC, or per process only."""
    from oct_mcp.execution.cgroups import delegated_cgroup
    from oct_mcp.middleware.sandbox import RUN_PROCESSES

    memory = f"{memory_limit_mb} MiB" if memory_limit_mb else "no memory limit"
    parent = delegated_cgroup()
    if parent is not None:
        return f"a cgroup per run under {parent}: {memory} and {RUN_PROCESSES} processes for the whole run"
    if os.geteuid() != 0:
        return (
            f"per process ({memory} each, RLIMIT_DATA); RLIMIT_NPROC lets a run add {RUN_PROCESSES} "
            "processes to the user's count (no delegated cgroup v2 here)"
        )
    return (
        f"per process only ({memory} each, RLIMIT_DATA); no process cap: RLIMIT_NPROC does not bind root "
        "and there is no delegated cgroup v2 here (the timeout and the tree kill bound a run)"
    )


def _availability(app: App, spec: ToolSpec) -> str:
    if spec.name.startswith("oct_git_"):
        # The git tools run the server's own git, never the project's, under the sandbox.
        git = shutil.which("git")
        return f"runs {git} under the sandbox" if git else "unavailable: git is not on the server's PATH"
    if spec.program is None:
        return "available (runs in-process)"
    try:
        described = how_it_runs(app.workspace.root, spec.name)
        return described or f"runs {find_program(app.workspace.root, spec.program)}"
    except ToolUnavailableError as exc:
        return f"unavailable: {exc.message}"


def secret_files_status(app: App) -> str:
    """What a command run is shown of the project files a read shows masked, and which setting says so."""
    from oct_mcp.backends import SecretFileView
    from oct_mcp.backends.selection import select_backend
    from oct_mcp.middleware.sandbox import SandboxSettings

    if "sandbox" not in app.chain.layer_names:
        return "no sandbox layer in this profile: the host runs the tools"
    settings = SandboxSettings.model_validate(app.profile.settings.get("sandbox", {}))
    if settings.show_secrets_to_runs:
        return (
            "runs read the project files a read shows masked as they are (show_secrets_to_runs = true): "
            "code a tool runs can print their secrets in a form the redactor does not know"
        )
    try:
        backend = select_backend(app.loaded.config.sandbox_backend)[0]
    except ConfigError:
        return "unknown: no sandbox backend works here"
    if backend.secret_files is SecretFileView.MASKED:
        return (
            "runs read a masked, read-only copy of each project file a read shows masked "
            f"({backend.name}; show_secrets_to_runs = false)"
        )
    if backend.secret_files is SecretFileView.HIDDEN:
        return (
            "runs cannot read the project files a read shows masked: permission denied "
            f"({backend.name}; show_secrets_to_runs = false)"
        )
    return (
        f"runs read the project files a read shows masked as they are: the {backend.name} backend "
        "confines no reads"
    )


def landlock_guarantee_status() -> list[tuple[str, str]]:
    """This kernel's Landlock ABI, and each guarantee the landlock backend meets or misses, with why."""
    from oct_mcp.backends import GUARANTEES
    from oct_mcp.backends.landlock import landlock_support

    support = landlock_support()
    missing = support.missing()
    rows = [("ABI", str(support.abi) if support.problem is None else f"none: {support.problem}")]
    for guarantee in sorted(GUARANTEES):
        reason = missing.get(guarantee)
        rows.append((guarantee, "met" if reason is None else f"missed: {reason}"))
    rows.append(("loopback", loopback_status()))
    return rows


def loopback_status() -> str:
    """What a landlock run without network may do on loopback here, and why not more."""
    from oct_mcp.backends.landlock import landlock_support
    from oct_mcp.backends.loopback import loopback_support

    support = landlock_support()
    if support.problem is not None or not support.seccomp:
        return "refused: no seccomp filter here"
    problem = loopback_support()
    if problem is not None:
        return f"refused (TCP bind, listen, UDP, unix sockets, ptys, /dev/shm): {problem}"
    return (
        "supervised: a run without network serves and reaches its own TCP and UDP sockets on "
        "127.0.0.0/8 and ::1 and its own unix sockets under its scratch folder, nothing else "
        "(no wildcard, no other address, no socket of the host); every run gets its own ptys and "
        "/dev/shm segments and semaphores, never another's"
    )


def bubblewrap_advice(
    probe_error: str | None = None, executable: str | None = None, sysctl: Path = RESTRICT_SYSCTL
) -> str | None:
    """Where AppArmor blocks an installed bubblewrap: that it does, and the one-time commands that let
    it run; None where bubblewrap works, is absent or fails for another reason.

    Args:
        probe_error: What bubblewrap's probe reported; by default this machine's probe.
        executable: The bwrap it probed; by default the one the backend uses.
        sysctl: The kernel's user-namespace restriction file.
    """
    from oct_mcp.backends.bubblewrap import Bubblewrap
    from oct_mcp.backends.selection import probe_backends

    if probe_error is None:
        availability = dict(probe_backends())["bubblewrap"]
        if availability.usable:
            return None
        probe_error = availability.detail
    executable = executable or Bubblewrap().executable
    if executable is None or not blocked_by_apparmor(probe_error, sysctl):
        return None
    return (
        f"bubblewrap is installed but AppArmor blocks it: this kernel lets only programs whose AppArmor "
        f"profile allows it create user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1), and "
        f"{executable} has no such profile. To let it run, once, as root (Ubuntu's documented profile):\n"
        f"{apparmor_profile_command(executable)}"
        "then run `oct-mcp doctor` again: `auto` picks bubblewrap once its probe passes\n"
    )


def sandbox_backend_status(configured: str) -> list[tuple[str, str]]:
    """Each backend, probed for real, and which one `sandbox_backend` selects here."""
    from oct_mcp.backends.selection import probe_backends, select_backend

    try:
        chosen = select_backend(configured)[0].name
    except ConfigError:
        chosen = None
    rows = []
    for name, availability in probe_backends():
        mark = "selected" if name == chosen else ("usable" if availability.usable else "unusable")
        rows.append((name, f"{mark}: {availability.detail}"))
    if chosen is None:
        rows.append(
            ("(none)", f"sandbox_backend {configured!r} does not work here: the server will not start")
        )
    return rows
