"""Each rule's examples, run against the rule: a `match` must match it, a `not_match` must not."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from oct_mcp.errors import FieldProblem, InvalidArgumentsError, OctError
from oct_mcp.rules._book import CompiledRule, RuleBook
from oct_mcp.rules._facts import call_facts
from oct_mcp.rules._model import STDIO_CLIENT, CallFacts, Example
from oct_mcp.spec import ToolSpec
from oct_mcp.workspace import Workspace


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
    risk = spec.risk_of(params.model_dump()).risk
    return call_facts(spec, params, workspace, risk=risk, client=client, with_arguments=True)


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
