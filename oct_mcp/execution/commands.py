"""The command run: a tool's `CommandPlan` carried out under the sandbox backend.

The scratch folder, the run's cgroup, the private git folder, caches, the protected-path snapshot
and settle around a writable run, the files a read shows masked, output files and each step: the
sandbox layer decides which plan runs, this module runs it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Final, Protocol

import anyio

from oct_mcp.backends import (
    GUARANTEES,
    NO_NETWORK,
    READS_CONFINED,
    SCRATCH_PREFIX,
    WRITES_CONFINED,
    Backend,
    Limits,
    Prepared,
    SandboxRequest,
    SecretFile,
    SecretFileView,
)
from oct_mcp.backends.devices import device_notes
from oct_mcp.backends.environment import sandbox_environment
from oct_mcp.backends.installs import install_roots, is_inside, tool_path_dirs
from oct_mcp.backends.results import RunResult
from oct_mcp.backends.rlimits import process_budget
from oct_mcp.backends.secret_files import SecretFileCache, history_holding, masked_copies
from oct_mcp.base_types import ProgressReporter, ToolResult, WithheldPaths
from oct_mcp.display import quote_name
from oct_mcp.errors import (
    FolderUnlistedError,
    LinkedFileError,
    ProtectedPathCreatedError,
    SandboxUnavailableError,
    ToolTimeoutError,
    UncheckedFolderError,
)
from oct_mcp.execution.caches import prepare_project_cache
from oct_mcp.execution.cgroups import RunCgroup, delegated_cgroup
from oct_mcp.execution.command_plan import COMMAND_STEPS_MAX, CommandPlan, NextCommand
from oct_mcp.execution.git_state import InstalledState, PrivateGitFolder, install_git_state
from oct_mcp.execution.outputs import OutputFolder
from oct_mcp.execution.protected_walk import (
    SNAPSHOT_MAX_ENTRIES,
    ProjectTooLargeError,
    ProtectedChanges,
    ProtectedSnapshot,
    settle_protected_paths,
    snapshot_protected,
)
from oct_mcp.execution.withheld_files import withheld_entries
from oct_mcp.telemetry import span

__all__ = ["RUN_PROCESSES", "CommandRunner", "Runner"]

_CPU_BACKSTOP_SECONDS: Final = 5
# Protected paths an error names; a run that planted thousands is described by the first ones.
_NAMES_SHOWN: Final = 20
_NAME_SHOWN_CHARS: Final = 200
RUN_PROCESSES: Final = 256
"""Processes and threads one command run may have (pids.max) or add to the user's (RLIMIT_NPROC)."""
_SYSTEM_PATH: Final = ("/usr/local/bin", "/usr/bin", "/bin")
_HOW_TO_ISOLATE: Final = (
    "install bubblewrap (apt install bubblewrap) and enable unprivileged user namespaces, "
    "or use a profile that does not need this"
)
_HOW_TO_CONFINE: Final = (
    "install bubblewrap (apt install bubblewrap; on Ubuntu 24.04+ also an AppArmor profile that "
    "lets bwrap create user namespaces), or run on a kernel with Landlock (Linux 5.13+) for the "
    "landlock backend; to accept the risk, set allow_unconfined_project_code to true"
)


