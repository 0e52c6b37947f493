"""A real SDK client over stdio against `python -m oct_mcp`, in both protocol eras."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import INITIALIZE, handshake, oct_server, only_text
from mcp import Client

from oct_mcp.tools import default_catalog

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.mark.parametrize(("mode", "protocol"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_a_client_over_stdio_lists_reads_and_is_refused_outside_the_project(
    project: Path, config_file: Path, mode: Any, protocol: str
) -> None:
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file, cwd=project), mode=mode) as client:
            negotiated = client.session.protocol_version
            listed = await client.list_tools()
            read = await client.call_tool("oct_read_file", {"path": "src/pkg/core.py"})
            files = await client.call_tool("oct_list_files", {"path": "src", "glob": "*.py"})
            refused = await client.call_tool("oct_read_file", {"path": "../outside.txt"})

    assert negotiated == protocol
    assert [tool.name for tool in listed.tools] == list(default_catalog())
    assert read.is_error is False
    assert only_text(read) == "def answer() -> int:\n    return 42\n"
    assert only_text(files).splitlines() == ["src/pkg/__init__.py", "src/pkg/core.py"]
    assert refused.is_error is True
    assert only_text(refused).startswith("[path_refused] ")
    assert "not yours" not in only_text(refused)


async def test_the_server_exits_cleanly_when_the_client_closes_stdin(
    project: Path, config_file: Path
) -> None:
    command = [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config_file)]
    with anyio.fail_after(60):
        process = await anyio.run_process(command, input=b"", check=False)

    assert process.returncode == 0
    assert process.stdout == b""
    assert b"Traceback" not in process.stderr


async def test_an_answer_larger_than_the_pipe_arrives_whole(project: Path, config_file: Path) -> None:
    # 90 KB of text, sent as text and as structured content: the writer meets a full pipe
    # (64 KiB) several times and waits for the client.
    line = "".join(chr(0x41 + index % 26) for index in range(99)) + "\n"
    text = line * 900
    (project / "big.txt").write_text(text)

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file, cwd=project)) as client:
            read = await client.call_tool("oct_read_file", {"path": "big.txt"})
            after = await client.call_tool("oct_read_file", {"path": "src/pkg/core.py"})

    assert read.is_error is False
    assert only_text(read) == text
    assert read.structured_content is not None
    assert read.structured_content["text"] == text
    assert only_text(after) == "def answer() -> int:\n    return 42\n"


def test_a_server_whose_client_stopped_reading_still_stops_on_sigterm(
    project: Path, config_file: Path
) -> None:
    # Answers pile up in a pipe nobody reads: the writer waits on the full pipe, and a signal must
    # still end the server (a writer thread blocked in write() would hold it).
    (project / "big.txt").write_text("x" * 900_000)
    command = [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config_file)]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as server:
        assert server.stdin is not None
        assert server.stdout is not None
        try:
            handshake(server)
            for ident in range(2, 6):
                call = {"name": "oct_read_file", "arguments": {"path": "big.txt"}}
                request = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": call}
                server.stdin.write(json.dumps(request).encode() + b"\n")
            server.stdin.flush()
            time.sleep(1.0)  # the first answer fills the pipe; the writer is waiting
            assert server.poll() is None

            started = time.monotonic()
            server.send_signal(signal.SIGTERM)
            code = server.wait(timeout=20)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()

    assert code == 0
    assert time.monotonic() - started < 10


def test_stray_writes_to_fd_1_while_serving_go_to_stderr_and_fd_1_comes_back(tmp_path: Path) -> None:
    script = tmp_path / "claim.py"
    script.write_text(
        "import os\n"
        "import anyio\n"
        "from oct_mcp.transports.stdio import _claimed_stdout\n"
        "with _claimed_stdout() as stdout:\n"
        "    assert stdout is not None\n"
        "    os.write(1, b'stray\\n')\n"
        "    anyio.run(stdout.write, 'protocol\\n')\n"
        "os.write(1, b'after\\n')\n"
    )

    done = subprocess.run([sys.executable, str(script)], capture_output=True, check=True, timeout=60)

    assert done.stdout == b"protocol\nafter\n"
    assert done.stderr == b"stray\n"


def test_stdout_that_is_not_a_pipe_is_left_to_the_sdk(tmp_path: Path) -> None:
    script = tmp_path / "claim.py"
    script.write_text(
        "from oct_mcp.transports.stdio import _claimed_stdout\n"
        "with _claimed_stdout() as stdout:\n"
        "    assert stdout is None\n"
        "print('plain')\n"
    )
    with (tmp_path / "out.txt").open("wb") as out:
        subprocess.run([sys.executable, str(script)], stdout=out, check=True, timeout=60)

    assert (tmp_path / "out.txt").read_text() == "plain\n"


GATED_SERVER = Path(__file__).parent / "servers" / "gated_build_server.py"


def _message(server: subprocess.Popen[bytes], timeout: float) -> dict[str, Any] | None:
    """The next line the server writes, or None when it writes none within `timeout` seconds."""
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], timeout)
    if not ready:
        return None
    line = server.stdout.readline()
    return json.loads(line) if line else None


def test_initialize_is_answered_while_the_app_is_still_being_built_and_the_listing_waits_for_it(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "build-now"
    server = subprocess.Popen(  # argv is a list, never a shell
        [
            sys.executable,
            str(GATED_SERVER),
            "--project-root",
            str(project),
            "--config",
            str(config_file),
            "--gate",
            str(gate),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None
    try:
        server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        server.stdin.flush()
        answered = _message(server, timeout=60)
        server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        server.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}\n')
        server.stdin.flush()
        before_the_build = _message(server, timeout=0.5)
        gate.touch()
        listed = _message(server, timeout=60)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        assert server.stdout is not None
        server.stdout.close()

    assert answered is not None
    assert answered["result"]["serverInfo"]["name"] == "oct-mcp"
    assert "tools" in answered["result"]["capabilities"]
    assert before_the_build is None
    assert listed is not None
    assert [tool["name"] for tool in listed["result"]["tools"]] == list(default_catalog())


def test_a_configuration_error_met_while_serving_is_said_on_stderr_and_ends_the_server_with_code_2(
    project: Path, tmp_path: Path
) -> None:
    # The handshake may be answered first: the app is built while the SDK answers it.
    served = subprocess.run(  # argv is a list, never a shell
        [
            sys.executable,
            "-m",
            "oct_mcp",
            "--project-root",
            str(project),
            "--config",
            str(tmp_path / "no-config.json"),
            "--profile",
            "nope",
        ],
        input=json.dumps(INITIALIZE).encode() + b"\n",
        capture_output=True,
        timeout=60,
    )

    assert served.returncode == 2
    assert b"oct-mcp: configuration error:" in served.stderr
    assert b"no profile named 'nope'" in served.stderr
    assert b"Traceback" not in served.stderr
    replies = [json.loads(line) for line in served.stdout.splitlines()]
    assert all(reply.get("id") == 1 and "result" in reply for reply in replies)
