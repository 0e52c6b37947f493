"""Attack probes, each placed in the project as a malicious conftest.py would be, run by the real sandbox.

Each probe prints what it managed. bubblewrap and landlock must block every one they claim to;
native confines no files and no network, so where it cannot block a probe the test says so,
and names the profile that refuses native for it (every profile refuses native for command
tools unless allow_unconfined_project_code is set; strict and airgapped need the guarantees
native lacks).
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes import make_context
from optional import bubblewrap, landlock
from processes import MIB, processes_with
from pydantic import BaseModel, ConfigDict

from oct_mcp.backends import GUARANTEES, Backend
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.loopback import loopback_support
from oct_mcp.backends.native import Native
from oct_mcp.backends.runner import run_prepared
from oct_mcp.errors import (
    InstallRefusedError,
    ProjectCodeRefusedError,
    ProtectedPathCreatedError,
    SandboxUnavailableError,
    ToolTimeoutError,
)
from oct_mcp.execution.applier import ChangeApplier
from oct_mcp.execution.commands import CommandRunner
from oct_mcp.middleware.sandbox import ExecutionSandbox
from oct_mcp.spec import CommandPlan, Risk, RunResult, ToolEnv, ToolSpec
from oct_mcp.testing import validated
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture(params=["bubblewrap", "landlock", "native"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "bubblewrap":
        return bubblewrap()
    return landlock() if request.param == "landlock" else Native()


CONFINING = ("bubblewrap", "landlock")


class ProbeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    script: str
    writes: bool = False
    network: bool = False


def _as_text(run: RunResult) -> ToolResult:
    return ToolResult(text=(run.stdout + run.stderr).decode(errors="replace"), is_error=run.exit_code != 0)


def _plan(params: ProbeParams, env: ToolEnv) -> CommandPlan:
    return CommandPlan(
        argv=(sys.executable, "-I", str(env.workspace.root / params.script)),
        parse=_as_text,
        writes_project=params.writes,
        needs_network=params.network,
    )


PROBE_TOOL = ToolSpec(
    name="test_probe",
    title="Probe",
    description="",
    params=ProbeParams,
    output=None,
    risk=Risk.EXECUTE,
    plan=_plan,
)


def _sandbox(
    backend: Backend,
    *,
    required: frozenset[str] = frozenset(),
    timeout: float = 20,
    allow_degraded: bool = False,
    allow_unconfined: bool = True,
) -> ExecutionSandbox:
    return ExecutionSandbox(
        commands=CommandRunner(
            backend=backend,
            runner=run_prepared,
            required=required,
            allow_degraded=allow_degraded,
            max_output_bytes=MIB,
            timeout_seconds=timeout,
            test_timeout_seconds=timeout,
            memory_bytes=512 * MIB,
            threads=2,
            allow_unconfined=allow_unconfined,
        ),
        applier=ChangeApplier(),
    )


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A project beside a secret and an outside folder, as on a developer's disk."""
    base = tmp_path.resolve()
    project = base / "project"
    (project / ".git" / "hooks").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n")
    (base / "outside").mkdir()
    (base / "secret.txt").write_text("TOP SECRET\n")
    return project


async def _probe(
    backend: Backend, project: Path, code: str, *, writes: bool = False, network: bool = False, **sandbox: Any
) -> ToolResult:
    (project / "probe.py").write_text(textwrap.dedent(code))
    params = ProbeParams(script="probe.py", writes=writes, network=network)
    ctx = validated(make_context("test_probe", Workspace(project)), PROBE_TOOL, params)
    with anyio.fail_after(60):
        outcome = await _sandbox(backend, **sandbox)(
            ctx, lambda ctx: pytest.fail("terminal layer called next")
        )
    assert isinstance(outcome, ToolResult)
    return outcome


def _try(action: str) -> str:
    """A probe body: run `action`, print DONE, or BLOCKED and the error's name."""
    return textwrap.dedent(f"""
        try:
            {action}
            print("DONE")
        except Exception as exc:
            print("BLOCKED", type(exc).__name__)
    """)


async def test_t1_write_outside_the_project(backend: Backend, world: Path) -> None:
    target = world.parent / "outside" / "pwned.txt"

    result = await _probe(backend, world, _try(f"open({str(target)!r}, 'w').write('x')"), writes=True)

    if backend.name in CONFINING:
        assert result.text.startswith("BLOCKED")
        assert not target.exists()
    else:
        # Gap: native confines no files. strict and airgapped need writes_confined and refuse native.
        assert result.text.startswith("DONE")


