"""The rules as their files write them, where they come from, and the facts of a call they judge."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from oct_mcp.spec import Risk

Effect = Literal["allow", "ask", "deny"]


Tier = Literal["admin", "user", "repo"]


TIERS: Final[tuple[Tier, ...]] = ("admin", "user", "repo")
"""From the strongest: a tier's deny or ask holds whatever the tiers after it say."""


EFFECT_STRICTNESS: Final[Mapping[str, int]] = {"allow": 0, "ask": 1, "deny": 2}


STDIO_CLIENT: Final = "stdio"
"""The client id of a stdio server's one client."""


ANY_TOOL: Final = "*"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArgvCondition(_Strict):
    """Over the command a run starts, as the caller named it (program first)."""

    prefix: tuple[str, ...] = ()
    """The argv starts with these words."""
    program: tuple[str, ...] = ()
    """The program is one of these names."""
    any: tuple[str, ...] = ()
    """Some word of the argv matches one of these globs (`*` any characters)."""


class When(_Strict):
    """Every condition given must hold; a condition over something the call does not have fails."""

    paths: tuple[str, ...] = ()
    """gitignore-style globs over each path the call touches, relative to the project root."""
    argv: ArgvCondition | None = None
    ref: tuple[str, ...] = ()
    """Globs over the git refs or branches the call names."""
    risk: tuple[Risk, ...] = ()
    """The call's own risk (oct_run's `writes` makes it a write)."""
    fields: dict[str, tuple[str, ...]] = Field(default_factory=dict, max_length=16)
    """Globs over an argument's value, by JSON pointer (`/table`, `/options/mode`): a string as it
    is, a number or boolean as JSON writes it, a list where any item matches; a pointer the call's
    arguments do not have fails. For an embedded server's own tools, whose arguments oct-mcp knows
    only by name."""

    @field_validator("fields")
    @classmethod
    def _pointers(cls, fields: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for pointer, globs in fields.items():
            if not pointer.startswith("/") or len(pointer) > 256 or pointer.count("/") > 8:
                raise ValueError(
                    f"{pointer!r} is no JSON pointer to an argument (/name, /a/b; 8 deep at most)"
                )
            if not globs:
                raise ValueError(f"{pointer!r} needs at least one glob")
        return fields

    client: tuple[str, ...] = ()
    """Globs over the calling client's id: `http:NAME` for a bearer token, `http:oauth:SUBJECT`
    for a person signed in through OAuth, `stdio` for the one client of a stdio server."""


class Example(_Strict):
    tool: str | None = None
    """The tool; the rule's only tool when it names one."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    client: str = Field(default=STDIO_CLIENT, min_length=1, max_length=256)
    """The calling client's id (`When.client`)."""


class Examples(_Strict):
    match: tuple[Example, ...] = ()
    not_match: tuple[Example, ...] = ()


class Rule(_Strict):
    """One rule as a config file writes it."""

    effect: Effect
    tools: tuple[str, ...] = (ANY_TOOL,)
    when: When = Field(default_factory=When)
    reason: str = Field(min_length=1, max_length=300)
    """Shown to whoever is refused or asked: say why, and what to do instead."""
    name: str | None = Field(default=None, min_length=1, max_length=64)
    examples: Examples = Field(default_factory=Examples)

    @field_validator("tools")
    @classmethod
    def _some_tool(cls, tools: tuple[str, ...]) -> tuple[str, ...]:
        if not tools:
            raise ValueError("name at least one tool, or * for every tool")
        return tools


@dataclass(frozen=True, slots=True)
class RuleSource:
    """The rules one file holds, as data, and the tier it speaks for."""

    tier: Tier
    file: str
    rules: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What a validated call touches: what rules are matched against."""

    tool: str
    risk: str
    paths: tuple[str, ...] = ()
    """Relative to the project root, POSIX: each path as named and as resolved, each once."""
    argv: tuple[str, ...] | None = None
    refs: tuple[str, ...] = ()
    client: str = STDIO_CLIENT
    """The calling client's id (`ClientInfo.client_id`)."""
    arguments: Mapping[str, Any] | None = None
    """The validated arguments, where a rule looks into them (`When.fields`); None elsewhere."""
