"""oct-mcp's own stdio server, with a test-only write tool in its catalog (until the catalog has its own)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fakes import catalog_with_write_tool

from oct_mcp.app import build_app
from oct_mcp.diagnostics import configure_diagnostics
from oct_mcp.server import AppEndpoint, serve_stdio


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--project-root", required=True)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--profile")
    args = parser.parse_args()
    configure_diagnostics(1)
    app = build_app(
        args.project_root, profile=args.profile, config_path=args.config, catalog=catalog_with_write_tool()
    )
    anyio.run(serve_stdio, lambda: AppEndpoint(app, transport="stdio"))


if __name__ == "__main__":
    main()
