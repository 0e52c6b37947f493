"""A text's lines as git, compilers, linters and grep number them."""

from __future__ import annotations

__all__ = ["count_lines", "split_lines"]


def split_lines(text: str) -> list[str]:
    """Lines with their endings; a last line without one still counts.

    Only "\\n" ends a line, as for git, compilers, linters and grep, whose line numbers callers pass in.
    """
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def count_lines(text: str) -> int:
    """`len(split_lines(text))`, counted without building the lines."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)
