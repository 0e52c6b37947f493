"""Rules over what a call touches: allow, ask or deny by its resolved paths, argv, git refs and risk.

The policy layer decides with them; `oct-mcp policy check` and `policy test` use the same functions,
so what the command prints is what the server does.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import stat
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import ConfigError, FieldProblem, InvalidArgumentsError, OctError
from oct_mcp.spec import Risk, ToolSpec
from oct_mcp.types import RuleVerdict
from oct_mcp.workspace import Workspace

__all__ = [
    "ADMIN_POLICY_ENV",
    "ADMIN_POLICY_PATH",
    "EFFECT_STRICTNESS",
    "TIERS",
    "CallFacts",
    "CompiledRule",
    "ExampleFailure",
    "PathsWithheld",
    "Rule",
    "RuleBook",
    "RuleSource",
    "call_facts",
    "compile_rules",
    "example_failures",
    "facts_of_arguments",
    "git_exclusions",
    "path_globs",
    "read_admin_rules",
]

Effect = Literal["allow", "ask", "deny"]
Tier = Literal["admin", "user", "repo"]

TIERS: Final[tuple[Tier, ...]] = ("admin", "user", "repo")
"""From the strongest: a tier's deny or ask holds whatever the tiers after it say."""
EFFECT_STRICTNESS: Final[Mapping[str, int]] = {"allow": 0, "ask": 1, "deny": 2}
ADMIN_POLICY_PATH: Final = "/etc/oct-mcp/policy.toml"
ADMIN_POLICY_ENV: Final = "OCT_MCP_ADMIN_POLICY"
"""Names the admin file where it is not at `ADMIN_POLICY_PATH`; it must be as well kept."""
REF_FIELDS: Final = ("branch", "base", "commit", "target", "ref", "revision", "start_point")
"""The params fields that name a git ref or branch."""
MAX_RULES: Final = 256
STDIO_CLIENT: Final = "stdio"
"""The client id of a stdio server's one client."""
_ANY_TOOL: Final = "*"
_NAMES_REMEMBERED: Final = 4_096
"""Names a `PathGlobs` keeps its answer for: about a megabyte at most, even of 255-byte names."""

_log = get_logger(__name__)


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
    tools: tuple[str, ...] = (_ANY_TOOL,)
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


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """A rule made ready to match: its globs compiled once, at start-up."""

    rule: Rule
    label: str
    """`name`, or `#N` (its place in its file, from 1)."""
    tier: Tier
    file: str
    tools: frozenset[str] | None
    """None: every tool."""
    paths: PathGlobs | None
    refs: re.Pattern[str] | None
    argv_words: re.Pattern[str] | None
    risks: frozenset[str]
    clients: re.Pattern[str] | None = None
    fields: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = ()
    """Each `When.fields` pointer as its tokens, with its globs as one pattern."""

    @property
    def only_tool_and_paths(self) -> bool:
        """No condition but the tools and the paths: every other one holds for any call."""
        return (
            not self.risks
            and self.refs is None
            and self.rule.when.argv is None
            and self.clients is None
            and not self.fields
        )

    def matches(self, facts: CallFacts, *, paths_hit: bool = True, paths_checked: bool = True) -> bool:
        """Whether every condition holds; `paths_hit` False: the book knows no path glob matches;
        `paths_checked` False: every condition but the paths."""
        if self.tools is not None and facts.tool not in self.tools:
            return False
        if self.risks and facts.risk not in self.risks:
            return False
        if self.clients is not None and not self.clients.fullmatch(facts.client):
            return False
        if self.fields and not all(
            _value_matches(facts.arguments, tokens, globs) for tokens, globs in self.fields
        ):
            return False
        globs = self.paths if paths_checked else None
        if globs is not None and not (paths_hit and globs.matches_any(facts.paths)):
            return False
        if self.refs is not None and not any(self.refs.fullmatch(ref) for ref in facts.refs):
            return False
        argv = self.rule.when.argv
        if argv is not None:
            if facts.argv is None:
                return False
            if argv.prefix and facts.argv[: len(argv.prefix)] != argv.prefix:
                return False
            if argv.program and (not facts.argv or facts.argv[0] not in argv.program):
                return False
            if self.argv_words is not None and not any(self.argv_words.fullmatch(w) for w in facts.argv):
                return False
        return True

    def verdict(self) -> RuleVerdict:
        return RuleVerdict(
            effect=self.rule.effect, reason=self.rule.reason, rule=self.label, tier=self.tier, file=self.file
        )


