"""A package's names loaded on first use (PEP 562): the package imports none of its heavy modules
until a caller asks for a name one of them defines."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from oct_mcp.collector import collector_paused

__all__ = ["lazy_names"]


def lazy_names(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's `__getattr__` and `__dir__`.

    Args:
        package: The package's `__name__`.
        where: Each name, and the submodule (relative to the package) that defines it.
        namespace: The package's `globals()`: a name loaded once is kept there, so later reads are
            plain attribute reads.
    """

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        with collector_paused():  # the models a module builds as it loads (collector.py)
            value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted({*namespace, *where})

    return load, names
