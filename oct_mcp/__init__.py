"""oct-mcp: a secure MCP server that runs a project's developer tools behind a chain of security layers."""

import typing as _typing

from oct_mcp.lazy_names import lazy_names as _lazy_names

__version__ = "0.1.0"

if _typing.TYPE_CHECKING:
    from oct_mcp.chain import Chain, build_chain, compose
    from oct_mcp.config import McpConfig, load_config
    from oct_mcp.errors import (
        ConfigError,
        ExecutionError,
        InvalidArgumentsError,
        OctError,
        PathRefusedError,
        RefusedError,
    )
    from oct_mcp.middleware.safety import SafetyDecision, SafetyGate
    from oct_mcp.profiles import Profile, resolve_profile, shipped_profile
    from oct_mcp.registry import ENTRY_POINT_GROUP, LayerRegistry, layer_registry
    from oct_mcp.spec import ToolSpec
    from oct_mcp.types import (
        CallContext,
        CallNext,
        ClientInfo,
        ConsentRequest,
        LayerRuntime,
        LayerType,
        Middleware,
        Outcome,
        Risk,
        Slot,
        ToolResult,
    )
    from oct_mcp.workspace import Workspace, contain

# Loaded on first use (PEP 562): `import oct_mcp.types`, or the `oct-mcp` command, runs this file
# first, and loading the chain, the layers and every tool here cost each of them about 300 ms
# (`python -X importtime -c "import oct_mcp.cli"`) before it knew what it needed.
_WHERE: dict[str, str] = {
    "Chain": "chain",
    "build_chain": "chain",
    "compose": "chain",
    "McpConfig": "config",
    "load_config": "config",
    "ConfigError": "errors",
    "ExecutionError": "errors",
    "InvalidArgumentsError": "errors",
    "OctError": "errors",
    "PathRefusedError": "errors",
    "RefusedError": "errors",
    "SafetyDecision": "middleware.safety",
    "SafetyGate": "middleware.safety",
    "Profile": "profiles",
    "resolve_profile": "profiles",
    "shipped_profile": "profiles",
    "ENTRY_POINT_GROUP": "registry",
    "LayerRegistry": "registry",
    "layer_registry": "registry",
    "Risk": "types",
    "ToolSpec": "spec",
    "CallContext": "types",
    "CallNext": "types",
    "ClientInfo": "types",
    "ConsentRequest": "types",
    "LayerRuntime": "types",
    "LayerType": "types",
    "Middleware": "types",
    "Outcome": "types",
    "Slot": "types",
    "ToolResult": "types",
    "Workspace": "workspace",
    "contain": "workspace",
}


__getattr__, __dir__ = _lazy_names(__name__, _WHERE, globals())

__all__ = [
    "ENTRY_POINT_GROUP",
    "CallContext",
    "CallNext",
    "Chain",
    "ClientInfo",
    "ConfigError",
    "ConsentRequest",
    "ExecutionError",
    "InvalidArgumentsError",
    "LayerRegistry",
    "LayerRuntime",
    "LayerType",
    "McpConfig",
    "Middleware",
    "OctError",
    "Outcome",
    "PathRefusedError",
    "Profile",
    "RefusedError",
    "Risk",
    "SafetyDecision",
    "SafetyGate",
    "Slot",
    "ToolResult",
    "ToolSpec",
    "Workspace",
    "__version__",
    "build_chain",
    "compose",
    "contain",
    "layer_registry",
    "load_config",
    "resolve_profile",
    "shipped_profile",
]
