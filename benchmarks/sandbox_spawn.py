"""Sandbox start-up: a trivial command under each backend against a bare subprocess, side by side.

Goals: native <= 1.15x the bare spawn; bubblewrap within +15 ms of it; landlock <= 1.2x or
within +2 ms. Two trivial commands:
/usr/bin/true (nothing but the spawn itself) and `python -I -c pass` (what every Python tool pays).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _common import Comparison, arguments, interleave, print_table

from oct_mcp.backends import Backend, Limits, Prepared, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.environment import sandbox_environment
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.native import Native
from oct_mcp.backends.runner import run_prepared

COMMANDS = {"true": ("/usr/bin/true",), "python": (sys.executable, "-I", "-c", "pass")}
LIMITS = Limits(memory_bytes=512 * 1_048_576, cpu_seconds=65)


def read_only_prepared(backend: Backend, project: Path, argv: tuple[str, ...]) -> Prepared:
    """`argv` prepared under `backend` as a read-only tool without network, as a tool runs."""
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


def timings_inside(prepared: Prepared, backend: str, rounds: int) -> dict[str, list[float]]:
    """Run a probe that prints its own timings as JSON (kind to seconds), `rounds` times: all of them."""

    async def once() -> dict[str, list[float]]:
        result = await run_prepared(prepared, backend=backend, time_limit=300, max_output=1 << 22)
        if result.exit_code != 0:
            raise RuntimeError(f"{backend} probe failed: {result.stderr!r}")
        found: dict[str, list[float]] = json.loads(result.stdout)
        return found

    merged: dict[str, list[float]] = {}
    for _ in range(rounds):
        for kind, spent in anyio.run(once).items():
            merged.setdefault(kind, []).extend(spent)
    return merged


def _timed(prepared: Prepared, name: str) -> float:
    async def once() -> float:
        started = time.perf_counter()
        result = await run_prepared(prepared, backend=name, time_limit=30, max_output=1_048_576)
        if result.exit_code != 0:
            raise RuntimeError(f"{name} run failed: {result.stderr!r}")
        return time.perf_counter() - started

    return anyio.run(once)


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=41)
    bubblewrap = Bubblewrap()
    has_bwrap = bubblewrap.probe().usable
    landlock = LandlockBackend()
    has_landlock = landlock.probe().usable
    comparisons: list[Comparison] = []
    extra_ms: dict[str, float] = {}
    landlock_extra_ms: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as temp:
        project = Path(temp).resolve()
        for label, argv in COMMANDS.items():
            bare = Prepared(argv=argv, env={}, cwd=project, guarantees=frozenset())
            native = read_only_prepared(Native(), project, argv)
            measures = [
                lambda bare=bare: _timed(bare, "bare"),
                lambda native=native: _timed(native, "native"),
            ]
            if has_bwrap:
                wrapped = read_only_prepared(bubblewrap, project, argv)
                measures.append(lambda wrapped=wrapped: _timed(wrapped, "bubblewrap"))
            if has_landlock:
                confined = read_only_prepared(landlock, project, argv)
                measures.append(lambda confined=confined: _timed(confined, "landlock"))
            for measure in measures:
                measure()  # warm-up
            samples = interleave(args.rounds, measures)
            comparisons.append(Comparison(f"native / bare ({label})", samples[1], samples[0], goal=1.15))
            if has_bwrap:
                # Its goal is absolute (+15 ms), checked below; the ratio is shown for reference.
                comparisons.append(
                    Comparison(f"bubblewrap / bare ({label})", samples[2], samples[0], goal=float("inf"))
                )
                extra_ms[label] = (statistics.median(samples[2]) - statistics.median(samples[0])) * 1e3
            if has_landlock:
                confined_samples = samples[-1]
                # The goal is met by either figure: <= 1.2x, or <= +2 ms; both are printed below.
                comparisons.append(
                    Comparison(f"landlock / bare ({label})", confined_samples, samples[0], goal=float("inf"))
                )
                # Against native too: both pay the same limit trampoline (prlimit), landlock adds its rules.
                against_native = Comparison(
                    f"landlock / native ({label})", confined_samples, samples[1], goal=float("inf")
                )
                comparisons.append(against_native)
                bare_median = statistics.median(samples[0])
                landlock_extra_ms[label] = (
                    (statistics.median(confined_samples) - bare_median) * 1e3,
                    statistics.median(confined_samples) / bare_median,
                )
    print_table(comparisons, args.rounds)
    for label, extra in extra_ms.items():
        verdict = "met" if extra <= 15 else "MISSED"
        print(f"bubblewrap adds {extra:.1f} ms per spawn ({label}; goal: <= 15 ms): {verdict}")
    for label, (extra, ratio) in landlock_extra_ms.items():
        verdict = "met" if extra <= 2 or ratio <= 1.2 else "MISSED"
        print(
            f"landlock adds {extra:.1f} ms per spawn, {ratio:.2f}x "
            f"({label}; goal: <= 1.2x or <= 2 ms): {verdict}"
        )
    if not has_bwrap:
        print("bubblewrap does not work on this machine: not measured")
    if not has_landlock:
        print("landlock does not work on this machine: not measured")


if __name__ == "__main__":
    main()
