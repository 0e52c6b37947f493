"""`oct-mcp install HOST` and `uninstall HOST`: this server in a host's MCP config, its own tools off.

The modules behind this one are private: what the package offers is what `__all__` names.
"""

from __future__ import annotations

from oct_mcp.install._hosts import (
    CLAUDE_CODE_DENY,
    DEFAULT_NAME,
    HOSTS,
    FileChange,
    HostConfigError,
    InstallPlan,
    ProjectRootError,
    ServerCommand,
    claude_desktop_config,
    server_command,
)
from oct_mcp.install._plans import apply_plan, plan_install, plan_uninstall, render_plan

__all__ = [
    "CLAUDE_CODE_DENY",
    "DEFAULT_NAME",
    "HOSTS",
    "FileChange",
    "HostConfigError",
    "InstallPlan",
    "ProjectRootError",
    "ServerCommand",
    "apply_plan",
    "claude_desktop_config",
    "plan_install",
    "plan_uninstall",
    "render_plan",
    "server_command",
]
