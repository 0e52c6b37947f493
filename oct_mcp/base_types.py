"""The types below `oct_mcp.types`: what a tool's plan, the applier and the rules share with the chain.

A leaf: it imports nothing of oct-mcp's at run time, so the modules that `oct_mcp.types` names for
the type checker (a tool's spec, the applier, the rules) can import these without an import cycle,
even one only the type checker follows. A layer finds each of them in `oct_mcp.types`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from oct_mcp.consent import ConsentFacts
    from oct_mcp.preview import Preview

__all__ = ["ProgressReporter", "Risk", "RuleVerdict", "ToolResult", "WithheldPaths"]

ProgressReporter: TypeAlias = Callable[[float, float | None, str | None], Awaitable[None]]


class Risk(StrEnum):
    """How much a tool can do: read the project, run project code, or change files."""

    READ = "read"
    EXECUTE = "execute"
    WRITE = "write"


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleVerdict:
    """The rule that decided a call (`oct_mcp.rules`): what the safety gate acts on, and shows."""

    effect: str
    """`allow`, `ask` or `deny`."""
    reason: str
    """The rule's own words, shown to whoever is asked or refused."""
    rule: str
    """Its name, or `#N`: its place in its file."""
    tier: str
    """`admin`, `user` or `repo`."""
    file: str


class WithheldPaths(Protocol):
    """The project paths the rules deny a call, kept out of what it lists, searches and shows
    (`oct_mcp.rules.PathsWithheld`)."""

    def hides(self, path: str) -> bool:
        """Whether a call naming `path` (relative to the root, POSIX) would be denied."""
        ...

    def hidden_among(self, prefix: str, names: Sequence[str]) -> list[int]:
        """The indices of the `names` in the folder at `prefix` (`` or ending in `/`) that `hides`."""
        ...

    def git_exclusions(self) -> tuple[str, ...]:
        """git pathspecs (`:(exclude,glob)...`) that leave out at least every path `hides` would."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool answered, and facts about how it ran."""

    text: str
    structured: Mapping[str, Any] | None = None
    is_error: bool = False
    exit_code: int | None = None
    duration_seconds: float | None = None
    truncated: bool = False
    output_bytes: int | None = None
    """What the tool printed in all, when more than the text kept."""
    redactions: int = 0
    backend: str | None = None
    """The sandbox backend a subprocess ran under; None for in-process tools."""
    degraded: tuple[str, ...] = ()
    """Guarantees the run did not have, which the profile allowed to be missing."""
    passthrough_content: tuple[Mapping[str, Any], ...] = ()
    """An embedding host's content items that are not text (images, audio), carried as they are."""
    preview: Preview | None = None
    """A preview run's answer: what the call would change."""
    consent: ConsentFacts | None = None
    """How the call got the consent it needed, when it needed one."""
    checkpoint: str | None = None
    """The checkpoint that can undo the changes this call made (`oct_undo`), when it made any."""
