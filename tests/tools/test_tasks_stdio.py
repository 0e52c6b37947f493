"""oct_list_tasks end to end: a real SDK client over stdio on a project with every kind of task file."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest
from clients import hints, oct_server, only_text
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

FIXTURE = Path(__file__).parent.parent / "data" / "projects" / "tasks"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "project"
    shutil.copytree(FIXTURE, root)
    return root


async def test_the_tasks_of_a_noxfile_tox_ini_makefile_and_scripts_come_with_their_argv(
    project: Path, config_file: Path
) -> None:
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            result = await client.call_tool("oct_list_tasks", {})

    tool = listed["oct_list_tasks"]
    assert hints(tool)[:2] == (True, False)
    assert tool.output_schema is not None
    assert result.is_error is False
    assert result.structured_content is not None
    by_argv = {tuple(task["argv"]): task["source"] for task in result.structured_content["tasks"]}
    assert {
        ("nox", "-s", "docs-live"): "noxfile.py",
        ("tox", "-e", "lint"): "tox.ini",
        ("make", "check"): "Makefile",
        ("tasks-demo",): "pyproject.toml",
        ("hatch", "run", "test"): "pyproject.toml",
        ("pdm", "run", "serve"): "pyproject.toml",
        ("npm", "run", "build"): "package.json",
    }.items() <= by_argv.items()
    assert result.structured_content["files"] == [
        "noxfile.py",
        "tox.ini",
        "Makefile",
        "pyproject.toml",
        "package.json",
    ]
    assert not (project / "NOXFILE_WAS_RUN").exists()


async def test_a_malformed_task_file_is_a_problem_in_a_successful_result(
    project: Path, config_file: Path
) -> None:
    (project / "pyproject.toml").write_text("[project\n")

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            result = await client.call_tool("oct_list_tasks", {})

    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["problems"] == [
        {"file": "pyproject.toml", "problem": "not valid TOML (line 1)"}
    ]
    assert {task["runner"] for task in result.structured_content["tasks"]} == {"nox", "tox", "make", "npm"}


async def test_a_path_outside_the_project_is_refused_by_its_code(project: Path, config_file: Path) -> None:
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            result = await client.call_tool("oct_list_tasks", {"path": "../"})

    assert result.is_error is True
    assert only_text(result).startswith("[path_refused]")
