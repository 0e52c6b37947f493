"""A file of the user's replaced whole: what `oct-mcp install` writes into a host's config and
`oct-mcp token` into the server's."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, text: str, mode: int) -> None:
    """Write beside the file and rename over it: a crash leaves the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.oct-mcp-{os.getpid()}.tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(scratch, mode)  # the umask may have narrowed os.open's mode
        os.replace(scratch, path)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
