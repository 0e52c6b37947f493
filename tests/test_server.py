"""The server through the SDK's own Client, in memory, in both protocol eras."""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from clients import hints, only_text
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from pydantic import BaseModel, ConfigDict
from structlog.testing import capture_logs

from oct_mcp.app import App, build_app
from oct_mcp.chain import build_chain
from oct_mcp.errors import INTERNAL_ERROR_MESSAGE
from oct_mcp.middleware.safety import CONFIRMATION_PREFIX
from oct_mcp.profiles import Profile, shipped_profile
from oct_mcp.registry import SHIPPED_LAYERS
from oct_mcp.server import (
    build_server,
    compact_schema,
    listed_annotations,
    listed_input_schema,
    listed_output_schema,
)
from oct_mcp.spec import Risk
from oct_mcp.tools import default_catalog
from oct_mcp.transports.consent_adapter import to_call_tool_result
from oct_mcp.types import CallContext, CallNext, ConsentRequest, LayerRuntime, LayerType, Outcome

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

MODES = ["auto", "legacy"]
SECRET_DETAIL = "secret internal detail /etc/shadow"  # noqa: S105 - a stand-in, not a credential


@pytest.fixture
def app(project: Path, config_file: Path) -> App:
    return build_app(project, config_path=config_file, environ={})


@pytest.mark.parametrize("mode", MODES)
async def test_list_tools_shows_the_catalog_with_schemas_and_annotations(app: App, mode: Any) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            listed = await client.list_tools()

    tools = {tool.name: tool for tool in listed.tools}
    assert list(tools) == list(default_catalog())
    read = tools["oct_read_file"]
    assert read.input_schema["required"] == ["path"]
    assert read.output_schema == {
        "type": "object",
        "required": ["path", "text", "start_line", "end_line", "total_lines"],
    }
    assert read.annotations is not None
    assert read.annotations.title == "Read a project file"
    assert hints(read) == (True, False, True, False)
    assert hints(tools["oct_edit"]) == (False, True, False, False)


@pytest.mark.parametrize("mode", MODES)
async def test_read_file_returns_text_and_structured_content(app: App, mode: Any) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            result = await client.call_tool("oct_read_file", {"path": "README.md", "start_line": 3})

    assert result.is_error is False
    assert only_text(result) == "line 3\nline 4\n"
    assert result.structured_content == {
        "path": "README.md",
        "text": "line 3\nline 4\n",
        "start_line": 3,
        "end_line": 4,
        "total_lines": 4,
    }


@pytest.mark.parametrize("mode", MODES)
async def test_list_files_skips_what_gitignore_ignores(app: App, mode: Any) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            result = await client.call_tool("oct_list_files", {})

    assert result.is_error is False
    assert only_text(result).splitlines() == [
        ".gitignore",
        "README.md",
        "src/pkg/__init__.py",
        "src/pkg/core.py",
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "--help"])
async def test_a_path_outside_the_project_is_refused_with_a_stable_code(
    app: App, mode: Any, path: str
) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            result = await client.call_tool("oct_read_file", {"path": path})

    assert result.is_error is True
    assert only_text(result).startswith("[path_refused] ")
    assert path not in only_text(result)
    assert result.structured_content is None


@pytest.mark.parametrize("mode", MODES)
async def test_bad_arguments_are_a_tool_error_naming_the_field(app: App, mode: Any) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            result = await client.call_tool("oct_read_file", {"path": "README.md", "start_line": "two"})

    assert result.is_error is True
    assert only_text(result).startswith(
        "[invalid_arguments] invalid arguments for oct_read_file: start_line:"
    )


@pytest.mark.parametrize("mode", MODES)
async def test_an_unknown_tool_is_a_tool_error(app: App, mode: Any) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            result = await client.session.call_tool("oct_nope", {})

    assert result.is_error is True
    assert only_text(result).startswith("[unknown_tool] ")


class _Crashing:
    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        raise RuntimeError(SECRET_DETAIL)


class _NoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")


