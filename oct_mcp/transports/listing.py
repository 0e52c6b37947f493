"""How oct's tools are listed to MCP clients: each ToolSpec as an MCP Tool, its schemas compacted
and its annotations only where they differ from the spec's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import mcp_types as types

from oct_mcp.consent import with_confirm_argument
from oct_mcp.spec import ToolSpec

__all__ = [
    "MAX_RESULT_META_KEY",
    "compact_schema",
    "listed_annotations",
    "listed_input_schema",
    "listed_output_schema",
    "tool_listing",
]

MAX_RESULT_META_KEY: Final = "anthropic/maxResultSizeChars"


def tool_listing(spec: ToolSpec, *, takes_confirm: bool) -> types.Tool:
    """How tools/list shows `spec`; with the chain's `confirm` where a call of it may need consent."""
    input_schema = listed_input_schema(spec.params.model_json_schema())
    if takes_confirm:
        input_schema = with_confirm_argument(input_schema)
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=input_schema,
        output_schema=listed_output_schema(spec.output.model_json_schema())
        if spec.output is not None
        else None,
        annotations=types.ToolAnnotations.model_validate(listed_annotations(spec.annotations)),
        # Claude Code saves a larger result to a file and shows the model its path instead.
        meta={MAX_RESULT_META_KEY: spec.max_result_chars} if spec.max_result_chars is not None else None,
    )


def listed_annotations(annotations: Mapping[str, Any]) -> dict[str, Any]:
    """`annotations` without the hints a client reads the same when they are absent.

    The title is listed once, here, where clients of both protocol eras look for it (a newer
    client reads a tool's `title`, then this one). A hint equal to the protocol's default
    (destructive, not idempotent, open world), or that the protocol reads only of a tool that
    is not read-only (destructiveHint, idempotentHint), goes: it costs every turn and says nothing.
    """
    read_only = annotations.get("readOnlyHint") is True
    listed = dict(annotations)
    for hint, default in _HINT_DEFAULTS.items():
        if hint in listed and (listed[hint] is default or (read_only and hint in _WRITE_HINTS)):
            del listed[hint]
    return listed


_HINT_DEFAULTS: Final[Mapping[str, bool]] = MappingProxyType(
    {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
)
"""MCP's tool annotation defaults: what a client assumes of a hint that is absent."""
_WRITE_HINTS: Final = frozenset({"destructiveHint", "idempotentHint"})
"""Hints MCP says are meaningful only when readOnlyHint is false."""


def listed_output_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """How tools/list shows an output schema: an object with the fields every result carries.

    An output schema is for a client to check results with; the model never reads it, yet
    tools/list carries it into every turn of the host's context (the whole structure was 14,000
    of 55,800 characters). Every result of the tool still passes it (structured content is the
    model's dump: an object with its required fields), a client resolves no `$ref`, and the
    structure itself is the output model's, checked in tests against each tool's real results.
    """
    listed: dict[str, Any] = {"type": "object"}
    required = schema.get("required")
    if isinstance(required, list) and required:
        listed["required"] = list(required)
    return listed


def listed_input_schema(schema: Mapping[str, Any]) -> Any:
    """How tools/list shows an input schema: what a model needs to write a call, compacted.

    Types, enums, required fields, defaults and descriptions stay. Limits (numeric bounds, string
    and list lengths, character patterns) and the closing of the object to other fields go: the
    validator checks the call against the whole model all the same, and refuses what they would
    have refused with `[invalid_arguments]`, naming the limit. So a call the listed schema refuses
    is refused by the server too; the reverse is not kept.
    """
    return _without_limits(compact_schema(schema))


_LIMITS: Final = frozenset(
    {
        "minimum",
        "maximum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "additionalProperties",
    }
)
"""Keywords the listing leaves to the server's validator (`listed_input_schema`)."""


def _without_limits(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_limits(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: (
            {name: _without_limits(value) for name, value in value.items()}
            if key in _SCHEMA_MAPS and isinstance(value, dict)
            else _without_limits(value)
        )
        for key, value in schema.items()
        if key not in _LIMITS
    }


def compact_schema(schema: Any) -> Any:
    """`schema` in fewer characters, accepting the same values.

    tools/list is in every turn of a model's context. Pydantic's generated titles repeat each
    property's name; an optional field's `anyOf` of a type and null is one `type` list; a default
    of null, false or 0 (what an absent field means to anyone) goes; a definition used once is
    written where it is used, so neither the model nor a client follows a `$ref` for it.
    """
    return _compacted(_inline_single_use(schema))


def _compacted(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_compacted(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    # A "title" whose value is a string is a schema's title; under "properties" a field named
    # title maps to a schema, and stays. So does a property named "default".
    compacted = {
        key: (
            {name: _compacted(value) for name, value in value.items()}
            if key in _SCHEMA_MAPS and isinstance(value, dict)
            else _compacted(value)
        )
        for key, value in schema.items()
        if not (key == "title" and isinstance(value, str)) and not (key == "default" and _means_absent(value))
    }
    return _merged_optional(compacted)


def _means_absent(default: Any) -> bool:
    """Whether a default is what an absent field means to anyone: null, false, 0 (an offset, no context)."""
    return default is None or default is False or (type(default) is int and default == 0)


_SCHEMA_MAPS: Final = frozenset({"properties", "$defs", "patternProperties"})
"""Keys whose value maps names to schemas: a name there is not a keyword."""


def _merged_optional(schema: dict[str, Any]) -> dict[str, Any]:
    """`{"anyOf": [{"type": T, ...}, {"type": "null"}], ...}` as `{"type": [T, "null"], ...}`."""
    choices = schema.get("anyOf")
    if not isinstance(choices, list) or len(choices) != 2 or {"type": "null"} not in choices:
        return schema
    (other,) = [choice for choice in choices if choice != {"type": "null"}]
    if not isinstance(other.get("type"), str) or set(other) & set(schema):
        return schema
    merged = {key: value for key, value in schema.items() if key != "anyOf"}
    merged.update(other)
    merged["type"] = [other["type"], "null"]
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    if "const" in merged:
        merged["enum"] = [merged.pop("const"), None]
    return merged


def _inline_single_use(schema: Any) -> Any:
    """`schema` with each `$defs` entry that one `$ref` names written in its place."""
    if not isinstance(schema, dict) or not isinstance(schema.get("$defs"), dict):
        return schema
    definitions: dict[str, Any] = schema["$defs"]
    uses: dict[str, int] = {}

    def count(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_DEFS):
                uses[ref.removeprefix(_DEFS)] = uses.get(ref.removeprefix(_DEFS), 0) + 1
            for value in node.values():
                count(value)
        elif isinstance(node, list):
            for value in node:
                count(value)

    count(schema)
    # A definition that refers to itself, or is named more than once, stays a definition.
    inlined = {name for name, used in uses.items() if used == 1 and name in definitions}
    inlined -= {name for name in inlined if f"{_DEFS}{name}" in repr(definitions[name])}

    def replace(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if len(node) == 1 and isinstance(ref, str) and ref.removeprefix(_DEFS) in inlined:
                return replace(definitions[ref.removeprefix(_DEFS)])
            return {key: replace(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [replace(value) for value in node]
        return node

    result = replace(schema)
    kept = {name: replace(value) for name, value in definitions.items() if name not in inlined}
    if kept:
        result["$defs"] = kept
    return result


_DEFS: Final = "#/$defs/"
