"""oct-mcp: a secure MCP server that runs a project's developer tools behind a chain of security layers."""

__version__ = "0.1.0"

from oct_mcp.chain import CallNext, Chain, LayerRuntime, LayerType, Middleware, build_chain, compose
from oct_mcp.config import McpConfig, load_config
from oct_mcp.context import CallContext, ClientInfo, ConsentRequest, Outcome, ToolResult
from oct_mcp.errors import (
    ConfigError,
    ExecutionError,
    InvalidArgumentsError,
    OctError,
    PathRefusedError,
    RefusedError,
)
from oct_mcp.profiles import Profile, resolve_profile, shipped_profile
from oct_mcp.spec import Risk, ToolSpec
from oct_mcp.workspace import Workspace, contain

__all__ = [
    "CallContext",
    "CallNext",
    "Chain",
    "ClientInfo",
    "ConfigError",
    "ConsentRequest",
    "ExecutionError",
    "InvalidArgumentsError",
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
    "ToolResult",
    "ToolSpec",
    "Workspace",
    "__version__",
    "build_chain",
    "compose",
    "contain",
    "load_config",
    "resolve_profile",
    "shipped_profile",
]
