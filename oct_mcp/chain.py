"""compose() and build_chain(): a profile's layers, validated and linked once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from pydantic import ValidationError

from oct_mcp.errors import ConfigError
from oct_mcp.registry import layer_registry
from oct_mcp.telemetry import is_on as telemetry_on
from oct_mcp.telemetry import traced_layer
from oct_mcp.types import (
    CallContext,
    CallNext,
    ConsentGate,
    LayerRuntime,
    LayerType,
    ListFilter,
    Middleware,
    Outcome,
    WarmsUp,
)

if TYPE_CHECKING:
    from oct_mcp.profiles import Profile
    from oct_mcp.spec import ToolSpec

__all__ = ["BASE_FIELDS", "Chain", "build_chain", "compose", "unreachable_endpoint"]

# Fields every CallContext has when it enters the chain; the rest are written by layers.
BASE_FIELDS: Final = frozenset({"tool", "arguments", "client", "call_id"})


async def unreachable_endpoint(ctx: CallContext, /) -> Outcome:
    """The endpoint of a chain built without one: its last layer (the sandbox) answers every call."""
    raise AssertionError("a chain with a terminal layer never reaches its endpoint")


def _link(layer: Middleware, call_next: CallNext) -> CallNext:
    async def call(ctx: CallContext, /) -> Outcome:
        return await layer(ctx, call_next)

    return call


def compose(layers: Sequence[Middleware], endpoint: CallNext, names: Sequence[str] | None = None) -> CallNext:
    """Link `layers` around `endpoint`, once: `layers[0]` is outermost.

    It sees the call first and the outcome last. With `names` (telemetry on), each layer runs in a
    span of its own; without, nothing is added to a call.
    """
    call = endpoint
    for index in reversed(range(len(layers))):
        layer = layers[index]
        call = _link(layer, call) if names is None else traced_layer(names[index], layer, call)
    return call


@dataclass(frozen=True, slots=True)
class Chain:
    """A built chain: call it with a context; ask it which tools to list, and which take `confirm`."""

    profile: str
    layer_names: tuple[str, ...]
    layers: tuple[Middleware, ...]
    call: CallNext

    async def __call__(self, ctx: CallContext, /) -> Outcome:
        return await self.call(ctx)

    def is_visible(self, spec: ToolSpec) -> bool:
        """True unless a layer of this chain hides the tool."""
        return all(layer.is_visible(spec) for layer in self.layers if isinstance(layer, ListFilter))

    def takes_confirm(self, spec: ToolSpec) -> bool:
        """True when a layer of this chain may ask about a call of the tool in a way `confirm=true`
        answers: its listed input schema then carries `confirm`."""
        return any(layer.takes_confirm(spec) for layer in self.layers if isinstance(layer, ConsentGate))

    def warm_up(self) -> None:
        """Do each layer's work before its first call (`WarmsUp`); blocking: call it off the event loop."""
        for layer in self.layers:
            if isinstance(layer, WarmsUp):
                layer.warm_up()


def build_chain(
    profile: Profile,
    runtime: LayerRuntime,
    *,
    endpoint: CallNext | None = None,
    registry: Mapping[str, LayerType] | None = None,
) -> Chain:
    """Validate `profile` and build its layers, outermost first.

    Args:
        profile: The ordered layer names and their settings.
        runtime: Config, workspace and catalog the layers are built with.
        endpoint: What the innermost layer calls; needed only when the
            profile has no terminal layer (an embedding host's own handler).
        registry: Layer types by name; when None, the shipped layers and those
            installed under the `oct_mcp.layers` entry point group.

    Returns:
        The chain, ready for concurrent calls.

    Raises:
        ConfigError: Unknown or duplicate layer, terminal layer not last, no
            terminal and no endpoint, a needed context field no earlier layer
            provides, or settings the layer does not accept.
    """
    if registry is None:
        registry = layer_registry()
    where = f"profile {profile.name!r}"
    types = _check_layer_order(profile, registry, has_endpoint=endpoint is not None)
    unused = set(profile.settings) - set(profile.layers)
    if unused:
        raise ConfigError(
            f"{where} has settings for layers it does not use: {', '.join(sorted(unused))}",
            rule="unused_settings",
        )
    layers: list[Middleware] = []
    for layer_type in types:
        raw_settings = profile.settings.get(layer_type.name, {})
        try:
            settings = layer_type.settings.model_validate(raw_settings)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(table)'}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)
            )
            raise ConfigError(
                f"{where}: bad settings for layer {layer_type.name!r}: {problems}", rule="bad_settings"
            ) from None
        layers.append(
            layer_type.build(settings, replace(runtime, profile=profile.name, guarantees=profile.guarantees))
        )
    return Chain(
        profile=profile.name,
        layer_names=profile.layers,
        layers=tuple(layers),
        call=compose(
            layers,
            endpoint if endpoint is not None else unreachable_endpoint,
            names=[layer_type.name for layer_type in types] if telemetry_on() else None,
        ),
    )


def _check_layer_order(
    profile: Profile, registry: Mapping[str, LayerType], *, has_endpoint: bool
) -> list[LayerType]:
    where = f"profile {profile.name!r}"
    if not profile.layers:
        raise ConfigError(f"{where} lists no layers", rule="no_layers")
    seen: set[str] = set()
    available = set(BASE_FIELDS)
    types: list[LayerType] = []
    for position, name in enumerate(profile.layers):
        layer_type = registry.get(name)
        if layer_type is None:
            raise ConfigError(
                f"{where}: unknown layer {name!r}; known layers: {', '.join(sorted(registry))}",
                rule="unknown_layer",
            )
        if name in seen:
            raise ConfigError(f"{where}: layer {name!r} is listed twice", rule="duplicate_layer")
        seen.add(name)
        if layer_type.terminal and position != len(profile.layers) - 1:
            raise ConfigError(
                f"{where}: {name!r} runs the tool itself, so it must be the last layer",
                rule="terminal_not_last",
            )
        if layer_type.terminal and has_endpoint:
            raise ConfigError(
                f"{where}: {name!r} runs the tool itself, so the chain cannot take an endpoint",
                rule="terminal_with_endpoint",
            )
        missing = layer_type.requires - available
        if missing:
            raise ConfigError(
                _missing_message(where, name, sorted(missing), profile, registry, position),
                rule="missing_field",
            )
        available |= layer_type.writes
        types.append(layer_type)
    if not types[-1].terminal and not has_endpoint:
        terminals = sorted(name for name in registry if _is_terminal(registry, name))
        raise ConfigError(
            f"{where} has no layer that runs tools; end it with {' or '.join(terminals)}", rule="no_terminal"
        )
    return types


def _missing_message(
    where: str,
    name: str,
    missing: list[str],
    profile: Profile,
    registry: Mapping[str, LayerType],
    position: int,
) -> str:
    later = {
        needed: other
        for other in profile.layers[position + 1 :]
        if other in registry
        for needed in missing
        if needed in registry[other].writes
    }
    if later:
        writers = ", ".join(
            f"{needed!r} is written by {writer!r}" for needed, writer in sorted(later.items())
        )
        return (
            f"{where}: layer {name!r} needs what a later layer writes ({writers}); "
            f"put the writer before {name!r}"
        )
    return (
        f"{where}: layer {name!r} needs {', '.join(missing)}, "
        "which no earlier layer provides; put the layer that writes it before"
    )


def _is_terminal(registry: Mapping[str, LayerType], name: str) -> bool:
    """Whether `name` runs tools; an installed layer that cannot be imported counts as not."""
    try:
        return registry[name].terminal
    except ConfigError:
        return False