async def test_t2_a_write_tool_cannot_touch_git_hooks_or_config(backend: Backend, world: Path) -> None:
    hook = world / ".git" / "hooks" / "pre-commit"
    code = _try(f"open({str(hook)!r}, 'w').write('#!/bin/sh\\ncurl evil')") + _try(
        f"open({str(world / '.git' / 'config')!r}, 'a').write('[core]\\nhooksPath=/tmp')"
    )

    if backend.name in CONFINING:
        result = await _probe(backend, world, code, writes=True)
        # bubblewrap: a read-only bind (EROFS); landlock: no write right on .git (EACCES).
        error = "OSError" if backend.name == "bubblewrap" else "PermissionError"
        assert result.text.split() == ["BLOCKED", error, "BLOCKED", error]
        assert not hook.exists()
        assert (world / ".git" / "config").read_text() == "[core]\n"
    else:
        # Native confines nothing: the writes happen, and the check after the run fails the call.
        error = await _writable_run(backend, world, code)
        assert error.message.startswith(
            "the tool wrote protected paths, which no tool may write: .git/config, .git/hooks/pre-commit "
            "(changed, moved or deleted;"
        )


async def _writable_run(backend: Backend, project: Path, code: str) -> ProtectedPathCreatedError:
    (project / "probe.py").write_text(textwrap.dedent(code))
    params = ProbeParams(script="probe.py", writes=True)
    ctx = validated(make_context("test_probe", Workspace(project)), PROBE_TOOL, params)
    with anyio.fail_after(60), pytest.raises(ProtectedPathCreatedError) as caught:
        await _sandbox(backend)(ctx, lambda ctx: pytest.fail("terminal layer called next"))
    return caught.value


async def test_protected_paths_a_write_tool_creates_are_removed_and_the_call_fails(
    backend: Backend, world: Path
) -> None:
    # bubblewrap binds only existing protected paths read-only; missing ones are checked after the run.
    (world / ".husky").mkdir()
    (world / ".husky" / "pre-commit").write_text("npm test\n")
    code = """
        from pathlib import Path
        Path(".vscode").mkdir()
        Path(".vscode/tasks.json").write_text('{"runOn": "folderOpen"}')
        Path(".pre-commit-config.yaml").write_text("repos: []")
        Path(".github/workflows").mkdir(parents=True)
        Path(".github/workflows/pwn.yml").write_text("on: push")
        Path("formatted.py").write_text("x = 1\\n")
    """
    if backend.name == "landlock":
        # No new entry can be made in the root at all: the first protected name is refused outright.
        result = await _probe(backend, world, code, writes=True)
        assert result.is_error
        assert "PermissionError" in result.text
        assert not (world / ".vscode").exists()
        return

    error = await _writable_run(backend, world, code)

    assert error.code == "protected_path_created"
    assert ".vscode" in error.message
    assert ".pre-commit-config.yaml" in error.message
    assert not (world / ".vscode").exists()
    assert not (world / ".pre-commit-config.yaml").exists()
    assert not (world / ".github" / "workflows").exists()
    assert (world / "formatted.py").read_text() == "x = 1\n"  # its other changes are kept
    assert (world / ".husky" / "pre-commit").read_text() == "npm test\n"  # there before: not touched


async def test_a_protected_path_created_behind_a_link_is_named_not_removed_through_it(
    backend: Backend, world: Path
) -> None:
    outside = world.parent / "outside"
    (outside / "workflows").mkdir()
    (outside / "workflows" / "keep.yml").write_text("keep\n")
    code = f"""
        import os
        os.symlink({str(outside)!r}, ".github")
    """
    if backend.name == "landlock":
        result = await _probe(backend, world, code, writes=True)
        assert "PermissionError" in result.text
        assert not os.path.lexists(world / ".github")
        return

    error = await _writable_run(backend, world, code)

    assert error.message.startswith(
        "the tool wrote protected paths, which no tool may write: .github (created;"
    )
    assert not (world / ".github").is_symlink()  # the link is removed, not what it leads to
    assert (outside / "workflows" / "keep.yml").read_text() == "keep\n"