class Runner(Protocol):
    """Spawns a prepared command and collects what it printed, within the limits (the sandbox's runner)."""

    def __call__(
        self,
        prepared: Prepared,
        *,
        backend: str,
        time_limit: float,
        max_output: int,
        on_stdout_line: Callable[[bytes], Awaitable[None]] | None = None,
        interrupt_first: bool = False,
    ) -> Awaitable[RunResult]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandRunner:
    """Runs command plans under one backend with the limits the profile sets."""

    backend: Backend
    runner: Runner
    required: frozenset[str]
    allow_degraded: bool
    max_output_bytes: int
    timeout_seconds: float
    test_timeout_seconds: float
    memory_bytes: int | None
    threads: int
    allow_unconfined: bool = False
    """Run commands where the backend confines nothing (allow_unconfined_project_code)."""
    show_secrets_to_runs: bool = False
    """The run reads the files a read shows masked as they are (`show_secrets_to_runs`)."""
    secret_files: SecretFileCache = field(default_factory=SecretFileCache)
    """Which project files a read shows masked, kept between runs."""

    async def run(
        self,
        plan: CommandPlan,
        project: Path,
        progress: ProgressReporter | None,
        withheld: WithheldPaths | None = None,
    ) -> ToolResult:
        """Run the plan's commands and parse the last one's output (a span `oct.sandbox.run` when
        telemetry is on: the backend, the program's name, the exit code; never an argument).
        The project's paths `withheld` hides are kept from the run.

        Raises:
            SandboxUnavailableError: The backend lacks a guarantee the profile needs.
            ToolTimeoutError: Past the time limit.
            ProtectedPathCreatedError: A writable run touched protected paths.
        """
        facts = {"oct.sandbox.backend": self.backend.name, "process.executable.name": Path(plan.argv[0]).name}
        with span("oct.sandbox.run", facts) as current:
            result = await self._run(plan, project, progress, withheld)
            if current is not None and result.exit_code is not None:
                current.set_attribute("process.exit.code", result.exit_code)
            return result

    async def _run(
        self,
        plan: CommandPlan,
        project: Path,
        progress: ProgressReporter | None,
        withheld: WithheldPaths | None,
    ) -> ToolResult:
        if plan.needs_network and NO_NETWORK in self.required:
            raise SandboxUnavailableError("the tool needs the network, which this profile forbids")
        if plan.cwd is not None and not is_inside(plan.cwd, project):
            raise RuntimeError("a plan's working folder must lie inside the project")
        timeout = limit = self.test_timeout_seconds if plan.long_running else self.timeout_seconds
        if plan.timeout_seconds is not None:
            timeout = limit = min(limit, plan.timeout_seconds)
        if plan.before_run is not None:
            await anyio.to_thread.run_sync(plan.before_run)
        # In a worker thread: a walk over a large project must not hold up the other calls.
        before = await anyio.to_thread.run_sync(_protected_before, project) if plan.writes_project else None
        changes: ProtectedChanges | None = None
        git_state: tuple[InstalledState, ...] = ()
        # The last command started (it may have written), and the call went on to parse it.
        last_started = finished = False
        scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
        outputs = OutputFolder(scratch)
        cgroup = _run_cgroup(self.memory_bytes)
        try:
            writes = plan.git_writes
            private = (
                None
                if writes is None
                else await anyio.to_thread.run_sync(
                    PrivateGitFolder, scratch, writes.git_dir, writes.files, writes.folders
                )
            )
            cache = (
                await anyio.to_thread.run_sync(prepare_project_cache, project) if plan.project_cache else None
            )
            # The cgroup caps the run's processes where there is one; else RLIMIT_NPROC, a budget
            # over the user's current count (None for root, whom it does not bind). Counting reads
            # /proc, milliseconds on a busy machine: not on the event loop.
            processes = (
                None if cgroup is not None else await anyio.to_thread.run_sync(process_budget, RUN_PROCESSES)
            )
            # In a worker thread: the walk looks at every project file, and reads the new ones.
            secrets = await anyio.to_thread.run_sync(self._secret_files, plan, project, scratch)
            denied = await anyio.to_thread.run_sync(self._withheld_files, plan, project, withheld)
            if denied:
                # Kept whole: a secret's masked copy inside a withheld folder would show it again.
                secrets = tuple(
                    file for file in secrets if not any(file.path.is_relative_to(path) for path in denied)
                )
                # git's objects kept for a secret already: named once.
                denied = tuple(path for path in denied if all(path != file.path for file in secrets))
            home, tmp = self.backend.home_and_tmp(scratch)
            roots = install_roots(Path(plan.argv[0]), project)
            path_dirs = [*tool_path_dirs(Path(plan.argv[0]), project, roots), *_SYSTEM_PATH]

            def environment(*, read_only_project: bool) -> dict[str, str]:
                return sandbox_environment(
                    path_dirs=path_dirs,
                    home=home,
                    tmpdir=tmp,
                    read_only_project=read_only_project,
                    threads=self.threads,
                    tool_env=(*plan.tool_env, *outputs.environment(plan.output_files)),
                    cache=None if cache is None else str(cache),
                    # GIT_DIR is never a tool's to set (it is never passed): the sandbox names its own folder.
                ) | dict(() if private is None else private.environment())

            request = SandboxRequest(
                argv=plan.argv,
                project=project,
                writable=plan.writes_project,
                network=plan.needs_network,
                protected=before.bind_paths(project) if before is not None else (),
                read_only_binds=(*roots, *plan.read_only_paths),
                env=environment(read_only_project=not plan.writes_project),
                limits=Limits(
                    memory_bytes=self.memory_bytes,
                    cpu_seconds=int(timeout) + _CPU_BACKSTOP_SECONDS,
                    processes=processes,
                ),
                scratch=scratch,
                strict_files="reads_confined" in self.required,
                writable_dirs=(
                    *((outputs.path,) if cache is None else (outputs.path, cache)),
                    *(() if private is None else (private.path,)),
                ),
                writable_inside=() if private is None else private.folders,
                cwd=plan.cwd,
                secret_files=(*secrets, *(SecretFile(path) for path in denied)),
                resolves_localhost=plan.resolves_localhost,
            )
            prepared = _prepare(self.backend, request, cgroup)
            if not prepared.guarantees & {READS_CONFINED, WRITES_CONFINED} and not self.allow_unconfined:
                # A command tool runs project code (a conftest.py, a plugin) or a program that writes.
                raise SandboxUnavailableError(
                    f"this tool runs project code, and the {self.backend.name} backend confines "
                    f"nothing here; {_HOW_TO_CONFINE}"
                )
            missing = self.required - prepared.guarantees
            if missing and (NO_NETWORK in missing or not self.allow_degraded):
                raise SandboxUnavailableError(
                    f"this profile needs {', '.join(sorted(missing))}, which the {self.backend.name} "
                    f"backend cannot give here; {_HOW_TO_ISOLATE}"
                )
            step, steps = plan.then, 1
            # Only the last command may write the project: the earlier ones decide what it runs over
            # (ruff's diff names the files to checkpoint), and project code that wrote there would
            # change files before their checkpoint is taken, unseen by the human.
            deciding = (
                replace(request, writable=False, env=environment(read_only_project=True))
                if plan.writes_project
                else request
            )
            if step is not None and plan.writes_project:
                prepared = _prepare(self.backend, deciding, cgroup)
            while step is not None:
                earlier = await self.runner(
                    prepared, backend=self.backend.name, time_limit=timeout, max_output=self.max_output_bytes
                )
                if earlier.timed_out:
                    raise ToolTimeoutError(_timeout_message(limit, plan))
                # In a worker thread: a step may read the files it checkpoints.
                decided = await anyio.to_thread.run_sync(step, earlier)
                argv, step = (
                    (decided.argv, decided.then) if isinstance(decided, NextCommand) else (decided, None)
                )
                steps += 1
                if argv[0] != plan.argv[0] or steps > COMMAND_STEPS_MAX:
                    # The binds and PATH were computed for the first command's program.
                    raise RuntimeError(
                        f"a plan's later commands must run its first command's program, {COMMAND_STEPS_MAX} "
                        "commands at most"
                    )
                prepared = _prepare(
                    self.backend, replace(request if step is None else deciding, argv=argv), cgroup
                )
                timeout = max(timeout - earlier.duration_seconds, 0.0)
            last_started = True
            run = await self.runner(
                prepared,
                backend=self.backend.name,
                time_limit=timeout,
                max_output=self.max_output_bytes,
                on_stdout_line=_progress_reader(plan, progress),
                interrupt_first=plan.reports_when_interrupted,
            )
            if plan.output_files:
                names = tuple(name for _, name in plan.output_files)
                files, cut = await anyio.to_thread.run_sync(outputs.read, names)
                run = replace(run, files=files, files_truncated=tuple(cut))
            if private is not None and run.exit_code == 0 and not run.timed_out:
                git_state = await anyio.to_thread.run_sync(private.changed)
            finished = True
        finally:
            outputs.close()
            if cgroup is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(cgroup.close)
            with anyio.CancelScope(shield=True):
                # A test run's scratch folder may hold many files.
                await anyio.to_thread.run_sync(partial(shutil.rmtree, scratch, ignore_errors=True))
            if before is not None:
                # Shielded: a run cut short by a timeout or a shutdown is checked all the same.
                with anyio.CancelScope(shield=True):
                    changes = await anyio.to_thread.run_sync(_settle, project, before)
            if last_started and not finished:
                # Cut short (cancelled, or failed reading what it left): what it changed stays undoable.
                await _after_failure(plan)
        if changes:
            _refuse_protected_changes(changes, await _after_failure(plan))
        if git_state and plan.git_writes is not None:
            # After the protected-path check, which would otherwise see HEAD changed: the run had no
            # right on the git folder, the server installs what git left in its private one.
            await anyio.to_thread.run_sync(install_git_state, plan.git_writes.git_dir, git_state)
        if run.timed_out and not plan.reports_when_interrupted:
            kept = await _after_failure(plan)
            raise ToolTimeoutError(_timeout_message(limit, plan) + ("" if kept is None else f"; {kept}"))
        degraded = tuple(
            sorted(GUARANTEES - prepared.guarantees - ({NO_NETWORK} if plan.needs_network else set()))
        )
        # In a worker thread: a parse may read what the run changed, and record its checkpoint.
        result = await anyio.to_thread.run_sync(plan.parse, replace(run, degraded=degraded))
        for note in device_notes(prepared.refused_devices, run.stdout + run.stderr):
            result = _with_note(result, note)
        if secrets:
            result = _with_note(result, _secrets_note(self.backend.secret_files, secrets, project))
        if denied:
            result = _with_note(result, _withheld_note(self.backend.secret_files, denied, project))
        return replace(
            result,
            exit_code=run.exit_code,
            truncated=result.truncated or run.truncated,
            output_bytes=run.output_bytes,
            backend=run.backend,
            degraded=degraded,
        )

    def _withheld_files(
        self, plan: CommandPlan, project: Path, withheld: WithheldPaths | None
    ) -> tuple[Path, ...]:
        """The project entries the rules withhold from this call, where the backend can keep them."""
        if (
            withheld is None
            or not plan.masks_secret_files
            or self.backend.secret_files is SecretFileView.REAL
        ):
            return ()
        entries = withheld_entries(project, withheld)
        # git's objects holding one of them as it is now would show it to `git show` in the run.
        history = history_holding(project, entries) if entries else None
        return entries if history is None or history in entries else (*entries, history)

    def _secret_files(self, plan: CommandPlan, project: Path, scratch: Path) -> tuple[SecretFile, ...]:
        """The project's files a read shows masked, each with its masked copy where the backend shows one."""
        view = self.backend.secret_files
        if self.show_secrets_to_runs or not plan.masks_secret_files or view is SecretFileView.REAL:
            return ()
        found = self.secret_files.find(project)
        history = () if found.history is None else (SecretFile(found.history),)
        if view is SecretFileView.MASKED:
            return (*masked_copies(found, scratch), *history)
        return (*(SecretFile(path) for path in (*found.files, *found.compiled)), *history)


