"""InputValidator: the tool is found, its arguments validated, its paths contained, before next runs."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from fakes import RecordingNext, make_context

from oct_mcp.errors import InvalidArgumentsError, PathRefusedError, UnknownToolError
from oct_mcp.middleware.validator import InputValidator
from oct_mcp.spec import ToolSpec
from oct_mcp.tools import default_catalog
from oct_mcp.tools.files import ListFilesParams, ReadFileParams
from oct_mcp.types import CallContext
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.anyio


@pytest.fixture
def validator() -> InputValidator:
    return InputValidator(catalog=default_catalog())


@pytest.fixture
def call(project: Path) -> Callable[..., CallContext]:
    """A context bound to the project, as the gateway passes it on."""
    return partial(make_context, workspace=Workspace(project))


async def test_validator_writes_spec_and_params_and_passes_on(
    validator: InputValidator, call: Callable[..., CallContext]
) -> None:
    call_next = RecordingNext()

    await validator(call("oct_read_file", path="README.md", start_line=2), call_next)

    (seen,) = call_next.seen
    assert seen.spec == default_catalog()["oct_read_file"]
    assert seen.params == ReadFileParams(path="README.md", start_line=2)


async def test_validator_fills_defaults_of_optional_arguments(
    validator: InputValidator, call: Callable[..., CallContext]
) -> None:
    call_next = RecordingNext()

    await validator(call("oct_list_files"), call_next)

    assert call_next.seen[0].params == ListFilesParams()


async def test_validator_refuses_an_unknown_tool_without_calling_next(
    validator: InputValidator, call: Callable[..., CallContext]
) -> None:
    call_next = RecordingNext()

    with pytest.raises(UnknownToolError) as caught:
        await validator(call("oct_delete_everything"), call_next)

    assert caught.value.code == "unknown_tool"
    assert call_next.seen == []


@pytest.mark.parametrize(
    ("arguments", "bad_fields"),
    [
        pytest.param({"path": "README.md", "mode": "x"}, {"(an unknown field)"}, id="unknown field"),
        pytest.param({}, {"path"}, id="missing field"),
        pytest.param({"path": 3}, {"path"}, id="wrong type"),
        pytest.param({"path": "README.md", "start_line": "2"}, {"start_line"}, id="number as text"),
        pytest.param({"path": "README.md", "start_line": True}, {"start_line"}, id="bool as number"),
        pytest.param({"path": "README.md", "start_line": 0}, {"start_line"}, id="below range"),
        pytest.param({"path": "x" * 5000}, {"path"}, id="overlong string"),
        pytest.param(
            {"path": "README.md", "start_line": 5, "end_line": 2}, {"(arguments)"}, id="range reversed"
        ),
    ],
)
async def test_validator_names_each_bad_field_without_calling_next(
    validator: InputValidator,
    arguments: dict[str, object],
    bad_fields: set[str],
    call: Callable[..., CallContext],
) -> None:
    call_next = RecordingNext()

    with pytest.raises(InvalidArgumentsError) as caught:
        await validator(call("oct_read_file", **arguments), call_next)

    assert {p.field for p in caught.value.problems} == bad_fields
    assert call_next.seen == []


async def test_validator_never_echoes_an_argument_value(
    validator: InputValidator, call: Callable[..., CallContext]
) -> None:
    secret = "ghp_" + "A" * 36

    with pytest.raises(InvalidArgumentsError) as caught:
        await validator(call("oct_read_file", path="README.md", token=secret), RecordingNext())

    assert secret not in caught.value.message


async def test_validator_never_echoes_the_name_of_an_unknown_field(
    validator: InputValidator, call: Callable[..., CallContext]
) -> None:
    secret = "sk-ant-api03-" + "B" * 40

    with pytest.raises(InvalidArgumentsError) as caught:
        await validator(call("oct_read_file", path="README.md", **{secret: 1}), RecordingNext())

    assert secret not in caught.value.message
    assert [p.field for p in caught.value.problems] == ["(an unknown field)"]


async def test_validator_needs_the_gateway_to_have_bound_a_workspace(validator: InputValidator) -> None:
    with pytest.raises(RuntimeError):
        await validator(make_context("oct_read_file", path="README.md"), RecordingNext())


@pytest.mark.parametrize(
    "path", ["../outside.txt", "/etc/passwd", "-rf", "a\x00b", "C:\\Windows", "\\\\server\\share"]
)
async def test_validator_refuses_a_path_that_leaves_the_project(
    validator: InputValidator, path: str, call: Callable[..., CallContext]
) -> None:
    call_next = RecordingNext()

    with pytest.raises(PathRefusedError) as caught:
        await validator(call("oct_read_file", path=path), call_next)

    assert caught.value.code == "path_refused"
    assert call_next.seen == []


async def test_validator_refuses_a_symlink_that_leads_outside(
    validator: InputValidator, project: Path, call: Callable[..., CallContext]
) -> None:
    (project / "escape").symlink_to(project.parent / "outside.txt")

    with pytest.raises(PathRefusedError):
        await validator(call("oct_read_file", path="escape"), RecordingNext())


# -- the chain's `confirm` -------------------------------------------------------------------------


@pytest.mark.parametrize("confirm", [True, False])
async def test_validator_takes_confirm_off_before_the_tools_model_and_says_whether_it_was_true(
    validator: InputValidator, call: Callable[..., CallContext], confirm: bool
) -> None:
    call_next = RecordingNext()

    await validator(call("oct_read_file", path="README.md", confirm=confirm), call_next)

    (seen,) = call_next.seen
    assert (seen.params, seen.confirmed) == (ReadFileParams(path="README.md"), confirm)
    assert seen.arguments == {"path": "README.md", "confirm": confirm}


async def test_validator_passes_a_call_without_confirm_on_as_unconfirmed(
    validator: InputValidator, call: Callable[..., CallContext]
) -> None:
    call_next = RecordingNext()

    await validator(call("oct_read_file", path="README.md"), call_next)

    assert call_next.seen[0].confirmed is False


@pytest.mark.parametrize(
    "confirm",
    [
        pytest.param("true", id="text"),
        pytest.param(1, id="number"),
        pytest.param(None, id="null"),
        pytest.param([True], id="list"),
        pytest.param("sk-ant-api03-" + "C" * 40, id="a secret"),
    ],
)
async def test_validator_refuses_a_confirm_that_is_not_a_boolean_naming_the_field_never_its_value(
    validator: InputValidator, call: Callable[..., CallContext], confirm: object
) -> None:
    call_next = RecordingNext()

    with pytest.raises(InvalidArgumentsError) as caught:
        await validator(call("oct_write_file", path="a.txt", content="x", confirm=confirm), call_next)

    assert caught.value.code == "invalid_arguments"
    assert caught.value.message == (
        "invalid arguments for oct_write_file: confirm: must be true or false (a JSON boolean)"
    )
    assert call_next.seen == []


@pytest.mark.parametrize("spec", default_catalog().values(), ids=lambda spec: spec.name)
async def test_no_tools_model_declares_confirm_and_each_accepts_a_call_carrying_it(
    validator: InputValidator, call: Callable[..., CallContext], spec: ToolSpec
) -> None:
    call_next = RecordingNext()

    with pytest.raises(InvalidArgumentsError) as caught:
        # Missing or not, the tool's own fields are the only problems: `confirm` never is one.
        await validator(call(spec.name, confirm=True, unknown_field=1), call_next)

    assert "confirm" not in spec.params.model_fields
    assert "confirm" not in {p.field for p in caught.value.problems}