async def test_landlock_removes_a_protected_path_made_inside_a_writable_folder(world: Path) -> None:
    (world / ".github").mkdir()  # not protected itself: writable, and .github/workflows is not there yet
    code = """
        from pathlib import Path
        Path(".github/workflows").mkdir()
        Path(".github/workflows/pwn.yml").write_text("on: push")
        Path(".github/dependabot.yml").write_text("version: 2")
    """

    error = await _writable_run(landlock(), world, code)

    assert ".github/workflows (created; removed again)" in error.message
    assert not (world / ".github" / "workflows").exists()
    assert (world / ".github" / "dependabot.yml").read_text() == "version: 2"


async def test_landlock_gives_no_write_through_a_link_in_the_project(world: Path) -> None:
    outside = world.parent / "outside"
    (world / "docs").symlink_to(outside)
    code = _try(f"open({str(world / 'docs' / 'pwned.txt')!r}, 'w').write('x')")

    result = await _probe(landlock(), world, code, writes=True)

    assert result.text.split() == ["BLOCKED", "PermissionError"]
    assert not (outside / "pwned.txt").exists()


async def test_t3_a_read_tool_cannot_write_the_project(backend: Backend, world: Path) -> None:
    result = await _probe(backend, world, _try(f"open({str(world / 'new.py')!r}, 'w').write('x')"))

    if backend.name in CONFINING:
        assert result.text.startswith("BLOCKED")
        assert not (world / "new.py").exists()
    else:
        assert result.text.startswith("DONE")


async def test_t4_read_a_secret_outside_the_project(backend: Backend, world: Path) -> None:
    result = await _probe(backend, world, _try(f"print(open({str(world.parent / 'secret.txt')!r}).read())"))

    if backend.name in CONFINING:
        assert result.text.startswith("BLOCKED")
    else:
        assert "TOP SECRET" in result.text


async def test_t5_the_servers_secrets_are_not_in_the_tools_environment(
    backend: Backend, world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "FAKE-AWS-SECRET")
    monkeypatch.setenv("GITHUB_TOKEN", "FAKE-GITHUB-TOKEN")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")

    result = await _probe(backend, world, "import os\nprint(sorted(os.environ))\n")

    assert "AWS_SECRET_ACCESS_KEY" not in result.text
    assert "GITHUB_TOKEN" not in result.text
    assert "LD_PRELOAD" not in result.text
    assert "'PATH'" in result.text


async def test_t6_the_servers_environment_cannot_be_read_through_proc(backend: Backend, world: Path) -> None:
    code = _try(f"open('/proc/{os.getpid()}/environ', 'rb').read()")

    result = await _probe(backend, world, code)

    if backend.name == "bubblewrap":
        # Its own PID namespace: the server is not even there to read.
        assert result.text.split() == ["BLOCKED", "FileNotFoundError"]
    elif backend.name == "landlock":
        # Outside the run's domain; and as root, the command has no capability left to get past it.
        assert result.text.split() == ["BLOCKED", "PermissionError"]
    elif os.geteuid() == 0:
        # Gap while the server runs as root: root reads any process's environ.
        assert result.text.startswith("DONE")
    else:
        # As its own user, the server is non-dumpable: a child of that user cannot read it.
        assert result.text.split() == ["BLOCKED", "PermissionError"]


def test_the_server_marks_itself_non_dumpable_when_it_builds_the_sandbox(tmp_path: Path) -> None:
    from oct_mcp.app import build_app

    build_app(tmp_path, config_path=tmp_path / "config.json", environ={})

    libc = ctypes.CDLL(None)
    assert libc.prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE


