"""A backend and a runner for tests: they record what they are asked and answer as scripted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from oct_mcp.backends import (
    GUARANTEES,
    Availability,
    EntryRights,
    Prepared,
    SandboxRequest,
    SecretFileView,
    scratch_home_and_tmp,
)
from oct_mcp.backends.results import RunResult

__all__ = ["FakeBackend", "ScriptedRunner"]


@dataclass
class FakeBackend:
    """Prepares each command to run as it is, claiming the guarantees it is given."""

    guarantees: frozenset[str] = GUARANTEES
    usable: bool = True
    name: str = "fake"
    entry_rights: EntryRights = EntryRights.WRITABLE_FOLDERS
    secret_files: SecretFileView = SecretFileView.HIDDEN
    requests: list[SandboxRequest] = field(default_factory=list)

    def home_and_tmp(self, scratch: Path) -> tuple[str, str]:
        return scratch_home_and_tmp(scratch)

    def probe(self) -> Availability:
        return Availability(self.usable, "a fake for tests")

    def prepare(self, request: SandboxRequest) -> Prepared:
        self.requests.append(request)
        return Prepared(
            argv=request.argv, env=dict(request.env), cwd=request.start_folder, guarantees=self.guarantees
        )


@dataclass
class ScriptedRunner:
    """Answers each run with `answer(prepared)`, without spawning anything."""

    answer: Callable[[Prepared], RunResult]
    seen: list[tuple[Prepared, float, int]] = field(default_factory=list)

    async def __call__(
        self,
        prepared: Prepared,
        *,
        backend: str,
        time_limit: float,
        max_output: int,
        on_stdout_line: Callable[[bytes], Awaitable[None]] | None = None,
        interrupt_first: bool = False,
    ) -> RunResult:
        self.seen.append((prepared, time_limit, max_output))
        return self.answer(prepared)
