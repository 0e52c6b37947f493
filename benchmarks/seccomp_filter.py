"""The run filter's cost: landlock runs under the current seccomp filter against the earlier one.

The earlier filter had socket rules only; the current one adds the metadata, creation-mode,
inode-flag and listen rules, and refuses x32 ahead of them. The kernel skips a filter for calls
it always allows, so the cost falls on the calls with rules, openat most of all. Three commands,
each under both filters, side by side: /usr/bin/true (the spawn), `python -I -c pass` (every
Python tool's start-up) and 20,000 opens (the worst case: a call with rules, over and over).
Goal: <= 1.05x on each start-up, <= 1.15x on the opens.

bubblewrap had no filter before: its runs with the filter against the same runs without it.
"""

from __future__ import annotations

import errno
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import anyio
from _common import Comparison, arguments, interleave, print_table

import oct_mcp.backends.landlock as landlock_backend
from oct_mcp.backends import Backend, Limits, Prepared, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.environment import sandbox_environment
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.runner import run_prepared
from oct_mcp.backends.seccomp import filter_program

OPENS = 20_000
COMMANDS = {
    "true": ("/usr/bin/true",),
    "python": (sys.executable, "-I", "-c", "pass"),
    f"{OPENS} opens": (
        sys.executable,
        "-I",
        "-c",
        f"import os\nfor _ in range({OPENS}): os.close(os.open('/dev/null', os.O_RDONLY))",
    ),
}
GOALS = {"true": 1.05, "python": 1.05, f"{OPENS} opens": 1.15}
LIMITS = Limits(memory_bytes=512 * 1_048_576, cpu_seconds=65)


@cache
def earlier_program(*, sockets: bool, network: bool, writes: bool, supervised: bool = False) -> bytes:
    """The filter as it was before the metadata and listen rules, rule for rule.

    It hands the supervisor nothing (`supervised` is taken and left unused): that filter had no
    notify rule, and a listener with none to answer costs a run nothing past its thread.
    """
    from seccompy import ArgCmp, CmpOp, Filter, syscalls

    rules = Filter()
    if network:
        rules.errno("socket", errno.EPERM, args=[ArgCmp(0, CmpOp.EQ, 1)])
    else:
        for family in (2, 10):
            for protocol in (0, 6):
                conditions = [
                    ArgCmp(0, CmpOp.EQ, family),
                    ArgCmp(1, CmpOp.MASKED_EQ, 1, mask=0xF),
                    ArgCmp(2, CmpOp.EQ, protocol),
                ]
                rules.allow("socket", args=conditions)
        rules.errno("socket", errno.EPERM)
    denied = ("io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace", "bpf")
    for name in (*denied, "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key"):
        rules.errno(name, errno.EPERM)
    if syscalls.arch() == "x86_64":
        for number in (41, 425, 426, 427, 521, 321, 298, 323, 250, 248, 249):
            rules.errno(0x40000000 | number, errno.EPERM)
    return rules.program


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


def timed(prepared: Prepared, program: Callable[..., bytes]) -> float:
    """One run, its filter compiled by `program`: the landlock backend loads what that returns."""
    landlock_backend.filter_program = program  # type: ignore[assignment]

    async def once() -> float:
        started = time.perf_counter()
        result = await run_prepared(prepared, backend="landlock", time_limit=60, max_output=1_048_576)
        if result.exit_code != 0:
            raise RuntimeError(f"run failed: {result.stderr!r}")
        return time.perf_counter() - started

    try:
        return anyio.run(once)
    finally:
        landlock_backend.filter_program = filter_program


def timed_bubblewrap(prepared: Prepared) -> float:
    async def once() -> float:
        started = time.perf_counter()
        result = await run_prepared(prepared, backend="bubblewrap", time_limit=60, max_output=1_048_576)
        if result.exit_code != 0:
            raise RuntimeError(f"run failed: {result.stderr!r}")
        return time.perf_counter() - started

    return anyio.run(once)


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=41)
    comparisons: list[Comparison] = []
    if Bubblewrap().probe().usable:
        with tempfile.TemporaryDirectory() as temp:
            project = Path(temp).resolve()
            for label, argv in COMMANDS.items():
                filtered = prepared_under(project, argv, Bubblewrap())
                unfiltered = replace(filtered, confinement=None)
                measures = [
                    lambda unfiltered=unfiltered: timed_bubblewrap(unfiltered),
                    lambda filtered=filtered: timed_bubblewrap(filtered),
                ]
                for measure in measures:
                    measure()
                without, with_filter = interleave(args.rounds, measures)
                comparisons.append(
                    Comparison(
                        f"bubblewrap with / without the filter ({label})",
                        with_filter,
                        without,
                        goal=GOALS[label],
                    )
                )
    else:
        print("bubblewrap does not work on this machine: not measured")
    if not LandlockBackend().probe().usable:
        print("landlock does not work on this machine: not measured")
    else:
        with tempfile.TemporaryDirectory() as temp:
            project = Path(temp).resolve()
            for label, argv in COMMANDS.items():
                prepared = prepared_under(project, argv, LandlockBackend())
                measures = [
                    lambda prepared=prepared: timed(prepared, earlier_program),
                    lambda prepared=prepared: timed(prepared, filter_program),
                ]
                for measure in measures:
                    measure()  # warm-up: both programs compiled before the first sample
                earlier, current = interleave(args.rounds, measures)
                comparisons.append(
                    Comparison(f"current / earlier filter ({label})", current, earlier, goal=GOALS[label])
                )
                extra_ms = (statistics.median(current) - statistics.median(earlier)) * 1e3
                print(f"{label}: the current filter adds {extra_ms:+.2f} ms a run (median)")
    print_table(comparisons, args.rounds)


if __name__ == "__main__":
    main()