@pytest.mark.parametrize("mode", MODES)
async def test_an_exception_inside_the_chain_never_reaches_the_client_as_text(app: App, mode: Any) -> None:
    registry = {
        **SHIPPED_LAYERS,
        "crash": LayerType(name="crash", settings=_NoSettings, build=lambda s, r: _Crashing()),
    }
    runtime = LayerRuntime(config=app.loaded.config, workspace=app.workspace, catalog=app.catalog)
    chain = build_chain(
        Profile(name="crashy", layers=("crash", "gateway", "validator", "sandbox")),
        runtime,
        registry=registry,
    )
    crashing_app = replace(app, chain=chain)

    with capture_logs() as logs, anyio.fail_after(10):
        async with Client(build_server(crashing_app, transport="memory"), mode=mode) as client:
            result = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert result.is_error is True
    assert only_text(result) == f"[internal_error] {INTERNAL_ERROR_MESSAGE}"
    assert SECRET_DETAIL not in str(result.model_dump())
    crashed = [log for log in logs if log["event"] == "call_crashed"]
    assert len(crashed) == 1
    assert crashed[0]["exc_info"] is True


def test_a_consent_request_becomes_the_seed_sentinel_text() -> None:
    message = f"{CONFIRMATION_PREFIX} oct_format would change files\nArguments digest: sha256:abc"
    result = to_call_tool_result(ConsentRequest(tool="oct_format", digest="sha256:abc", message=message))

    assert result.is_error is True
    assert only_text(result) == message


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_outside_a_profiles_allowlist_is_neither_listed_nor_callable(
    project: Path, config_file: Path, mode: Any
) -> None:
    config_file.write_text(
        json.dumps(
            {
                "profile": "readonly",
                "profiles": {
                    "readonly": {
                        "layers": ["gateway", "validator", "policy", "sandbox"],
                        "settings": {"policy": {"tools": ["oct_read_file"]}},
                    }
                },
            }
        )
    )
    app = build_app(project, config_path=config_file, environ={})

    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            listed = await client.list_tools()
            refused = await client.session.call_tool("oct_list_files", {})

    assert [tool.name for tool in listed.tools] == ["oct_read_file"]
    assert refused.is_error is True
    assert only_text(refused).startswith("[policy] ")


@pytest.mark.parametrize("mode", MODES)
async def test_safe_mode_refuses_every_call_through_the_server(
    project: Path, config_file: Path, mode: Any
) -> None:
    app = build_app(project, config_path=config_file, environ={"OCT_MCP_SAFE_MODE": "1"})

    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            result = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert result.is_error is True
    assert only_text(result).startswith("[safe_mode] oct-mcp is in safe mode")


@pytest.mark.parametrize("profile", ["default", "strict", "airgapped"])
def test_each_shipped_profile_lists_the_whole_catalog(project: Path, config_file: Path, profile: str) -> None:
    app = build_app(project, profile=profile, config_path=config_file, environ={})

    assert [spec.name for spec in app.visible_tools()] == list(app.catalog)


async def test_strict_caps_the_rate_limit(project: Path, config_file: Path) -> None:
    config_file.write_text(json.dumps({"rate_limit_per_minute": 500}))
    app = build_app(project, profile="strict", config_path=config_file, environ={})

    async with Client(build_server(app, transport="memory")) as client:
        results = [await client.call_tool("oct_read_file", {"path": "README.md"}) for _ in range(21)]

    assert [r.is_error for r in results] == [False] * 20 + [True]
    assert only_text(results[-1]).startswith("[rate_limited] rate limited: at most 20 calls per minute")


def test_listed_schemas_leave_out_generated_titles_and_keep_a_field_named_title() -> None:
    schema = {
        "title": "Model",
        "properties": {"title": {"title": "Title", "type": "string"}, "n": {"title": "N", "type": "integer"}},
        "$defs": {"Inner": {"title": "Inner", "anyOf": [{"title": "A", "type": "string"}]}},
    }

    assert compact_schema(schema) == {
        "properties": {"title": {"type": "string"}, "n": {"type": "integer"}},
        "$defs": {"Inner": {"anyOf": [{"type": "string"}]}},
    }


# -- `confirm` in the listing ------------------------------------------------------------------------

CATALOG = default_catalog()
# A write asks; so may a tool whose arguments decide its risk (oct_run with writes=true, oct_format).
ASKING_BY_DEFAULT = {
    name for name, spec in CATALOG.items() if spec.risk is Risk.WRITE or spec.call_risk is not None
}
DEFAULT_LAYERS = list(shipped_profile("default").layers)


