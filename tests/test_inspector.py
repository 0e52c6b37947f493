"""The MCP Inspector's command-line mode against `python -m oct_mcp` over stdio.

The Inspector declares no elicitation, so a write gets the seed's sentinel, then runs on confirm=true.
`.ci/run` installs it (npm) into .ci/node; a machine with only Python has no Inspector to run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from optional import missing

pytestmark = pytest.mark.e2e

INSPECTOR = (
    Path(__file__).resolve().parent.parent / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"
)
VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def inspector() -> Path:
    if not INSPECTOR.exists():
        missing("the MCP Inspector", "bash .ci/run installs it with npm")
    return INSPECTOR


@pytest.fixture
def inspected_project(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "proj"
    root.mkdir()
    (root / "mod.py").write_text("import os\nx=1\n")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "ruff").symlink_to(VENV_BIN / "ruff")
    return root


def _inspect(inspector: Path, project: Path, config: Path, *method: str) -> dict[str, Any]:
    server = [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config)]
    completed = subprocess.run(
        [str(inspector), "--cli", *method, "--", *server],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output: dict[str, Any] = json.loads(
        completed.stdout[: completed.stdout.rindex("}") + 1] if "}" in completed.stdout else "{}"
    )
    return output


def _text(result: dict[str, Any]) -> str:
    return "\n".join(item["text"] for item in result.get("content", []) if item.get("type") == "text")


def test_the_inspector_lists_reads_lints_is_refused_and_writes_after_the_sentinel(
    inspector: Path, inspected_project: Path, config_file: Path
) -> None:
    listed = _inspect(inspector, inspected_project, config_file, "--method", "tools/list")
    read = _inspect(
        inspector, inspected_project, config_file, "--method", "tools/call", "--tool-name", "oct_read_file",
        "--tool-arg", "path=mod.py",
    )  # fmt: skip
    lint = _inspect(
        inspector, inspected_project, config_file, "--method", "tools/call", "--tool-name", "oct_lint"
    )
    refused = _inspect(
        inspector, inspected_project, config_file, "--method", "tools/call", "--tool-name", "oct_read_file",
        "--tool-arg", "path=../../etc/passwd",
    )  # fmt: skip
    sentinel = _inspect(
        inspector, inspected_project, config_file, "--method", "tools/call", "--tool-name", "oct_format",
        "--tool-arg", "apply=true",
    )  # fmt: skip
    unchanged = (inspected_project / "mod.py").read_text()
    written = _inspect(
        inspector, inspected_project, config_file, "--method", "tools/call", "--tool-name", "oct_format",
        "--tool-arg", "apply=true", "--tool-arg", "confirm=true",
    )  # fmt: skip

    assert {"oct_read_file", "oct_lint", "oct_format"} <= {tool["name"] for tool in listed["tools"]}
    assert _text(read) == "import os\nx=1\n"
    assert "F401" in [d["code"] for d in lint["structuredContent"]["diagnostics"]]
    assert _text(refused).startswith("[path_refused] ")
    assert _text(sentinel).startswith("[oct-mcp requires_confirmation] oct_format")
    assert unchanged == "import os\nx=1\n"
    assert written["structuredContent"]["changed_files"] == ["mod.py"]
    assert (inspected_project / "mod.py").read_text() == "import os\n\nx = 1\n"
