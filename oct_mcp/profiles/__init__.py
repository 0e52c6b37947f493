"""Profiles are data: an ordered list of layer names (outermost first) and each layer's settings."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Final

from oct_mcp.backends import GUARANTEES
from oct_mcp.config import PROFILE_NAMES, is_profile_name
from oct_mcp.errors import ConfigError

__all__ = [
    "SHIPPED_PROFILES",
    "Profile",
    "profile_from_data",
    "resolve_profile",
    "shipped_profile",
]

SHIPPED_PROFILES: Final = (*PROFILE_NAMES, "embedded")
"""The seed's three, and `embedded` for servers that embed the chain (no sandbox: the host runs its tools)."""
_PROFILE_KEYS: Final = frozenset({"description", "layers", "settings", "guarantees"})


@dataclass(frozen=True, slots=True)
class Profile:
    """An ordered list of layers, outermost first, and the settings of each."""

    name: str
    layers: tuple[str, ...]
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    description: str = ""
    origin: str = "shipped"
    guarantees: frozenset[str] = frozenset()

    @property
    def allows_network(self) -> bool:
        return "no_network" not in self.guarantees


def profile_from_data(name: str, data: Any, origin: str) -> Profile:
    """Check the shape of a profile document (TOML table or JSON object) and make a Profile.

    Which layers exist and what their settings mean is checked when the chain is built.

    Raises:
        ConfigError: The document is not a table with `layers` (a list of names),
            optional `settings` (a table of tables) and optional `description`.
    """
    where = f"profile {name!r} ({origin})"
    if not is_profile_name(name):
        raise ConfigError(f"{where}: a profile name has letters, digits, - and _ only", rule="profile_name")
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a table", rule="profile_not_a_table")
    unknown = set(data) - _PROFILE_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown keys {sorted(unknown)}; a profile has {sorted(_PROFILE_KEYS)}",
            rule="profile_unknown_keys",
        )
    layers = data.get("layers")
    if not isinstance(layers, list) or not all(isinstance(n, str) for n in layers):
        raise ConfigError(
            f"{where}: 'layers' must be a list of layer names, outermost first", rule="profile_layers"
        )
    settings = data.get("settings", {})
    if not isinstance(settings, dict) or not all(isinstance(v, dict) for v in settings.values()):
        raise ConfigError(
            f"{where}: 'settings' must be a table of tables, one per layer", rule="profile_settings"
        )
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{where}: 'description' must be a string", rule="profile_description")
    guarantees = data.get("guarantees", [])
    if not isinstance(guarantees, list) or not set(guarantees) <= GUARANTEES:
        raise ConfigError(
            f"{where}: 'guarantees' must be a list drawn from {sorted(GUARANTEES)}", rule="profile_guarantees"
        )
    return Profile(
        name=name,
        layers=tuple(layers),
        settings=settings,
        description=description,
        origin=origin,
        guarantees=frozenset(guarantees),
    )


def shipped_profile(name: str) -> Profile:
    """Load one of the profiles shipped in this package (`default`, `strict`, `airgapped`).

    Raises:
        ConfigError: No shipped profile has that name.
    """
    if name not in SHIPPED_PROFILES:
        raise ConfigError(
            f"no shipped profile named {name!r}; shipped: {', '.join(SHIPPED_PROFILES)}",
            rule="unknown_profile",
        )
    text = resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return profile_from_data(name, tomllib.loads(text), origin="shipped")


def resolve_profile(name: str, user_profiles: Mapping[str, Any]) -> Profile:
    """The profile called `name`: the user's own (from the config file) first, then the shipped ones.

    A user profile may not take a shipped profile's name: `strict` must always mean
    what this package ships.

    Raises:
        ConfigError: No such profile, a user profile shadows a shipped one, or it is malformed.
    """
    if name in user_profiles:
        if name in SHIPPED_PROFILES:
            raise ConfigError(
                f"the config file defines a profile named {name!r}, which is a shipped profile; rename it",
                rule="profile_shadows_shipped",
            )
        return profile_from_data(name, user_profiles[name], origin="config file")
    if name in SHIPPED_PROFILES:
        return shipped_profile(name)
    known = sorted({*SHIPPED_PROFILES, *user_profiles})
    raise ConfigError(
        f"no profile named {name!r}; known profiles: {', '.join(known)}", rule="unknown_profile"
    )
