"""Which sandbox backend runs here: each probed once per process, and the one the config names."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from oct_mcp.backends import Availability, Backend
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.native import Native
from oct_mcp.backends.sandbox_exec import SandboxExec
from oct_mcp.errors import ConfigError

__all__ = ["probe_backends", "select_backend"]


@dataclass
class _ProbeCache:
    results: dict[str, Availability] = field(default_factory=dict)


_cache = _ProbeCache()


def _backends() -> Mapping[str, Backend]:
    return {
        "bubblewrap": Bubblewrap(),
        "landlock": LandlockBackend(),
        "sandbox_exec": SandboxExec(),
        "native": Native(),
    }


def _probe(backend: Backend) -> Availability:
    cached = _cache.results.get(backend.name)
    if cached is None:
        cached = _cache.results[backend.name] = backend.probe()
    return cached


def probe_backends() -> list[tuple[str, Availability]]:
    """Every backend with whether it works here (probed once per process)."""
    return [(name, _probe(backend)) for name, backend in _backends().items()]


def select_backend(name: str) -> tuple[Backend, Availability]:
    """The backend `sandbox_backend` names; `auto` picks bubblewrap, then landlock (sandbox_exec on
    macOS), then native.

    Raises:
        ConfigError: An explicitly named backend does not work here (never a silent fallback).
    """
    backends = _backends()
    if name != "auto":
        backend = backends[name]
        availability = _probe(backend)
        if not availability.usable:
            raise ConfigError(
                f"sandbox_backend {name!r} does not work on this machine: {availability.detail}"
            )
        return backend, availability
    order = ["bubblewrap", "landlock", "native"] if sys.platform != "darwin" else ["sandbox_exec", "native"]
    for candidate in order:
        availability = _probe(backends[candidate])
        if availability.usable:
            return backends[candidate], availability
    raise ConfigError("no sandbox backend works on this machine")  # pragma: no cover - native always works
