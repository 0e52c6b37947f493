"""The example layer of examples/write_budget: installed by its entry point into a fresh venv and named
in a user profile, over stdio; and passed in code to `guard` around an SDK server's tool."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from clients import Accept
from mcp import Client, StdioServerParameters

from oct_mcp.embed import guard

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "write_budget"
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(EXAMPLE / "src"))

from guarded_sdk_server import build  # noqa: E402
from oct_write_budget import LAYER  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BUDGETED_LAYERS = ["audit", "gateway", "validator", "policy", "safety", "write_budget", "redactor"]


def _config(tmp_path: Path, layers: list[str], max_writes: int, **fields: object) -> Path:
    profile = {
        "layers": layers,
        "settings": {"policy": {"tools": ["*"]}, "write_budget": {"max_writes": max_writes}},
    }
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "profile": "budgeted",
                "profiles": {"budgeted": profile},
                "audit_log_path": str(tmp_path / "audit.log"),
                "rate_limit_per_minute": 1000,
                **fields,
            }
        )
    )
    return path


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _can_build_wheels_here() -> bool:
    """setuptools in this environment builds a wheel: it has bdist_wheel (70.1 on), or `wheel` does."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    return any(
        importlib.util.find_spec(name) is not None for name in ("wheel", "setuptools.command.bdist_wheel")
    )


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv where the example is pip-installed, the only place its entry point exists.

    Its dependencies (oct-mcp as this test run has it installed, the SDK, pydantic) come from the
    test run's own environment through a site directory, so none is downloaded. pip builds the
    example with this environment's setuptools where that can build a wheel (offline, about a
    second); otherwise in an isolated build environment, fetching setuptools from the index.
    """
    where = tmp_path_factory.mktemp("fresh")
    # A copy: setuptools writes its build folders beside the sources.
    source = shutil.copytree(
        EXAMPLE, where / "write_budget", ignore=shutil.ignore_patterns("build", "*.egg-info")
    )
    home = where / "venv"
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    shared = sysconfig.get_paths()["purelib"]
    Path(purelib, "shared_test_environment.pth").write_text(f"import site; site.addsitedir({shared!r})\n")
    build = ["--no-build-isolation", "--no-index"] if _can_build_wheels_here() else []
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            *build,
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return python


def test_the_layer_is_not_installed_where_the_tests_run() -> None:
    from oct_mcp.registry import layer_registry

    assert "write_budget" not in layer_registry()


def test_doctor_names_the_distribution_the_installed_layer_came_from(
    fresh_python: Path, project: Path, tmp_path: Path
) -> None:
    config = _config(tmp_path, [*BUDGETED_LAYERS, "sandbox"], max_writes=1)

    doctor = subprocess.run(
        [fresh_python, "-m", "oct_mcp", "doctor", "--project-root", str(project), "--config", str(config)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )

    layer_lines = [line.split() for line in doctor.stdout.splitlines() if line.startswith("  write_budget ")]
    assert layer_lines == [
        ["write_budget", "entry", "point", "of", "oct-mcp-write-budget", "0.1.0,", "in", "this", "chain"]
    ]


async def test_an_installed_layer_named_in_a_user_profile_runs_in_the_chain_over_stdio(
    fresh_python: Path, project: Path, tmp_path: Path
) -> None:
    config = _config(tmp_path, [*BUDGETED_LAYERS, "sandbox"], max_writes=1)
    server = StdioServerParameters(
        command=str(fresh_python),
        args=["-m", "oct_mcp", "--project-root", str(project), "--config", str(config)],
    )

    with anyio.fail_after(60):
        async with Client(server, elicitation_callback=Accept()) as client:
            first = await client.call_tool(
                "oct_write_file", {"path": "one.txt", "content": "1\n", "dry_run": False}
            )
            preview = await client.call_tool("oct_write_file", {"path": "two.txt", "content": "2\n"})
            second = await client.call_tool(
                "oct_write_file", {"path": "two.txt", "content": "2\n", "dry_run": False}
            )

    assert (first.is_error, (project / "one.txt").read_text()) == (False, "1\n")
    assert preview.is_error is False
    assert second.is_error is True
    assert _text(second).startswith("[write_budget_exhausted] ")
    assert not (project / "two.txt").exists()


async def test_the_same_layer_passed_to_guard_runs_around_an_sdk_servers_tool(
    project: Path, tmp_path: Path
) -> None:
    # A host's tool cannot be told to make a dry run: the gate must decide to run it for real.
    config = _config(tmp_path, BUDGETED_LAYERS, max_writes=1, dry_run_default_for_writes=False)
    notes = {"a": "first", "b": "second"}
    server = build(project, notes)
    guard(server, project_root=project, config_path=config, environ={}, profile="budgeted", layers=[LAYER])

    with anyio.fail_after(30):
        async with Client(server, elicitation_callback=Accept()) as client:
            first = await client.call_tool("delete_note", {"name": "a"})
            second = await client.call_tool("delete_note", {"name": "b"})

    assert first.is_error is False
    assert second.is_error is True
    assert _text(second).startswith("[write_budget_exhausted] ")
    assert notes == {"b": "second"}
