"""Shared fixtures: the anyio backend, a Hypothesis profile for CI, a small project on disk."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from optional import usable_backend

# CI runs derandomised, so a red run can be reproduced from its log alone.
settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


_CONFINING_BACKENDS = frozenset({"bubblewrap", "landlock"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_backend(name): the test runs that sandbox backend for real")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that runs bubblewrap or landlock, by a marker or by a parameter naming it (alone or as a
    config's `sandbox_backend`), skips where that backend does not work here, or fails under
    OCT_MCP_TESTS_REQUIRE_ALL (tests/optional.py)."""
    names = {marker.args[0] for marker in item.iter_markers("needs_backend")}
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec is not None else ():
        if isinstance(value, dict):
            value = value.get("sandbox_backend")
        if isinstance(value, str) and value in _CONFINING_BACKENDS:
            names.add(value)
    for name in sorted(names):
        usable_backend(name)


@pytest.fixture(scope="session", autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A HOME of the test run's own: the default audit log and config never touch the real one.

    Session-scoped, so Hypothesis tests do not see a function-scoped fixture; the stdio servers
    the tests spawn inherit it (the SDK passes HOME on).
    """
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        yield home


@pytest.fixture(scope="session", autouse=True)
def _screening_helper_stopped() -> Iterator[None]:
    """The in-process searches share the server's screening helper, a child process: stopped once
    the run ends, as the server's exit ends it, not left for the interpreter to warn of."""
    yield
    from oct_mcp.tools.screen_helper import SCREEN_HELPER

    SCREEN_HELPER.stop()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _measure_coverage_in_stdio_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's stdio client passes its servers a minimal environment, dropping the variable
    coverage uses to measure subprocesses: pass it on, so servers the tests start are measured."""
    from mcp.client import stdio

    default_environment = stdio.get_default_environment

    def with_coverage() -> dict[str, str]:
        extra = {name: value for name, value in os.environ.items() if name.startswith("COVERAGE_")}
        return {**default_environment(), **extra}

    monkeypatch.setattr(stdio, "get_default_environment", with_coverage)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project: a package, a README, an ignored folder, and a secret outside the root."""
    root = (tmp_path / "project").resolve()
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text('"""A package."""\n')
    (root / "src" / "pkg" / "core.py").write_text("def answer() -> int:\n    return 42\n")
    (root / "README.md").write_text("# Demo\n\nline 3\nline 4\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("built\n")
    (root / "debug.log").write_text("log\n")
    (tmp_path / "outside.txt").write_text("not yours\n")
    return root


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """A config file path with no file yet, so tests never read the user's own config."""
    return tmp_path / "config.json"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP port on the host's loopback, listening: a sandboxed run must not reach it."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    yield server
    server.close()
