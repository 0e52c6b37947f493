"""The chain: order, short-circuit, and building profiles into chains."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from fakes import RecordingNext, make_context
from pydantic import BaseModel, ConfigDict

from oct_mcp.chain import build_chain, compose
from oct_mcp.config import PROFILE_NAMES, McpConfig
from oct_mcp.errors import ConfigError, RefusedError
from oct_mcp.profiles import Profile, shipped_profile
from oct_mcp.registry import SHIPPED_LAYERS
from oct_mcp.spec import Risk, ToolSpec
from oct_mcp.tools import default_catalog
from oct_mcp.types import CallContext, CallNext, LayerRuntime, LayerType, Outcome, ToolResult
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Tracing:
    """Appends `<name>-in` before passing on and `<name>-out` after."""

    name: str
    log: list[str]

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        self.log.append(f"{self.name}-in")
        outcome = await call_next(ctx)
        self.log.append(f"{self.name}-out")
        return outcome


@dataclass(frozen=True)
class Answering:
    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        return ToolResult(text="answered early")


@dataclass(frozen=True)
class Refusing:
    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        raise RefusedError("no")


async def test_compose_runs_the_first_layer_outermost() -> None:
    log: list[str] = []
    endpoint = RecordingNext()
    chain = compose([Tracing("a", log), Tracing("b", log)], endpoint)

    await chain(make_context())

    assert log == ["a-in", "b-in", "b-out", "a-out"]
    assert len(endpoint.seen) == 1


async def test_compose_with_no_layers_is_the_endpoint() -> None:
    endpoint = RecordingNext(outcome=ToolResult(text="direct"))

    outcome = await compose([], endpoint)(make_context())

    assert outcome == ToolResult(text="direct")


async def test_an_answering_layer_short_circuits_everything_inside_it() -> None:
    log: list[str] = []
    endpoint = RecordingNext()
    chain = compose([Tracing("a", log), Answering(), Tracing("c", log)], endpoint)

    outcome = await chain(make_context())

    assert outcome == ToolResult(text="answered early")
    assert log == ["a-in", "a-out"]
    assert endpoint.seen == []


async def test_a_refusing_layer_raises_through_the_outer_layers_and_nothing_inside_runs() -> None:
    log: list[str] = []
    endpoint = RecordingNext()
    chain = compose([Tracing("a", log), Refusing(), Tracing("c", log)], endpoint)

    with pytest.raises(RefusedError):
        await chain(make_context())

    assert log == ["a-in"]
    assert endpoint.seen == []


async def test_a_layer_passes_a_rewritten_context_on() -> None:
    @dataclass(frozen=True)
    class DryRun:
        async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
            return await call_next(replace(ctx, dry_run=True))

    endpoint = RecordingNext()

    await compose([DryRun()], endpoint)(make_context())

    assert endpoint.seen[0].dry_run is True


# -- building profiles -------------------------------------------------------------------------


class _NoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _layer(
    name: str,
    *,
    requires: frozenset[str] = frozenset(),
    provides: frozenset[str] = frozenset(),
    terminal: bool = False,
) -> LayerType:
    log: list[str] = []
    return LayerType(
        name=name,
        settings=_NoSettings,
        build=lambda settings, runtime: Tracing(name, log),
        requires=requires,
        provides=provides,
        terminal=terminal,
    )


TEST_REGISTRY = {
    "writer": _layer("writer", provides=frozenset({"spec", "params"})),
    "reader": _layer("reader", requires=frozenset({"spec"})),
    "plain": _layer("plain"),
    "runner": _layer("runner", requires=frozenset({"params"}), terminal=True),
}


@pytest.fixture
def runtime(tmp_path: Path) -> LayerRuntime:
    return LayerRuntime(
        config=McpConfig(), workspace=Workspace(tmp_path.resolve()), catalog=default_catalog()
    )


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_every_shipped_profile_builds(name: str, runtime: LayerRuntime) -> None:
    profile = shipped_profile(name)

    chain = build_chain(profile, runtime)

    assert chain.layer_names == profile.layers
    assert chain.layer_names[-1] == "sandbox"
    assert all(layer in SHIPPED_LAYERS for layer in profile.layers)


def test_a_good_custom_profile_builds_in_the_given_order(runtime: LayerRuntime) -> None:
    profile = Profile(name="mine", layers=("plain", "writer", "reader", "runner"))

    chain = build_chain(profile, runtime, registry=TEST_REGISTRY)

    assert chain.layer_names == ("plain", "writer", "reader", "runner")


@pytest.mark.parametrize(
    ("layers", "settings", "rule"),
    [
        pytest.param((), {}, "no_layers", id="no layers"),
        pytest.param(("writer", "nosuch", "runner"), {}, "unknown_layer", id="unknown layer"),
        pytest.param(("writer", "plain", "plain", "runner"), {}, "duplicate_layer", id="duplicate layer"),
        pytest.param(("writer", "runner", "plain"), {}, "terminal_not_last", id="terminal not last"),
        pytest.param(("writer", "plain"), {}, "no_terminal", id="no terminal and no endpoint"),
        pytest.param(
            ("reader", "writer", "runner"), {}, "missing_field", id="needed field written only later"
        ),
        pytest.param(("plain", "runner"), {}, "missing_field", id="needed field never written"),
        pytest.param(("writer", "runner"), {"runner": {"speed": 3}}, "bad_settings", id="unknown setting"),
        pytest.param(
            ("writer", "runner"), {"plain": {}}, "unused_settings", id="settings for an absent layer"
        ),
    ],
)
def test_a_bad_profile_fails_with_config_error_naming_the_rule(
    layers: tuple[str, ...], settings: dict[str, dict[str, object]], rule: str, runtime: LayerRuntime
) -> None:
    profile = Profile(name="bad", layers=layers, settings=settings)

    with pytest.raises(ConfigError) as caught:
        build_chain(profile, runtime, registry=TEST_REGISTRY)

    assert (caught.value.code, caught.value.rule) == ("config", rule)


def test_a_terminal_layer_before_another_is_refused_even_with_an_endpoint(runtime: LayerRuntime) -> None:
    profile = Profile(name="bad", layers=("writer", "runner", "plain"))

    with pytest.raises(ConfigError) as caught:
        build_chain(profile, runtime, endpoint=RecordingNext(), registry=TEST_REGISTRY)

    assert caught.value.rule == "terminal_not_last"


def test_a_terminal_layer_cannot_also_take_an_endpoint(runtime: LayerRuntime) -> None:
    profile = Profile(name="both", layers=("writer", "runner"))

    with pytest.raises(ConfigError) as caught:
        build_chain(profile, runtime, endpoint=RecordingNext(), registry=TEST_REGISTRY)

    assert caught.value.rule == "terminal_with_endpoint"


async def test_a_profile_without_a_terminal_runs_the_given_endpoint(runtime: LayerRuntime) -> None:
    endpoint = RecordingNext(outcome=ToolResult(text="host handler"))
    profile = Profile(name="embedded", layers=("writer", "plain"))

    chain = build_chain(profile, runtime, endpoint=endpoint, registry=TEST_REGISTRY)
    outcome = await chain(make_context())

    assert outcome == ToolResult(text="host handler")


def test_a_layer_type_cannot_name_a_field_the_context_lacks() -> None:
    with pytest.raises(ValueError, match="unknown context fields"):
        _layer("typo", requires=frozenset({"parms"}))


def test_the_chain_lists_every_tool_unless_a_layer_hides_it(runtime: LayerRuntime) -> None:
    @dataclass(frozen=True)
    class HidesWrites:
        async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
            return await call_next(ctx)

        def is_visible(self, spec: ToolSpec) -> bool:
            return spec.risk is not Risk.WRITE

    registry = {
        **TEST_REGISTRY,
        "hider": replace(TEST_REGISTRY["plain"], name="hider", build=lambda s, r: HidesWrites()),
    }
    chain = build_chain(Profile(name="p", layers=("hider", "writer", "runner")), runtime, registry=registry)
    read_tool = default_catalog()["oct_read_file"]

    assert chain.is_visible(read_tool) is True
    assert chain.is_visible(replace(read_tool, risk=Risk.WRITE)) is False


def test_a_tool_is_listed_only_when_every_filtering_layer_shows_it(runtime: LayerRuntime) -> None:
    @dataclass(frozen=True)
    class Hides:
        risk: Risk

        async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
            return await call_next(ctx)

        def is_visible(self, spec: ToolSpec) -> bool:
            return spec.risk is not self.risk

    registry = {
        **TEST_REGISTRY,
        "no_writes": replace(TEST_REGISTRY["plain"], name="no_writes", build=lambda s, r: Hides(Risk.WRITE)),
        "no_runs": replace(TEST_REGISTRY["plain"], name="no_runs", build=lambda s, r: Hides(Risk.EXECUTE)),
    }
    profile = Profile(name="p", layers=("no_writes", "no_runs", "writer", "runner"))
    chain = build_chain(profile, runtime, registry=registry)
    read_tool = default_catalog()["oct_read_file"]

    shown = [
        chain.is_visible(replace(read_tool, risk=risk)) for risk in (Risk.READ, Risk.EXECUTE, Risk.WRITE)
    ]

    assert shown == [True, False, False]


def test_warming_the_chain_builds_what_the_redactors_first_call_would(tmp_path: Path) -> None:
    # In a fresh interpreter: the detectors are process-wide, and this test run built them long ago.
    import subprocess
    import sys

    code = """
