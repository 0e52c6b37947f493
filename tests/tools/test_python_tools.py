"""oct_lint, oct_fix, oct_format, oct_typecheck and oct_test end to end: a real SDK client over stdio."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import Accept, hints, model_view, oct_server, only_text
from mcp import Client, StdioServerParameters

from oct_mcp.spec import Risk
from oct_mcp.tools import default_catalog

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

VENV_BIN = Path(sys.executable).parent
PROGRAMS = ("ruff", "pytest", "mypy")


@pytest.fixture
def fixture_project(tmp_path: Path) -> Path:
    """A package with lint, format and type problems, a passing and a failing test, and git history."""
    root = tmp_path.resolve() / "demo"
    (root / "demo").mkdir(parents=True)
    (root / "demo" / "__init__.py").write_text("")
    (root / "demo" / "core.py").write_text(
        "import os\n\n\ndef add(a: int, b: int) -> int:\n    return a+b\n\n\n"
        "def name() -> str:\n    return 1\n"
    )
    (root / "tests").mkdir()
    (root / "tests" / "test_core.py").write_text(
        "from demo.core import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_broken():\n    assert add(1, 1) == 3, 'wrong sum'\n"
    )
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    # The project's own tools, as a developer's .venv would hold them.
    (root / ".venv" / "bin").mkdir(parents=True)
    for program in PROGRAMS:
        (root / ".venv" / "bin" / program).symlink_to(VENV_BIN / program)
    (root / ".gitignore").write_text(".venv/\n")
    git = ["git", "-C", str(root), "-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "initial"], check=True)
    return root


async def test_the_python_tools_are_listed_with_truthful_annotations(
    fixture_project: Path, config_file: Path
) -> None:
    with anyio.fail_after(60):
        async with Client(oct_server(fixture_project, config_file)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    for name in ("oct_lint", "oct_test", "oct_typecheck"):
        assert hints(tools[name])[:2] == (False, False)
        assert tools[name].output_schema is not None
    for name in ("oct_format", "oct_fix"):
        assert hints(tools[name]) == (False, True, False, False)


async def test_lint_returns_each_problem_structured(fixture_project: Path, config_file: Path) -> None:
    with anyio.fail_after(60):
        async with Client(oct_server(fixture_project, config_file)) as client:
            result = await client.call_tool("oct_lint", {})

    assert result.is_error is False
    assert result.structured_content is not None
    (diagnostic,) = result.structured_content["diagnostics"]
    assert diagnostic == {
        "path": "demo/core.py",
        "line": 1,
        "column": 8,
        "code": "F401",
        "message": "`os` imported but unused",
        "fixable": True,
    }
    assert result.structured_content["by_rule"] == {"F401": 1}
    assert "demo/core.py:1:8: F401" in only_text(result)


async def test_typecheck_returns_mypys_diagnostics(fixture_project: Path, config_file: Path) -> None:
    with anyio.fail_after(120):
        async with Client(oct_server(fixture_project, config_file)) as client:
            result = await client.call_tool("oct_typecheck", {"paths": ["demo"]})

    assert result.is_error is False
    assert result.structured_content is not None
    codes = [(d["path"], d["line"], d["code"]) for d in result.structured_content["diagnostics"]]
    assert codes == [("demo/core.py", 9, "return-value")]


async def test_test_reports_counts_failures_and_progress(fixture_project: Path, config_file: Path) -> None:
    updates: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total))

    with anyio.fail_after(120):
        async with Client(oct_server(fixture_project, config_file)) as client:
            result = await client.call_tool("oct_test", {}, progress_callback=on_progress)

    assert result.is_error is False
    structured = result.structured_content
    assert structured is not None
    assert (structured["passed"], structured["failed"], structured["errors"]) == (1, 1, 0)
    (failure,) = structured["failures"]
    assert failure["node_id"] == "tests/test_core.py::test_broken"
    assert failure["message"] == "AssertionError: wrong sum\nassert 2 == 3\n +  where 2 = add(1, 1)"
    assert "assert add(1, 1) == 3, 'wrong sum'" in failure["traceback"]
    assert "tests/test_core.py:9" in failure["traceback"]
    view = model_view(result)
    assert "tests/test_core.py::test_broken" in view
    assert "AssertionError: wrong sum" in view
    assert updates == [(100.0, 100.0)]


async def test_test_filters_by_keyword(fixture_project: Path, config_file: Path) -> None:
    with anyio.fail_after(120):
        async with Client(oct_server(fixture_project, config_file)) as client:
            result = await client.call_tool("oct_test", {"keyword": "test_add"})

    assert result.structured_content is not None
    assert (result.structured_content["passed"], result.structured_content["failed"]) == (1, 0)


@pytest.mark.parametrize("keyword", ["-p no:x", "--collect-only", "a; rm -rf /"])
async def test_test_refuses_an_expression_that_could_be_an_option(
    fixture_project: Path, config_file: Path, keyword: str
) -> None:
    with anyio.fail_after(60):
        async with Client(oct_server(fixture_project, config_file)) as client:
            result = await client.call_tool("oct_test", {"keyword": keyword})

    assert result.is_error is True
    assert only_text(result).startswith("[invalid_arguments] ")


async def test_format_shows_the_diff_then_formats_with_consent(
    fixture_project: Path, config_file: Path
) -> None:
    before = (fixture_project / "demo" / "core.py").read_text()
    with anyio.fail_after(120):
        async with Client(oct_server(fixture_project, config_file), elicitation_callback=Accept()) as client:
            preview = await client.call_tool("oct_format", {"apply": False})
            unchanged = (fixture_project / "demo" / "core.py").read_text()
            applied = await client.call_tool("oct_format", {"apply": True})

    assert preview.is_error is False
    assert preview.structured_content is not None
    assert preview.structured_content["applied"] is False
    assert preview.structured_content["changed_files"] == ["demo/core.py", "tests/test_core.py"]
    assert "+    return a + b" in preview.structured_content["diff"]
    assert unchanged == before
    assert applied.structured_content == {
        "tool": "ruff format",
        "applied": True,
        "changed_files": ["demo/core.py", "tests/test_core.py"],
        "diff": "",
        "next_offset": None,
        "notes": [],
    }
    assert "return a + b" in (fixture_project / "demo" / "core.py").read_text()


async def test_fix_previews_by_default_then_fixes_when_asked(
    fixture_project: Path, config_file: Path
) -> None:
    with anyio.fail_after(120):
        async with Client(oct_server(fixture_project, config_file), elicitation_callback=Accept()) as client:
            preview = await client.call_tool("oct_fix", {})
            still_there = "import os" in (fixture_project / "demo" / "core.py").read_text()
            fixed = await client.call_tool("oct_fix", {"dry_run": False})

    assert preview.structured_content is not None
    assert preview.structured_content["applied"] is False
    assert "-import os" in preview.structured_content["diff"]
    assert still_there is True
    assert fixed.structured_content is not None
    assert fixed.structured_content["changed_files"] == ["demo/core.py"]
    assert "import os" not in (fixture_project / "demo" / "core.py").read_text()


async def test_a_missing_tool_is_a_clear_result(fixture_project: Path, config_file: Path) -> None:
    (fixture_project / ".venv" / "bin" / "mypy").unlink()
    with anyio.fail_after(60):
        async with Client(
            StdioServerParameters(
                command=sys.executable,
                args=["-m", "oct_mcp", "--project-root", str(fixture_project), "--config", str(config_file)],
                env={"PATH": "/usr/bin:/bin"},
            )
        ) as client:
            result = await client.call_tool("oct_typecheck", {})

    assert result.is_error is True
    assert only_text(result).startswith("[tool_unavailable] mypy is not installed")
    assert "pip install mypy" in only_text(result)


async def test_fastmcps_client_over_stdio_lists_reads_lints_is_refused_and_writes_with_consent(
    fixture_project: Path, config_file: Path
) -> None:
    import os

    from fastmcp import Client as FastMCPClient
    from fastmcp.client.transports import StdioTransport

    async def accept(message: str, response_type: Any, params: Any, context: Any) -> Any:
        return types.ElicitResult(action="accept", content={"approve": True})

    env = {
        name: value
        for name, value in os.environ.items()
        if name in ("PATH", "HOME") or name.startswith("COVERAGE_")
    }
    transport = StdioTransport(
        sys.executable,
        ["-m", "oct_mcp", "--project-root", str(fixture_project), "--config", str(config_file)],
        env=env,
    )
    with anyio.fail_after(120):
        async with FastMCPClient(transport, elicitation_handler=accept) as client:
            names = [tool.name for tool in await client.list_tools()]
            read = await client.call_tool("oct_read_file", {"path": "demo/core.py", "end_line": 1})
            lint = await client.call_tool("oct_lint", {})
            refused = await client.call_tool("oct_read_file", {"path": "/etc/passwd"}, raise_on_error=False)
            formatted = await client.call_tool("oct_format", {"apply": True})

    assert {"oct_read_file", "oct_lint", "oct_format"} <= set(names)
    assert only_text(read) == "import os\n"
    assert lint.structured_content is not None
    assert lint.structured_content["count"] == 1
    assert refused.is_error is True
    assert only_text(refused).startswith("[path_refused] ")
    assert formatted.structured_content is not None
    assert formatted.structured_content["changed_files"] == ["demo/core.py", "tests/test_core.py"]


def test_every_tool_that_runs_project_tooling_is_project_code_and_says_so() -> None:
    runs_project_tooling = [spec for spec in default_catalog().values() if spec.program is not None]

    assert {spec.name for spec in runs_project_tooling} == {
        "oct_lint",
        "oct_test",
        "oct_typecheck",
        "oct_format",
        "oct_fix",
        "oct_run",
    }
    for spec in runs_project_tooling:
        assert spec.risk in (Risk.EXECUTE, Risk.WRITE)
        assert spec.annotations["readOnlyHint"] is False
        assert "project code" in spec.description
