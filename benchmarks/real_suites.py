"""Real test suites under `oct_test` against the same suite in a terminal: counts and time.

Issue 30's table: projects whose suites use the OS heavily (anyio: TCP, UDP and unix sockets;
joblib: multiprocessing and its semaphores; pexpect: ptys; sqlite-utils: files and sqlite), each
downloaded as its pinned sdist, unpacked into a cache folder outside the repository (`--cache`,
default the user's cache folder) and given its own `.venv` inside, with its test dependencies
installed from PyPI. Then, per project, interleaved:

- the terminal: `.venv/bin/python -m pytest` in the project folder, as a person would type it;
- `oct_test` with no arguments, through the official SDK client over stdio, once per sandbox backend
  this machine can run (`--backends`), the server's `timeout_test_seconds` raised to `--timeout`.

Prints, per project and backend, passed / failed / errors / skipped for both, whether they are the
same, the median times and the ratio (goal <= 1.1x), and for every difference the node ids that
failed under oct_test and not in the terminal, with the first line of their message.

    python benchmarks/real_suites.py
    python benchmarks/real_suites.py --projects anyio sqlite-utils --backends landlock

With `--rounds 1` and no `--projects` (the smoke test), nothing is downloaded: a generated project
whose tests use loopback TCP, a unix socket, a multiprocessing pool and a pty runs, with the
benchmark's own interpreter, in the terminal and under oct_test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

from oct_mcp.backends.selection import probe_backends
from oct_mcp.tools.python.pytest_report import read_report


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    install: tuple[str, ...]
    """What to install into the project's `.venv` besides the project itself (its test extras)."""
    pytest_args: tuple[str, ...] = ()
    """Where the tests are, when pytest would not find them from the project's own config."""


PROJECTS: Final = (
    Project("anyio", "4.4.0", (".[test,trio]", "pytest==8.2.2")),
    Project("sqlite-utils", "3.37", (".[test]",)),
    Project("pexpect", "4.9.0", (".", "pytest")),
    Project("joblib", "1.4.2", (".", "pytest", "threadpoolctl"), ("joblib",)),
)


@dataclass
class Outcome:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: list[float] = field(default_factory=list)
    failing: dict[str, str] = field(default_factory=dict)
    """Node id to the first line of its message, for the tests that failed or errored."""
    ended: str = "finished"
    complete: bool = True
    """Whether `failing` holds every failure (oct_test leaves out those past its result's budget)."""

    def counts(self) -> tuple[int, int, int, int]:
        return (self.passed, self.failed, self.errors, self.skipped)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median time taken)")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "oct-mcp-bench" / "suites"
    parser.add_argument("--cache", type=Path, default=cache, help="where the projects are kept")
    parser.add_argument("--projects", nargs="*", default=None, help="default: all (none with --rounds 1)")
    parser.add_argument("--backends", nargs="*", default=["landlock", "bubblewrap"])
    parser.add_argument("--timeout", type=int, default=1_800, help="timeout_test_seconds for oct_test")
    return parser.parse_args()


GENERATED: Final = Project("generated", "smoke", ())
_GENERATED_TESTS: Final = """
import multiprocessing, os, pty, socket


def test_loopback_tcp():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    client.sendall(b"ping")
    assert peer.recv(4) == b"ping"


def test_unix_socket(tmp_path):
    path = str(tmp_path / "s")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    socket.socket(socket.AF_UNIX).connect(path)


def test_pool():
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert pool.map(abs, [-1, -2]) == [1, 2]


def test_pty():
    leader, follower = pty.openpty()
    os.write(follower, b"x")
    assert os.read(leader, 1) == b"x"
"""


def prepare(project: Project, cache: Path) -> Path:
    """The project unpacked from its pinned sdist, with a `.venv` holding it and its test needs."""
    if project is GENERATED:
        folder = Path(tempfile.mkdtemp(prefix="oct-suite-"))
        (folder / "test_os.py").write_text(_GENERATED_TESTS)
        return folder
    folder = cache / f"{project.name}-{project.version}"
    ready = folder / ".venv" / "ready"
    if ready.exists():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as download:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-d",
                download,
                f"{project.name}=={project.version}",
            ],
            check=True,
        )
        (archive,) = Path(download).glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            top = tar.getnames()[0].split("/", 1)[0]
            tar.extractall(cache, filter="data")
    (cache / top).rename(folder)
    subprocess.run([sys.executable, "-m", "venv", str(folder / ".venv")], check=True)
    python = folder / ".venv" / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", *project.install], cwd=folder, check=True)
    ready.touch()
    return folder


def _interpreter(folder: Path) -> Path:
    """The project's own `.venv`'s, else this benchmark's (the generated project has none)."""
    own = folder / ".venv" / "bin" / "python"
    return own if own.exists() else Path(sys.executable)


