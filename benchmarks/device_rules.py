"""The device rules' cost: runs with them against the same runs without them, side by side.

The rules: under landlock, a right to list /dev (one more Landlock rule); under both backends, two
more seccomp rules on ioctl (TIOCSTI and TIOCLINUX refused). The kernel walks a filter's rules for
ioctl only on an ioctl, so the worst case is a run of ioctls. Three commands: /usr/bin/true (the
spawn), `python -I -c pass` (every Python tool's start-up) and 20,000 ioctls.
Goal: landlock within +2 ms a spawn (<= 1.05x on the start-ups), <= 1.15x on the ioctls.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import anyio
from _common import Comparison, arguments, interleave, print_table

import oct_mcp.backends.landlock as landlock_backend
import oct_mcp.backends.landlock_rules as landlock_rules
import oct_mcp.backends.seccomp as seccomp
from oct_mcp.backends import Backend, Limits, Prepared, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.environment import sandbox_environment
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.runner import run_prepared

IOCTLS = 20_000
COMMANDS = {
    "true": ("/usr/bin/true",),
    "python": (sys.executable, "-I", "-c", "pass"),
    f"{IOCTLS} ioctls": (
        sys.executable,
        "-I",
        "-c",
        "import fcntl, os, termios\nread_end, _ = os.pipe()\n"
        f"for _ in range({IOCTLS}): fcntl.ioctl(read_end, termios.FIONREAD, b'0000')",
    ),
}
GOALS = {"true": 1.05, "python": 1.05, f"{IOCTLS} ioctls": 1.15}
LIMITS = Limits(memory_bytes=512 * 1_048_576, cpu_seconds=65)
FILTER_ORIGINAL = seccomp.filter_program


@cache
def program_without_device_rules(
    *, sockets: bool, network: bool, writes: bool, supervised: bool = False
) -> bytes:
    """The run filter compiled without its terminal rules, all else the same."""
    rules = seccomp._terminal_rules
    seccomp._terminal_rules = lambda _rules: None  # type: ignore[assignment]
    try:
        return FILTER_ORIGINAL.__wrapped__(
            sockets=sockets, network=network, writes=writes, supervised=supervised
        )  # type: ignore[attr-defined,no-any-return]
    finally:
        seccomp._terminal_rules = rules  # type: ignore[assignment]


@contextmanager
def without_device_rules() -> Iterator[None]:
    """Runs started inside get neither the /dev listing rule nor the terminal rules."""
    listed = landlock_rules._DEVICES_LISTED
    landlock_rules._DEVICES_LISTED = "/nonexistent-device-folder"  # no rule for a missing path
    landlock_backend.filter_program = program_without_device_rules  # type: ignore[assignment]
    seccomp.filter_program = program_without_device_rules  # type: ignore[assignment]
    try:
        yield
    finally:
        landlock_rules._DEVICES_LISTED = listed  # type: ignore[misc]
        landlock_backend.filter_program = FILTER_ORIGINAL
        seccomp.filter_program = FILTER_ORIGINAL


def prepared_under(project: Path, argv: tuple[str, ...], backend: Backend) -> Prepared:
    """`argv` prepared as a read-only tool without network, as a tool runs."""
    home, tmp = backend.home_and_tmp(project)
    env = sandbox_environment(
        path_dirs=["/usr/bin"], home=home, tmpdir=tmp, read_only_project=True, threads=2
    )
    request = SandboxRequest(
        argv=argv,
        project=project,
        writable=False,
        network=False,
        protected=(),
        read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
        env=env,
        limits=LIMITS,
        scratch=project,
    )
    return backend.prepare(request)


def timed(prepared: Prepared, name: str, *, rules: bool) -> float:
    async def once() -> float:
        started = time.perf_counter()
        result = await run_prepared(prepared, backend=name, time_limit=60, max_output=1_048_576)
        if result.exit_code != 0:
            raise RuntimeError(f"{name} run failed: {result.stderr!r}")
        return time.perf_counter() - started

    if rules:
        return anyio.run(once)
    with without_device_rules():
        return anyio.run(once)


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=41)
    comparisons: list[Comparison] = []
    backends: list[Backend] = [Bubblewrap(), LandlockBackend()]
    for backend in backends:
        if not backend.probe().usable:
            print(f"{backend.name} does not work on this machine: not measured")
            continue
        with tempfile.TemporaryDirectory() as temp:
            project = Path(temp).resolve()
            for label, argv in COMMANDS.items():
                prepared = prepared_under(project, argv, backend)
                measures: list[Callable[[], float]] = [
                    lambda prepared=prepared, name=backend.name: timed(prepared, name, rules=False),
                    lambda prepared=prepared, name=backend.name: timed(prepared, name, rules=True),
                ]
                for measure in measures:
                    measure()  # warm-up: both programs compiled before the first sample
                without, with_rules = interleave(args.rounds, measures)
                comparisons.append(
                    Comparison(
                        f"{backend.name} with / without the device rules ({label})",
                        with_rules,
                        without,
                        goal=GOALS[label],
                    )
                )
                extra_ms = (statistics.median(with_rules) - statistics.median(without)) * 1e3
                print(f"{backend.name}, {label}: the device rules add {extra_ms:+.2f} ms a run (median)")
    print_table(comparisons, args.rounds)


if __name__ == "__main__":
    main()
