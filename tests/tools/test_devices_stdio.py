"""A project's pty and multiprocessing tests under oct_test, through a real SDK client over stdio.

What a terminal runs must pass on each backend: ptys (`pty.openpty`, `os.forkpty`, a child on a
pty), multiprocessing with every start method, `Manager`, `shared_memory` and a named semaphore.
What the test holds outside the run (a pty of its own, a shared memory segment) must stay out of
reach: the project's tests read its names from a file and assert they are refused. The server
runs as the test's user and as an unprivileged one (nobody), each with a project it owns.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing import shared_memory
from pathlib import Path
from typing import Final

import anyio
import pytest
from clients import oct_server
from mcp import Client, StdioServerParameters
from optional import missing, usable_backend

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

VENV_BIN: Final = Path(sys.executable).parent
NOBODY: Final = 65534
BACKENDS: Final = ("landlock", "bubblewrap")
DEVICE_TESTS: Final = """
import ctypes
import json
import multiprocessing
import os
import pty
import select
import sys
from pathlib import Path

import _posixshmem
import pytest
from multiprocessing import shared_memory

OUTSIDE = json.loads((Path(__file__).parent / "outside.json").read_text())


def read_until(fd, wanted):
    seen = b""
    while wanted not in seen:
        ready, _, _ = select.select([fd], [], [], 10)
        if not ready:
            break
        try:
            chunk = os.read(fd, 1024)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        seen += chunk
    return seen


# First, before a pty of the run's own could take the same number in a devpts of its own.
def test_another_pty_is_refused():
    with pytest.raises(OSError):
        os.open(f"/dev/pts/{OUTSIDE['pts']}", os.O_RDWR | os.O_NOCTTY)


def test_openpty_round_trip():
    master, terminal = pty.openpty()
    os.write(terminal, b"ping\\n")
    assert b"ping" in read_until(master, b"ping")


def test_forkpty_child_is_on_a_terminal():
    pid, master = os.forkpty()
    if pid == 0:
        os.write(1, b"child:%d\\n" % os.isatty(0))
        os._exit(0)
    assert b"child:1" in read_until(master, b"\\n")
    os.waitpid(pid, 0)


def test_a_program_on_a_pty_answers():
    pid, master = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", "print('got', input())"])
    os.write(master, b"hello\\n")
    assert b"got hello" in read_until(master, b"got hello")
    os.waitpid(pid, 0)


def double(value):
    return value * 2


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool(method):
    with multiprocessing.get_context(method).Pool(2) as workers:
        assert workers.map(double, [1, 2, 3]) == [2, 4, 6]


def test_manager():
    with multiprocessing.Manager() as manager:
        shared = manager.dict(a=1)
        assert dict(shared) == {"a": 1}


def test_shared_memory():
    segment = shared_memory.SharedMemory(create=True, size=16)
    try:
        segment.buf[:2] = b"ok"
        other = shared_memory.SharedMemory(name=segment.name)
        assert bytes(other.buf[:2]) == b"ok"
        other.close()
    finally:
        segment.close()
        segment.unlink()


def test_named_semaphore():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sem_open.restype = ctypes.c_void_p
    libc.sem_open.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint)
    name = b"/named-%d" % os.getpid()
    made = libc.sem_open(name, os.O_CREAT | os.O_EXCL, 0o600, 0)
    assert made not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
    again = libc.sem_open(name, 0, 0, 0)
    assert again not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
    libc.sem_post(ctypes.c_void_p(again))
    value = ctypes.c_int()
    libc.sem_getvalue(ctypes.c_void_p(made), ctypes.byref(value))
    assert value.value == 1
    assert libc.sem_unlink(name) == 0


def test_another_segment_is_out_of_reach():
    with pytest.raises(OSError):
        os.open(f"/dev/shm/{OUTSIDE['segment']}", os.O_RDWR)
    with pytest.raises(OSError):
        _posixshmem.shm_open(f"/{OUTSIDE['segment']}", os.O_RDWR)
    with pytest.raises(OSError):
        _posixshmem.shm_unlink(f"/{OUTSIDE['segment']}")
"""
PASSED: Final = 11


@pytest.fixture
def outside() -> Iterator[dict[str, str]]:
    """A pty and a shared memory segment of the test's own, outside any run."""
    master, terminal = os.openpty()
    segment = shared_memory.SharedMemory(create=True, size=16)
    segment.buf[:7] = b"private"
    try:
        yield {"pts": os.ttyname(terminal).rsplit("/", 1)[1], "segment": segment.name}
        assert bytes(segment.buf[:7]) == b"private"
    finally:
        segment.close()
        segment.unlink()
        os.close(master)
        os.close(terminal)


def _runs_folders() -> set[str]:
    return {entry for entry in os.listdir("/dev/shm") if entry.startswith("oct-run-")}


def _project(root: Path, outside: dict[str, str]) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_devices.py").write_text(DEVICE_TESTS)
    (root / "tests" / "outside.json").write_text(json.dumps(outside))
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "pytest").symlink_to(VENV_BIN / "pytest")
    return root


