"""PolicyEngine: the tool and program allowlists, the protected paths no write may touch, and the rules."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from pydantic import Field

from oct_mcp.errors import ConfigError, PolicyError
from oct_mcp.protected import ProtectedPaths
from oct_mcp.rules import RuleBook, RuleSource, call_facts, compile_rules, example_failures
from oct_mcp.spec import Risk, ToolSpec
from oct_mcp.types import CallContext, CallNext, LayerRuntime, LayerSettings, LayerType, Outcome

__all__ = ["ALL_TOOLS", "DEFAULT_PROGRAMS", "LAYER", "PolicyEngine", "PolicySettings", "rule_book"]

ALL_TOOLS: Final = "*"
DEFAULT_PROGRAMS: Final = ("python", "pytest", "nox", "tox", "make", "hatch", "uv run", "npm run")
"""The project's interpreter (`python`) and the usual runners; `uv run` pins uv's first argument."""


class PolicySettings(LayerSettings):
    tools: tuple[str, ...] = Field(default=(ALL_TOOLS,))
    """The tools this profile allows, by name; `*` allows every tool of the catalog."""
    programs: tuple[str, ...] = Field(default=DEFAULT_PROGRAMS)
    """The commands a tool that runs what the caller names (oct_run) may start: a program's name,
    or a name and the first argument it must have (`npm run`). `python` is the project's interpreter."""
    rules: tuple[dict[str, Any], ...] = ()
    """Rules over what a call touches (`oct_mcp.rules.Rule`), after the user config's own: the user tier."""


@dataclass(frozen=True, slots=True)
class PolicyEngine:
    """Refuse tools outside the allowlist, commands outside `programs`, the network where the
    profile forbids it, and writes (by the call's own risk, `ToolSpec.risk_of`) to protected paths;
    then the rules (`oct_mcp.rules`).

    Reads `ctx.tool`, `ctx.spec`, `ctx.params`, `ctx.risk`, `ctx.workspace`; writes `ctx.rule_verdict` (a
    rule's ask or allow) and `ctx.withheld` (the paths a deny rule keeps out of the output). Raises
    `PolicyError`, whose message names the rule. Never answers. Hides refused tools from tools/list.
    """

    profile: str
    allowed: frozenset[str] | None
    """None: every tool."""
    protected: ProtectedPaths
    programs: frozenset[tuple[str, ...]] = frozenset(tuple(entry.split()) for entry in DEFAULT_PROGRAMS)
    """Each allowed command as its words: one (any arguments) or two (the first argument pinned)."""
    network_allowed: bool = True
    """False where the profile requires the `no_network` guarantee."""
    rules: RuleBook = field(default_factory=RuleBook)

    def is_visible(self, spec: ToolSpec) -> bool:
        return self.allowed is None or spec.name in self.allowed

    def takes_confirm(self, spec: ToolSpec) -> bool:
        """A rule may ask about a call of the tool: `confirm=true` answers it where nobody can be asked."""
        return self.rules.may_ask(spec.name)

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        if self.allowed is not None and ctx.tool not in self.allowed:
            raise PolicyError(f"the tool is not allowed in profile {self.profile!r} (rule: allowlist)")
        spec, params, workspace, call = ctx.spec, ctx.params, ctx.workspace, ctx.risk
        if spec is None or params is None or workspace is None or call is None:
            raise RuntimeError("the policy layer was reached without validated params")
        if spec.runs is not None and not self._allows_command(spec.runs(params)):
            allowed = ", ".join(sorted(" ".join(words) for words in self.programs)) or "none"
            raise PolicyError(
                f"the program is not allowed in profile {self.profile!r} (rule: programs; allowed: "
                f"{allowed}); to allow it, add its name, or its name and first argument, to the "
                'programs of your own profile in the config file: "profiles": {"mine": {"settings": '
                '{"policy": {"programs": [...]}}}}'
            )
        if call.network and not self.network_allowed:
            # Refused here, before the gate asks anyone: the sandbox would refuse the run anyway.
            raise PolicyError(
                f"the call asks for the network, which profile {self.profile!r} forbids (rule: no_network); "
                "run it without network=true, or under a profile without the no_network guarantee"
            )
        if call.risk is Risk.WRITE:
            for name, path in spec.given_paths(params):
                workspace.contain_text(path)
                # The name as given, not only where it leads: `.vscode` linked to `settings/`
                # is still `.vscode` to the IDE that reads it.
                given = Path(path) if Path(path).is_absolute() else workspace.root / path
                rule = self.protected.rule_for(given)
                if rule is not None:
                    raise PolicyError(
                        f"{spec.name} may not write to {rule.why} (protected path rule: {rule.name}, "
                        f"argument: {name})"
                    )
        if self.rules.applies_to(spec.name):
            facts = call_facts(
                spec,
                params,
                workspace,
                risk=call.risk,
                resolved=ctx.resolved_paths,
                client=ctx.client.client_id,
                with_arguments=self.rules.looks_into_arguments,
            )
            decided = self.rules.decide(facts)
            if decided is not None and decided.rule.effect == "deny":
                raise PolicyError(
                    f"{spec.name} is denied by rule {decided.label} ({decided.tier} tier): "
                    f"{decided.rule.reason}; `oct-mcp policy check` shows which rule decides a call"
                )
            # A file the call would be refused had it named it is left out of what it lists,
            # searches and shows: a listing or a search hit must not tell what a read may not.
            withheld = None if spec.names_only_its_paths else self.rules.withheld_from(facts)
            if decided is not None or withheld is not None:
                verdict = decided.verdict() if decided is not None else None
                return await call_next(replace(ctx, rule_verdict=verdict, withheld=withheld))
        return await call_next(ctx)

    def _allows_command(self, command: tuple[str, ...]) -> bool:
        return bool(command) and (
            (command[0],) in self.programs or (len(command) > 1 and command[:2] in self.programs)
        )


