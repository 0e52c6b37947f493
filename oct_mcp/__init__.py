"""oct-mcp: a secure MCP server that runs a project's developer tools behind a chain of security layers."""

__version__ = "0.1.0"

from oct_mcp.collector import collector_paused as _collector_paused

with _collector_paused():
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
    from oct_mcp.spec import Risk, ToolSpec
    from oct_mcp.types import (
        CallContext,
        CallNext,
        ClientInfo,
        ConsentRequest,
        LayerRuntime,
        LayerType,
        Middleware,
        Outcome,
        Slot,
        ToolResult,
    )
    from oct_mcp.workspace import Workspace, contain

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
