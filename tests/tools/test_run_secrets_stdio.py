"""The red team's probes through a real SDK client over stdio: code a tool runs cannot print a secret
a read shows masked, in any form, on every backend that confines reads."""

from __future__ import annotations

import base64
import binascii
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import model_view, oct_server
from mcp import Client
from optional import usable_backend

from oct_mcp.profiles import shipped_profile

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

VENV_BIN = Path(sys.executable).parent
SECRET = "Xk9vR2mQ7pL4sT8wZ3nB"  # noqa: S105 - a test secret
ENV = f"DB_PASSWORD={SECRET}\n"
BACKENDS = ("bubblewrap", "landlock")
PROBES = {
    "reversed": "print(open('.env').read()[::-1])",
    "base64": "import base64; print(base64.b64encode(open('.env', 'rb').read()).decode())",
    "hex": "print(open('.env', 'rb').read().hex())",
    "one character a line": "print('\\n'.join(open('.env').read()))",
}
CONFTEST = """\
import base64

import pytest


@pytest.fixture(autouse=True)
def leak():
    data = open(".env", "rb").read()
    pytest.fail(
        " ".join(
            [data.decode()[::-1], base64.b64encode(data).decode(), data.hex(), "\\n".join(data.decode())]
        )
    )
"""
HONEST_TEST = """\
import os
from pathlib import Path


def test_reads_its_data():
    assert Path("tests/data.txt").read_text() == "42\\n"


def test_lists_the_project_and_sees_the_env_file_is_there():
    assert ".env" in os.listdir(".")
    assert os.stat(".env").st_size > 0


def test_fails_honestly():
    assert 1 + 1 == 3
"""


def leaked_forms(text: str) -> list[str]:
    """Each form of the secret `text` shows: as it is, reversed, spread over lines, hex, base64."""
    forms = []
    if SECRET in text:
        forms.append("plain")
    if SECRET[::-1] in text:
        forms.append("reversed")
    if SECRET in re.sub(r"\s|\\n", "", text):
        forms.append("spread over lines")
    if SECRET.encode().hex() in text.lower():
        forms.append("hex")
    for run in re.findall(r"[A-Za-z0-9+/]{16,}={0,2}", text):
        for start in range(4):
            chunk = run[start:]
            try:
                decoded = base64.b64decode(chunk + "=" * (-len(chunk) % 4))
            except (binascii.Error, ValueError):
                continue
            if SECRET.encode() in decoded:
                forms.append("base64")
    return forms


def _project(where: Path, *, with_venv: bool) -> Path:
    """A project with a `.env` a read shows masked; a venv of its own for oct_run, or the test
    suite's pytest linked into `.venv/bin` for oct_test, as a developer's `.venv` holds it."""
    root = where.resolve() / "project"
    (root / "tests").mkdir(parents=True)
    (root / ".env").write_text(ENV)
    (root / "tests" / "data.txt").write_text("42\n")
    if with_venv:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    else:
        (root / ".venv" / "bin").mkdir(parents=True)
        (root / ".venv" / "bin" / "pytest").symlink_to(VENV_BIN / "pytest")
    return root


def _config(config_file: Path, backend: str, *, show_secrets: bool = False) -> None:
    config: dict[str, Any] = {"sandbox_backend": backend}
    if show_secrets:
        default = shipped_profile("default")
        settings = {**default.settings, "sandbox": {"show_secrets_to_runs": True}}
        config |= {
            "profile": "shows_secrets",
            "profiles": {"shows_secrets": {"layers": list(default.layers), "settings": settings}},
        }
    config_file.write_text(json.dumps(config))


async def _calls(project: Path, config_file: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    results: list[types.CallToolResult] = []
    with anyio.fail_after(180):
        async with Client(oct_server(project, config_file)) as client:
            for tool, arguments in calls:
                results.append(await client.call_tool(tool, arguments))
    return [model_view(result) + "\n" + _texts(result) for result in results]


def _texts(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_oct_run_prints_no_form_of_a_secret_a_read_shows_masked(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path, with_venv=True)
    _config(config_file, backend)

    views = await _calls(
        project, config_file, [("oct_run", {"argv": ["python", "-c", code]}) for code in PROBES.values()]
    )

    leaks = {probe: leaked_forms(view) for probe, view in zip(PROBES, views, strict=True)}
    assert leaks == {probe: [] for probe in PROBES}
    # The result says why the run did not get the file, naming it.
    how = "shown to the run masked" if backend == "bubblewrap" else "kept from the run"
    assert all(f"1 file(s) holding secrets were {how}" in view and "(.env)" in view for view in views)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_conftest_under_oct_test_prints_no_form_of_the_secret(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path, with_venv=False)
    (project / "conftest.py").write_text(CONFTEST)
    (project / "tests" / "test_one.py").write_text("def test_one():\n    pass\n")
    _config(config_file, backend)

    (view,) = await _calls(project, config_file, [("oct_test", {})])

    assert leaked_forms(view) == []
    assert "(.env)" in view


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_honest_suite_passes_and_fails_as_in_a_terminal(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path, with_venv=False)
    (project / "tests" / "test_honest.py").write_text(HONEST_TEST)
    _config(config_file, backend)
    terminal = subprocess.run(
        [str(VENV_BIN / "pytest"), "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )

    async with Client(oct_server(project, config_file)) as client:
        with anyio.fail_after(180):
            result = await client.call_tool("oct_test", {})

    output = result.structured_content
    assert output is not None, _texts(result)
    assert terminal.stdout.splitlines()[-1].startswith("1 failed, 2 passed")
    assert (output["passed"], output["failed"], output["errors"]) == (2, 1, 0)
    assert [failure["node_id"] for failure in output["failures"]] == [
        "tests/test_honest.py::test_fails_honestly"
    ]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_show_secrets_to_runs_gives_the_run_the_real_file(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path, with_venv=True)
    _config(config_file, backend, show_secrets=True)

    (view,) = await _calls(
        project, config_file, [("oct_run", {"argv": ["python", "-c", PROBES["reversed"]]})]
    )

    # What the setting gives up: the redactor knows no reversed secret.
    assert leaked_forms(view) == ["reversed"]
    assert "holding secrets" not in view


@pytest.mark.parametrize("backend", BACKENDS)
async def test_git_history_holding_the_secret_is_kept_from_the_run_and_git_tools_still_work(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path, with_venv=True)
    who = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    for args in (["init", "-q"], ["add", ".env"], ["commit", "-q", "-m", "oops"]):
        subprocess.run(["git", "-C", str(project), *who, *args], check=True, capture_output=True)
    _config(config_file, backend)
    history = (
        "import subprocess\n"
        "shown = subprocess.run(['git', 'show', 'HEAD:.env'], capture_output=True).stdout\n"
        "print(shown[::-1])\n"
    )

    run, status = await _calls(
        project,
        config_file,
        [("oct_run", {"argv": ["python", "-c", history]}), ("oct_git_status", {})],
    )

    assert leaked_forms(run) == []
    assert "git's objects (.git/objects) hold one of them" in run
    # git's own tools read the real files and history: .env is committed and unchanged, not modified.
    assert "holding secrets" not in status
    assert status.splitlines()[1:] == ["## master", "?? .venv/", "?? tests/"]
