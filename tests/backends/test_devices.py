"""Devices a test suite uses, per backend: ptys, /dev listed, POSIX shared memory, no keystrokes typed.

`device_probe.py` runs under each confining backend through the real runner, from a harness that
first opens a pty and a shared memory segment of its own outside the run (the user's terminal, a
browser's segment): the run must reach neither. The harness runs as the server's user and as an
unprivileged one (nobody).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Final

import pytest
from command_tool import run_command
from optional import bubblewrap, landlock
from unprivileged import NOBODY, PACKAGES, copied_packages, unprivileged_python

from oct_mcp.backends.devices import PTYS, SHARED_MEMORY, device_notes
from oct_mcp.backends.loopback import loopback_support

pytestmark = pytest.mark.e2e

PROBE: Final = Path(__file__).with_name("device_probe.py")
HARNESS: Final = """
import json, os, select, shutil, sys, tempfile, time
from multiprocessing import shared_memory
from pathlib import Path
import anyio
from oct_mcp.backends import Limits, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.runner import run_prepared

probe, name = Path(sys.argv[1]), sys.argv[2]
backend = Bubblewrap() if name == "bubblewrap" else LandlockBackend()
runs_folders = lambda: {entry for entry in os.listdir("/dev/shm") if entry.startswith("oct-run-")}
folders_before = runs_folders()
master, terminal = os.openpty()
number = os.ttyname(terminal).rsplit("/", 1)[1]
segment = shared_memory.SharedMemory(create=True, size=16)
segment.buf[:7] = b"private"
left = f"oct-left-{os.getpid()}"
scratch = Path(tempfile.mkdtemp(prefix="oct-devices-"))
try:
    home, tmp = backend.home_and_tmp(scratch)
    request = SandboxRequest(
        argv=(sys.executable, "-I", str(probe), number, segment.name, left),
        project=probe.parent, writable=False, network=False, protected=(),
        read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
        env={"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": tmp},
        limits=Limits(memory_bytes=1024 * 1_048_576, cpu_seconds=120), scratch=scratch,
    )
    prepared = backend.prepare(request)
    run = anyio.run(lambda: run_prepared(prepared, backend=name, time_limit=120, max_output=1 << 20))
    lines = run.stdout.decode().strip().splitlines()
    results = json.loads(lines[-1]) if lines else {"stderr": run.stderr.decode()[-3000:]}
    results["outside: segment"] = bytes(segment.buf[:7]).decode()
    results["outside: terminal typed into"] = bool(select.select([terminal], [], [], 0)[0])
    results["outside: run's segment seen"] = os.path.exists(f"/dev/shm/{left}")
    # Removed by the supervisor once the run's last process is gone, a moment after the call returns.
    deadline = time.monotonic() + 10
    while runs_folders() - folders_before and time.monotonic() < deadline:
        time.sleep(0.05)
    results["outside: run's folder left"] = sorted(runs_folders() - folders_before)
finally:
    shutil.rmtree(scratch, ignore_errors=True)
    segment.close()
    segment.unlink()
    if os.path.exists(f"/dev/shm/{left}"):
        os.unlink(f"/dev/shm/{left}")