@dataclass(frozen=True, slots=True)
class PathGlobs:
    """gitignore-style globs as two expressions: over one name at any depth (`*.pem`, `secrets/`),
    and over a path from the project root (`config/prod.yaml`, `/build`, `docs/**/*.md`).

    A path matches where a name of it matches the first, or it or a folder above it matches the
    second: what a folder's glob denies, it denies all inside. Written for speed: each path is
    tried against one expression per part, never a pattern at a time.
    """

    names: str | None
    """The alternation over one name, for the globs neither a plain name nor `*` and a suffix."""
    rooted: str | None
    """The alternation over a path from the root."""
    literal_names: frozenset[str] = frozenset()
    """Plain names (`secrets`, `.env`): a set lookup per part."""
    suffixes: tuple[str, ...] = ()
    """`*.pem` as `.pem`: a `str.endswith` per part."""
    _names: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _rooted: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _name_hits: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Each name's answer, once worked out: a tree's names repeat (`__init__.py`, `LC_MESSAGES`,
    `index.ts`), and a listing asks for every name it walks past. Emptied whole when full; calls
    sharing it from threads each see a right answer or none (each step is one dict operation)."""

    def __post_init__(self) -> None:
        # Most globs are plain names or suffixes, tried without a regular expression; the rest
        # are one expression over each part, and one match for the path or a folder above it.
        names = re.compile(self.names) if self.names is not None else None
        rooted = re.compile(f"(?:{self.rooted})(?:/|$)") if self.rooted is not None else None
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_rooted", rooted)

    def matches_any(self, paths: Iterable[str]) -> bool:
        return any(self.matches(path) for path in paths)

    def matches(self, path: str) -> bool:
        if self._rooted is not None and self._rooted.match(path):
            return True
        if not (self.literal_names or self.suffixes or self._names is not None):
            return False
        return any(self.matches_name(part) for part in path.split("/"))

    def matches_rooted(self, path: str) -> bool:
        """Whether a glob over a path from the root matches it or a folder above it."""
        return self._rooted is not None and self._rooted.match(path) is not None

    def matches_name(self, name: str) -> bool:
        """Whether a glob over one name (at any depth) matches `name`."""
        hit = self._name_hits.get(name)
        return self._remember(name) if hit is None else hit

    def names_hit(self, names: Sequence[str]) -> list[int]:
        """The indices of the `names` a glob over one name matches."""
        known = self._name_hits
        hits: list[int] = []
        for index, name in enumerate(names):
            hit = known.get(name)
            if hit or (hit is None and self._remember(name)):
                hits.append(index)
        return hits

    def _remember(self, name: str) -> bool:
        hit = name in self.literal_names or bool(self.suffixes and name.endswith(self.suffixes))
        if not hit and self._names is not None:
            hit = self._names.fullmatch(name) is not None
        if len(self._name_hits) >= _NAMES_REMEMBERED:
            self._name_hits.clear()
        self._name_hits[name] = hit
        return hit

    @classmethod
    def union(cls, globs: Iterable[PathGlobs]) -> PathGlobs:
        listed = list(globs)
        return cls(
            names=_alternation(g.names for g in listed),
            rooted=_alternation(g.rooted for g in listed),
            literal_names=frozenset().union(*(g.literal_names for g in listed)),
            suffixes=tuple(suffix for g in listed for suffix in g.suffixes),
        )


def _alternation(texts: Iterable[str | None]) -> str | None:
    kept = [text for text in texts if text is not None]
    return "|".join(f"(?:{text})" for text in kept) if kept else None


def path_globs(patterns: Iterable[str]) -> PathGlobs:
    """Compile gitignore-style globs.

    Raises:
        ValueError: A glob is empty, a negation (`!`: write a rule before this one instead), or
            climbs (`..`).
    """
    names: list[str] = []
    rooted: list[str] = []
    literal: set[str] = set()
    suffixes: list[str] = []
    for raw in patterns:
        glob = raw.strip().rstrip("/")
        if not glob or glob.startswith("!") or ".." in glob.split("/"):
            raise ValueError(raw)
        if "/" in glob:
            rooted.append(_glob_regex(glob.lstrip("/")))
        elif not any(char in glob for char in "*?[\\"):
            literal.add(glob)
        elif glob.startswith("*") and glob[1:] and not any(char in glob[1:] for char in "*?[\\"):
            suffixes.append(glob[1:])
        else:
            names.append(_glob_regex(glob))
    return PathGlobs(
        names=_alternation(names),
        rooted=_alternation(rooted),
        literal_names=frozenset(literal),
        suffixes=tuple(suffixes),
    )


def _glob_regex(glob: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(glob):
        char = glob[index]
        if glob.startswith("**/", index):
            out.append("(?:[^/]+/)*")
            index += 3
        elif glob.startswith("**", index):
            out.append(".*")
            index += 2
        elif char == "*":
            out.append("[^/]*")
            index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[" and "]" in glob[index + 2 :]:
            close = glob.index("]", index + 2)
            body = glob[index + 1 : close]
            negated = body.startswith("!")
            body = re.escape(body[1:] if negated else body).replace(r"\-", "-")
            out.append(f"[{'^' if negated else ''}{body}]")
            index = close + 1
        else:
            out.append(re.escape(char))
            index += 1
    return "".join(out)


def _globs(patterns: Iterable[str], flags: int = 0) -> re.Pattern[str] | None:
    words = [re.escape(p).replace(r"\*", ".*").replace(r"\?", ".") for p in patterns]
    return re.compile("|".join(f"(?:{w})" for w in words), flags) if words else None


def _value_globs(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """`When.fields`' globs (never none: the model refuses an empty list). A value may span lines
    (a commit message): `*` reaches across them."""
    compiled = _globs(patterns, re.DOTALL)
    if compiled is None:
        raise ValueError("a fields condition has no glob")
    return compiled


def _pointer_tokens(pointer: str) -> tuple[str, ...]:
    """RFC 6901: `/a~1b/c` is ("a/b", "c")."""
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:])


def _value_matches(
    arguments: Mapping[str, Any] | None, tokens: tuple[str, ...], globs: re.Pattern[str]
) -> bool:
    """Whether the value at `tokens` matches; a value that is not there matches nothing."""
    value: Any = arguments
    for token in tokens:
        if isinstance(value, Mapping) and token in value:
            value = value[token]
        elif isinstance(value, list | tuple) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return False
    items = value if isinstance(value, list | tuple) else [value]
    return any(globs.fullmatch(item if isinstance(item, str) else json.dumps(item)) for item in items)


@dataclass(frozen=True, slots=True)
class RuleBook:
    """Every rule in force, by tier, each tier in its file's order."""

    by_tier: tuple[tuple[Tier, tuple[CompiledRule, ...]], ...] = ()
    _by_tool: Mapping[str, tuple[tuple[CompiledRule, ...], ...]] = field(default_factory=dict)
    _path_union: Mapping[str, PathGlobs] = field(default_factory=dict)
    """By tool: every path glob that can apply to it as one expression, where all can be one: a
    call whose paths it does not match skips each rule over paths with one match in all."""
    _pathless: Mapping[str, tuple[tuple[CompiledRule, ...], ...]] = field(default_factory=dict)
    """By tool: `_by_tool` without the rules over paths, tried where the union matches no path."""
    _withholding: dict[tuple[int, ...], tuple[PathGlobs, tuple[str, ...]]] = field(default_factory=dict)
    _denying: dict[str, tuple[tuple[CompiledRule, ...], tuple[CompiledRule, ...], tuple[int, ...]]] = field(
        default_factory=dict
    )
    """By tool: `_denying_plan`'s answer, computed on its first call."""
    looks_into_arguments: bool = False
    """Some rule has a condition over an argument's value (`When.fields`): the facts keep them."""
    """By the denying rules' identities: their globs as one screen, and as written (`withheld_from`)."""

    @property
    def rules(self) -> tuple[CompiledRule, ...]:
        return tuple(rule for _tier, rules in self.by_tier for rule in rules)

    def __bool__(self) -> bool:
        return any(rules for _tier, rules in self.by_tier)

    def for_tool(self, tool: str) -> tuple[tuple[CompiledRule, ...], ...]:
        """Each tier's rules that can apply to `tool`, in order (computed once per tool name)."""
        found = self._by_tool.get(tool)
        if found is None:
            found = tuple(
                tuple(rule for rule in rules if rule.tools is None or tool in rule.tools)
                for _tier, rules in self.by_tier
            )
        return found

    def applies_to(self, tool: str) -> bool:
        """Whether some rule can apply to a call of `tool`: where none can, its facts are not needed."""
        return any(self.for_tool(tool))

    def may_ask(self, tool: str) -> bool:
        return any(rule.rule.effect == "ask" for rules in self.for_tool(tool) for rule in rules)

    def decide(self, facts: CallFacts) -> CompiledRule | None:
        """The rule that decides the call, or None where no rule matches.

        In each tier the first rule that matches; of those, the strictest (deny, then ask, then
        allow), and of equals the strongest tier's. So a rule below never loosens one above.
        """
        chosen: CompiledRule | None = None
        union = self._path_union.get(facts.tool)
        paths_hit = union is None or union.matches_any(facts.paths)
        tiers = self.for_tool(facts.tool) if paths_hit else self._pathless[facts.tool]
        for rules in tiers:
            for rule in rules:
                if rule.matches(facts, paths_hit=paths_hit):
                    if chosen is None or (
                        EFFECT_STRICTNESS[rule.rule.effect] > EFFECT_STRICTNESS[chosen.rule.effect]
                    ):
                        chosen = rule
                    break
        return chosen

    def withheld_from(self, facts: CallFacts) -> PathsWithheld | None:
        """What the deny rules over paths keep out of the output of this call; None where none can.

        A deny rule counts where every condition but its paths holds for the call (its tool, risk,
        argv, refs): a file it covers is one the call would be refused had it named it.
        """
        plan = self._denying.get(facts.tool)
        if plan is None:
            plan = self._denying[facts.tool] = self._denying_plan(facts.tool)
        always, conditional, always_key = plan
        if conditional:
            denying = (*always, *(rule for rule in conditional if rule.matches(facts, paths_checked=False)))
        else:
            denying = always
        if not denying:
            return None
        key = always_key if len(denying) == len(always) else tuple(id(rule) for rule in denying)
        found = self._withholding.get(key)
        if found is None:
            # Built once for each set of denying rules: a call pays one lookup, not a compile.
            screen = PathGlobs.union(rule.paths for rule in denying if rule.paths is not None)
            globs = tuple(dict.fromkeys(glob for rule in denying for glob in rule.rule.when.paths))
            found = self._withholding[key] = (screen, globs)
        return PathsWithheld(book=self, facts=facts, screen=found[0], globs=found[1])

    def _denying_plan(
        self, tool: str
    ) -> tuple[tuple[CompiledRule, ...], tuple[CompiledRule, ...], tuple[int, ...]]:
        """The deny rules over paths that can apply to `tool`: those whose only other condition is
        the tool itself (they count for every call of it: judged once, here), the rest (judged per
        call), and the identity of the first set. Written out for speed: with 30 such rules, asking
        each on every call cost 20 us a call."""
        rules = [
            rule
            for rules in self.for_tool(tool)
            for rule in rules
            if rule.rule.effect == "deny" and rule.paths is not None
        ]
        always = tuple(rule for rule in rules if rule.only_tool_and_paths)
        conditional = tuple(rule for rule in rules if not rule.only_tool_and_paths)
        return always, conditional, tuple(id(rule) for rule in always)


