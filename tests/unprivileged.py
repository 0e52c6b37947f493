"""A server run as an unprivileged user (nobody): the system Python, and oct_mcp's packages copied where
nobody can read them."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from optional import missing

NOBODY = 65534
PACKAGES = (
    "oct_mcp",
    "anyio",
    "idna",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_inspection",
    "typing_extensions",
    "structlog",
    "pathspec",
    "orjson",
    "ahocorasick_rs",
    "landlockpy",
    "seccompy",
    # The gateway's shared rate-limit window, imported with the layers.
    "limits",
    "deprecated",
    "wrapt",
    "packaging",
)


def unprivileged_python() -> str:
    candidate = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if not (os.access(candidate, os.X_OK) and shutil.which("setpriv") and os.geteuid() == 0):
        missing(
            "an unprivileged user to run a server as",
            f"needs root (to switch to nobody), setpriv and the system's {candidate}",
        )
    return candidate


@contextmanager
def copied_packages(packages: tuple[str, ...], harness: str | None = None) -> Iterator[Path]:
    """`packages` copied into `site/` of a world-readable folder, with an empty `project/` nobody owns
    and `harness.py` when given: what a server run as nobody imports and works in."""
    base = Path(tempfile.mkdtemp(prefix="oct-nobody-", dir="/tmp"))
    try:
        base.chmod(0o755)
        site = base / "site"
        for name in packages:
            spec = importlib.util.find_spec(name)
            assert spec is not None
            assert spec.origin is not None
            origin = Path(spec.origin)
            source = origin.parent if origin.name == "__init__.py" else origin
            target = site / source.name
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        project = base / "project"
        project.mkdir()
        shutil.chown(project, NOBODY, NOBODY)
        for path in [base, *base.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
            elif path != project:
                path.chmod(0o644)
        if harness is not None:
            (base / "harness.py").write_text(textwrap.dedent(harness))
            (base / "harness.py").chmod(0o644)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
