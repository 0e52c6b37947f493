"""A guarded SDK server over stdio whose `lookup` tool's description (or hint) is given on the command
line: started twice with two descriptions, it is the rug pull pinned definitions must catch."""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from oct_mcp.embed import guard


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--project-root", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--pins", type=Path, required=True)
    parser.add_argument("--description", required=True)
    parser.add_argument("--open-world", choices=["true", "false"], default="true")
    parser.add_argument("--allow-narrowing", action="store_true")
    args = parser.parse_args()
    server = MCPServer("pinned-demo")
    hints = ToolAnnotations(readOnlyHint=True, openWorldHint=args.open_world == "true")

    @server.tool(description=args.description, annotations=hints)
    def lookup(word: str) -> str:
        return f"looked up {word}"

    @server.tool(description="Say hello.", annotations=ToolAnnotations(readOnlyHint=True))
    def hello(name: str) -> str:
        return f"hello {name}"

    guard(
        server,
        project_root=args.project_root,
        config_path=args.config,
        environ={},
        pin_file=args.pins,
        allow_narrowing=args.allow_narrowing,
    )
    server.run("stdio")


if __name__ == "__main__":
    main()