@dataclass(frozen=True, slots=True)
class PathsWithheld:
    """The paths the deny rules keep out of one call's listings, search hits and git output.

    `hides` decides a path as the rules would decide a call naming it (`RuleBook.decide`: first
    match in each tier, the strictest tier wins), after one match against every denying glob at
    once, which most paths miss. git is given the same globs as exclusions instead: it learns which
    files changed only as it runs, so it leaves out all the globs cover, even a path an earlier
    allow rule would let a call name (more hidden, never less).
    """

    book: RuleBook
    facts: CallFacts
    screen: PathGlobs
    """Every denying rule's globs as one: a path it misses is not withheld."""
    globs: tuple[str, ...]
    """The denying rules' globs as their files wrote them."""
    _missed: set[str] = field(default_factory=set)
    """The folders (as prefixes, `a/b/`) the screen misses, with every folder above them."""

    def hides(self, path: str) -> bool:
        return self.screen.matches(path) and self._denied(path)

    def hidden_among(self, prefix: str, names: Sequence[str]) -> list[int]:
        if prefix and self._folder_hit(prefix):
            return [index for index, name in enumerate(names) if self.hides(prefix + name)]
        # No part of the folder's path is hit: only the name, and the whole path by a rooted glob,
        # are left to try (a listing's every entry would otherwise split and try its folder's parts).
        screen = self.screen
        if screen.rooted is None:
            candidates = screen.names_hit(names)
        else:
            hit, rooted = screen.matches_name, screen.matches_rooted
            candidates = [index for index, name in enumerate(names) if hit(name) or rooted(prefix + name)]
        if not candidates:
            return candidates
        return [index for index in candidates if self._denied(prefix + names[index])]

    def _folder_hit(self, prefix: str) -> bool:
        """Whether the screen hits the folder at `prefix` or one above it; a walk asks for a folder
        after its parent, so where the parent was missed only the last name is tried again."""
        folder = prefix[:-1]
        parent, _, name = folder.rpartition("/")
        screen = self.screen
        if not parent or parent + "/" in self._missed:
            hit = screen.matches_name(name) or (screen.rooted is not None and screen.matches_rooted(folder))
        else:
            hit = screen.matches(folder)
        if not hit:
            self._missed.add(prefix)
        return hit

    def _denied(self, path: str) -> bool:
        decided = self.book.decide(replace(self.facts, paths=(path,)))
        return decided is not None and decided.rule.effect == "deny"

    def git_exclusions(self) -> tuple[str, ...]:
        return tuple(pathspec for glob in self.globs for pathspec in git_exclusions(glob))


