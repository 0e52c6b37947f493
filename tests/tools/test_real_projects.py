"""Projects oct did not write work as in a terminal: each fixture project in tests/data/projects is run
through a real SDK client over stdio, and the same command run directly in a copy of it says the same."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import Accept, oct_server, only_text
from mcp import Client
from optional import missing

from oct_mcp.backends.selection import probe_backends
from oct_mcp.execution.caches import project_cache

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

DATA = Path(__file__).resolve().parent.parent / "data" / "projects"
VENV_BIN = Path(sys.executable).parent
PROGRAMS = ("ruff", "pytest", "mypy")
_PYTEST_COUNTS = re.compile(r"(\d+) (passed|failed)")
_MYPY_LINE = re.compile(r"^(\S+?):(\d+): error: .*\[([a-z-]+)\]$")


def fixture_project(tmp_path: Path, name: str) -> Path:
    """A copy of the fixture project, its tools in its .venv as a developer's would be."""
    root = tmp_path.resolve() / "oct" / name
    shutil.copytree(DATA / name, root)
    (root / ".venv" / "bin").mkdir(parents=True)
    for program in PROGRAMS:
        (root / ".venv" / "bin" / program).symlink_to(VENV_BIN / program)
    return root


def terminal(tmp_path: Path, root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`argv` run directly in a writable copy of the project, with its .venv's tools first on PATH."""
    copy = tmp_path.resolve() / "terminal" / root.name
    if not copy.exists():
        shutil.copytree(root, copy, symlinks=True)
    env = {
        "PATH": f"{VENV_BIN}{os.pathsep}/usr/bin:/bin",
        "HOME": str(tmp_path / "terminal-home"),
        "LANG": "C.UTF-8",
    }
    return subprocess.run(list(argv), cwd=copy, env=env, capture_output=True, text=True, check=False)


def server_env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path.resolve() / "user-cache")}


async def call(
    tmp_path: Path, root: Path, config_file: Path, *calls: tuple[str, dict[str, Any]]
) -> list[types.CallToolResult]:
    answers = []
    with anyio.fail_after(240):
        async with Client(
            oct_server(root, config_file, env=server_env(tmp_path)), elicitation_callback=Accept()
        ) as client:
            for tool, arguments in calls:
                answers.append(await client.call_tool(tool, arguments))
    return answers


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error is False, only_text(result)
    assert result.structured_content is not None
    return result.structured_content


def pytest_counts(output: str) -> dict[str, int]:
    summary = output.strip().splitlines()[-1]
    return {word: int(number) for number, word in _PYTEST_COUNTS.findall(summary)}


# -- oct_test ----------------------------------------------------------------------------------