async def _oct_test(server: StdioServerParameters) -> dict[str, object]:
    with anyio.fail_after(240):
        async with Client(server) as client:
            result = await client.call_tool("oct_test", {})
    assert result.structured_content is not None, result.content
    return result.structured_content


def _assert_all_passed(structured: dict[str, object], left_before: set[str]) -> None:
    counts = {key: structured[key] for key in ("passed", "failed", "errors", "skipped")}
    assert counts == {"passed": PASSED, "failed": 0, "errors": 0, "skipped": 0}, structured["failures"]
    assert not [note for note in structured["notes"] if "pty" in note or "/dev/shm" in note]  # type: ignore[attr-defined]
    # The run's own /dev/shm folder goes with its last process.
    deadline = time.monotonic() + 10
    while _runs_folders() - left_before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _runs_folders() - left_before == set()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_pty_and_multiprocessing_tests_pass_and_reach_nothing_outside_the_run(
    tmp_path: Path, config_file: Path, backend: str, outside: dict[str, str]
) -> None:
    usable_backend(backend)
    project = _project(tmp_path.resolve() / "proj", outside)
    before = _runs_folders()
    env = {"OCT_MCP_SANDBOX": backend, "PATH": os.environ["PATH"]}

    structured = await _oct_test(oct_server(project, config_file, env=env))

    _assert_all_passed(structured, before)


PYTEST_PACKAGES: Final = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")


def _link_or_copy(source: str, target: str) -> None:
    # A hard link where the tree shares the file system: no 250 MB copy, and the file's own mode
    # (0644 from pip) is what nobody reads it by.
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


@pytest.fixture(scope="module")
def readable_site() -> Iterator[Path]:
    """This test run's packages, oct_mcp included, where nobody can read them.

    The test run's own environment may lie under a folder only its owner may enter (a CI's
    temporary clone): the unprivileged server and its project's interpreter read this instead.
    """
    base = Path(tempfile.mkdtemp(prefix="oct-devices-site-", dir="/tmp"))
    try:
        base.chmod(0o755)
        site = base / "site"
        source = next(
            Path(path) for path in sys.path if path.endswith("site-packages") and Path(path).is_dir()
        )
        shutil.copytree(
            source,
            site,
            copy_function=_link_or_copy,
            ignore=shutil.ignore_patterns("__pycache__", "*.pth", "oct_mcp", "oct_mcp-*"),
        )
        package = Path(__file__).resolve().parent.parent.parent / "oct_mcp"
        shutil.copytree(package, site / "oct_mcp", ignore=shutil.ignore_patterns("__pycache__"))
        for path in [base, *base.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        for path in (site / "oct_mcp").rglob("*"):
            if path.is_file():
                path.chmod(0o644)
        yield site
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_as_an_unprivileged_server_pty_and_multiprocessing_tests_pass_the_same(
    backend: str, outside: dict[str, str], readable_site: Path
) -> None:
    usable_backend(backend)
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if os.geteuid() != 0 or not shutil.which("runuser") or not os.access(python, os.X_OK):
        missing(
            "an unprivileged user to run a server as",
            f"needs root (to switch to nobody), runuser and the system's {python}",
        )
    base = Path(tempfile.mkdtemp(prefix="oct-devices-nobody-", dir="/tmp"))
    try:
        base.chmod(0o755)
        project = base / "proj"
        (project / "tests").mkdir(parents=True)
        (project / "tests" / "test_devices.py").write_text(DEVICE_TESTS)
        (project / "tests" / "outside.json").write_text(json.dumps(outside))
        # The project's own environment: the system's interpreter, with this run's pytest beside it.
        venv = project / ".venv"
        bin_folder = venv / "bin"
        bin_folder.mkdir(parents=True)
        (bin_folder / "python").symlink_to(python)
        (venv / "pyvenv.cfg").write_text(
            f"home = {Path(python).parent}\ninclude-system-site-packages = false\n"
        )
        packages = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        packages.mkdir(parents=True)
        # Inside the project, the one place of this test's that every sandbox shows the run.
        for name in PYTEST_PACKAGES:
            found = readable_site / name
            if found.is_dir():
                shutil.copytree(found, packages / name, copy_function=_link_or_copy)
            elif found.exists():
                _link_or_copy(str(found), str(packages / name))
        config = base / "config.json"
        config.write_text("{}")
        for path in [base, *base.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        config.chmod(0o644)
        server = StdioServerParameters(
            command=str(shutil.which("runuser")),
            args=[
                "-u",
                "nobody",
                "--",
                "env",
                f"PYTHONPATH={readable_site}",
                python,
                "-s",
                "-m",
                "oct_mcp",
                "--project-root",
                str(project),
                "--config",
                str(config),
            ],
            env={"OCT_MCP_SANDBOX": backend, "PATH": "/usr/bin:/bin", "HOME": str(base)},
        )
        before = _runs_folders()

        structured = await _oct_test(server)

        _assert_all_passed(structured, before)
    finally:
        shutil.rmtree(base, ignore_errors=True)
