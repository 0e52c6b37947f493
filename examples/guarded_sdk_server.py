"""An MCP server of your own, guarded by oct-mcp's chain in one line.

Run it over stdio: `python examples/guarded_sdk_server.py --project-root /path/to/project`.
Its read tools run freely; its destructive tool asks the user first; a path argument is kept
inside the project; a secret in its output is masked; every call is in the audit log; its
resources pass untouched.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from oct_mcp.embed import ForeignTool, guard


def build(project_root: Path, notes: dict[str, str]) -> MCPServer:
    """The host server, its own tools and resource; not yet guarded."""
    server = MCPServer("notes")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def read_note(name: str) -> str:
        """Read one note."""
        return notes.get(name, "no such note")

    @server.tool()
    def delete_note(name: str) -> str:
        """Delete one note (destructive: it says nothing of being read-only)."""
        return "deleted" if notes.pop(name, None) is not None else "no such note"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def read_file(path: str) -> str:
        """Read a file of the project."""
        return (project_root / path).read_text()

    @server.resource("notes://index")
    def index() -> str:
        """Every note's name."""
        return ", ".join(sorted(notes))

    return server


# oct-mcp contains `read_file`'s `path` inside the project, as it does for its own tools.
TOOLS = {"read_file": ForeignTool(path_arguments=("path",))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--project-root", type=Path, default=Path("."))
    parser.add_argument("--config", type=Path, help="oct-mcp config file (default: ~/.oct-mcp/config.json)")
    args = parser.parse_args()
    server = build(args.project_root.resolve(), {"todo": "ship it"})
    guard(server, project_root=args.project_root, config_path=args.config, tools=TOOLS)
    server.run("stdio")


if __name__ == "__main__":
    main()