def git_exclusions(glob: str) -> tuple[str, str]:
    """A gitignore-style glob as two git exclusion pathspecs: the paths it names, and all inside them.

    git's `glob` magic matches as `PathGlobs` does (`*`, `?` and `[...]` stop at `/`, `**/` any
    folders), so a glob without `/` is tried at any depth (`**/NAME`), one with `/` from the root.
    Where the two read a glob apart, git is given more, never less: a `\\` is a plain character to
    the rules, so it is doubled; a `[` that closes nowhere is plain too, and escaped; a `**` inside a
    name crosses folders for the rules, so a rooted glob is cut to what comes before it and a `*`.
    """
    body = glob.strip().rstrip("/")
    rooted = "/" in body
    body = body.lstrip("/")
    if rooted:
        inside = [m.start() for m in re.finditer(r"\*\*", body) if not _whole_segment(body, m.start())]
        if inside:
            body = body[: inside[0]] + "*"
    escaped: list[str] = []
    for index, char in enumerate(body):
        if char == "\\":
            escaped.append("\\\\")
        elif char == "[" and "]" not in body[index + 2 :]:
            escaped.append("\\[")
        else:
            escaped.append(char)
    pattern = "".join(escaped) if rooted else "**/" + "".join(escaped)
    return (f":(exclude,glob){pattern}", f":(exclude,glob){pattern}/**")


