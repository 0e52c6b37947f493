"""A failing tool's stderr names none of the server's own folders: a real SDK client over stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from clients import Accept, oct_server, only_text
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

# The test's own conftest fails pytest (exit code 3), printing the folders the server runs from.
CONFTEST = """import os, sys
sys.stderr.write(
    f"prefix={sys.prefix} base={sys.base_prefix} exe={sys.executable} home={os.environ['HOME']}\\n"
)
raise SystemExit(3)
"""


@pytest.mark.parametrize("backend", ["native", "bubblewrap", "landlock"])
async def test_a_failing_tools_stderr_shows_tokens_for_the_servers_venv_interpreter_and_scratch(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    project = tmp_path.resolve() / "demo"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "conftest.py").write_text(CONFTEST)
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "pytest").symlink_to(Path(sys.executable).parent / "pytest")
    # native confines nothing: the test opts in, to see its output anonymised there too.
    config_file.write_text(json.dumps({"sandbox_backend": backend, "allow_unconfined_project_code": True}))

    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file), elicitation_callback=Accept()) as client:
            result = await client.call_tool("oct_test", {})

    text = only_text(result)
    assert result.is_error is True
    assert text.startswith("[tool_failed] pytest failed (exit code 3);")
    assert sys.prefix not in text
    assert sys.base_prefix not in text
    assert "prefix=<venv> base=<python> exe=<venv>/bin/python" in text
    if backend == "native":
        assert "home=<scratch>/home" in text
