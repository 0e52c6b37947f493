"""The rules compiled: each rule's conditions, the book that decides a call, and what it withholds."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from pydantic import ValidationError

from oct_mcp.base_types import RuleVerdict
from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import ConfigError
from oct_mcp.rules._globs import (
    PathGlobs,
    compiled_globs,
    git_exclusions,
    path_globs,
    pointer_tokens,
    value_globs,
    value_matches,
)
from oct_mcp.rules._model import ANY_TOOL, EFFECT_STRICTNESS, TIERS, CallFacts, Rule, RuleSource, Tier

MAX_RULES: Final = 256


_log = get_logger(__name__)


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
            value_matches(facts.arguments, tokens, globs) for tokens, globs in self.fields
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
            hit = screen.matches_name(name) or screen.matches_rooted(folder)
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
            unknown = set(rule.tools) - {ANY_TOOL} - known
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
        tools=None if ANY_TOOL in rule.tools else frozenset(rule.tools),
        paths=paths,
        refs=compiled_globs(when.ref),
        argv_words=compiled_globs(when.argv.any) if when.argv is not None else None,
        risks=frozenset(risk.value for risk in when.risk),
        clients=compiled_globs(when.client),
        fields=tuple((pointer_tokens(pointer), value_globs(globs)) for pointer, globs in when.fields.items()),
    )