def _whole_segment(body: str, at: int) -> bool:
    """Whether the `**` at `at` is a whole folder's name (`a/**/b`, `**/b`, `a/**`)."""
    return (at == 0 or body[at - 1] == "/") and (at + 2 == len(body) or body[at + 2] == "/")


def compile_rules(sources: Sequence[RuleSource], tool_names: Iterable[str] = ()) -> RuleBook:
    """Parse and compile the rules of every source, strongest tier first.

    Args:
        sources: The files' rules as data, with their tier.
        tool_names: The tools of the catalog: a rule naming another is refused; empty: not checked.

    Raises:
        ConfigError: A rule is malformed or names an unknown tool. A repository's allow is
            dropped (logged): its config may only deny or ask.
    """
    known = frozenset(tool_names)
    by_tier: dict[Tier, list[CompiledRule]] = {tier: [] for tier in TIERS}
    for source in sources:
        if len(source.rules) > MAX_RULES:
            raise ConfigError(f"{source.file}: at most {MAX_RULES} rules", rule="rules")
        for index, raw in enumerate(source.rules, start=1):
            where = f"rule #{index} of {source.file} ({source.tier} tier)"
            try:
                rule = Rule.model_validate(raw)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '(rule)'}: {e['msg']}"
                    for e in exc.errors(include_url=False, include_input=False)
                )
                raise ConfigError(f"{where} is malformed: {problems}", rule="rules") from None
            unknown = set(rule.tools) - {_ANY_TOOL} - known
            if known and unknown:
                raise ConfigError(f"{where} names unknown tools: {', '.join(sorted(unknown))}", rule="rules")
            if source.tier == "repo" and rule.effect == "allow":
                # A repository may tighten, never loosen: its allow is dropped, said where it is read.
                _log.warning(
                    "repo_rule_ignored", file=source.file, rule=index, problem="a repository may not allow"
                )
                continue
            by_tier[source.tier].append(_compile(rule, f"{rule.name or f'#{index}'}", source))
    ordered = tuple((tier, tuple(by_tier[tier])) for tier in TIERS if by_tier[tier])
    per_tool = {
        name: tuple(tuple(r for r in rules if r.tools is None or name in r.tools) for _t, rules in ordered)
        for name in known
    }
    unions = {
        name: PathGlobs.union(rule.paths for rules in tiers for rule in rules if rule.paths is not None)
        for name, tiers in per_tool.items()
    }
    pathless = {
        name: tuple(tuple(rule for rule in rules if rule.paths is None) for rules in tiers)
        for name, tiers in per_tool.items()
    }
    return RuleBook(
        by_tier=ordered,
        _by_tool=per_tool,
        _path_union=unions,
        _pathless=pathless,
        looks_into_arguments=any(rule.fields for _tier, rules in ordered for rule in rules),
    )


