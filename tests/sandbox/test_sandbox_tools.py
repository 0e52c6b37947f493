"""Real tools (ruff, pytest, git) under every backend with the default limits, and a server killed mid-run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from command_tool import run_command
from optional import bubblewrap, landlock
from processes import processes_with

from oct_mcp.backends import Backend
from oct_mcp.backends.native import Native

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(params=["bubblewrap", "landlock", "native"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "bubblewrap":
        return bubblewrap()
    return landlock() if request.param == "landlock" else Native()


@pytest.fixture
def python_project(tmp_path: Path) -> Path:
    project = tmp_path.resolve() / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "calc.py").write_text("import os\n\n\ndef add(a, b):\n    return a + b\n")
    (project / "test_calc.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nfrom calc import add\n\n\n"
        "def test_add():\n    assert add(1, 2) == 3\n"
    )
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


async def test_ruff_check_finds_the_same_problems_as_unsandboxed(
    backend: Backend, python_project: Path
) -> None:
    argv = [str(VENV_BIN / "ruff"), "check", "--output-format", "json", "--no-cache", "."]
    plain = subprocess.run(argv, cwd=python_project, capture_output=True, check=False)

    result = await run_command(backend, python_project, argv)

    assert result.exit_code == plain.returncode == 1
    codes = [d["code"] for d in json.loads(result.text)]
    assert codes == [d["code"] for d in json.loads(plain.stdout)]
    assert "F401" in codes


async def test_ruff_fix_writes_the_project_when_the_plan_may(backend: Backend, python_project: Path) -> None:
    result = await run_command(
        backend, python_project, [str(VENV_BIN / "ruff"), "check", "--fix", "."], writes=True
    )

    assert result.exit_code == 0
    assert "import os" not in (python_project / "src" / "calc.py").read_text()


async def test_ruff_with_64_threads_fits_the_default_memory_limit(
    backend: Backend, python_project: Path
) -> None:
    argv = [str(VENV_BIN / "ruff"), "check", "--no-cache", "."]

    result = await run_command(backend, python_project, argv, env=[("RAYON_NUM_THREADS", "64")])

    assert result.exit_code == 1


async def test_pytest_runs_the_projects_tests(backend: Backend, python_project: Path) -> None:
    result = await run_command(
        backend, python_project, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    )

    assert result.exit_code == 0
    assert "1 passed" in result.text


async def test_mypy_checks_the_project_under_the_default_memory_limit(
    backend: Backend, python_project: Path
) -> None:
    (python_project / "src" / "typed.py").write_text("def half(x: int) -> int:\n    return x / 2\n")

    result = await run_command(backend, python_project, [str(VENV_BIN / "mypy"), "--no-error-summary", "src"])

    assert result.exit_code == 1
    assert 'typed.py:2: error: Incompatible return value type (got "float", expected "int")' in result.text


async def test_git_reads_the_repository(backend: Backend, python_project: Path) -> None:
    git = shutil.which("git")
    assert git is not None

    result = await run_command(
        backend, python_project, [git, "-c", "core.hooksPath=/dev/null", "status", "--porcelain"]
    )

    assert result.exit_code == 0
    assert sorted(result.text.split()) == ["??", "??", "src/", "test_calc.py"]


async def test_t17_a_server_killed_mid_run_leaves_nothing_behind_under_bubblewrap(tmp_path: Path) -> None:
    bubblewrap()
    marker = f"oct-orphan-probe-{os.getpid()}"
    project = tmp_path.resolve()
    harness = project / "harness.py"
    harness.write_text(
        textwrap.dedent(f"""
            import anyio, sys
            from oct_mcp.backends import Limits, SandboxRequest
            from oct_mcp.backends.bubblewrap import Bubblewrap
            from oct_mcp.backends.runner import run_prepared
            from pathlib import Path
            request = SandboxRequest(
                argv=({sys.executable!r}, "-c", "import subprocess, sys, time; "
                      "[subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', {marker!r}]) "
                      "for _ in range(5)]; time.sleep(120)", {marker!r}),
                project=Path({str(project)!r}), writable=False, network=False, protected=(),
                read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)), env={{"PATH": "/usr/bin"}},
                limits=Limits(memory_bytes=None, cpu_seconds=300), scratch=Path({str(project)!r}),
            )
            prepared = Bubblewrap().prepare(request)
            anyio.run(lambda: run_prepared(prepared, backend="bubblewrap", time_limit=300, max_output=1024))
        """)
    )
    server = subprocess.Popen([sys.executable, str(harness)], cwd=project)
    try:
        with anyio.fail_after(30):
            while len(processes_with(marker)) < 6:
                await anyio.sleep(0.05)
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()

    with anyio.fail_after(10):
        while processes_with(marker):
            await anyio.sleep(0.05)
