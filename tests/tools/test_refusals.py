"""Refusal notes claim only what the backend refuses and the report shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from oct_mcp.tools.python import pytest_report
from oct_mcp.tools.python.refusals import refusal_notes

pytestmark = pytest.mark.e2e

ROOT = Path("/home/dev/project")
# A bind to a port below 1024 by a user without the right: the system's answer, not a sandbox's.
LOW_PORT = pytest_report.TestFailure(
    node_id="tests/test_net.py::test_binds_port_80",
    kind="failed",
    message="PermissionError: [Errno 13] Permission denied",
    traceback='tests/test_net.py:5: in test_binds_port_80\n    server.bind(("127.0.0.1", 80))',
)
READ_ONLY = pytest_report.TestFailure(
    node_id="tests/test_io.py::test_writes_here",
    kind="failed",
    message="OSError: [Errno 30] Read-only file system: 'out.txt'",
    traceback="tests/test_io.py:3: in test_writes_here\n    open('out.txt', 'w')",
)


@pytest.mark.parametrize("backend", ["bubblewrap", "native", "sandbox_exec"])
def test_a_refusal_the_backend_does_not_make_is_not_claimed(backend: str) -> None:
    assert refusal_notes([LOW_PORT], backend, ROOT) == []


def test_landlock_which_refuses_every_bind_without_network_names_it_with_the_address() -> None:
    (note,) = refusal_notes([LOW_PORT], "landlock", ROOT)

    assert note.startswith(
        "sandbox refusal: 1 test(s) failed because the landlock sandbox refused to bind, listen on or "
        'connect a TCP socket (("127.0.0.1", 80)), for example tests/test_net.py::test_binds_port_80; '
    )


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_a_write_into_the_read_only_project_is_named_on_every_confining_backend(backend: str) -> None:
    (note,) = refusal_notes([READ_ONLY], backend, ROOT)

    assert "refused to write in the project, which runs see read-only (out.txt)" in note
    assert "oct_run and writes=true" in note