def _compile(rule: Rule, label: str, source: RuleSource) -> CompiledRule:
    when = rule.when
    try:
        paths = path_globs(when.paths) if when.paths else None
    except ValueError as exc:
        raise ConfigError(
            f"rule {label} of {source.file}: a path glob is empty, climbs (..) or negates (!); "
            "for an exception, put a rule before this one",
            rule="rules",
        ) from exc
    return CompiledRule(
        rule=rule,
        label=label,
        tier=source.tier,
        file=source.file,
        tools=None if _ANY_TOOL in rule.tools else frozenset(rule.tools),
        paths=paths,
        refs=_globs(when.ref),
        argv_words=_globs(when.argv.any) if when.argv is not None else None,
        risks=frozenset(risk.value for risk in when.risk),
        clients=_globs(when.client),
        fields=tuple(
            (_pointer_tokens(pointer), _value_globs(globs)) for pointer, globs in when.fields.items()
        ),
    )


def call_facts(
    spec: ToolSpec,
    params: BaseModel,
    workspace: Workspace,
    *,
    resolved: Sequence[tuple[str, str]] = (),
    with_targets: bool = True,
    client: str = STDIO_CLIENT,
    with_arguments: bool = False,
) -> CallFacts:
    """What a validated call touches, for the rules.

    Every path field, and the paths a patch or a move names inside (`targets`), each as named and as
    resolved in the project (a link to `secrets/` is `secrets/`); the command a run starts; the refs
    it names; its own risk.

    Args:
        resolved: Paths as given and where they resolve, as the validator found them: not
            resolved again.
        client: The calling client's id.
        with_arguments: Keep the validated arguments, for rules that look into them (`When.fields`).

    Raises:
        OctError: A path leaves the project (the validator refused it already for a path field).
    """
    # The dump costs more than the rest together: only the tools whose arguments decide their risk
    # or name paths inside (a patch) need it.
    needed = with_arguments or spec.targets is not None or spec.call_risk is not None
    args = params.model_dump() if needed else None
    # The validator's list is the path fields' own, in the same order: not walked again.
    named = [given for given, _landed in resolved] or [path for _field, path in spec.given_paths(params)]
    if with_targets and spec.targets is not None and args is not None:
        # A patch that cannot be read names nothing; the tool refuses it when it runs.
        with contextlib.suppress(OctError, ValueError, TypeError, KeyError):
            named.extend(p for p in spec.targets(args) if isinstance(p, str))
    known = dict(resolved)
    paths: list[str] = []
    for path in named:
        landed = known.get(path)
        if landed is None:
            landed = workspace.contain_text(path)
        as_named = _as_named(path, workspace)
        if as_named is not None and as_named not in paths:
            paths.append(as_named)
        if landed != f"{workspace.root}/{as_named}":
            shown = workspace.relative(landed)
            if shown not in paths:
                paths.append(shown)
    refs = tuple(
        value for name in _ref_fields(type(params)) if isinstance(value := getattr(params, name), str)
    )
    return CallFacts(
        tool=spec.name,
        risk=spec.risk.value if args is None or spec.call_risk is None else spec.risk_of(args).risk.value,
        paths=tuple(paths),
        argv=spec.runs(params) if spec.runs is not None else None,
        refs=refs,
        client=client,
        arguments=args if with_arguments else None,
    )