def _program_entries(programs: tuple[str, ...]) -> frozenset[tuple[str, ...]]:
    entries = []
    for entry in programs:
        words = tuple(entry.split())
        if not 1 <= len(words) <= 2 or "/" in words[0] or words[0].startswith("-"):
            raise ConfigError(
                "layer 'policy': each of `programs` is a program's name, or a name and its first "
                "argument (`uv run`); not a path, not an option"
            )
        entries.append(words)
    return frozenset(entries)


def rule_book(settings: PolicySettings, runtime: LayerRuntime) -> RuleBook:
    """The rules in force: the admin file's, the user's config's, the profile's, a trusted repository's.

    Raises:
        ConfigError: A rule is malformed, or an example says the opposite of what its rule does
            (each such example is named).
    """
    sources = list(runtime.rule_sources)
    if settings.rules:
        # The profile is the user's choice: its rules join the user tier, after the config file's.
        after_user = sum(1 for source in sources if source.tier in ("admin", "user"))
        sources.insert(
            after_user, RuleSource(tier="user", file=f"profile {runtime.profile}", rules=settings.rules)
        )
    book = compile_rules(sources, () if runtime.open_catalog else runtime.catalog)
    if runtime.open_catalog:
        # An embedding host lists its tools after start-up: examples naming them cannot be run yet.
        return book
    failures = example_failures(book, runtime.catalog, runtime.workspace)
    if failures:
        listed = "\n  ".join(failure.describe() for failure in failures)
        raise ConfigError(
            f"{len(failures)} rule example(s) disagree with their rule; fix the rule or the example "
            f"(`oct-mcp policy test` runs them all):\n  {listed}",
            rule="rule_examples",
        )
    return book


def _build(settings: PolicySettings, runtime: LayerRuntime) -> PolicyEngine:
    names = set(settings.tools)
    unknown = names - set(runtime.catalog) - {ALL_TOOLS}
    if unknown and not runtime.open_catalog:
        raise ConfigError(f"layer 'policy' allows tools that do not exist: {', '.join(sorted(unknown))}")
    return PolicyEngine(
        profile=runtime.profile,
        allowed=None if ALL_TOOLS in names else frozenset(names),
        protected=ProtectedPaths.for_config(runtime.config, runtime.workspace.root, runtime.server_files),
        programs=_program_entries(settings.programs),
        network_allowed="no_network" not in runtime.guarantees,
        rules=rule_book(settings, runtime),
    )


LAYER: Final = LayerType(
    name="policy",
    settings=PolicySettings,
    build=_build,
    requires=frozenset({"workspace", "spec", "params", "risk"}),
    provides=frozenset({"rule_verdict", "withheld"}),
)
