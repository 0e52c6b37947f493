"""Layers of one's own: slots a layer declares, layers passed in code, layers installed by entry point."""

from __future__ import annotations

import io
import json
import textwrap
from dataclasses import dataclass, replace
from itertools import count
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from oct_mcp.app import build_app
from oct_mcp.chain import build_chain
from oct_mcp.config import McpConfig
from oct_mcp.doctor import print_doctor
from oct_mcp.errors import ConfigError
from oct_mcp.profiles import Profile
from oct_mcp.registry import ENTRY_POINT_GROUP, SHIPPED_LAYERS, layer_registry
from oct_mcp.testing import RecordingNext, make_context
from oct_mcp.testing.strategies import contexts
from oct_mcp.tools import default_catalog
from oct_mcp.types import CallContext, CallNext, LayerRuntime, LayerType, Outcome, Slot
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.anyio

COUNT = Slot("counter", "count", int)


class _NoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class _Counter:
    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        return await call_next(COUNT.put(ctx, 41))


@dataclass(frozen=True)
class _Reader:
    seen: list[int | None]

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        self.seen.append(COUNT.get(ctx))
        return await call_next(ctx)


READ_COUNTS: list[int | None] = []
COUNTER = LayerType(name="counter", settings=_NoSettings, build=lambda s, r: _Counter(), slots=(COUNT,))
READER = LayerType(
    name="reader",
    settings=_NoSettings,
    build=lambda s, r: _Reader(READ_COUNTS),
    requires=frozenset({COUNT.key}),
)
REGISTRY = {"counter": COUNTER, "reader": READER}


@pytest.fixture
def runtime(tmp_path: Path) -> LayerRuntime:
    return LayerRuntime(
        config=McpConfig(), workspace=Workspace(tmp_path.resolve()), catalog=default_catalog()
    )


async def test_a_layer_reading_a_slot_another_declares_builds_and_reads_its_value(
    runtime: LayerRuntime,
) -> None:
    endpoint = RecordingNext()
    chain = build_chain(
        Profile(name="mine", layers=("counter", "reader")), runtime, endpoint=endpoint, registry=REGISTRY
    )

    await chain(make_context())

    assert READ_COUNTS[-1] == 41
    assert COUNT.get(endpoint.seen[0]) == 41


def test_the_reverse_order_fails_naming_both_layers(runtime: LayerRuntime) -> None:
    with pytest.raises(ConfigError) as refused:
        build_chain(
            Profile(name="mine", layers=("reader", "counter")),
            runtime,
            endpoint=RecordingNext(),
            registry=REGISTRY,
        )

    assert refused.value.code == "config"
    assert "'reader'" in refused.value.message
    assert "'counter'" in refused.value.message
    assert "'counter.count'" in refused.value.message


def test_a_slot_no_layer_of_the_profile_writes_fails(runtime: LayerRuntime) -> None:
    with pytest.raises(ConfigError) as refused:
        build_chain(
            Profile(name="mine", layers=("reader",)), runtime, endpoint=RecordingNext(), registry=REGISTRY
        )

    assert "no earlier layer provides" in refused.value.message


@given(ctx=contexts(), value=st.integers())
def test_a_slot_carries_its_value_and_changes_nothing_else_of_any_context(
    ctx: CallContext, value: int
) -> None:
    carried = COUNT.put(ctx, value)

    assert COUNT.get(carried) == value
    assert replace(carried, layer_data=ctx.layer_data) == ctx


def test_a_slot_is_empty_until_its_layer_puts_a_value_and_holds_only_its_kind() -> None:
    ctx = make_context()

    assert COUNT.get(ctx) is None
    with pytest.raises(TypeError):
        COUNT.put(ctx, "forty-one")  # type: ignore[arg-type]
    assert COUNT.get(COUNT.put(ctx, 1)) == 1
    assert ctx.layer_data == {}


@pytest.mark.parametrize(
    "declaration",
    [
        pytest.param({"slots": (Slot("other", "count", int),)}, id="slot named after another layer"),
        pytest.param(
            {"provides": frozenset({"counter.undeclared"})}, id="provides a slot it does not declare"
        ),
        pytest.param({"requires": frozenset({"no_such_field"})}, id="requires an unknown field"),
        pytest.param({"provides": frozenset({"layer_data"})}, id="names the slots' storage itself"),
    ],
)
def test_a_layer_type_refuses_declarations_it_cannot_keep(declaration: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="counter"):
        LayerType(name="counter", settings=_NoSettings, build=lambda s, r: _Counter(), **declaration)  # type: ignore[arg-type]


# -- where layers come from ----------------------------------------------------------------------

_DISTRIBUTIONS = count()


