"""A FastMCP server of your own, guarded by oct-mcp's chain as a FastMCP middleware.

Run it over stdio: `python examples/guarded_fastmcp_server.py --project-root /path/to/project`
(needs `pip install 'oct-mcp[fastmcp]'`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fastmcp import FastMCP
from mcp_types import ToolAnnotations

from oct_mcp.embed import ForeignTool
from oct_mcp.embed.fastmcp import guard_fastmcp


def build(project_root: Path, notes: dict[str, str]) -> FastMCP:
    """The host server and its own tools; not yet guarded."""
    server = FastMCP("notes")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def read_note(name: str) -> str:
        """Read one note."""
        return notes.get(name, "no such note")

    @server.tool
    def delete_note(name: str) -> str:
        """Delete one note (destructive: it says nothing of being read-only)."""
        return "deleted" if notes.pop(name, None) is not None else "no such note"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def read_file(path: str) -> str:
        """Read a file of the project."""
        return (project_root / path).read_text()

    return server


TOOLS = {"read_file": ForeignTool(path_arguments=("path",))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--project-root", type=Path, default=Path("."))
    parser.add_argument("--config", type=Path, help="oct-mcp config file (default: ~/.oct-mcp/config.json)")
    args = parser.parse_args()
    server = build(args.project_root.resolve(), {"todo": "ship it"})
    guard_fastmcp(server, project_root=args.project_root, config_path=args.config, tools=TOOLS)
    server.run("stdio")


if __name__ == "__main__":
    main()
