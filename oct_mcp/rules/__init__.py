"""Rules over what a call touches: allow, ask or deny by its resolved paths, argv, git refs and risk.

The policy layer decides with them; `oct-mcp policy check` and `policy test` use the same functions,
so what the command prints is what the server does. The modules behind this one are private: what
the package offers is what `__all__` names.
"""

from __future__ import annotations

from oct_mcp.rules._admin import ADMIN_POLICY_ENV, ADMIN_POLICY_PATH, read_admin_rules
from oct_mcp.rules._book import CompiledRule, PathsWithheld, RuleBook, compile_rules
from oct_mcp.rules._examples import ExampleFailure, example_failures, facts_of_arguments
from oct_mcp.rules._facts import call_facts
from oct_mcp.rules._globs import git_exclusions, path_globs
from oct_mcp.rules._model import EFFECT_STRICTNESS, STDIO_CLIENT, TIERS, CallFacts, Rule, RuleSource, Tier

__all__ = [
    "ADMIN_POLICY_ENV",
    "ADMIN_POLICY_PATH",
    "EFFECT_STRICTNESS",
    "STDIO_CLIENT",
    "TIERS",
    "CallFacts",
    "CompiledRule",
    "ExampleFailure",
    "PathsWithheld",
    "Rule",
    "RuleBook",
    "RuleSource",
    "Tier",
    "call_facts",
    "compile_rules",
    "example_failures",
    "facts_of_arguments",
    "git_exclusions",
    "path_globs",
    "read_admin_rules",
]
