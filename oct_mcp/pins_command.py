"""`oct-mcp tools pending|diff|accept --pins FILE`: review and accept an embedded server's changed tools."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final, TextIO

from oct_mcp.embed.pins import PinFile, definition_diff
from oct_mcp.errors import PinFileError
from oct_mcp.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["PINS_ACTIONS", "pins_parser", "run_pins"]

PINS_ACTIONS: Final = ("pending", "diff", "accept")


def pins_parser(debug_levels: list[int]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oct-mcp tools",
        description="Review the tools an embedded server withholds because their definition changed "
        "since first served, and accept them.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="{pending,diff,accept}")
    pending = actions.add_parser("pending", help="the withheld tools, one a line")
    diff = actions.add_parser("diff", help="what changed: the pinned and the served definition, as a diff")
    diff.add_argument("names", nargs="*", metavar="NAME", help="tools (default: every pending one)")
    accept = actions.add_parser("accept", help="pin the served definition: the tool is served again")
    accept.add_argument("names", nargs="*", metavar="NAME")
    accept.add_argument("--all", action="store_true", help="every pending tool")
    for action in (pending, diff, accept):
        action.add_argument(
            "--pins",
            type=Path,
            required=True,
            metavar="FILE",
            help="the server's pin file (its log names it: tool_changed ... pin_file=FILE)",
        )
        action.add_argument("--debug", type=int, choices=debug_levels, metavar="N", help="0 to 4")
    return parser


def run_pins(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    try:
        pins = PinFile.load(args.pins)
    except PinFileError as exc:
        print(f"oct-mcp tools: {exc.message}; remove the file to pin every tool anew", file=sys.stderr)
        return EXIT_USAGE
    names = list(getattr(args, "names", []))
    unknown = sorted(set(names) - pins.pending.keys())
    if unknown:
        print(
            f"oct-mcp tools: not withheld: {', '.join(unknown)} (oct-mcp tools pending lists them)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if args.action == "pending":
        for name in sorted(pins.pending):
            out.write(f"{name}\n")
        out.write(f"{len(pins.pending)} tool(s) withheld, {len(pins.pinned)} pinned\n")
        return EXIT_OK
    if args.action == "diff":
        for name in names or sorted(pins.pending):
            out.write(definition_diff(name, pins.pinned.get(name, {}), pins.pending[name]))
        return EXIT_OK
    if not names and not args.all:
        print("oct-mcp tools accept: name the tools, or pass --all", file=sys.stderr)
        return EXIT_USAGE
    accepted = pins.accept(None if args.all else names)
    try:
        pins.save(args.pins)
    except OSError as exc:
        print(f"oct-mcp tools: cannot write {args.pins}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    out.write(f"accepted: {', '.join(accepted) or 'nothing pending'}; served again from the next listing\n")
    return EXIT_OK