async def test_t7_t8_t9_airgapped_reaches_no_network(world: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.5)
    abstract = f"\0oct-probe-{os.getpid()}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(abstract)
    unix.listen()
    code = (
        "import socket\n"
        + _try(f"socket.create_connection(('127.0.0.1', {port}), timeout=2)")
        + _try(f"s = socket.socket(socket.AF_UNIX); s.connect({abstract!r})")
        + _try(f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', {udp.getsockname()!r})")
    )
    try:
        result = await _probe(bubblewrap(), world, code, required=frozenset(GUARANTEES))
        verdicts = result.text.split()
        # UDP to 127.0.0.1 may be "sent": into the sandbox's own loopback, which the host never sees.
        with pytest.raises(TimeoutError):
            udp.recvfrom(16)
    finally:
        unix.close()
        udp.close()

    assert verdicts[0::2][:2] == ["BLOCKED", "BLOCKED"]
    with pytest.raises(TimeoutError):
        listener.accept()


async def test_landlock_reaches_no_host_socket_of_any_kind(
    world: Path, listener: socket.socket, tmp_path: Path
) -> None:
    port = listener.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.5)
    abstract = f"\0oct-probe-{os.getpid()}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(abstract)
    unix.listen()
    socket_path = str(tmp_path / "agent.sock")  # outside the project, as an ssh-agent or Docker socket
    pathname = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pathname.bind(socket_path)
    pathname.listen()
    pathname.settimeout(0.5)
    code = (
        "import socket\n"
        + _try(f"socket.create_connection(('127.0.0.1', {port}), timeout=2)")
        + _try(f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', {udp.getsockname()!r})")
        + _try(f"s = socket.socket(socket.AF_UNIX); s.connect({abstract!r})")
        + _try(f"s = socket.socket(socket.AF_UNIX); s.connect({socket_path!r})")
        + _try("socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)")
        + _try("a, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'")
    )
    try:
        result = await _probe(landlock(), world, code, required=frozenset(GUARANTEES))
        with pytest.raises(TimeoutError):
            udp.recvfrom(16)
        with pytest.raises(TimeoutError):
            pathname.accept()
    finally:
        unix.close()
        udp.close()
        pathname.close()

    # With loopback supervised, the host's loopback sockets read as ports where nothing listens.
    loopback = "ConnectionRefusedError" if loopback_support() is None else "PermissionError"
    assert result.text.split() == [
        *["BLOCKED", loopback] * 2, *["BLOCKED", "PermissionError"] * 3, "DONE",
    ]  # fmt: skip
    with pytest.raises(TimeoutError):
        listener.accept()


async def test_landlock_cannot_signal_a_process_outside_the_run(world: Path) -> None:
    outsider = await anyio.open_process([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        result = await _probe(landlock(), world, _try(f"import os; os.kill({outsider.pid}, 9)"))
        assert outsider.returncode is None
    finally:
        outsider.kill()
        await outsider.wait()
        await outsider.aclose()

    assert result.text.split() == ["BLOCKED", "PermissionError"]


async def test_native_refuses_command_tools_unless_unconfined_project_code_is_allowed(world: Path) -> None:
    with pytest.raises(SandboxUnavailableError) as caught:
        await _probe(Native(), world, "print('ran')", allow_unconfined=False)

    assert caught.value.code == "sandbox_unavailable"
    assert "bubblewrap" in caught.value.message
    assert "Landlock" in caught.value.message
    assert "allow_unconfined_project_code" in caught.value.message


async def test_landlock_runs_command_tools_without_the_unconfined_opt_in(world: Path) -> None:
    result = await _probe(landlock(), world, "print('ran')", allow_unconfined=False)

    assert result.text == "ran\n"


async def test_airgapped_refuses_native_which_cannot_isolate_the_network(world: Path) -> None:
    with pytest.raises(SandboxUnavailableError) as caught:
        await _probe(Native(), world, "print('ran')", required=frozenset(GUARANTEES))

    assert "no_network" in caught.value.message
    assert "bubblewrap" in caught.value.message


async def test_strict_refuses_native_unless_degraded_runs_are_allowed(world: Path) -> None:
    strict = frozenset({"writes_confined", "reads_confined"})
    with pytest.raises(SandboxUnavailableError):
        await _probe(Native(), world, "print('ran')", required=strict)

    result = await _probe(Native(), world, "print('ran')", required=strict, allow_degraded=True)

    assert result.text == "ran\n"
    assert result.degraded == ("no_network", "reads_confined", "writes_confined")


async def test_a_tool_that_needs_the_network_is_refused_where_the_profile_forbids_it(world: Path) -> None:
    with pytest.raises(SandboxUnavailableError):
        await _probe(bubblewrap(), world, "print('ran')", network=True, required=frozenset({"no_network"}))


async def test_t11_a_fork_bomb_leaves_no_process_behind(backend: Backend, world: Path) -> None:
    marker = f"oct-fork-bomb-{os.getpid()}"
    code = f"""
        import subprocess, sys, time
        for _ in range(300):
            try:
                subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", {marker!r}])
            except OSError:
                break
        time.sleep(120)
    """

    with pytest.raises(ToolTimeoutError):
        await _probe(backend, world, code, timeout=3)

    with anyio.fail_after(10):
        while processes_with(marker):
            await anyio.sleep(0.05)


async def test_t12_a_memory_bomb_fails_inside_the_limit(backend: Backend, world: Path) -> None:
    code = _try("block = bytearray(2 * 1024 ** 3)")

    result = await _probe(backend, world, code)

    assert result.text.split() == ["BLOCKED", "MemoryError"]


async def test_t13_an_output_flood_is_cut_and_the_server_keeps_running(backend: Backend, world: Path) -> None:
    code = "import sys\nblock = b'y' * 65536\nfor _ in range(3200):\n    sys.stdout.buffer.write(block)\n"

    result = await _probe(backend, world, code)

    assert result.truncated is True
    assert len(result.text.encode()) <= MIB
    assert result.output_bytes is not None
    assert result.output_bytes > MIB


def _daemon_code(beat: Path, *, then_sleep: bool) -> str:
    return f"""
        import os, signal, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                while True:
                    with open({str(beat)!r}, "a") as f:
                        f.write("x")
                    time.sleep(0.02)
            os._exit(0)
        while not os.path.exists({str(beat)!r}):
            time.sleep(0.01)
        time.sleep({120 if then_sleep else 0})
    """


@pytest.mark.parametrize("then_sleep", [True, False], ids=["timed_out", "main_exits"])
async def test_t14_t15_a_setsid_daemon_that_ignores_sigterm_is_gone_after_the_call_under_landlock(
    world: Path, then_sleep: bool
) -> None:
    beat = world / "src" / "heartbeat"
    (world / "src").mkdir()
    code = _daemon_code(beat, then_sleep=then_sleep)

    if then_sleep:
        with pytest.raises(ToolTimeoutError):
            await _probe(landlock(), world, code, writes=True, timeout=2)
    else:
        await _probe(landlock(), world, code, writes=True)
    size = beat.stat().st_size
    await anyio.sleep(0.5)

    assert size > 0
    assert beat.stat().st_size == size


async def test_t14_a_daemon_that_ignores_sigterm_dies_with_the_run_under_bubblewrap(world: Path) -> None:
    beat = world / "heartbeat"
    code = f"""
        import os, signal, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                while True:
                    with open({str(beat)!r}, "a") as f:
                        f.write("x")
                    time.sleep(0.02)
            os._exit(0)
        time.sleep(120)
    """

    with pytest.raises(ToolTimeoutError):
        await _probe(bubblewrap(), world, code, writes=True, timeout=1)
    size = beat.stat().st_size
    await anyio.sleep(0.5)

    assert size > 0
    assert beat.stat().st_size == size


async def test_t16_a_process_that_ignores_sigterm_is_killed(backend: Backend, world: Path) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(120)\n"

    with anyio.fail_after(20), pytest.raises(ToolTimeoutError):
        await _probe(backend, world, code, timeout=1)


async def test_t21_the_tool_runs_in_its_own_session(backend: Backend, world: Path) -> None:
    result = await _probe(backend, world, f"import os\nprint(os.getsid(0) != {os.getsid(0)})\n")

    assert result.text == "True\n"


async def test_bubblewrap_disappearing_after_start_up_refuses_instead_of_running_unsandboxed(
    world: Path, tmp_path: Path
) -> None:
    backend = bubblewrap()
    assert backend.executable is not None
    copy = tmp_path / "bwrap"
    copy.write_bytes(Path(backend.executable).read_bytes())
    copy.chmod(0o755)
    vanishing = Bubblewrap()
    vanishing.__dict__["executable"] = str(copy)  # the cached lookup, pointed at a copy we can remove
    assert (await _probe(vanishing, world, "print('ran')")).text == "ran\n"

    copy.unlink()

    with pytest.raises(SandboxUnavailableError) as caught:
        await _probe(vanishing, world, "print('ran')")
    assert "no longer" in caught.value.message


# what the project's own venv may get bound: nothing its files name


class VenvToolParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _plan_venv_tool(params: VenvToolParams, env: ToolEnv) -> CommandPlan:
    return CommandPlan(argv=(str(env.workspace.root / ".venv" / "bin" / "probe"),), parse=_as_text)


def _venv_tool_spec(risk: Risk) -> ToolSpec:
    return ToolSpec(
        name="test_venv_tool",
        title="Venv tool",
        description="",
        params=VenvToolParams,
        output=None,
        risk=risk,
        plan=_plan_venv_tool,
    )


def _plant_venv(project: Path, home_line: str, code: str, *, python: Path | None = None) -> None:
    """A project venv as a malicious repository ships it: its pyvenv.cfg, its python link, a tool."""
    bin_dir = project / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text(
        f"home = {home_line}\ninclude-system-site-packages = false\n"
    )
    (bin_dir / "python").symlink_to(python or os.path.realpath(sys.executable))
    (bin_dir / "probe").write_text(f"#!{bin_dir / 'python'} -I\n{textwrap.dedent(code)}")
    (bin_dir / "probe").chmod(0o755)


async def _run_venv_tool(
    backend: Backend, project: Path, *, risk: Risk = Risk.EXECUTE, **sandbox: Any
) -> ToolResult:
    ctx = validated(
        make_context("test_venv_tool", Workspace(project)), _venv_tool_spec(risk), VenvToolParams()
    )
    with anyio.fail_after(60):
        outcome = await _sandbox(backend, **sandbox)(
            ctx, lambda ctx: pytest.fail("terminal layer called next")
        )
    assert isinstance(outcome, ToolResult)
    return outcome


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = (tmp_path / "home").resolve()
    (home / ".ssh" / "bin").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(home))
    return home


async def test_a_venv_home_line_naming_the_ssh_folder_binds_nothing(world: Path, fake_home: Path) -> None:
    _plant_venv(
        world,
        str(fake_home / ".ssh" / "bin"),
        _try(f"print(open({str(fake_home / '.ssh' / 'id_ed25519')!r}).read())"),
    )

    result = await _run_venv_tool(bubblewrap(), world)

    assert "PRIVATE KEY" not in result.text
    assert result.text.split()[:2] == ["BLOCKED", "FileNotFoundError"]


async def test_a_venv_home_line_naming_proc_shows_no_host_process(world: Path) -> None:
    _plant_venv(world, "/proc/x", _try(f"print(open('/proc/{os.getpid()}/cmdline', 'rb').read())"))

    result = await _run_venv_tool(bubblewrap(), world)

    assert result.text.split()[:2] == ["BLOCKED", "FileNotFoundError"]


async def test_a_venv_home_line_naming_a_folder_with_a_host_socket_reaches_no_service_in_airgapped(
    world: Path,
) -> None:
    services = world.parent / "services"
    (services / "bin").mkdir(parents=True)
    host_service = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host_service.bind(str(services / "service.sock"))
    host_service.listen()
    code = "import socket\n" + _try(
        f"s = socket.socket(socket.AF_UNIX); s.connect({str(services / 'service.sock')!r})"
    )
    _plant_venv(world, str(services / "bin"), code)
    try:
        result = await _run_venv_tool(bubblewrap(), world, required=frozenset(GUARANTEES))
    finally:
        host_service.close()

    assert result.text.split()[:2] == ["BLOCKED", "FileNotFoundError"]


async def test_a_venv_python_linked_to_no_real_python_install_is_refused(
    backend: Backend, world: Path
) -> None:
    # A venv link leading outside the project to a lone file: binding its folder would show the folder.
    lone = world.parent / "outside" / "bin" / "python"
    lone.parent.mkdir(parents=True)
    lone.write_text("#!/bin/sh\necho ran\n")
    lone.chmod(0o755)
    (world.parent / "outside" / "secret.txt").write_text("TOP SECRET\n")
    _plant_venv(world, str(lone.parent), "print('ran')\n", python=lone)

    with pytest.raises(InstallRefusedError):
        await _run_venv_tool(backend, world)


async def test_a_venv_python_linked_to_a_real_python_install_runs(backend: Backend, world: Path) -> None:
    _plant_venv(world, "/nonexistent/bin", "import sys\nprint('ran', sys.version_info[:2])\n")

    result = await _run_venv_tool(backend, world)

    assert result.text.split()[0] == "ran", result.text


async def test_a_read_tool_never_runs_a_program_inside_the_project(backend: Backend, world: Path) -> None:
    marker = world.parent / "ran"
    _plant_venv(world, "/nonexistent/bin", f"open({str(marker)!r}, 'w').write('x')\n")

    with pytest.raises(ProjectCodeRefusedError):
        await _run_venv_tool(backend, world, risk=Risk.READ)

    assert not marker.exists()
