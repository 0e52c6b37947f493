"""InputValidator: arguments checked by each tool's pydantic model, every path contained."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from oct_mcp.consent import CONFIRM_FIELD, without_confirm
from oct_mcp.display import has_format_characters
from oct_mcp.errors import FieldProblem, InvalidArgumentsError, UnknownToolError
from oct_mcp.spec import ToolSpec
from oct_mcp.types import CallContext, CallNext, LayerRuntime, LayerSettings, LayerType, Outcome
from oct_mcp.workspace import NO_FORMAT_CHARACTERS, Workspace

__all__ = [
    "LAYER",
    "InputValidator",
    "ValidatorSettings",
    "take_confirm",
    "validate_and_resolve",
    "validate_arguments",
]

_CONFIRM_PROBLEM: Final = "must be true or false (a JSON boolean)"


class ValidatorSettings(LayerSettings):
    """The validator takes no settings: every tool's arguments are validated and contained."""


def validate_arguments(spec: ToolSpec, arguments: Mapping[str, Any], workspace: Workspace) -> BaseModel:
    """Validate `arguments` with the tool's model and contain every path field in the workspace.

    `validate_and_resolve` without the resolved paths.
    """
    return validate_and_resolve(spec, arguments, workspace)[0]


def validate_and_resolve(
    spec: ToolSpec, arguments: Mapping[str, Any], workspace: Workspace
) -> tuple[BaseModel, tuple[tuple[str, str], ...]]:
    """Validate `arguments` with the tool's model and contain every path field in the workspace.

    Args:
        spec: The tool.
        arguments: As the host sent them.
        workspace: The project root paths must stay inside.

    Returns:
        The validated params, and each path argument with where it resolves (absolute, inside).

    Raises:
        InvalidArgumentsError: Each bad field and why, never its value; a path with format
            characters or line and paragraph separators.
        PathRefusedError: A path field would leave the project root.
    """
    try:
        params = spec.params.model_validate(dict(arguments))
    except ValidationError as exc:
        problems = [
            FieldProblem(field=_field_label(error["loc"], spec), problem=error["msg"])
            for error in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
        raise InvalidArgumentsError(spec.name, problems) from None
    hidden = [
        FieldProblem(field=name, problem=NO_FORMAT_CHARACTERS)
        for name, path in spec.given_paths(params)
        if has_format_characters(path)
    ]
    if hidden:
        raise InvalidArgumentsError(spec.name, hidden)
    resolved = tuple((path, workspace.contain_text(path)) for _field, path in spec.given_paths(params))
    return params, resolved


def take_confirm(spec: ToolSpec, arguments: Mapping[str, Any]) -> tuple[bool, Mapping[str, Any]]:
    """Take the chain's `confirm` off a call's arguments, before the tool's model sees them.

    Args:
        spec: The tool.
        arguments: As the host sent them.

    Returns:
        Whether the call carried `confirm=true`, and the arguments the tool's model validates.

    Raises:
        InvalidArgumentsError: `confirm` is there and not a boolean (its value never repeated).
    """
    if CONFIRM_FIELD not in arguments:
        return False, arguments
    confirm = arguments[CONFIRM_FIELD]
    # Strict, as the tools' models are: "true", 1 or null is a client's mistake, never a consent.
    if not isinstance(confirm, bool):
        raise InvalidArgumentsError(spec.name, [FieldProblem(field=CONFIRM_FIELD, problem=_CONFIRM_PROBLEM)])
    return confirm, without_confirm(arguments)


def _field_label(loc: tuple[int | str, ...], spec: ToolSpec) -> str:
    """Where the problem is, in words safe to send back.

    Field names the model declares are ours; an unknown field's name came from
    the client and could be anything (a secret, a prompt), so it is not repeated.
    """
    known = spec.params.model_fields
    parts = [
        str(part) if isinstance(part, int) or part in known or index > 0 else "(an unknown field)"
        for index, part in enumerate(loc)
    ]
    return ".".join(parts) or "(arguments)"


@dataclass(frozen=True, slots=True)
class InputValidator:
    """Resolve the tool, take the chain's `confirm` off the arguments, and validate the rest.

    Reads `ctx.tool`, `ctx.arguments`, `ctx.workspace`. Writes `ctx.spec`, `ctx.params`, `ctx.confirmed`,
    `ctx.risk`, `ctx.resolved_paths`.
    Raises `UnknownToolError`, `InvalidArgumentsError`, `PathRefusedError`. Never answers.
    """

    catalog: Mapping[str, ToolSpec]

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        spec = self.catalog.get(ctx.tool)
        if spec is None:
            raise UnknownToolError("no tool by that name on this server; tools/list shows the tools")
        if ctx.workspace is None:
            raise RuntimeError("the validator was reached without a workspace")
        confirmed, arguments = take_confirm(spec, ctx.arguments)
        params, resolved = validate_and_resolve(spec, arguments, ctx.workspace)
        # The dump is the costly part: only a tool whose arguments decide its risk needs it.
        risk = spec.own_risk if spec.call_risk is None else spec.risk_of(params.model_dump())
        return await call_next(
            replace(ctx, spec=spec, params=params, confirmed=confirmed, risk=risk, resolved_paths=resolved)
        )


def _build(settings: ValidatorSettings, runtime: LayerRuntime) -> InputValidator:
    return InputValidator(catalog=runtime.catalog)


LAYER: Final = LayerType(
    name="validator",
    settings=ValidatorSettings,
    build=_build,
    requires=frozenset({"workspace"}),
    provides=frozenset({"spec", "params", "confirmed", "risk", "resolved_paths"}),
)