def _profile(name: str, layers: list[str], **safety: object) -> dict[str, object]:
    settings: dict[str, object] = {"policy": {"tools": ["*"]}}
    if safety:
        settings["safety"] = safety
    return {"profile": name, "profiles": {name: {"layers": layers, "settings": settings}}}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param({}, ASKING_BY_DEFAULT, id="default"),
        pytest.param({"auto_approve_read_tools": False}, set(CATALOG), id="reads need consent"),
        pytest.param(
            _profile("running_asks", DEFAULT_LAYERS, confirm_execute=True),
            ASKING_BY_DEFAULT | {name for name, spec in CATALOG.items() if spec.risk is Risk.EXECUTE},
            id="confirm_execute",
        ),
        pytest.param(
            {"profile": "strict", "auto_approve_read_tools": False}, set(), id="strict: a human answers"
        ),
        pytest.param(
            {
                **_profile("ungated", [n for n in DEFAULT_LAYERS if n != "safety"]),
                "auto_approve_read_tools": False,
            },
            set(),
            id="no safety layer",
        ),
    ],
)
async def test_the_listing_offers_confirm_exactly_for_the_tools_whose_calls_it_may_settle(
    project: Path, config_file: Path, config: dict[str, Any], expected: set[str]
) -> None:
    config_file.write_text(json.dumps(config))
    app = build_app(project, config_path=config_file, environ={})

    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory")) as client:
            listed = await client.list_tools()

    offering = {tool.name for tool in listed.tools if "confirm" in tool.input_schema.get("properties", {})}
    assert offering == expected


@pytest.mark.parametrize("mode", MODES)
async def test_the_listed_confirm_is_an_optional_boolean_after_the_tools_own_arguments(
    app: App, mode: Any
) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            listed = await client.list_tools()

    schema = next(tool.input_schema for tool in listed.tools if tool.name == "oct_write_file")
    assert list(schema["properties"]) == ["path", "content", "dry_run", "confirm"]
    assert schema["properties"]["confirm"] == {"type": "boolean"}
    assert "confirm" not in schema["required"]


def test_an_optional_field_is_one_type_list_and_a_default_an_absent_field_means_goes() -> None:
    optional = {"anyOf": [{"type": "string", "maxLength": 9}, {"type": "null"}], "default": None}
    choice = {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}]}
    both = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    defaults = {"properties": {"default": optional, "n": {"type": "integer", "default": 0}}}
    kept = {
        "properties": {"flag": {"type": "boolean", "default": True}, "n": {"type": "integer", "default": 3}}
    }

    assert compact_schema(optional) == {"type": ["string", "null"], "maxLength": 9}
    assert compact_schema(choice) == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert compact_schema(both) == both
    assert compact_schema(defaults) == {
        "properties": {"default": {"type": ["string", "null"], "maxLength": 9}, "n": {"type": "integer"}}
    }
    assert compact_schema(kept) == kept


def test_a_listed_input_schema_keeps_what_a_model_writes_a_call_with_and_leaves_limits_to_the_server() -> (
    None
):
    schema = {
        "additionalProperties": False,
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "maxLength": 9,
                "pattern": "^a",
                "description": "d",
            },
            "mode": {"enum": ["x", "y"], "type": "string", "default": "x"},
            "n": {"type": "integer", "minimum": 1, "maximum": 9, "default": 5},
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        },
        "required": ["pattern"],
        "type": "object",
    }

    assert listed_input_schema(schema) == {
        "properties": {
            "pattern": {"type": "string", "description": "d"},
            "mode": {"enum": ["x", "y"], "type": "string", "default": "x"},
            "n": {"type": "integer", "default": 5},
            "items": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["pattern"],
        "type": "object",
    }


def test_a_listed_output_schema_is_an_object_with_the_fields_every_result_carries() -> None:
    schema = {
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"type": "integer", "default": 0}},
        "required": ["a"],
        "$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "type": "object",
    }

    assert listed_output_schema(schema) == {"type": "object", "required": ["a"]}
    assert listed_output_schema({"properties": {}, "type": "object"}) == {"type": "object"}


