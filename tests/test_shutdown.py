"""Shutdown mid-run: SIGTERM, SIGINT, SIGHUP or stdin closing end the runs of a server or `oct-mcp call`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clients import handshake
from optional import bubblewrap, landlock
from processes import processes_with

pytestmark = pytest.mark.e2e

VENV_BIN = Path(sys.executable).parent


def _project(tmp_path: Path, marker: str) -> Path:
    root = tmp_path.resolve() / "proj"
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "pytest").symlink_to(VENV_BIN / "pytest")
    (root / "test_slow.py").write_text(
        "import subprocess, sys, time\n\n\ndef test_slow():\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', {marker!r}])\n"
        "    time.sleep(120)\n"
    )
    return root


def _start(project: Path, config: Path, backend: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OCT_MCP_SANDBOX": backend}
    command = [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config)]
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert server.stdin is not None
    handshake(server)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "oct_test", "arguments": {}},
    }
    server.stdin.write(json.dumps(call).encode() + b"\n")
    server.stdin.flush()
    return server


def _wait_until(predicate: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock", "native"])
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT", "SIGHUP", "stdin closed"])
def test_stopping_the_server_mid_run_kills_the_tools_tree_and_exits_0(
    tmp_path: Path, config_file: Path, backend: str, stop: str
) -> None:
    # Skips where the backend does not work here.
    if backend == "bubblewrap":
        bubblewrap()
    elif backend == "landlock":
        landlock()
    marker = f"oct-shutdown-{os.getpid()}-{backend}-{stop.replace(' ', '-')}"
    audit_log = tmp_path / "audit.log"
    # native confines nothing: the test accepts that on purpose, to see its tree killed too.
    config = {"audit_log_path": str(audit_log), "allow_unconfined_project_code": backend == "native"}
    config_file.write_text(json.dumps(config))
    server = _start(_project(tmp_path, marker), config_file, backend)
    try:
        assert _wait_until(lambda: processes_with(marker), 60), "the test never started"
        started = time.monotonic()
        if stop == "stdin closed":
            assert server.stdin is not None
            server.stdin.close()
        else:
            server.send_signal(getattr(signal, stop))
        code = server.wait(timeout=15)
        stopped_in = time.monotonic() - started
        assert server.stderr is not None
        diagnostics = server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for pipe in (server.stdin, server.stdout, server.stderr):
            if pipe is not None:
                pipe.close()

    assert code == 0
    assert stopped_in < 10
    assert _wait_until(lambda: not processes_with(marker), 10)
    assert b"Traceback" not in diagnostics
    records = [json.loads(line) for line in audit_log.read_text().splitlines()]
    assert [(r["tool"], r["outcome"]) for r in records] == [("oct_test", "interrupted")]


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_a_server_started_at_a_terminal_says_so_answers_a_line_and_stops_on_ctrl_c(
    tmp_path: Path, config_file: Path, stop: str
) -> None:
    import pty
    import select

    project = tmp_path / "proj"
    project.mkdir()
    config_file.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log")}))
    controller, terminal = pty.openpty()
    argv = [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config_file)]
    server = subprocess.Popen(argv, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)

    def shown_until(marker: bytes) -> bytes:
        seen = b""
        while marker not in seen:
            ready, _, _ = select.select([controller], [], [], 60)
            assert ready, f"the terminal showed nothing more after {seen[-300:]!r}"
            seen += os.read(controller, 65_536)
        return seen

    try:
        started = shown_until(b"Ctrl-C stops it")
        os.write(controller, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        answered = shown_until(b'"id":1')
        server.send_signal(getattr(signal, stop))
        code = server.wait(timeout=15)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        os.close(controller)

    assert f"serving {project.resolve()} (profile default) over stdio".encode() in started
    assert b'"result":{}' in answered
    assert code == 0


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_stopping_oct_mcp_call_mid_run_ends_the_run_it_started(
    tmp_path: Path, config_file: Path, backend: str, stop: str
) -> None:
    # Skips where the backend does not work here.
    if backend == "bubblewrap":
        bubblewrap()
    else:
        landlock()
    marker = f"oct-call-stop-{os.getpid()}-{backend}-{stop}"
    project = tmp_path.resolve() / "proj"
    project.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    config_file.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log")}))
    arguments = {"argv": ["python", "-c", "import sys, time; time.sleep(120)", marker]}
    command = [
        *(sys.executable, "-m", "oct_mcp", "call", "oct_run", "--json", json.dumps(arguments)),
        *("--project-root", str(project), "--config", str(config_file)),
    ]
    env = {**os.environ, "OCT_MCP_SANDBOX": backend}
    call = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        # The call's own command line names the marker too.
        assert _wait_until(lambda: set(processes_with(marker)) - {call.pid}, 60), "the run never started"
        call.send_signal(getattr(signal, stop))
        code = call.wait(timeout=15)
        assert call.stderr is not None
        said = call.stderr.read()
    finally:
        if call.poll() is None:
            call.kill()
            call.wait()
        for pipe in (call.stdout, call.stderr):
            if pipe is not None:
                pipe.close()
        leftover = [pid for pid in processes_with(marker) if pid != call.pid]
        for pid in leftover:
            os.kill(pid, signal.SIGKILL)

    assert code == 128 + getattr(signal, stop)
    assert f"[interrupted] oct-mcp call stopped on {stop}".encode() in said
    assert b"Traceback" not in said
    assert leftover == []
