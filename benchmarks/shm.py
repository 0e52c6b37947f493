"""Ptys-and-/dev/shm supervision on landlock: what a run's multiprocessing and shared memory pay.

Inside one run each, side by side: a landlock run (its /dev/shm names made by the supervisor,
seccomp user notification), a bubblewrap run (a /dev/shm of its own, no supervisor) and a bare
subprocess. Per call: a `multiprocessing` Pool of 2 started, used and closed with each start
method; a `shared_memory.SharedMemory` made and unlinked; a `multiprocessing.Lock` (a named
semaphore: sem_open, link, unlink); a `tempfile.mkstemp` and unlink in TMPDIR, which goes to the
supervisor to have its path looked at (O_CREAT | O_EXCL) and then runs as asked. No goal: the
figures are what a multiprocessing-heavy test suite pays.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from _common import Comparison, arguments, print_table
from sandbox_spawn import read_only_prepared, timings_inside

from oct_mcp.backends import Prepared
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.loopback import loopback_support

CALLS = 400
POOLS = 5
PROBE = f"""
import json, multiprocessing, os, tempfile, time
from multiprocessing import shared_memory

def double(value):
    return value * 2

def timed(action, count):
    spent = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        spent.append(time.perf_counter() - started)
    return spent

def pool(method):
    with multiprocessing.get_context(method).Pool(2) as workers:
        workers.map(double, [1, 2])

def segment():
    made = shared_memory.SharedMemory(create=True, size=4096)
    made.close()
    made.unlink()

def temporary():
    fd, name = tempfile.mkstemp()
    os.close(fd)
    os.unlink(name)

if __name__ == "__main__":
    found = {{method: timed(lambda: pool(method), {POOLS}) for method in ("fork", "spawn", "forkserver")}}
    found["shm"] = timed(segment, {CALLS})
    found["lock"] = timed(multiprocessing.Lock, {CALLS})
    found["mkstemp"] = timed(temporary, {CALLS})
    print(json.dumps(found))
"""
KINDS = (
    ("fork", "Pool(2) start, map, close: fork"),
    ("spawn", "Pool(2) start, map, close: spawn"),
    ("forkserver", "Pool(2) start, map, close: forkserver"),
    ("shm", "SharedMemory create+unlink"),
    ("lock", "multiprocessing.Lock (sem_open)"),
    ("mkstemp", "tempfile.mkstemp+unlink"),
)


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=3)
    landlock, bubblewrap = LandlockBackend(), Bubblewrap()
    if not landlock.probe().usable or loopback_support() is not None:
        print(f"the supervisor does not work here: {loopback_support()}; not measured")
        return
    comparisons: list[Comparison] = []
    with tempfile.TemporaryDirectory() as temp:
        project = Path(temp).resolve()
        (project / "probe.py").write_text(PROBE)
        argv = (sys.executable, "-I", str(project / "probe.py"))
        supervised = timings_inside(read_only_prepared(landlock, project, argv), "landlock", args.rounds)
        bare_env = {"TMPDIR": str(project)}
        bare = timings_inside(
            Prepared(argv=argv, env=bare_env, cwd=project, guarantees=frozenset()), "bare", args.rounds
        )
        own = None
        if bubblewrap.probe().usable:
            own = timings_inside(read_only_prepared(bubblewrap, project, argv), "bubblewrap", args.rounds)
    for kind, claim in KINDS:
        unit = "ms" if kind in ("fork", "spawn", "forkserver") else "us"
        comparisons.append(
            Comparison(f"{claim}, landlock / bare", supervised[kind], bare[kind], float("inf"), unit)
        )
        if own is not None:
            comparisons.append(
                Comparison(f"{claim}, landlock / bubblewrap", supervised[kind], own[kind], float("inf"), unit)
            )
    print_table(comparisons, args.rounds)
    medians = {kind: statistics.median(supervised[kind]) * 1e6 for kind in ("shm", "lock", "mkstemp")}
    print("per call (landlock, median us): " + ", ".join(f"{k} {v:.0f}" for k, v in medians.items()))
    print(f"pools: {POOLS} per start method a run; calls: {CALLS} a run; {args.rounds} runs each")


if __name__ == "__main__":
    main()
