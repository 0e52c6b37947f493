"""oct_test's structured results from real pytest runs, through a real SDK client over stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from clients import oct_server
from mcp import Client
from optional import usable_backend

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

VENV_BIN = Path(sys.executable).parent
BACKENDS = ("landlock", "bubblewrap")


def _project(root: Path, tests: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "conftest.py").write_text('pytest_plugins = ["pytester"]\n')
    (root / "tests" / "test_outer.py").write_text(tests)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-rsfE"\n')
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "pytest").symlink_to(VENV_BIN / "pytest")
    return root


NESTED = '''
import pytest


def test_plain_failure():
    assert 1 == 2, "plain"


def test_runs_a_nested_pytest(pytester):
    pytester.makepyfile(
        test_inner="""
        import pytest

        @pytest.fixture
        def bad():
            raise ValueError("inner fixture")

        def test_inner_fails():
            assert 1 == 2

        def test_inner_errors(bad):
            pass
        """
    )
    pytester.runpytest("-rfE").assert_outcomes(passed=2)


@pytest.mark.skip(reason="needs a GPU")
def test_skipped():
    pass


def test_after_the_nested_run():
    raise KeyError("after")
'''

SLOW = """
import time


def test_fails_first():
    assert "a" == "b"


def test_passes():
    pass


def test_hangs():
    time.sleep(120)
"""


def _env(backend: str) -> dict[str, str]:
    return {"OCT_MCP_SANDBOX": backend, "PATH": os.environ["PATH"]}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_nested_pytester_run_leaves_the_structured_failures_and_skip_reasons_right(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path.resolve() / "proj", NESTED)
    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file, env=_env(backend))) as client:
            result = await client.call_tool("oct_test", {})

    structured = result.structured_content
    assert structured is not None, result.content
    counts = {key: structured[key] for key in ("passed", "failed", "errors", "skipped")}
    assert counts == {"passed": 0, "failed": 3, "errors": 0, "skipped": 1}
    assert [(f["node_id"], f["message"]) for f in structured["failures"]] == [
        ("tests/test_outer.py::test_plain_failure", "AssertionError: plain\nassert 1 == 2"),
        (
            "tests/test_outer.py::test_runs_a_nested_pytest",
            structured["failures"][1]["message"],
        ),
        ("tests/test_outer.py::test_after_the_nested_run", "KeyError: 'after'"),
    ]
    assert structured["failures"][1]["message"].startswith("AssertionError: assert {")
    assert "inner fixture" not in structured["failures"][1]["message"]
    assert structured["skips"] == [{"reason": "needs a GPU", "count": 1, "where": "tests/test_outer.py"}]
    assert structured["ended"] == "finished"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_run_past_its_time_limit_returns_what_pytest_reported_until_then(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path.resolve() / "proj", SLOW)
    config_file.write_text(json.dumps({"timeout_test_seconds": 8}))
    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file, env=_env(backend))) as client:
            result = await client.call_tool("oct_test", {})

    structured = result.structured_content
    assert structured is not None, result.content
    assert structured["ended"] == "timed_out"
    counts = {key: structured[key] for key in ("passed", "failed", "errors", "skipped")}
    assert counts == {"passed": 1, "failed": 1, "errors": 0, "skipped": 0}
    (failure,) = structured["failures"]
    assert failure["node_id"] == "tests/test_outer.py::test_fails_first"
    assert failure["message"].startswith("AssertionError: assert 'a' == 'b'")
    assert structured["notes"][0].startswith("[timeout] the run reached its time limit")


REFUSED = """
import asyncio
import multiprocessing
import os
import pty
import socket
import warnings
from multiprocessing import shared_memory


def test_tcp_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.close()


def test_asyncio_server():
    async def main():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        server.close()

    asyncio.run(main())


def test_unix_socket(tmp_path):
    socket.socket(socket.AF_UNIX).bind(str(tmp_path / "s"))


def test_udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(("127.0.0.1", 0))


def test_pty():
    pty.openpty()


def test_lock():
    multiprocessing.Lock()


def test_shared_memory():
    shared_memory.SharedMemory(create=True, size=16).unlink()


def test_lists_dev():
    os.listdir("/dev")


def test_writes_in_project():
    os.mkdir("some_folder")


def test_plain():
    raise PermissionError("a message of the test's own, not the sandbox's")


def test_degrades():
    warnings.warn("[Errno 13] Permission denied.  joblib will operate in serial mode", UserWarning)
"""

# What the note names for each test, where the backend refused the test something. A pty, a
# semaphore or shared memory is the sandbox's device note's to name, never a refusal note's.
REFUSALS = {
    "test_tcp_server": "TCP socket (('127.0.0.1', 0)",
    "test_asyncio_server": "TCP socket (",
    "test_unix_socket": "create a unix socket",
    "test_udp": "create a UDP socket",
    "test_lists_dev": "open a path the sandbox does not show (/dev)",
}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_test_the_sandbox_refused_something_is_named_with_what_would_allow_it(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path.resolve() / "proj", REFUSED)
    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file, env=_env(backend))) as client:
            result = await client.call_tool("oct_test", {})

    structured = result.structured_content
    assert structured is not None, result.content
    failed = {f["node_id"].rpartition("::")[2] for f in structured["failures"]}
    refusals = [note for note in structured["notes"] if note.startswith("sandbox refusal:")]
    for test, named in REFUSALS.items():
        naming = [note for note in refusals if f"::{test}" in note]
        if test in failed:
            (note,) = naming
            assert f"the {backend} sandbox refused to" in note
            assert named in note.replace('"', "'")
        else:
            assert naming == []
    (written,) = [note for note in refusals if "::test_writes_in_project" in note]
    assert "some_folder" in written
    assert "oct_run and writes=true" in written
    assert not any("test_plain" in note for note in refusals)
    for device in ("test_pty", "test_lock", "test_shared_memory", "test_degrades"):
        assert not any(f"::{device}" in note for note in refusals)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_link_to_a_folder_the_sandbox_does_not_show_is_ignored_and_named_not_a_failed_run(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    elsewhere = tmp_path.resolve() / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "test_data.py").write_text("def test_in_the_data_folder():\n    pass\n")
    project = _project(tmp_path.resolve() / "proj", "def test_ok():\n    pass\n")
    (project / "data").symlink_to(elsewhere)
    (project / "tests" / "fixtures").symlink_to(elsewhere)
    (project / "src").mkdir()
    (project / "tests" / "inside").symlink_to(project / "src")
    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file, env=_env(backend))) as client:
            result = await client.call_tool("oct_test", {})

    structured = result.structured_content
    assert structured is not None, result.content
    counts = {key: structured[key] for key in ("passed", "failed", "errors", "skipped")}
    # The terminal runs the two tests behind the links too; the run sees only its own.
    assert counts == {"passed": 1, "failed": 0, "errors": 0, "skipped": 0}
    (hidden,) = [note for note in structured["notes"] if note.startswith("hidden from the run:")]
    assert hidden.startswith("hidden from the run: data, tests/fixtures: links to what lies outside")
    assert "--ignore" in hidden