def terminal(project: Project, folder: Path, outcome: Outcome) -> None:
    started = time.perf_counter()
    run = subprocess.run(
        [
            str(_interpreter(folder)),
            "-m",
            "pytest",
            "-q",
            "-rfE",
            "--tb=short",
            "-p",
            "no:cacheprovider",
            *project.pytest_args,
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    )
    outcome.seconds.append(time.perf_counter() - started)
    # Read as oct_test reads its own run, so both sides are counted by the same reader.
    report = read_report(run.stdout)
    outcome.passed, outcome.failed = report.counts["passed"], report.counts["failed"]
    outcome.errors, outcome.skipped = report.counts["errors"], report.counts["skipped"]
    outcome.failing = {failure.node_id: _first_line(failure.message) for failure in report.failures}


def _first_line(message: str) -> str:
    return message.split("\n", 1)[0][:160]


async def under_oct(
    project: Project, folder: Path, backend: str, limit_seconds: int, outcome: Outcome
) -> None:
    with tempfile.TemporaryDirectory() as home:
        config = Path(home) / "config.json"
        config.write_text(
            json.dumps(
                {
                    "sandbox_backend": backend,
                    "timeout_test_seconds": limit_seconds,
                    "audit_log_path": str(Path(home) / "audit.jsonl"),
                    "rate_limit_per_minute": 1_000,
                }
            )
        )
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "oct_mcp", "--project-root", str(folder), "--config", str(config)],
            env={
                "PATH": os.pathsep.join(
                    (str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath))
                ),
                "HOME": home,
                "XDG_CACHE_HOME": home,
            },
        )
        arguments: dict[str, Any] = {"paths": list(project.pytest_args)} if project.pytest_args else {}
        async with Client(server, read_timeout_seconds=limit_seconds + 120) as client:
            started = time.perf_counter()
            result = await client.call_tool("oct_test", arguments)
            outcome.seconds.append(time.perf_counter() - started)
    report = result.structured_content
    if report is None:
        text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
        raise RuntimeError(f"{project.name} under {backend}: no report: {text[:500]}")
    outcome.passed, outcome.failed = report["passed"], report["failed"]
    outcome.errors, outcome.skipped = report["errors"], report["skipped"]
    outcome.ended = report.get("ended", "finished")
    outcome.complete = report.get("failures_omitted", 0) == 0
    outcome.failing = {f["node_id"]: _first_line(f.get("message") or "") for f in report["failures"]}


def main() -> None:
    options = parse()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started in the background by a shell (`cmd &` ignores SIGINT): the suites' runs would
        # inherit that, and a test that interrupts itself (pexpect's test_interrupt) waits for ever
        # in the terminal run. A terminal's pytest has SIGINT's default, as oct-mcp's runs do.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if options.projects is None and options.rounds == 1:
        chosen = [GENERATED]
    else:
        names = options.projects or [p.name for p in PROJECTS]
        chosen = [p for p in PROJECTS if p.name in names]
    rows: list[str] = []
    differences: list[str] = []
    usable = {name for name, availability in probe_backends() if availability.usable}
    backends = [name for name in options.backends if name in usable]
    for name in sorted(set(options.backends) - usable):
        print(f"{name}: does not work on this machine (`oct-mcp doctor` says why); left out")
    for project in chosen:
        folder = prepare(project, options.cache)
        reference = Outcome()
        subjects = {backend: Outcome() for backend in backends}
        for _ in range(options.rounds):
            terminal(project, folder, reference)
            for backend, outcome in subjects.items():
                anyio.run(under_oct, project, folder, backend, options.timeout, outcome)
        if project is GENERATED:
            shutil.rmtree(folder)
        for backend, outcome in subjects.items():
            same = outcome.counts() == reference.counts()
            ended = "" if outcome.ended == "finished" else f" ({outcome.ended})"
            ratio = statistics.median(outcome.seconds) / statistics.median(reference.seconds)
            rows.append(
                f"| {project.name} {project.version} | {backend} | {'/'.join(map(str, reference.counts()))} "
                f"| {'/'.join(map(str, outcome.counts()))}{ended} "
                f"| {'same' if same else 'DIFFERENT'} | {statistics.median(reference.seconds):.1f} s "
                f"| {statistics.median(outcome.seconds):.1f} s | {ratio:.2f} | <= 1.1 |"
            )
            for node, message in sorted(outcome.failing.items()):
                if node not in reference.failing:
                    differences.append(f"- {project.name} on {backend}: {node}: {message}")
            for node in sorted(set(reference.failing) - set(outcome.failing)) if outcome.complete else ():
                differences.append(f"- {project.name} on {backend}: fails in the terminal only: {node}")
    print(f"rounds: {options.rounds}, cores: {os.cpu_count()}")
    print(
        "| project | backend | terminal p/f/e/s | oct_test p/f/e/s | counts | terminal | oct_test "
        "| ratio | goal |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if differences:
        print("\nfailing under oct_test only, or in the terminal only:")
        print("\n".join(differences))


if __name__ == "__main__":
    main()
