"""ExecutionSandbox (Layer 4): the terminal layer, which runs a tool's plan isolated and within its limits."""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Protocol

import anyio
from pydantic import BaseModel, ConfigDict

from oct_mcp.backends import (
    GUARANTEES,
    NO_NETWORK,
    SCRATCH_PREFIX,
    Backend,
    Limits,
    Prepared,
    SandboxRequest,
    select_backend,
)
from oct_mcp.backends.environment import sandbox_environment
from oct_mcp.backends.installs import install_roots
from oct_mcp.backends.runner import run_prepared
from oct_mcp.chain import CallNext, LayerRuntime, LayerType
from oct_mcp.context import CallContext, Outcome, ProgressReporter, ToolResult
from oct_mcp.errors import ProtectedPathCreatedError, SandboxUnavailableError, ToolTimeoutError
from oct_mcp.protected import (
    existing_protected_paths,
    present_protected_names,
    remove_created_protected_paths,
)
from oct_mcp.spec import CommandPlan, InProcessPlan, RunResult, ToolEnv

__all__ = ["LAYER", "ExecutionSandbox", "Runner", "SandboxSettings", "cap_output"]

TRUNCATION_NOTE: Final = "\n[oct-mcp: output truncated at {limit} bytes (max_output_bytes)]"
_MIB: Final = 1_048_576
_CPU_BACKSTOP_SECONDS: Final = 5
_MAX_TOOL_THREADS: Final = 4
_SYSTEM_PATH: Final = ("/usr/local/bin", "/usr/bin", "/bin")
_PR_SET_DUMPABLE: Final = 4
_HOW_TO_ISOLATE: Final = (
    "install bubblewrap (apt install bubblewrap) and enable unprivileged user namespaces, "
    "or use a profile that does not need this"
)


class SandboxSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    allow_degraded: bool = False
    """Run where the backend lacks a guarantee the profile names (never the network one)."""


class Runner(Protocol):
    def __call__(
        self,
        prepared: Prepared,
        *,
        backend: str,
        time_limit: float,
        max_output: int,
        on_stdout_line: Callable[[bytes], Awaitable[None]] | None = None,
    ) -> Awaitable[RunResult]: ...