print(json.dumps(results))
"""

OUTSIDE_UNTOUCHED: Final = {
    "outside: segment": "private",
    "outside: terminal typed into": False,
    "outside: run's segment seen": False,
    "outside: run's folder left": [],
}
EXPECTED: Final = {
    # Its own /dev: a devpts of its own (the user's terminals are not there), a /dev/shm of its own.
    "bubblewrap": {
        "other pts": "ERR FileNotFoundError",
        "pair": "OK ping",
        "forkpty": "OK child:1",
        "spawn": "OK True",
        "TIOCSTI": "ERR PermissionError",
        "TIOCSTI own pty": "ERR PermissionError",
        "list /dev": "OK True",
        "block device": "OK False",
        "other segment": "ERR FileNotFoundError",
        "other segment by shm_open": "ERR FileNotFoundError",
        "lock": "OK True",
        "pool fork": "OK [2, 4]",
        "pool spawn": "OK [2, 4]",
        "pool forkserver": "OK [2, 4]",
        "manager": "OK {'a': 1}",
        "shared_memory": "OK True",
        "named semaphore": "OK 2",
        "leave segment": "OK None",
        **OUTSIDE_UNTOUCHED,
    },
    # /dev listed; ptys and /dev/shm through the supervisor: the terminal side of its own pty only,
    # its segments in a folder of its own (oct_mcp/backends/ptys.py, shm.py). Another pty or segment
    # opened by its path is refused by Landlock; one opened as glibc opens its own is not there.
    "landlock": {
        "other pts": "ERR PermissionError",
        "pair": "OK ping",
        "forkpty": "OK child:1",
        "spawn": "OK True",
        "TIOCSTI": "ERR PermissionError",
        "TIOCSTI own pty": "ERR PermissionError",
        "list /dev": "OK True",
        "block device": "OK False",
        "other segment": "ERR PermissionError",
        "other segment by shm_open": "ERR FileNotFoundError",
        "lock": "OK True",
        "pool fork": "OK [2, 4]",
        "pool spawn": "OK [2, 4]",
        "pool forkserver": "OK [2, 4]",
        "manager": "OK {'a': 1}",
        "shared_memory": "OK True",
        "named semaphore": "OK 2",
        "leave segment": "OK None",
        **OUTSIDE_UNTOUCHED,
    },
}


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_a_run_gets_the_devices_its_backend_gives_and_never_the_users_terminal_or_segments(
    backend: str, tmp_path: Path
) -> None:
    harness = tmp_path / "harness.py"
    harness.write_text(textwrap.dedent(HARNESS))
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(PROBE, project / PROBE.name)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    completed = subprocess.run(
        [sys.executable, str(harness), str(project / PROBE.name), backend],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip

    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == EXPECTED[backend]


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_as_nobody_a_run_gets_the_same_devices_and_never_the_users_terminal_or_segments(
    backend: str,
) -> None:
    python = unprivileged_python()
    with copied_packages(PACKAGES) as base:
        (base / "harness.py").write_text(textwrap.dedent(HARNESS))
        probe = base / "project" / PROBE.name
        shutil.copy(PROBE, probe)
        probe.chmod(0o644)
        command = [
            "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
            "env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={base / 'site'}", "HOME=/nonexistent",
            python, "-s", str(base / "harness.py"), str(probe), backend,
        ]  # fmt: skip

        completed = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)

    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == EXPECTED[backend]


NEEDS_BOTH: Final = """
import multiprocessing, os, traceback
try:
    master, terminal = os.openpty()
    print("ok")
except OSError:
    traceback.print_exc()
try:
    multiprocessing.Lock()
    print("ok")
except OSError:
    traceback.print_exc()
"""


@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_result_has_no_device_note_since_runs_get_both(backend: str, tmp_path: Path) -> None:
    """Landlock's runs get them through the supervisor; a note stays for a kernel that cannot supervise."""
    (tmp_path / "needs_both.py").write_text(NEEDS_BOTH)
    chosen = bubblewrap() if backend == "bubblewrap" else landlock()
    result = await run_command(chosen, tmp_path, [sys.executable, "-I", "needs_both.py"])

    assert result.text.splitlines() == ["ok", "ok"]


def test_a_run_that_needed_a_pty_or_shared_memory_is_told_which_and_what_gives_it() -> None:
    pexpect = b"E   OSError: out of pty devices\n"
    pty_test = (
        b">       master, slave = os.openpty()\nE       PermissionError: [Errno 13] Permission denied\n"
    )
    joblib = b"UserWarning: [Errno 13] Permission denied.  joblib will operate in serial mode\n"
    semlock = b'  File ".../multiprocessing/synchronize.py", line 57, in __init__\nPermissionError\n'

    assert device_notes((PTYS, SHARED_MEMORY), pexpect) == [PTYS.note]
    assert device_notes((PTYS, SHARED_MEMORY), pty_test) == [PTYS.note]
    assert device_notes((PTYS, SHARED_MEMORY), joblib + semlock) == [SHARED_MEMORY.note]
    assert device_notes((PTYS, SHARED_MEMORY), pexpect + semlock) == [PTYS.note, SHARED_MEMORY.note]
    assert device_notes((PTYS, SHARED_MEMORY), b"3 passed in 0.1s\n") == []
    assert device_notes((), pexpect + semlock) == []


def test_doctor_names_no_device_gap_where_the_supervisor_gives_landlock_runs_ptys_and_shared_memory() -> None:
    if loopback_support() is not None:
        pytest.skip(f"this kernel cannot supervise a run: {loopback_support()}")
    detail = landlock().probe().detail

    assert "pty" not in detail
    assert "/dev/shm" not in detail
