"""The landlock backend's own mechanisms: backend choice, refused rules, a cancelled run, /sys.

Writes at the project root: `test_project_entries.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from optional import bubblewrap, landlock

from oct_mcp.backends import Limits, SandboxRequest
from oct_mcp.backends.runner import run_prepared
from oct_mcp.errors import SandboxUnavailableError, ToolUnavailableError

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

LIMITS = Limits(memory_bytes=512 * 1_048_576, cpu_seconds=65)


def _request(project: Path, scratch: Path, argv: tuple[str, ...], **changes: object) -> SandboxRequest:
    fields: dict[str, object] = {
        "argv": argv,
        "project": project,
        "writable": False,
        "network": False,
        "protected": (),
        "read_only_binds": (Path(sys.base_prefix), Path(sys.prefix)),
        "env": {"PATH": "/usr/bin"},
        "limits": LIMITS,
        "scratch": scratch,
    }
    fields.update(changes)
    return SandboxRequest(**fields)  # type: ignore[arg-type]


async def test_rules_the_kernel_refuses_fail_the_run_and_nothing_runs(tmp_path: Path) -> None:
    backend = landlock()
    marker = tmp_path / "ran"
    read_end, write_end = os.pipe()
    try:
        # A pipe is no file hierarchy: the kernel refuses a rule on it (EBADFD).
        request = _request(
            tmp_path,
            tmp_path,
            (sys.executable, "-c", f"open({str(marker)!r}, 'w')"),
            read_only_binds=(Path(f"/proc/self/fd/{read_end}"),),
        )
        prepared = backend.prepare(request)
        with anyio.fail_after(30), pytest.raises(SandboxUnavailableError) as caught:
            await run_prepared(prepared, backend="landlock", time_limit=20, max_output=65_536)
    finally:
        os.close(read_end)
        os.close(write_end)

    assert caught.value.code == "sandbox_unavailable"
    assert not marker.exists()


def test_auto_picks_landlock_where_bubblewrap_cannot_make_namespaces(tmp_path: Path) -> None:
    """As on Ubuntu 24.04 or in a container: run the choice where user namespaces are off."""
    bwrap = bubblewrap().executable
    landlock()
    assert bwrap is not None
    choice = "from oct_mcp.backends.selection import select_backend; print(select_backend('auto')[0].name)"
    # A private /tmp for the probes, with this checkout and its venv shown again where they live under it.
    shown = sorted({str(Path(sys.prefix)), str(Path(__file__).resolve().parents[2])})
    command = [
        bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        *(argument for path in shown for argument in ("--ro-bind", path, path)),
        "--unshare-user", "--disable-userns", "--unshare-pid", "--die-with-parent", "--",
        sys.executable, "-c", choice,
    ]  # fmt: skip

    completed = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["landlock"]


async def test_a_landlock_run_cancelled_from_outside_still_kills_the_command_and_its_daemon(
    tmp_path: Path,
) -> None:
    backend = landlock()
    (tmp_path / "src").mkdir()
    pids = tmp_path / "src" / "pids"
    code = textwrap.dedent(f"""
        import os, signal, time
        if os.fork() == 0:
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            open({str(pids)!r}, "a").write(str(os.getpid()) + "\\n")
            time.sleep(60)
        open({str(pids)!r}, "a").write(str(os.getpid()) + "\\n")
        time.sleep(60)
    """)
    request = _request(tmp_path, tmp_path, (sys.executable, "-I", "-c", code), writable=True)
    prepared = backend.prepare(request)

    with anyio.move_on_after(1):
        await run_prepared(prepared, backend="landlock", time_limit=30, max_output=65_536)

    with anyio.fail_after(10):
        while any(_alive(int(pid)) for pid in pids.read_text().split()):
            await anyio.sleep(0.05)
    assert len(pids.read_text().split()) == 2


async def test_a_missing_program_under_landlock_is_a_clear_error(tmp_path: Path) -> None:
    backend = landlock()
    prepared = backend.prepare(_request(tmp_path, tmp_path, ("/usr/bin/true",)))
    # Without the limit trampoline in front, which would report the missing program as its exit code.
    prepared = replace(prepared, argv=(str(tmp_path / "no-such-tool"),))

    with anyio.fail_after(30), pytest.raises(ToolUnavailableError) as caught:
        await run_prepared(prepared, backend="landlock", time_limit=5, max_output=65_536)

    assert caught.value.code == "tool_unavailable"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_a_run_reads_the_cpu_and_memory_limits_and_nothing_else_of_sys(tmp_path: Path) -> None:
    # joblib (loky) reads the cgroup's CPU quota to size its pool: a file that exists and cannot be
    # opened stopped its suite at collection. The limits are the run's to read; the rest is not.
    backend = landlock()
    limits = [
        path
        for path in (
            "/sys/fs/cgroup/cpu.max",
            "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/devices/system/cpu/online",
        )
        if os.path.isfile(path)
    ]
    assert limits  # /sys/devices/system/cpu/online is on every Linux
    others = ("/sys/fs/cgroup/cpu/cgroup.procs", "/sys/kernel/mm/transparent_hugepage/enabled")
    others = tuple(path for path in others if os.path.isfile(path))
    code = textwrap.dedent(f"""
        for path in {[*limits, *others]!r}:
            try:
                open(path).read()
                print(path, "READ")
            except OSError as exc:
                print(path, "BLOCKED", type(exc).__name__)
    """)
    request = _request(tmp_path, tmp_path, (sys.executable, "-I", "-c", code))

    prepared = backend.prepare(request)
    with anyio.fail_after(30):
        run = await run_prepared(prepared, backend="landlock", time_limit=20, max_output=65_536)

    lines = run.stdout.decode().splitlines()
    assert lines == [f"{path} READ" for path in limits] + [
        f"{path} BLOCKED PermissionError" for path in others
    ]


async def test_a_run_started_by_root_holds_no_capability_and_cannot_regain_one(tmp_path: Path) -> None:
    # As root the command would keep every capability and read the server's environment despite
    # Landlock: the spawning thread empties its bounding set and locks SECBIT_NOROOT first.
    if os.geteuid() != 0:
        pytest.skip("only a root server has capabilities for its runs to inherit")
    backend = landlock()
    code = "print(*(l for l in open('/proc/self/status') if l.startswith(('Cap', 'Uid'))), sep='')"
    request = _request(tmp_path, tmp_path, (sys.executable, "-I", "-c", code))

    prepared = backend.prepare(request)
    with anyio.fail_after(30):
        run = await run_prepared(prepared, backend="landlock", time_limit=20, max_output=65_536)

    fields = dict(line.split(":", 1) for line in run.stdout.decode().splitlines() if line)
    assert fields["Uid"].split()[0] == "0"
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[name], 16) == 0, name


def test_the_capability_check_sees_a_full_bounding_set_and_an_emptied_one() -> None:
    # The check asks the kernel capability by capability: a thread that dropped every one is seen
    # as holding none (so a run from it needs no drop), the server's own thread as holding some.
    import threading

    from oct_mcp.backends.landlock import _drop_root_capabilities, _thread_has_capabilities

    if os.geteuid() != 0:
        pytest.skip("only root may drop capabilities from its bounding set")
    seen: list[bool] = []

    def in_a_thread() -> None:
        seen.append(_thread_has_capabilities())
        _drop_root_capabilities()
        seen.append(_thread_has_capabilities())

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()

    assert seen == [True, False]
    assert _thread_has_capabilities()
