"""Files of a test project, written from a mapping of paths to contents."""

from __future__ import annotations

from pathlib import Path


def write(root: Path, contents: dict[str, str | bytes]) -> None:
    """Each path of `contents` under `root`, its folders made, text as UTF-8."""
    for name, content in contents.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
