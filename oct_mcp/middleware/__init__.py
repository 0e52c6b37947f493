"""The layers of the chain, one module each, and the registry profiles name them from."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from oct_mcp.chain import LayerType
from oct_mcp.middleware import audit, gateway, policy, redactor, safety, sandbox, validator

__all__ = ["REGISTRY"]

REGISTRY: Final[Mapping[str, LayerType]] = MappingProxyType(
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
