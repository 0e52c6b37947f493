"""The exit statuses of every `oct-mcp` command, one set for all of them (scripts test these)."""

from __future__ import annotations

from typing import Final

__all__ = ["EXIT_BROAD_ROOT", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
"""The command ran and its answer is no: a call that failed, a log that does not verify."""
EXIT_USAGE: Final = 2
"""The command was not understood, or its configuration is wrong: nothing ran."""
EXIT_BROAD_ROOT: Final = 3
"""The project root is /, the home folder, above it, or holds keys: refused without --allow-broad-root."""
