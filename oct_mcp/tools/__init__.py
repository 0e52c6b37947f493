"""The oct tool catalog: each tool a ToolSpec with its params model, risk and plan."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from oct_mcp.spec import ToolSpec
from oct_mcp.tools.files import LIST_FILES, READ_FILE
from oct_mcp.tools.python import FIX, FORMAT, LINT, TEST, TYPECHECK

__all__ = ["default_catalog"]


def default_catalog() -> Mapping[str, ToolSpec]:
    """Every tool this server offers, by name, in the order tools/list shows them."""
    return MappingProxyType(
        {spec.name: spec for spec in (READ_FILE, LIST_FILES, LINT, TEST, TYPECHECK, FORMAT, FIX)}
    )