def test_listed_annotations_leave_out_what_a_client_reads_the_same_when_absent() -> None:
    read = {
        "title": "R",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    write = {
        "title": "W",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    gentle = {
        "title": "G",
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": True,
    }

    assert listed_annotations(read) == {"title": "R", "readOnlyHint": True, "openWorldHint": False}
    assert listed_annotations(write) == {"title": "W", "openWorldHint": False}
    assert listed_annotations(gentle) == {"title": "G", "destructiveHint": False, "idempotentHint": True}


def test_a_definition_used_once_is_written_in_place_and_one_used_twice_stays() -> None:
    schema = {
        "properties": {
            "one": {"$ref": "#/$defs/Once"},
            "a": {"$ref": "#/$defs/Twice"},
            "b": {"items": {"$ref": "#/$defs/Twice"}, "type": "array"},
        },
        "$defs": {
            "Once": {"properties": {"x": {"type": "integer"}}, "type": "object"},
            "Twice": {"properties": {"y": {"type": "string"}}, "type": "object"},
        },
    }

    assert compact_schema(schema) == {
        "properties": {
            "one": {"properties": {"x": {"type": "integer"}}, "type": "object"},
            "a": {"$ref": "#/$defs/Twice"},
            "b": {"items": {"$ref": "#/$defs/Twice"}, "type": "array"},
        },
        "$defs": {"Twice": {"properties": {"y": {"type": "string"}}, "type": "object"}},
    }


def _values(names: list[str]) -> st.SearchStrategy[object]:
    """JSON values shaped like the tools' arguments and results: objects keyed by their own names."""
    scalars = (
        st.none() | st.booleans() | st.integers(-3, 50_000) | st.sampled_from(["", "a", "lines", "x" * 1100])
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(names), inner, max_size=6)
        ),
        max_leaves=12,
    )


def _names(schema: object) -> set[str]:
    if isinstance(schema, dict):
        found = set(schema.get("properties", {})) if isinstance(schema.get("properties"), dict) else set()
        return found.union(*(_names(value) for value in schema.values()))
    if isinstance(schema, list):
        return set().union(*(_names(value) for value in schema))
    return set()


Validators = tuple[
    jsonschema.Draft202012Validator, jsonschema.Draft202012Validator, jsonschema.Draft202012Validator
]


@functools.cache
def _schema_pairs(name: str) -> tuple[tuple[Validators, list[str]], ...]:
    """Validators of each of a tool's generated schemas, its compacted and its listed form; its names."""
    spec = CATALOG[name]
    generated = [(spec.params.model_json_schema(), listed_input_schema)]
    if spec.output is not None:
        generated.append((spec.output.model_json_schema(), listed_output_schema))
    return tuple(
        (
            (
                jsonschema.Draft202012Validator(schema),
                jsonschema.Draft202012Validator(compact_schema(schema)),
                jsonschema.Draft202012Validator(listed(schema)),
            ),
            sorted(_names(schema)) or ["x"],
        )
        for schema, listed in generated
    )


@pytest.mark.parametrize("name", list(CATALOG))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_compacted_schema_accepts_exactly_what_the_generated_one_does_and_the_listed_one_no_less(
    name: str, data: st.DataObject
) -> None:
    for (generated, compacted, listed), names in _schema_pairs(name):
        value = data.draw(st.dictionaries(st.sampled_from(names), _values(names), max_size=len(names)))
        valid = generated.is_valid(value)
        assert compacted.is_valid(value) is valid, value
        # What a client checks before sending, or checks a result with, never refuses what the server takes.
        assert listed.is_valid(value) or not valid, value


LISTING_BUDGET_CHARS = 20_000
"""The default profile's tools/list, compact JSON, every tool kept: 58,010 characters before the
listing was made for a model's context (README, "Tools"; `benchmarks/catalog.py` measures it)."""


@pytest.mark.parametrize("mode", MODES)
async def test_the_default_listing_stays_within_its_budget(app: App, mode: Any) -> None:
    with anyio.fail_after(10):
        async with Client(build_server(app, transport="memory"), mode=mode) as client:
            listed = await client.list_tools()

    tools = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listed.tools]
    assert len(tools) == len(CATALOG)
    assert len(json.dumps({"tools": tools}, separators=(",", ":"))) <= LISTING_BUDGET_CHARS
