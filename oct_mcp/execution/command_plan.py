"""A command plan: what a tool asks to run under the sandbox, step by step, and how to read it.

`execution.commands` runs it; `spec` re-exports these for the tools that build one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeAlias

from oct_mcp.backends.results import RunResult
from oct_mcp.base_types import ToolResult

__all__ = ["COMMAND_STEPS_MAX", "CommandPlan", "GitWrites", "NextCommand", "Then"]


COMMAND_STEPS_MAX: Final = 4
"""The most commands one plan runs: its `argv` and the steps its `then` chain names."""


@dataclass(frozen=True, slots=True)
class NextCommand:
    """A step of a plan that has steps after it: the argv to run, and what decides the next one."""

    argv: tuple[str, ...]
    then: Then


Then: TypeAlias = Callable[[RunResult], "tuple[str, ...] | NextCommand"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandPlan:
    """Run `argv` in a subprocess under the sandbox backend, then `parse` what it printed."""

    argv: tuple[str, ...]
    """argv[0] is an absolute path to the program: nothing is looked up on PATH at run time."""
    parse: Callable[[RunResult], ToolResult]
    writes_project: bool = False
    """The project is writable (protected paths stay read-only); otherwise read-only."""
    needs_network: bool = False
    long_running: bool = False
    """Uses timeout_test_seconds instead of timeout_default_seconds (test runs)."""
    tool_env: tuple[tuple[str, str], ...] = ()
    """Tool settings for the environment; names that look like secrets or hijacks are dropped."""
    progress: Callable[[bytes], tuple[float, float | None, str | None] | None] | None = None
    """Reads one line of the tool's stdout as (progress, total, message), or None for no news."""
    read_only_paths: tuple[Path, ...] = ()
    """Folders outside the project the tool must read (a worktree's git folders), bound read-only.
    The plan checks them: nothing a call's arguments name ever lands here."""
    output_files: tuple[tuple[str, str], ...] = ()
    """(environment name, file name): the name is set to a path in a folder of the run that only
    this command writes, and the file's content comes back in `RunResult.files` (a report the tool
    writes there instead of a pipe, or a file a plugin would otherwise write into the project)."""
    project_cache: bool = False
    """Bytecode, mypy and ruff caches go to the project's cache folder (`project_cache`), kept
    between runs, instead of the run's scratch folder."""
    cwd: Path | None = None
    """The folder inside the project the command starts in; None: the project root. The plan
    contains it (a folder a call names passes the validator's containment first)."""
    timeout_seconds: float | None = None
    """A time limit lower than the configured one (a call asked for less); never raises it."""
    reports_when_interrupted: bool = False
    """The program prints its report when interrupted (SIGINT), as pytest does: past the time limit
    the runner interrupts it first and gives it a few seconds, and `parse` reads that run
    (`RunResult.timed_out` set) instead of the call failing with a timeout."""
    then: Then | None = None
    """A next command: `argv` runs first, in the same sandbox, and what it printed decides the
    argv run next (the same program); a `NextCommand` carries its own `then`, so each step's
    output can decide the one after it (git lists its config, then checks a ref, then runs).
    `parse` reads the last step's output; a step raises to refuse the call (in a worker thread: it
    may read files). Of a plan that `writes_project`, only the last command may write the project:
    the earlier ones run with it read-only. At most `COMMAND_STEPS_MAX` commands run. A runner that
    ignored it would run `argv` only, never a later command unchecked."""
    git_writes: GitWrites | None = None
    """The git folder writes the command makes (git's own argv must not name `--git-dir`: the
    sandbox sets GIT_DIR to the run's private git folder)."""
    before_run: Callable[[], None] | None = None
    """Reads the project before the command runs (a writing run's baseline, the files a format may
    change), in a worker thread so that a large project holds up no other call; raises to refuse
    the call, nothing run. A plan's own function stays on the event loop: it must read little."""
    after_failure: Callable[[], str | None] | None = None
    """Called, in a worker thread, where the last command ran but the call fails without `parse`
    (a refusal of what it did to protected paths, its time limit, a cancellation): a writing plan
    records the checkpoint of what the run changed, so oct_undo can take it back. Returns a note
    for the error (the checkpoint's id, or why there is none; never a value of the call), or None."""
    resolves_localhost: bool = True
    """Whether the run's `localhost` resolves as on a machine with a network card
    (`SandboxRequest.resolves_localhost`): test suites' listeners ask so. False for the server's own
    programs (git), whose runs then skip what it costs."""
    masks_secret_files: bool = True
    """The run reads the project's files that a read shows masked as a read shows them (bubblewrap)
    or not at all (landlock), unless the profile's `show_secrets_to_runs` says otherwise. False only
    for the server's own programs run with fixed arguments that need the files as they are and
    print nothing a pattern redactor cannot see (git: a commit of a masked copy would commit the
    masks, a status would call the file changed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GitWrites:
    """What a git command may change in the project's own git folder, which stays read-only itself.

    The sandbox copies `files` into a private git folder of the run (with a `commondir` naming
    `git_dir`) and points GIT_DIR at it, so the lock files git makes beside HEAD and the index land
    there; the data folders `folders` of `git_dir` are writable. After a run whose every command
    exited 0, the sandbox installs each copy that changed back into `git_dir`, refusing when the
    original changed meanwhile. No right on `git_dir` itself is ever given: its config, hooks and
    info stay read-only under every backend.
    """

    git_dir: Path
    files: tuple[str, ...]
    """Per-worktree files: `HEAD`, `index`, `logs/HEAD`."""
    folders: tuple[str, ...]
    """Data folders of the git folder: `objects`, `refs`, `logs`."""