def _secrets_note(view: SecretFileView, secrets: tuple[SecretFile, ...], project: Path) -> str:
    """What the result says of the files a read shows masked: how the run saw them, and their names."""
    objects = project / ".git" / "objects"
    names = tuple(str(file.path.relative_to(project)) for file in secrets if file.path != objects)
    how = (
        "shown to the run masked as a read shows them, read-only"
        if view is SecretFileView.MASKED
        else "kept from the run: opening one fails with permission denied"
    )
    history = _HISTORY_KEPT if len(names) < len(secrets) else ""
    return (
        f"{len(names)} file(s) holding secrets were {how} ({_listed(names)}){history}; code that needs "
        "the real values fails for it: a profile with show_secrets_to_runs = true in [settings.sandbox] "
        "gives them back"
    )


def _withheld_note(view: SecretFileView, denied: tuple[Path, ...], project: Path) -> str:
    """What the result says of the paths the rules withhold: how many, never which."""
    how = (
        "cannot be opened there, a folder shows empty"
        if view is SecretFileView.MASKED
        else "cannot be opened there (permission denied)"
    )
    count = sum(path != project / ".git" / "objects" for path in denied)
    history = _HISTORY_KEPT if count < len(denied) else ""
    return f"{count} path(s) the rules withhold from this call were kept from the run: they {how}{history}"


