"""The runner with real processes: output cap, timeouts, kills that leave nothing behind, bounded drains."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from oct_mcp.backends import Prepared
from oct_mcp.backends.runner import run_prepared
from oct_mcp.errors import ToolUnavailableError
from oct_mcp.interrupts import pass_interrupts_to_children

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CAP = 1_048_576


@pytest.fixture(autouse=True)
def _interrupts_reach_children() -> Iterator[None]:
    """As the command line does first (`oct_mcp.interrupts`): pytest started as a shell's background
    job inherits SIGINT ignored, and so would every command these tests start."""
    before = signal.getsignal(signal.SIGINT)
    pass_interrupts_to_children()
    yield
    signal.signal(signal.SIGINT, before)


def _python(tmp_path: Path, code: str) -> Prepared:
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(code))
    return Prepared(
        argv=(sys.executable, str(script)),
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        guarantees=frozenset(),
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): it is dead for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_the_runner_returns_exit_code_and_both_pipes(tmp_path: Path) -> None:
    prepared = _python(tmp_path, "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)\n")

    with anyio.fail_after(30):
        result = await run_prepared(prepared, backend="native", time_limit=20, max_output=CAP)

    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    assert (result.truncated, result.timed_out, result.output_bytes) == (False, False, 8)


async def test_an_output_flood_is_cut_at_the_cap_and_the_process_killed(tmp_path: Path) -> None:
    prepared = _python(
        tmp_path,
        """
        import sys
        block = b"x" * 65536
        for _ in range(3200):  # 200 MiB
            sys.stdout.buffer.write(block)
        """,
    )

    with anyio.fail_after(30):
        result = await run_prepared(prepared, backend="native", time_limit=20, max_output=CAP)

    assert result.truncated is True
    assert len(result.stdout) + len(result.stderr) == CAP
    assert CAP < result.output_bytes < 200 * CAP
    assert result.exit_code is not None
    assert result.exit_code < 0
    assert result.timed_out is False


async def test_a_command_past_its_time_limit_is_killed(tmp_path: Path) -> None:
    prepared = _python(tmp_path, "import time\nprint('started', flush=True)\ntime.sleep(60)\n")

    with anyio.fail_after(30):
        result = await run_prepared(prepared, backend="native", time_limit=0.5, max_output=CAP)

    assert result.timed_out is True
    assert result.exit_code == -signal.SIGTERM
    assert result.stdout == b"started\n"


async def test_a_command_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    prepared = _python(
        tmp_path,
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n",
    )

    with anyio.fail_after(30):
        result = await run_prepared(prepared, backend="native", time_limit=0.5, max_output=CAP, grace=0.5)

    assert result.timed_out is True
    assert result.exit_code == -signal.SIGKILL


async def test_a_command_that_reports_when_interrupted_gets_sigint_first_and_prints_its_report(
    tmp_path: Path,
) -> None:
    prepared = _python(
        tmp_path,
        """
        import time
        print('started', flush=True)
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            print('2 passed, 1 failed (interrupted)', flush=True)
            raise SystemExit(2)
        """,
    )

    with anyio.fail_after(30):
        result = await run_prepared(
            prepared, backend="native", time_limit=0.5, max_output=CAP, interrupt_first=True
        )

    assert result.timed_out is True
    assert result.exit_code == 2
    assert result.stdout == b"started\n2 passed, 1 failed (interrupted)\n"


async def test_a_command_that_ignores_the_interrupt_is_ended_after_its_few_seconds(tmp_path: Path) -> None:
    prepared = _python(
        tmp_path,
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n",
    )

    with anyio.fail_after(30):
        result = await run_prepared(
            prepared,
            backend="native",
            time_limit=0.5,
            max_output=CAP,
            interrupt_first=True,
            interrupt_seconds=0.5,
        )

    assert result.timed_out is True
    assert result.exit_code == -signal.SIGTERM


async def test_children_in_the_commands_group_die_with_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    prepared = _python(
        tmp_path,
        f"""
        import subprocess, sys, time
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        children = [subprocess.Popen(sleeper) for _ in range(20)]
        open({str(pids)!r}, "w").write(" ".join(str(c.pid) for c in children))
        time.sleep(60)
        """,
    )

    with anyio.fail_after(30):
        await run_prepared(prepared, backend="native", time_limit=2, max_output=CAP)

    await _until_dead([int(pid) for pid in pids.read_text().split()])


async def _until_dead(pids: list[int]) -> None:
    """SIGKILL is delivered asynchronously: give the kernel a moment to finish each process."""
    with anyio.fail_after(10):
        while any(_alive(pid) for pid in pids):
            await anyio.sleep(0.01)


async def test_a_daemon_holding_the_pipe_cannot_hang_the_runner(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    prepared = _python(
        tmp_path,
        f"""
        import os, signal, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                open({str(pid_file)!r}, "w").write(str(os.getpid()))
                time.sleep(60)  # stdout and stderr stay open in here
            os._exit(0)
        os.wait()
        print("main done", flush=True)
        """,
    )
    try:
        with anyio.fail_after(30):
            result = await run_prepared(prepared, backend="native", time_limit=20, max_output=CAP, drain=0.5)

        assert result.exit_code == 0
        assert result.stdout == b"main done\n"
        assert result.timed_out is False
    finally:
        # A setsid daemon leaves the command's group: native cannot reach it (bubblewrap's PID
        # namespace can; strict and airgapped need that backend). Killed here by its recorded PID.
        with anyio.fail_after(10):
            while not pid_file.exists():
                await anyio.sleep(0.05)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)


async def test_a_run_cancelled_from_outside_still_kills_the_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    prepared = _python(
        tmp_path, f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    )

    with anyio.move_on_after(1):
        await run_prepared(prepared, backend="native", time_limit=30, max_output=CAP, grace=0.5)

    await _until_dead([int(pid_file.read_text())])


async def test_a_missing_program_is_a_clear_error(tmp_path: Path) -> None:
    prepared = Prepared(argv=(str(tmp_path / "no-such-tool"),), env={}, cwd=tmp_path, guarantees=frozenset())

    with pytest.raises(ToolUnavailableError) as caught:
        await run_prepared(prepared, backend="native", time_limit=5, max_output=CAP)

    assert caught.value.code == "tool_unavailable"
