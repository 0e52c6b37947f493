"""How a command ran: the one type the backends hand up, kept where they can import it.

A leaf module: the backends import nothing above them (`spec`, the tools), so the run's result
lives here and `spec` re-exports it for the tools that parse it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["RunResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """How a command ran under the sandbox: what it printed and the facts of the run."""

    exit_code: int | None
    """The exit status; negative for a signal; None if it never started."""
    stdout: bytes
    stderr: bytes
    output_bytes: int
    """Everything both pipes carried, including what was cut."""
    truncated: bool
    timed_out: bool
    duration_seconds: float
    backend: str
    degraded: tuple[str, ...] = ()
    """Guarantees this run did not have, which the profile allowed to be missing."""
    files: Mapping[str, bytes] = field(default_factory=dict)
    """What the command wrote to the output files its plan named, by file name; absent if it wrote none."""
    files_truncated: tuple[str, ...] = ()
    """Output files larger than the cap, whose content in `files` is cut."""