def cap_output(result: ToolResult, limit: int) -> ToolResult:
    """Cut the result's text to at most `limit` UTF-8 bytes, on a character boundary.

    Args:
        result: What the tool answered.
        limit: `max_output_bytes`.

    Returns:
        The result unchanged when it fits; else cut, marked `truncated`, with a note saying so.
    """
    if len(result.text) * 4 <= limit:
        return result  # no UTF-8 character takes more than 4 bytes: it fits without encoding it
    encoded = result.text.encode("utf-8")
    if len(encoded) <= limit:
        return result
    note = TRUNCATION_NOTE.format(limit=limit)
    room = max(limit - len(note.encode("utf-8")), 0)
    # errors="ignore" drops the partial character a byte cut can leave at the end.
    text = encoded[:room].decode("utf-8", errors="ignore") + note
    return replace(result, text=text, truncated=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSandbox:
    """Run the validated tool's plan: in-process ones in a thread (or inline), commands under the backend.

    Reads `ctx.workspace`, `ctx.spec`, `ctx.params`, `ctx.dry_run`. Never calls `call_next`:
    it always answers. Raises `SandboxUnavailableError` when the backend lacks a guarantee
    the profile needs, `ToolTimeoutError` past the time limit, and what the tool raises.
    """

    backend: Backend
    runner: Runner
    required: frozenset[str]
    allow_degraded: bool
    max_output_bytes: int
    timeout_seconds: float
    test_timeout_seconds: float
    memory_bytes: int | None
    threads: int

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        if ctx.spec is None or ctx.params is None or ctx.workspace is None:
            # build_chain refuses a profile without the gateway and validator before this layer.
            raise RuntimeError("the sandbox layer was reached without validated params")
        env = ToolEnv(
            workspace=ctx.workspace,
            max_output_bytes=self.max_output_bytes,
            max_jobs=self.threads,
            dry_run=ctx.dry_run,
        )
        plan = ctx.spec.plan(ctx.params, env)
        started = time.perf_counter()
        if isinstance(plan, InProcessPlan):
            result = plan.function() if plan.inline else await self._run_in_process(plan)
        else:
            result = await self._run_command(plan, ctx.workspace.root, ctx.progress)
        return replace(
            cap_output(result, self.max_output_bytes),
            duration_seconds=time.perf_counter() - started,
        )

    async def _run_in_process(self, plan: InProcessPlan) -> ToolResult:
        with anyio.move_on_after(self.timeout_seconds):
            # abandon_on_cancel: a timed-out read cannot be interrupted, but the call must
            # still return; the worker thread ends by itself when its read completes.
            return await anyio.to_thread.run_sync(plan.function, abandon_on_cancel=True)
        raise ToolTimeoutError(
            f"the tool ran past its limit of {self.timeout_seconds:g} s (timeout_default_seconds)"
        )

    async def _run_command(
        self, plan: CommandPlan, project: Path, progress: ProgressReporter | None
    ) -> ToolResult:
        if plan.needs_network and NO_NETWORK in self.required:
            raise SandboxUnavailableError("the tool needs the network, which this profile forbids")
        timeout = self.test_timeout_seconds if plan.long_running else self.timeout_seconds
        before = present_protected_names(project) if plan.writes_project else None
        created: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
        try:
            home, tmp = self.backend.home_and_tmp(scratch)
            path_dirs = [*_venv_bins(Path(plan.argv[0])), *_SYSTEM_PATH]
            request = SandboxRequest(
                argv=plan.argv,
                project=project,
                writable=plan.writes_project,
                network=plan.needs_network,
                protected=existing_protected_paths(project, before) if before is not None else (),
                read_only_binds=(*install_roots(Path(plan.argv[0]), project), *plan.read_only_paths),
                env=sandbox_environment(
                    path_dirs=path_dirs,
                    home=home,
                    tmpdir=tmp,
                    read_only_project=not plan.writes_project,
                    threads=self.threads,
                    tool_env=plan.tool_env,
                ),
                limits=Limits(
                    memory_bytes=self.memory_bytes,
                    cpu_seconds=int(timeout) + _CPU_BACKSTOP_SECONDS,
                    # RLIMIT_NPROC counts every process of the user, so it cannot be a per-run budget;
                    # the kernel ignores it for root. The timeout and the tree kill bound a fork bomb.
                    processes=None,
                ),
                scratch=scratch,
                strict_files="reads_confined" in self.required,
            )
            prepared = self.backend.prepare(request)
            missing = self.required - prepared.guarantees
            if missing and (NO_NETWORK in missing or not self.allow_degraded):
                raise SandboxUnavailableError(
                    f"this profile needs {', '.join(sorted(missing))}, which the {self.backend.name} "
                    f"backend cannot give here; {_HOW_TO_ISOLATE}"
                )
            run = await self.runner(
                prepared,
                backend=self.backend.name,
                time_limit=timeout,
                max_output=self.max_output_bytes,
                on_stdout_line=_progress_reader(plan, progress),
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            if before is not None:
                created = remove_created_protected_paths(project, before)
        _refuse_created_protected_paths(*created)
        if run.timed_out:
            setting = "timeout_test_seconds" if plan.long_running else "timeout_default_seconds"
            raise ToolTimeoutError(
                f"the tool ran past its limit of {timeout:g} s ({setting}) and was stopped"
            )
        degraded = tuple(
            sorted(GUARANTEES - prepared.guarantees - ({NO_NETWORK} if plan.needs_network else set()))
        )
        result = plan.parse(replace(run, degraded=degraded))
        return replace(
            result,
            exit_code=run.exit_code,
            truncated=result.truncated or run.truncated,
            output_bytes=run.output_bytes,
            backend=run.backend,
            degraded=degraded,
        )


def _refuse_created_protected_paths(removed: tuple[str, ...], left: tuple[str, ...]) -> None:
    """A writable run that created protected paths fails, whatever else it did, saying what became of them."""
    if not removed and not left:
        return
    parts = []
    if removed:
        parts.append(f"{', '.join(removed)} (removed again)")
    if left:
        parts.append(f"{', '.join(left)} (left: it sits behind a link; remove it yourself)")
    raise ProtectedPathCreatedError(
        f"the tool created protected paths, which no tool may write: {'; '.join(parts)}; "
        "its other changes were kept"
    )


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


def _venv_bins(executable: Path) -> list[str]:
    """The tool's own venv first on PATH, so what it spawns comes from the same install."""
    venv = executable.parent.parent
    return [str(executable.parent)] if (venv / "pyvenv.cfg").is_file() else []


def _make_server_undumpable() -> None:
    """A child running as the same user must not read the server's environment through /proc."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _build(settings: SandboxSettings, runtime: LayerRuntime) -> ExecutionSandbox:
    config = runtime.config
    backend, _ = select_backend(config.sandbox_backend)
    _make_server_undumpable()
    return ExecutionSandbox(
        backend=backend,
        runner=run_prepared,
        required=runtime.guarantees,
        allow_degraded=settings.allow_degraded,
        max_output_bytes=config.max_output_bytes,
        timeout_seconds=config.timeout_default_seconds,
        test_timeout_seconds=config.timeout_test_seconds,
        memory_bytes=config.memory_limit_mb * _MIB if config.memory_limit_mb else None,
        threads=max(1, min(os.cpu_count() or 1, config.max_jobs, _MAX_TOOL_THREADS)),
    )


LAYER: Final = LayerType(
    name="sandbox",
    settings=SandboxSettings,
    build=_build,
    requires=frozenset({"workspace", "spec", "params"}),
    terminal=True,
)