async def test_a_flat_layout_that_is_not_installed_imports_as_in_a_terminal(
    tmp_path: Path, config_file: Path
) -> None:
    root = fixture_project(tmp_path, "flat")

    (result,) = await call(tmp_path, root, config_file, ("oct_test", {}))
    direct = terminal(tmp_path, root, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider")

    output = structured(result)
    assert pytest_counts(direct.stdout) == {"passed": 1, "failed": 1}
    assert (output["passed"], output["failed"]) == (1, 1)


async def test_a_failure_carries_its_whole_message_and_a_bounded_traceback(
    tmp_path: Path, config_file: Path
) -> None:
    root = fixture_project(tmp_path, "flat")

    (result,) = await call(tmp_path, root, config_file, ("oct_test", {}))

    (failure,) = structured(result)["failures"]
    assert failure["node_id"] == "tests/test_app.py::test_broken"
    assert "the whole message, " * 12 + "and its end" in failure["message"]
    assert "assert 2 == 3" in failure["message"]
    assert "tests/test_app.py:10: in test_broken" in failure["traceback"]
    assert len(failure["traceback"]) <= 4_000


async def test_coverage_in_addopts_writes_outside_the_read_only_project(
    tmp_path: Path, config_file: Path
) -> None:
    root = fixture_project(tmp_path, "coverage_addopts")

    (result,) = await call(tmp_path, root, config_file, ("oct_test", {}))
    direct = terminal(tmp_path, root, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider")

    output = structured(result)
    assert pytest_counts(direct.stdout) == {"passed": 2}
    assert (output["passed"], output["failed"], output["errors"]) == (2, 0, 0)
    assert "TOTAL" in only_text(result)
    assert not (root / ".coverage").exists()


async def test_a_run_that_ends_without_a_summary_is_an_error_showing_stderrs_end(
    tmp_path: Path, config_file: Path
) -> None:
    # A real venv without pytest: `python -m pytest` exits 1 with nothing on stdout.
    root = tmp_path.resolve() / "oct" / "bare"
    shutil.copytree(DATA / "flat", root)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)

    (result,) = await call(tmp_path, root, config_file, ("oct_test", {}))

    text = only_text(result)
    assert result.is_error is True
    assert text.startswith("[tool_failed] pytest failed (exit code 1);")
    assert "No module named pytest" in text


async def test_jobs_without_xdist_says_the_tests_ran_serially(tmp_path: Path, config_file: Path) -> None:
    root = fixture_project(tmp_path, "flat")

    (result,) = await call(tmp_path, root, config_file, ("oct_test", {"jobs": 2}))

    output = structured(result)
    assert (output["passed"], output["failed"]) == (1, 1)
    assert any(note.startswith("ran serially") for note in output["notes"])
    assert "ran serially" in only_text(result)


def _usable(backend: str) -> None:
    availability = dict(probe_backends())[backend]
    if not availability.usable:
        missing(backend, availability.detail)


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_last_failed_reruns_only_the_failures_from_a_warm_owner_only_cache(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    _usable(backend)
    config_file.write_text(json.dumps({"sandbox_backend": backend}))
    root = fixture_project(tmp_path, "flat")

    first, again = await call(
        tmp_path, root, config_file, ("oct_test", {}), ("oct_test", {"last_failed": True})
    )

    assert (structured(first)["passed"], structured(first)["failed"]) == (1, 1)
    assert (structured(again)["passed"], structured(again)["failed"]) == (0, 1)
    cache = project_cache(root, server_env(tmp_path))
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert any((cache / "pycache").rglob("*.pyc"))
    assert not (root / ".pytest_cache").exists()
    assert not list(root.rglob("__pycache__"))


# -- oct_typecheck -----------------------------------------------------------------------------


def mypy_errors(output: str) -> list[tuple[str, int, str]]:
    return [
        (found.group(1), int(found.group(2)), found.group(3))
        for found in map(_MYPY_LINE.match, output.splitlines())
        if found is not None
    ]


async def test_typecheck_runs_the_installed_checker_when_both_are_configured(
    tmp_path: Path, config_file: Path
) -> None:
    root = fixture_project(tmp_path, "both_checkers")

    (result,) = await call(tmp_path, root, config_file, ("oct_typecheck", {}))
    direct = terminal(tmp_path, root, "mypy", "src")

    output = structured(result)
    assert output["tool"] == "mypy"
    assert mypy_errors(direct.stdout) == [("src/typed/__init__.py", 2, "return-value")]
    assert [(d["path"], d["line"], d["code"]) for d in output["diagnostics"]] == mypy_errors(direct.stdout)
    assert output["notes"][0] == (
        "checker: mypy (the project configures pyright too, but pyright is not installed)"
    )


async def test_typecheck_checks_the_packages_when_setup_cfg_has_no_mypy_section(
    tmp_path: Path, config_file: Path
) -> None:
    root = fixture_project(tmp_path, "setup_cfg")

    (result,) = await call(tmp_path, root, config_file, ("oct_typecheck", {}))
    direct = terminal(tmp_path, root, "mypy", ".")

    output = structured(result)
    assert mypy_errors(direct.stdout) == [("plain/__init__.py", 2, "return-value")]
    assert [(d["path"], d["line"], d["code"]) for d in output["diagnostics"]] == mypy_errors(direct.stdout)
    assert "checked: plain (the mypy config names no files; pass paths to choose)" in output["notes"]


async def test_typecheck_runs_the_checker_asked_for(tmp_path: Path, config_file: Path) -> None:
    root = fixture_project(tmp_path, "both_checkers")

    (result,) = await call(tmp_path, root, config_file, ("oct_typecheck", {"checker": "pyright"}))

    assert result.is_error is True
    assert only_text(result).startswith("[tool_unavailable] pyright is not installed")


# -- oct_lint ----------------------------------------------------------------------------------

_PROBLEMS = 3_125


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_lint_lists_thousands_of_problems_without_a_kill(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    _usable(backend)
    config_file.write_text(json.dumps({"sandbox_backend": backend}))
    root = fixture_project(tmp_path, "lint_many")
    lines = ["a = 1", *(f"v{index} = a == None" for index in range(_PROBLEMS))]
    (root / "problems.py").write_text("\n".join(lines) + "\n")

    first, last = await call(
        tmp_path,
        root,
        config_file,
        ("oct_lint", {}),
        ("oct_lint", {"offset": _PROBLEMS - 25}),
    )
    direct = terminal(tmp_path, root, "ruff", "check", "--output-format", "json")

    assert len(json.loads(direct.stdout)) == _PROBLEMS
    page = structured(first)
    shown = len(page["diagnostics"])
    assert (page["count"], page["by_rule"], page["next_offset"]) == (_PROBLEMS, {"E711": _PROBLEMS}, shown)
    assert page["diagnostics"][0]["line"] == 2
    assert f"the rest with offset={shown}" in only_text(first)
    tail = structured(last)
    assert (tail["next_offset"], len(tail["diagnostics"]), tail["diagnostics"][-1]["line"]) == (
        None,
        25,
        _PROBLEMS + 1,
    )


async def test_lint_passes_ruffs_own_warnings_through(tmp_path: Path, config_file: Path) -> None:
    root = fixture_project(tmp_path, "markdown")

    (result,) = await call(tmp_path, root, config_file, ("oct_lint", {"paths": ["docs"]}))
    direct = terminal(tmp_path, root, "ruff", "check", "--", "docs")

    output = structured(result)
    assert "No Python files found" in direct.stderr
    assert output["count"] == 0
    assert output["warnings"] == ["warning: No Python files found under the given path(s)"]
    assert "No Python files found" in only_text(result)


# -- oct_format --------------------------------------------------------------------------------


async def test_format_reports_every_file_it_changed(tmp_path: Path, config_file: Path) -> None:
    root = fixture_project(tmp_path, "markdown")

    direct = terminal(tmp_path, root, "ruff", "format", "--diff")
    (result,) = await call(tmp_path, root, config_file, ("oct_format", {"apply": True}))

    assert sorted(re.findall(r"^--- (\S+)$", direct.stdout, re.MULTILINE)) == ["README.md", "code.py"]
    assert structured(result)["changed_files"] == ["README.md", "code.py"]
    assert "x = 1" in (root / "README.md").read_text()


# -- ignores: git status, list and search ------------------------------------------------------

_VENV_FILES = 2_000


def unignored_venv_project(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose .venv (thousands of files) no .gitignore names, and a user home whose
    global excludes file ignores `*.log`."""
    root = tmp_path.resolve() / "oct" / "unignored_venv"
    shutil.copytree(DATA / "unignored_venv", root)
    site = root / ".venv" / "lib" / "python3.11" / "site-packages" / "dependency"
    site.mkdir(parents=True)
    for index in range(_VENV_FILES):
        (site / f"module_{index}.py").write_text("VALUE = 'marker-string'\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"marker-string")
    home = tmp_path.resolve() / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Test\n[core]\n\texcludesFile = ~/global-ignore\n")
    (home / "global-ignore").write_text("*.log\n")
    git = ["git", "-C", str(root), "-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "app.py", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "initial"], check=True)
    return root, home


async def call_as_user(
    tmp_path: Path, root: Path, home: Path, config_file: Path, *calls: tuple[str, dict[str, Any]]
) -> list[types.CallToolResult]:
    answers = []
    env = {**server_env(tmp_path), "HOME": str(home)}
    with anyio.fail_after(240):
        async with Client(oct_server(root, config_file, env=env)) as client:
            for tool, arguments in calls:
                answers.append(await client.call_tool(tool, arguments))
    return answers


def as_user(home: Path, root: Path, *argv: str) -> list[str]:
    """A git command in a terminal: the user's global config loaded, as git does for them."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    completed = subprocess.run(["git", *argv], cwd=root, env=env, capture_output=True, text=True, check=True)
    return completed.stdout.splitlines()


async def test_git_status_shows_an_unignored_venv_as_one_entry_and_honours_the_global_excludes(
    tmp_path: Path, config_file: Path
) -> None:
    root, home = unignored_venv_project(tmp_path)

    (status,) = await call_as_user(tmp_path, root, home, config_file, ("oct_git_status", {}))
    direct = as_user(home, root, "status", "--porcelain")

    assert direct == ["?? .venv/", "?? __pycache__/"]
    assert [f"{e['xy']} {e['path']}" for e in structured(status)["entries"]] == direct


async def test_list_and_search_skip_environment_folders_and_honour_the_global_excludes(
    tmp_path: Path, config_file: Path
) -> None:
    root, home = unignored_venv_project(tmp_path)

    listing, search, inside = await call_as_user(
        tmp_path,
        root,
        home,
        config_file,
        ("oct_list_files", {}),
        ("oct_search", {"pattern": "marker-string"}),
        ("oct_list_files", {"path": ".venv/lib/python3.11/site-packages/dependency", "max_results": 5}),
    )
    direct = as_user(home, root, "ls-files", "--cached", "--others", "--exclude-standard")

    project_files = [path for path in direct if not path.startswith((".venv/", "__pycache__/"))]
    assert project_files == ["README.md", "app.py"]
    assert structured(listing)["files"] == project_files
    assert [match["path"] for match in structured(search)["matches"]] == ["app.py"]
    assert len(structured(inside)["files"]) == 5


def test_doctor_says_which_interpreter_runs_the_tests_and_which_checker_and_why(
    tmp_path: Path, config_file: Path
) -> None:
    root = fixture_project(tmp_path, "both_checkers")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)

    doctor = subprocess.run(
        [
            sys.executable,
            "-m",
            "oct_mcp",
            "doctor",
            "--project-root",
            str(root),
            "--config",
            str(config_file),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    lines = {line.split()[0]: line for line in doctor.splitlines() if line.strip().startswith("oct_")}
    assert (
        f"runs {root}/venv/bin/python -m pytest (python -m pytest, with the project's venv's interpreter)"
        in (lines["oct_test"])
    )
    assert (
        "(checker: mypy (the project configures pyright too, but pyright is not installed))"
        in (lines["oct_typecheck"])
    )


async def test_a_poetry_project_runs_its_tests_with_poetrys_environment(
    tmp_path: Path, config_file: Path
) -> None:
    # native: the environment's .pth reaches this test run's packages, which no sandbox binds.
    config_file.write_text(json.dumps({"sandbox_backend": "native", "allow_unconfined_project_code": True}))
    root = tmp_path.resolve() / "oct" / "poetry_flat"
    shutil.copytree(DATA / "flat", root)
    (root / "pyproject.toml").write_text('[tool.poetry]\nname = "Poetry Flat"\nversion = "0"\n')
    digest = hashlib.sha256(os.fsencode(os.path.realpath(root))).digest()
    name = f"poetry_flat-{base64.urlsafe_b64encode(digest).decode()[:8]}-py3.11"
    environment = Path(server_env(tmp_path)["XDG_CACHE_HOME"]) / "pypoetry" / "virtualenvs" / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True)
    (site,) = environment.glob("lib/python3*/site-packages")
    (site / "outer.pth").write_text(next(p for p in sys.path if p.endswith("site-packages")) + "\n")

    (result,) = await call(tmp_path, root, config_file, ("oct_test", {}))

    output = structured(result)
    assert (output["passed"], output["failed"]) == (1, 1)
    assert output["notes"] == [
        "ran: python -m pytest, with poetry's environment for the project's interpreter"
    ]


async def test_a_junit_report_in_addopts_is_written_outside_the_read_only_project(
    tmp_path: Path, config_file: Path
) -> None:
    root = fixture_project(tmp_path, "junit_addopts")

    (result,) = await call(tmp_path, root, config_file, ("oct_test", {}))
    direct = terminal(tmp_path, root, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider")

    output = structured(result)
    assert pytest_counts(direct.stdout) == {"passed": 2}
    assert (output["passed"], output["failed"], output["errors"]) == (2, 0, 0)
    assert not (root / "reports").exists()