def _install(site: Path, layer_name: str, *, module_source: str | None = None) -> str:
    """A distribution in `site` whose entry point offers `layer_name`, as pip would leave it installed."""
    number = next(_DISTRIBUTIONS)
    module = f"installed_layer_{number}"
    distribution = f"extra-layer-{number}"
    (site / f"{module}.py").write_text(
        module_source
        or textwrap.dedent(
            f"""
            from dataclasses import dataclass, replace
            from pydantic import BaseModel, ConfigDict
            from oct_mcp.types import LayerType

            class Settings(BaseModel):
                model_config = ConfigDict(extra="forbid")

            @dataclass(frozen=True)
            class Passing:
                async def __call__(self, ctx, call_next, /):
                    return await call_next(ctx)

            LAYER = LayerType(name={layer_name!r}, settings=Settings, build=lambda s, r: Passing())
            """
        )
    )
    info = site / f"{distribution.replace('-', '_')}-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{layer_name} = {module}:LAYER\n")
    return distribution


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_an_installed_layer_is_known_by_its_entry_point_and_builds_in_a_profile(
    site: Path, runtime: LayerRuntime
) -> None:
    distribution = _install(site, "stamp")
    registry = layer_registry()

    chain = build_chain(
        Profile(name="mine", layers=("stamp",)), runtime, endpoint=RecordingNext(), registry=registry
    )

    assert chain.layer_names == ("stamp",)
    assert registry.origin("stamp") == f"entry point of {distribution} 1.2"
    assert registry.origin("sandbox") == "shipped"


def test_an_unknown_layer_fails_listing_the_installed_ones_too(site: Path, runtime: LayerRuntime) -> None:
    _install(site, "stamp")

    with pytest.raises(ConfigError) as refused:
        build_chain(Profile(name="mine", layers=("nosuch", "sandbox")), runtime)

    assert refused.value.message.endswith("known layers: " + ", ".join(sorted({*SHIPPED_LAYERS, "stamp"})))


def test_an_installed_layer_may_not_take_a_shipped_name(site: Path) -> None:
    _install(site, "sandbox")

    with pytest.raises(ConfigError) as refused:
        layer_registry()

    assert "'sandbox'" in refused.value.message


def test_an_unbuildable_profile_lists_the_terminal_layers_even_with_a_broken_one_installed(
    site: Path, runtime: LayerRuntime
) -> None:
    _install(site, "broken", module_source="raise RuntimeError('half installed')\n")

    with pytest.raises(ConfigError) as refused:
        build_chain(Profile(name="mine", layers=("gateway",)), runtime)

    assert refused.value.message.endswith("end it with sandbox")


def test_a_layer_passed_in_code_may_not_take_a_shipped_name() -> None:
    impostor = LayerType(name="safety", settings=_NoSettings, build=lambda s, r: _Counter())

    with pytest.raises(ConfigError) as refused:
        layer_registry([impostor])

    assert "'safety'" in refused.value.message


def test_a_broken_installed_layer_fails_only_the_profiles_that_name_it(
    site: Path, runtime: LayerRuntime
) -> None:
    distribution = _install(site, "broken", module_source="raise RuntimeError('half installed')\n")
    registry = layer_registry()

    fine = Profile(name="fine", layers=("gateway", "validator", "sandbox"))
    broken = Profile(name="mine", layers=("broken", "validator", "sandbox"))

    build_chain(fine, runtime, registry=registry)
    with pytest.raises(ConfigError) as refused:
        build_chain(broken, runtime, registry=registry)

    assert distribution in refused.value.message
    assert "half installed" not in refused.value.message


def test_an_entry_point_must_name_a_layer_type_of_its_own_name(site: Path, runtime: LayerRuntime) -> None:
    _install(site, "misnamed", module_source="from oct_mcp.middleware.policy import LAYER\n")

    with pytest.raises(ConfigError) as refused:
        build_chain(Profile(name="mine", layers=("misnamed", "validator", "sandbox")), runtime)

    assert "LayerType called 'misnamed'" in refused.value.message


def test_build_app_takes_layers_from_code_and_doctor_says_where_each_came_from(
    site: Path, tmp_path: Path
) -> None:
    distribution = _install(site, "stamp")
    project = tmp_path / "project"
    project.mkdir()
    profile = {"layers": ["counter", "reader", "stamp", "gateway", "validator", "sandbox"]}
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {"profile": "mine", "profiles": {"mine": profile}, "audit_log_path": str(tmp_path / "a.log")}
        )
    )

    app = build_app(project, config_path=config, environ={}, layers=[COUNTER, READER])
    out = io.StringIO()
    print_doctor(app, out)

    origins = {
        line.split()[0]: " ".join(line.split()[1:])
        for line in out.getvalue()
        .split("layers a profile may name (where each came from):\n")[1]
        .splitlines()
        if line.startswith("  ")
    }
    assert app.chain.layer_names == tuple(profile["layers"])
    assert origins["counter"] == "passed in code, in this chain"
    assert origins["stamp"] == f"entry point of {distribution} 1.2, in this chain"
    assert origins["audit"] == "shipped"
    assert origins["sandbox"] == "shipped, in this chain"