_HISTORY_KEPT: Final = (
    "; git's objects (.git/objects) hold one of them as it is now, so they were kept from the run "
    "too: git commands that read history fail there"
)


def _with_note(result: ToolResult, note: str) -> ToolResult:
    """`result` with `note` as its last line, and in its structured `notes` where it has them."""
    structured = result.structured
    if structured is not None and isinstance(structured.get("notes"), list):
        structured = {**structured, "notes": [*structured["notes"], note]}
    return replace(result, text=f"{result.text}\n{note}" if result.text else note, structured=structured)


def _prepare(backend: Backend, request: SandboxRequest, cgroup: RunCgroup | None) -> Prepared:
    """The backend's command, moved into the run's cgroup first where there is one."""
    prepared = backend.prepare(request)
    return prepared if cgroup is None else replace(prepared, argv=(*cgroup.join_prefix(), *prepared.argv))


def _run_cgroup(memory_bytes: int | None) -> RunCgroup | None:
    """A cgroup for this run (memory for all its processes, their count), where the server may make one."""
    parent = delegated_cgroup()
    if parent is None:
        return None
    try:
        return RunCgroup.create(parent, memory_bytes=memory_bytes, processes=RUN_PROCESSES)
    except OSError:
        return None  # the delegation went away: the rlimits still hold