@functools.cache
def _ref_fields(model: type[BaseModel]) -> tuple[str, ...]:
    # Asked once per tool: a pydantic model answers a missing attribute slowly (it raises inside).
    return tuple(name for name in REF_FIELDS if name in model.model_fields)


def _as_named(path: str, workspace: Workspace) -> str | None:
    """The path as the call named it, relative and normalised, without following links."""
    framed = f"/{path}/"
    if not path.startswith("/") and "//" not in framed and "/./" not in framed and "/../" not in framed:
        return path  # already relative and normal, as most are
    root = str(workspace.root)
    joined = os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
    if joined == root:
        return "."
    if not joined.startswith(root.rstrip("/") + "/"):
        return None
    return joined[len(root.rstrip("/")) + 1 :]


@dataclass(frozen=True, slots=True)
class ExampleFailure:
    """An example that says the opposite of what its rule does."""

    rule: CompiledRule
    kind: Literal["match", "not_match"]
    example: Example
    problem: str
    tool: str | None = None
    """The tool the example calls, where it names one or its rule names only one."""

    def describe(self) -> str:
        tool = self.tool or "(no tool)"
        return (
            f"rule {self.rule.label} ({self.rule.tier} tier, {self.rule.file}): its {self.kind} example "
            f"{tool} {_shown_arguments(self.example.arguments)} {self.problem}"
        )


def _shown_arguments(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True)


