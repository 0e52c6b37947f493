"""The command line: exit codes, doctor, and call through the same chain."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from oct_mcp.cli import EXIT_CALL_FAILED, EXIT_OK, EXIT_USAGE, main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_project_root_that_does_not_exist_exits_with_code_2(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"

    code, out, err = _run(capsys, "--project-root", str(missing), "--config", str(config_file))

    assert code == EXIT_USAGE
    assert out == ""
    assert "is not an existing directory" in err


def test_a_project_root_that_is_a_file_exits_with_code_2(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        capsys, "doctor", "--project-root", str(project / "README.md"), "--config", str(config_file)
    )

    assert code == EXIT_USAGE
    assert "--project-root" in err


def test_an_unknown_profile_exits_with_code_2_naming_the_known_ones(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        capsys, "doctor", "--project-root", str(project), "--config", str(config_file), "--profile", "lax"
    )

    assert code == EXIT_USAGE
    assert "no profile named 'lax'" in err
    assert "strict" in err


def test_doctor_shows_each_value_with_its_source_the_chain_and_the_tools(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file.write_text(json.dumps({"max_jobs": 2}))
    monkeypatch.setenv("OCT_MCP_SAFE_MODE", "1")

    code, out, _ = _run(
        capsys, "doctor", "--project-root", str(project), "--config", str(config_file), "--profile", "strict"
    )

    assert code == EXIT_OK
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    assert lines["max_jobs"][1:] == ["2", "file"]
    assert lines["safe_mode"][1:] == ["True", "env"]
    assert lines["profile"][1:] == ["'strict'", "cli"]
    assert lines["timeout_default_seconds"][1:] == ["60", "default"]
    assert "chain, outermost first: gateway > validator > policy > safety > sandbox" in out
    assert "oct_read_file" in lines
    assert "bubblewrap" in lines


def test_call_prints_the_tool_text_and_exits_0(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        capsys,
        "call",
        "oct_read_file",
        "--project-root",
        str(project),
        "--config",
        str(config_file),
        "--json",
        '{"path": "README.md", "end_line": 1}',
    )

    assert code == EXIT_OK
    assert out == "# Demo\n"
    assert json.loads(err)["total_lines"] == 4


def test_call_refused_exits_1_with_the_code(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        capsys,
        "call",
        "oct_read_file",
        "--project-root",
        str(project),
        "--config",
        str(config_file),
        "--json",
        '{"path": "../outside.txt"}',
    )

    assert code == EXIT_CALL_FAILED
    assert out == ""
    assert err.startswith("[path_refused] ")


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]"])
def test_call_with_bad_json_exits_2(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str], arguments: str
) -> None:
    code, out, _ = _run(
        capsys,
        "call",
        "oct_read_file",
        "--project-root",
        str(project),
        "--config",
        str(config_file),
        "--json",
        arguments,
    )

    assert code == EXIT_USAGE
    assert out == ""


def test_python_dash_m_is_the_same_program(project: Path) -> None:
    import subprocess

    completed = subprocess.run(
        [sys.executable, "-m", "oct_mcp", "--version"],
        capture_output=True,
        text=True,
        check=False,
        cwd=project,
    )

    assert completed.returncode == 0
    assert completed.stdout.startswith("oct-mcp ")