def _timeout_message(limit: float, plan: CommandPlan) -> str:
    setting = "timeout_test_seconds" if plan.long_running else "timeout_default_seconds"
    if plan.timeout_seconds is not None and plan.timeout_seconds <= limit:
        setting = "the call's timeout_seconds"
    return f"the tool ran past its limit of {limit:g} s ({setting}) and was stopped"


def _protected_before(project: Path) -> ProtectedSnapshot:
    """The protected paths before a writable run.

    Raises:
        SandboxUnavailableError: The project is too large to walk.
        FolderUnlistedError: A folder cannot be listed: the check could not tell what a run put there.
        LinkedFileError: A protected file has another name, which a run could write it through.
    """
    try:
        snapshot = snapshot_protected(project)
    except ProjectTooLargeError:
        raise SandboxUnavailableError(
            f"the project holds more than {SNAPSHOT_MAX_ENTRIES} files and folders, more than the check "
            "of protected paths around a writable run walks; run the tool yourself, or remove what "
            "the project does not need (build output, caches)"
        ) from None
    if snapshot.unlisted:
        raise FolderUnlistedError(
            f"the check of protected paths around a writable run cannot list {_reasons(snapshot.unlisted)}, "
            "so it could not tell what a run put there; make each readable to the server's user "
            "(chmod u+rx), or move it out of the project, and call again; nothing ran"
        )
    if snapshot.linked:
        raise LinkedFileError(
            f"protected files have another name (a hard link) a writable run could change them through: "
            f"{_listed(snapshot.linked)}; replace each with a copy of itself (cp F F.new && mv F.new F), "
            "then call again; nothing ran"
        )
    return snapshot


