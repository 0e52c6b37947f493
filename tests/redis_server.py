"""A real Redis for the tests: Debian's redis-server on a free loopback port, stopped after."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from optional import missing

READY = b"Ready to accept connections"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RedisServer:
    """One redis-server process; `stop` and `start` again on the same port, as an outage would."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        program = shutil.which("redis-server")
        if program is None:
            missing("redis-server", "apt-get install -y redis-server")
        argv = [program, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.directory), "--daemonize", "no", "--loglevel", "notice"]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.process.stdout is not None
        # readline blocks until redis says it listens (or ends): no polling.
        for line in self.process.stdout:
            if READY in line:
                return
        raise AssertionError("redis-server ended before it was ready")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
            assert self.process.stdout is not None
            self.process.stdout.close()
        self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(directory=tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
