"""The import rules of the design: layers stand alone, only server, transports and embed speak MCP."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

import oct_mcp

PACKAGE = Path(oct_mcp.__file__).parent
SDK_MODULES = ("mcp", "mcp_types", "fastmcp")


def _imports(path: Path) -> Iterator[str]:
    module_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module_parts[: len(module_parts) - node.level]
                base = ".".join((*parent, base) if base else parent)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _is_under(name: str, *modules: str) -> bool:
    return any(name == m or name.startswith(f"{m}.") for m in modules)


LAYER_FILES = sorted(p for p in (PACKAGE / "middleware").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("path", LAYER_FILES, ids=lambda p: p.stem)
def test_a_layer_imports_no_sdk_no_server_no_tools_and_no_other_layer(path: Path) -> None:
    other_layers = [f"oct_mcp.middleware.{p.stem}" for p in LAYER_FILES if p != path]
    forbidden = (
        *SDK_MODULES,
        "oct_mcp.server",
        "oct_mcp.embed",
        "oct_mcp.tools",
        "oct_mcp.cli",
        *other_layers,
    )

    assert [name for name in _imports(path) if _is_under(name, *forbidden)] == []


# server.py, the transports and the embed package are the modules allowed to speak MCP.
NOT_MCP_FILES = sorted(
    p
    for p in PACKAGE.rglob("*.py")
    if p.relative_to(PACKAGE).parts[0] not in ("server.py", "transports", "embed")
)


@pytest.mark.parametrize("path", NOT_MCP_FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_server_transports_and_embed_import_the_sdk(path: Path) -> None:
    assert [name for name in _imports(path) if _is_under(name, *SDK_MODULES)] == []


@pytest.mark.parametrize("path", sorted((PACKAGE / "tools").rglob("*.py")), ids=lambda p: p.stem)
def test_tools_do_not_import_the_middleware(path: Path) -> None:
    assert [name for name in _imports(path) if _is_under(name, "oct_mcp.middleware")] == []


def test_the_public_api_exports_exactly_its_all() -> None:
    # Submodules become attributes once imported anywhere; they are not part of the API list.
    public = {
        name
        for name, value in vars(oct_mcp).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }

    assert public == set(oct_mcp.__all__) - {"__version__"}


def test_the_seed_names_import_from_the_package() -> None:
    from oct_mcp import McpConfig, load_config

    assert isinstance(load_config(PACKAGE / "no-such-config.json"), McpConfig)