def facts_of_arguments(
    spec: ToolSpec, arguments: Mapping[str, Any], workspace: Workspace, *, client: str = STDIO_CLIENT
) -> CallFacts:
    """`call_facts` for arguments as a client would send them, validated as the server does.

    Raises:
        OctError: The server would refuse the arguments (a bad field, a path out of the project).
    """
    try:
        params = spec.params.model_validate(dict(arguments))
    except ValidationError as exc:
        problems = [
            FieldProblem(field=".".join(str(p) for p in error["loc"]) or "(arguments)", problem=error["msg"])
            for error in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
        raise InvalidArgumentsError(spec.name, problems) from None
    for _field, path in spec.given_paths(params):
        workspace.contain_text(path)
    return call_facts(spec, params, workspace, client=client, with_arguments=True)


def example_failures(
    book: RuleBook, catalog: Mapping[str, ToolSpec], workspace: Workspace, *, skip_unknown: bool = False
) -> list[ExampleFailure]:
    """Check every rule's examples: each `match` must match the rule, each `not_match` must not.

    With `skip_unknown`, an example whose tool `catalog` does not hold is passed over rather than
    failed: a host guarding its own tools shares the config file with oct-mcp's server, whose tools
    it does not have.
    """
    failures: list[ExampleFailure] = []
    for rule in book.rules:
        for kind in ("match", "not_match"):
            examples = rule.rule.examples.match if kind == "match" else rule.rule.examples.not_match
            for example in examples:
                tool = example.tool
                if tool is None and rule.tools is not None and len(rule.tools) == 1:
                    (tool,) = rule.tools
                spec = catalog.get(tool) if tool is not None else None
                if spec is None and skip_unknown:
                    continue
                if spec is None:
                    missing = "names no tool of this server (give its tool)"
                    failures.append(ExampleFailure(rule, kind, example, missing, tool))
                    continue
                try:
                    facts = facts_of_arguments(spec, example.arguments, workspace, client=example.client)
                except OctError as exc:
                    failures.append(
                        ExampleFailure(rule, kind, example, f"is refused as a call: {exc.message}", tool)
                    )
                    continue
                if rule.matches(facts) != (kind == "match"):
                    problem = "does not match it" if kind == "match" else "matches it"
                    failures.append(ExampleFailure(rule, kind, example, problem, tool))
    return failures


def read_admin_rules(environ: Mapping[str, str]) -> RuleSource | None:
    """The admin tier: `/etc/oct-mcp/policy.toml`, or the file `OCT_MCP_ADMIN_POLICY` names.

    Returns:
        Its rules; None when there is no such file.

    Raises:
        ConfigError: The file is not owned by root, others or its group may write it, or it is
            not a TOML table whose `rules` is a list of tables. The server does not start: an
            admin's rules that cannot be trusted or read must not be silently dropped.
    """
    named = environ.get(ADMIN_POLICY_ENV, "").strip()
    path = Path(named or ADMIN_POLICY_PATH)
    try:
        info = path.stat()
    except FileNotFoundError:
        if named:
            raise ConfigError(
                f"the admin policy {path} ({ADMIN_POLICY_ENV}) does not exist", rule="admin"
            ) from None
        return None
    except OSError as exc:
        raise ConfigError(
            f"the admin policy {path} cannot be read ({type(exc).__name__})", rule="admin"
        ) from exc
    for checked in (path, *path.parents[:1]):
        held = checked.stat()
        if held.st_uid != 0 or held.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ConfigError(
                f"the admin policy {path} is refused: {checked} must be owned by root and writable by "
                "root alone (chown root, chmod go-w)",
                rule="admin",
            )
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"the admin policy {path} is not a regular file", rule="admin")
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"the admin policy {path} is not valid TOML", rule="admin") from exc
    unknown = set(document) - {"rules"}
    rules = document.get("rules", [])
    if unknown or not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ConfigError(f"the admin policy {path} holds only `[[rules]]` tables", rule="admin")
    return RuleSource(tier="admin", file=str(path), rules=tuple(rules))