def _settle(project: Path, before: ProtectedSnapshot) -> ProtectedChanges:
    try:
        return settle_protected_paths(project, before)
    except ProjectTooLargeError:
        # Fail closed: what the run did to protected paths cannot be told.
        return ProtectedChanges(unchecked=True)


async def _after_failure(plan: CommandPlan) -> str | None:
    """The plan's `after_failure` note, shielded: a cancelled call's changes are recorded all the same."""
    if plan.after_failure is None:
        return None
    with anyio.CancelScope(shield=True):
        return await anyio.to_thread.run_sync(plan.after_failure)
    return None  # not reached: a shielded scope never ends what it runs, though mypy cannot tell


def _refuse_protected_changes(changes: ProtectedChanges, kept: str | None = None) -> None:
    """A writable run that touched protected paths, or hid a folder from the check, fails, whatever else
    it did, saying what became of them (and, with `kept`, where its other changes can be undone)."""
    undo = "" if kept is None else f" ({kept})"
    parts = []
    if changes.removed:
        parts.append(f"{_listed(changes.removed)} (created; removed again)")
    if changes.left:
        parts.append(
            f"{_listed(changes.left)} (created; left: it sits behind a link, holds what was there "
            "before, or made a folder a git directory; remove it yourself)"
        )
    if changes.changed:
        parts.append(
            f"{_listed(changes.changed)} (changed, moved or deleted; restore it from version control "
            "or a backup)"
        )
    if changes.unchecked:
        parts.append(
            f"none could be checked: the project grew past {SNAPSHOT_MAX_ENTRIES} files and folders "
            "during the run; check them with oct_git_status"
        )
    hidden = []
    if changes.unlocked:
        hidden.append(
            f"{_listed(changes.unlocked)} (made unreadable by the run, which hides what is inside from "
            "this check; made readable again (chmod u+rwx) and checked)"
        )
    if changes.unlisted:
        hidden.append(
            f"{_reasons(dict(changes.unlisted))} (cannot be listed, so a .git or an IDE's config may hide "
            "inside: do not run git or open an editor there; make it readable (chmod u+rwx) and check "
            "it with oct_git_status, or remove it)"
        )
    if parts:
        raise ProtectedPathCreatedError(
            f"the tool wrote protected paths, which no tool may write: {'; '.join([*parts, *hidden])}; "
            f"its other changes were kept{undo}"
        )
    raise UncheckedFolderError(
        f"the check of protected paths after the run could not see into every folder: {'; '.join(hidden)}; "
        f"the call's result is withheld and its other changes were kept{undo}"
    )


def _reasons(unlisted: Mapping[str, str]) -> str:
    """Folders the check could not list, each with why (the system's reason, never a value of the call)."""
    names = sorted(unlisted)
    shown = ", ".join(f"{_shown(name)} ({unlisted[name]})" for name in names[:_NAMES_SHOWN])
    return shown if len(names) <= _NAMES_SHOWN else f"{shown} and {len(names) - _NAMES_SHOWN} more"


def _shown(name: str) -> str:
    """A project-relative name for a message: quoted where it hides characters, cut where it is long
    (a run can make a path far longer than any message should carry)."""
    if len(name) > _NAME_SHOWN_CHARS:
        half = _NAME_SHOWN_CHARS // 2
        return f"{quote_name(name[:half])}...{quote_name(name[-half:])}"
    return quote_name(name)


def _listed(names: tuple[str, ...]) -> str:
    shown = ", ".join(map(_shown, names[:_NAMES_SHOWN]))
    return shown if len(names) <= _NAMES_SHOWN else f"{shown} and {len(names) - _NAMES_SHOWN} more"


def _progress_reader(
    plan: CommandPlan, progress: ProgressReporter | None
) -> Callable[[bytes], Awaitable[None]] | None:
    """Turns the tool's stdout lines into progress reports, when both sides want them."""
    read, report = plan.progress, progress
    if read is None or report is None:
        return None

    async def on_line(line: bytes) -> None:
        news = read(line)
        if news is not None:
            await report(*news)

    return on_line
