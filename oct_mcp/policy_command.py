"""`oct-mcp policy check` and `policy test`, and the rules `doctor` shows, running nothing."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TextIO

from oct_mcp.errors import OctError
from oct_mcp.exit_codes import EXIT_OK, EXIT_USAGE
from oct_mcp.middleware.policy import PolicyEngine
from oct_mcp.rules import (
    ADMIN_POLICY_ENV,
    ADMIN_POLICY_PATH,
    STDIO_CLIENT,
    CompiledRule,
    RuleBook,
    facts_of_arguments,
)

if TYPE_CHECKING:
    from oct_mcp.app import App

__all__ = ["policy_check", "policy_test", "print_rules", "rules_in_force"]


def rules_in_force(app: App) -> RuleBook:
    """The policy layer's rules; none where the profile has no policy layer."""
    return next((layer.rules for layer in app.chain.layers if isinstance(layer, PolicyEngine)), RuleBook())


def _describe(rule: CompiledRule) -> str:
    return f"rule {rule.label} ({rule.tier} tier, {rule.file})"


def policy_check(app: App, tool: str, raw_arguments: str, out: TextIO, *, client: str = STDIO_CLIENT) -> int:
    """Print the rules' decision for one call, the rule that made it and its tier; run nothing.

    Returns:
        0 when the call could be judged, whatever the decision; 2 for a call the server would
        refuse before the rules (unknown tool, bad arguments), said on `out`.
    """
    spec = app.catalog.get(tool)
    if spec is None:
        out.write(f"[unknown_tool] no tool {tool!r} on this server; oct-mcp tools lists them\n")
        return EXIT_USAGE
    try:
        arguments = json.loads(raw_arguments)
    except ValueError:
        out.write("[usage] --json is not valid JSON\n")
        return EXIT_USAGE
    if not isinstance(arguments, dict):
        out.write("[usage] --json must be a JSON object of arguments\n")
        return EXIT_USAGE
    try:
        facts = facts_of_arguments(spec, arguments, app.workspace, client=client)
    except OctError as exc:
        out.write(f"[{exc.code}] {exc.message}\n")
        return EXIT_USAGE
    decided = rules_in_force(app).decide(facts)
    out.write(f"tool: {tool} ({facts.risk})\n")
    out.write(f"client: {facts.client}\n")
    if facts.paths:
        out.write(f"paths: {', '.join(facts.paths)}\n")
    if facts.argv is not None:
        out.write(f"argv: {' '.join(facts.argv)}\n")
    if facts.refs:
        out.write(f"refs: {', '.join(facts.refs)}\n")
    if decided is None:
        out.write("decision: none (no rule matches: the profile's own consent rules apply)\n")
        return EXIT_OK
    out.write(f"decision: {decided.rule.effect}\n")
    out.write(f"by: {_describe(decided)}\n")
    out.write(f"reason: {decided.rule.reason}\n")
    return EXIT_OK


def policy_test(app: App, out: TextIO) -> int:
    """Print every rule's examples as passed. The server checked them when it built its chain, so a
    failing example never reaches here: it stopped `build_app` with each failure named."""
    book = rules_in_force(app)
    count = 0
    for rule in book.rules:
        examples = rule.rule.examples
        for kind, listed in (("match", examples.match), ("not_match", examples.not_match)):
            for example in listed:
                count += 1
                call = " ".join(filter(None, (example.tool, json.dumps(example.arguments, sort_keys=True))))
                if example.client != STDIO_CLIENT:
                    call += f" as {example.client}"
                out.write(f"ok  {_describe(rule)}: {kind} {call}\n")
    untested = [rule for rule in book.rules if not (rule.rule.examples.match or rule.rule.examples.not_match)]
    for rule in untested:
        out.write(f"--  {_describe(rule)}: no examples\n")
    out.write(f"{count} example(s) of {len(book.rules)} rule(s) agree with their rules\n")
    return EXIT_OK


def print_rules(app: App, out: TextIO) -> None:
    """The rules in force for `doctor`, strongest tier first, each with its tier and file."""
    book = rules_in_force(app)
    admin = next((source for source in app.rule_sources if source.tier == "admin"), None)
    if admin is None:
        out.write(f"admin policy: none ({ADMIN_POLICY_PATH} absent, {ADMIN_POLICY_ENV} unset)\n")
    else:
        out.write(f"admin policy: {admin.file} ({len(admin.rules)} rule(s), owned by root)\n")
    if not book:
        out.write("rules: none\n")
        return
    out.write("rules, strongest tier first (in each tier the first match; of tiers the strictest):\n")
    for rule in book.rules:
        tools = "*" if rule.tools is None else ",".join(sorted(rule.tools))
        out.write(
            f"  {rule.tier:<6} {rule.rule.effect:<6} {rule.label:<20} tools {tools}: {rule.rule.reason} "
            f"({rule.file})\n"
        )
