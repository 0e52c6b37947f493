"""Every code block of the README: Python blocks run, TOML and JSON blocks parse."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def _blocks(language: str) -> list[pytest.ParameterSet]:
    text = README.read_text(encoding="utf-8")
    return [
        pytest.param(match.group(2), id=f"line {text.count(chr(10), 0, match.start()) + 1}")
        for match in _FENCE.finditer(text)
        if match.group(1) == language
    ]


def test_the_readme_has_the_blocks_this_test_runs() -> None:
    assert len(_blocks("python")) >= 5
    assert len(_blocks("toml")) >= 1


@pytest.mark.parametrize("code", _blocks("python"))
def test_a_python_block_runs(code: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    # A reader's machine: a home of its own (the default config and audit log live there), the
    # example layer importable as if installed, and no client on stdin (a served block returns).
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "examples" / "write_budget" / "src"), str(ROOT)]),
    }
    env = {key: value for key, value in env.items() if not key.startswith("OCT_MCP_")}

    ran = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert ran.returncode == 0, ran.stderr[-2_000:]


@pytest.mark.parametrize("text", _blocks("toml"))
def test_a_toml_block_parses(text: str) -> None:
    assert isinstance(tomllib.loads(text), dict)


@pytest.mark.parametrize("text", _blocks("json"))
def test_a_json_block_parses(text: str) -> None:
    assert isinstance(json.loads(text), dict)
