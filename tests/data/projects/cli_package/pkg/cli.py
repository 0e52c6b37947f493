"""The package's command line: greets, says which interpreter runs it, or writes a file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pkg", description="Greets whoever it is told to.")
    parser.add_argument("--name", default="world", help="who to greet")
    parser.add_argument("--where", action="store_true", help="print the interpreter's prefix")
    parser.add_argument("--write", metavar="FILE", help="write the greeting to FILE")
    parser.add_argument("--fail", type=int, default=0, metavar="CODE", help="exit with CODE")
    args = parser.parse_args(argv)
    greeting = f"hello, {args.name}"
    if args.where:
        print(sys.prefix)
    if args.write:
        Path(args.write).write_text(greeting + "\n")
    print(greeting)
    if args.fail:
        print("failing as asked", file=sys.stderr)
    return args.fail


if __name__ == "__main__":
    sys.exit(main())