import sys
from pathlib import Path
from oct_mcp.app import build_app
from oct_mcp.redaction import engine, paths, screen
app = build_app(Path(sys.argv[1]), config_path=Path(sys.argv[1]) / "none.json", environ={})
built = lambda: (engine.keyword_scanner.cache_info().currsize, screen._engines.cache_info().currsize,
                 paths._matchers.cache_info().currsize)
before = built()
app.chain.warm_up()
print(before, built())
"""
    project = tmp_path / "project"
    project.mkdir()

    ran = subprocess.run(
        [sys.executable, "-c", code, str(project)], capture_output=True, text=True, timeout=120, check=True
    )

    assert ran.stdout.split("\n")[0] == "(0, 0, 0) (1, 1, 1)"


def test_warming_calls_each_layer_that_warms_up_and_skips_the_others() -> None:
    warmed: list[str] = []

    @dataclass(frozen=True)
    class Warming:
        name: str

        async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
            return await call_next(ctx)

        def warm_up(self) -> None:
            warmed.append(self.name)

    @dataclass(frozen=True)
    class Plain:
        async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
            return await call_next(ctx)

    from oct_mcp.chain import Chain

    layers = (Warming("outer"), Plain(), Warming("inner"))
    chain = Chain(
        profile="p", layer_names=("a", "b", "c"), layers=layers, call=compose(layers, RecordingNext())
    )

    chain.warm_up()

    assert warmed == ["outer", "inner"]
