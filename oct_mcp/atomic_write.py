"""A file replaced whole: what `oct-mcp install` writes into a host's config, `oct-mcp token` into
the server's, and an embedding guard into its pin file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, text: str, mode: int) -> None:
    """Write beside the file and rename over it: a crash leaves the old file or the new, never half.

    The scratch file has a name of its own each time (`mkstemp`, owner-only until it is complete): a
    name made of the process id alone would be taken by one a killed process left behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    scratch = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(scratch, mode)
        os.replace(scratch, path)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
