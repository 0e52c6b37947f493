"""What strict and airgapped show of /etc: enough that honest programs run as quietly as in a terminal."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from optional import bubblewrap, landlock

from oct_mcp.backends import Backend, Limits, SandboxRequest
from oct_mcp.backends.runner import run_prepared

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BACKENDS: dict[str, Callable[[], Backend]] = {"bubblewrap": bubblewrap, "landlock": landlock}


# The interpreter's own start-up configuration, read as the import system reads it at start (where no
# compiled copy beside it spares the read, every run printed "Error in sitecustomize ...
# PermissionError" under Landlock, and under bubblewrap the hook silently never ran).
START_UP = (
    "import importlib.util\n"
    "spec = importlib.util.find_spec('sitecustomize')\n"
    "print(spec and open(spec.origin, 'rb').read().hex())\n"
)


@pytest.mark.parametrize("name", sorted(BACKENDS))
async def test_the_system_python_starts_under_strict_files_as_in_a_terminal(
    tmp_path: Path, name: str
) -> None:
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 in /usr/bin or /bin: nothing of /etc to show it")
    argv = (python, "-c", START_UP)
    terminal = subprocess.run(argv, capture_output=True, check=True, cwd=tmp_path)
    backend = BACKENDS[name]()
    project = tmp_path / "project"
    project.mkdir()
    request = SandboxRequest(
        argv=argv,
        project=project,
        writable=False,
        network=False,
        protected=(),
        read_only_binds=(),
        env={"PATH": "/usr/bin:/bin"},
        limits=Limits(memory_bytes=512 * 1_048_576, cpu_seconds=65),
        scratch=tmp_path,
        strict_files=True,
    )

    with anyio.fail_after(60):
        run = await run_prepared(backend.prepare(request), backend=name, time_limit=30, max_output=65_536)

    assert (run.exit_code, run.stdout, run.stderr) == (0, terminal.stdout, terminal.stderr)
