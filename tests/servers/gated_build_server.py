"""oct-mcp's own stdio server whose app is built only once a gate file appears: what the host is
answered while the chain is still being built, seen from outside the process."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import anyio

from oct_mcp.app import build_app
from oct_mcp.diagnostics import configure_diagnostics
from oct_mcp.server import AppEndpoint, serve_stdio
from oct_mcp.transports.binding import Endpoint

GATE_WAIT_SECONDS = 120


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--project-root", required=True)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--gate", type=Path, required=True)
    args = parser.parse_args()
    configure_diagnostics(1)

    def build() -> Endpoint:
        waited = 0.0
        while not args.gate.exists() and waited < GATE_WAIT_SECONDS:
            time.sleep(0.01)
            waited += 0.01
        return AppEndpoint(build_app(args.project_root, config_path=args.config), transport="stdio")

    anyio.run(serve_stdio, build)


if __name__ == "__main__":
    main()
