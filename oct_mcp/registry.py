"""The layers a profile may name: shipped, installed under the entry point group, or passed in code."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Final

from oct_mcp.errors import ConfigError
from oct_mcp.middleware import audit, gateway, policy, redactor, safety, sandbox, validator
from oct_mcp.types import LayerType

__all__ = ["ENTRY_POINT_GROUP", "SHIPPED_LAYERS", "LayerRegistry", "layer_registry"]

ENTRY_POINT_GROUP: Final = "oct_mcp.layers"
"""An installed distribution offers a layer as `name = "module:LAYER"`, the name a profile uses."""
SHIPPED_ORIGIN: Final = "shipped"
CODE_ORIGIN: Final = "passed in code"

SHIPPED_LAYERS: Final[Mapping[str, LayerType]] = MappingProxyType(
    {
        layer.name: layer
        for layer in (
            audit.LAYER,
            gateway.LAYER,
            validator.LAYER,
            policy.LAYER,
            safety.LAYER,
            redactor.LAYER,
            sandbox.LAYER,
        )
    }
)


class LayerRegistry(Mapping[str, LayerType]):
    """Layer types by the name a profile gives them, and where each came from.

    An installed layer is imported only when a profile names it: a broken package fails the
    profiles that use it, not every start. No layer may take a shipped layer's name, so
    `sandbox` always means the one this package ships.
    """

    def __init__(self, passed: Sequence[LayerType] = (), installed: Sequence[EntryPoint] = ()) -> None:
        self._loaded: dict[str, LayerType] = dict(SHIPPED_LAYERS)
        self._origins: dict[str, str] = dict.fromkeys(SHIPPED_LAYERS, SHIPPED_ORIGIN)
        for layer in passed:
            if layer.name in self._origins:
                raise ConfigError(
                    f"two layers are named {layer.name!r} ({self._origins[layer.name]}, and passed in "
                    "code); give the one passed in code another name"
                )
            self._loaded[layer.name] = layer
            self._origins[layer.name] = CODE_ORIGIN
        self._entry_points: dict[str, EntryPoint] = {}
        for entry in installed:
            origin = f"entry point of {_distribution(entry)}"
            if self._origins.get(entry.name) == SHIPPED_ORIGIN:
                raise ConfigError(
                    f"the installed {_distribution(entry)} offers a layer named {entry.name!r}, which "
                    "is a shipped layer's name; uninstall it or ask its authors to rename the layer"
                )
            if entry.name in self._entry_points:
                raise ConfigError(
                    f"two installed distributions offer a layer named {entry.name!r} "
                    f"({_distribution(self._entry_points[entry.name])}, {_distribution(entry)}); "
                    "uninstall one"
                )
            self._entry_points[entry.name] = entry
            # A layer passed in code stands over an installed one of its name.
            self._origins.setdefault(entry.name, origin)

    def __getitem__(self, name: str) -> LayerType:
        if name in self._loaded:
            return self._loaded[name]
        entry = self._entry_points.get(name)
        if entry is None:
            raise KeyError(name)
        self._loaded[name] = _load(entry)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._origins)

    def __len__(self) -> int:
        return len(self._origins)

    def origin(self, name: str) -> str:
        """`shipped`, `passed in code`, or `entry point of <distribution> <version>`.

        Raises:
            KeyError: No layer has that name.
        """
        return self._origins[name]


def layer_registry(passed: Sequence[LayerType] = ()) -> LayerRegistry:
    """The shipped layers, the installed ones (entry point group `oct_mcp.layers`), and `passed`.

    Raises:
        ConfigError: A layer takes a shipped layer's name, or two installed ones share a name.
    """
    return LayerRegistry(passed, tuple(entry_points(group=ENTRY_POINT_GROUP)))


def _distribution(entry: EntryPoint) -> str:
    dist = entry.dist
    return "an unknown distribution" if dist is None else f"{dist.name} {dist.version}"


def _load(entry: EntryPoint) -> LayerType:
    try:
        loaded = entry.load()
    except Exception as exc:
        raise ConfigError(
            f"the layer {entry.name!r} of {_distribution(entry)} could not be imported "
            f"({type(exc).__name__}); reinstall the package or remove the layer from the profile"
        ) from exc
    if not isinstance(loaded, LayerType) or loaded.name != entry.name:
        raise ConfigError(
            f"the entry point {entry.name!r} of {_distribution(entry)} must name a LayerType "
            f"called {entry.name!r} (oct_mcp.types.LayerType)"
        )
    return loaded
