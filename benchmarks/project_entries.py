"""Entries a writable landlock run makes at the project root: what the supervisor costs a call.

Inside one writable run each, side by side: a landlock run (the project root holds `.git`, so
Landlock closes it and the supervisor makes the run's entries there, `project_entries.py`), a
bubblewrap run (the project bound writable, no supervisor) and a bare subprocess. Per call: a file
made, written, closed and removed (a) at the project root, where the supervisor makes and removes
it, and (b) in a folder of the project, where the supervisor only looks at the folder and the
kernel makes the call (Landlock judges it); and (c) a write-and-rename over a root file, as an
editor saves. No goal in the issue for the call itself; the spawn goal (landlock <= +2 ms) is
`sandbox_spawn.py`'s.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from _common import Comparison, arguments, print_table
from sandbox_spawn import timings_inside

from oct_mcp.backends import Backend, Limits, Prepared, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.environment import sandbox_environment
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.loopback import loopback_support

CALLS = 400
LIMITS = Limits(memory_bytes=512 * 1_048_576, cpu_seconds=120)
PROBE = f"""
import json, os, time

def timed(action, count):
    spent = []
    for index in range(count):
        started = time.perf_counter()
        action(index)
        spent.append(time.perf_counter() - started)
    return spent

def made(folder):
    def action(index):
        name = os.path.join(folder, f"made-{{index}}.txt")
        with open(name, "w") as file:
            file.write("x")
        os.unlink(name)
    return action

def saved(index):
    with open(".notes.md.tmp", "w") as file:
        file.write(str(index))
    os.replace(".notes.md.tmp", "notes.md")

found = {{"root": timed(made("."), {CALLS}), "folder": timed(made("src"), {CALLS})}}
found["save"] = timed(saved, {CALLS})
print(json.dumps(found))
"""
KINDS = (
    ("root", "file made, written, removed at the root"),
    ("folder", "file made, written, removed in a folder"),
    ("save", "write and rename over a root file"),
)


def _writable(backend: Backend, project: Path, scratch: Path, argv: tuple[str, ...]) -> Prepared:
    home, tmp = backend.home_and_tmp(scratch)
    env = sandbox_environment(
        path_dirs=["/usr/bin"], home=home, tmpdir=tmp, read_only_project=False, threads=2
    )
    request = SandboxRequest(
        argv=argv,
        project=project,
        writable=True,
        network=False,
        protected=(project / ".git",),
        read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
        env=env,
        limits=LIMITS,
        scratch=scratch,
    )
    return backend.prepare(request)


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=3)
    landlock, bubblewrap = LandlockBackend(), Bubblewrap()
    if not landlock.probe().usable or loopback_support() is not None:
        print(f"the supervisor does not work here: {loopback_support()}; not measured")
        return
    with tempfile.TemporaryDirectory() as temp:
        base = Path(temp).resolve()
        project, scratch = base / "project", base / "scratch"
        for folder in (project / ".git", project / "src", scratch):
            folder.mkdir(parents=True)
        (project / "probe.py").write_text(PROBE)
        (project / "notes.md").write_text("notes\n")
        argv = (sys.executable, "-I", str(project / "probe.py"))
        supervised = timings_inside(_writable(landlock, project, scratch, argv), "landlock", args.rounds)
        bare = timings_inside(
            Prepared(argv=argv, env={}, cwd=project, guarantees=frozenset()), "bare", args.rounds
        )
        own = None
        if bubblewrap.probe().usable:
            own = timings_inside(_writable(bubblewrap, project, scratch, argv), "bubblewrap", args.rounds)
    comparisons: list[Comparison] = []
    for kind, claim in KINDS:
        comparisons.append(
            Comparison(f"{claim}, landlock / bare", supervised[kind], bare[kind], float("inf"), "us")
        )
        if own is not None:
            comparisons.append(
                Comparison(f"{claim}, landlock / bubblewrap", supervised[kind], own[kind], float("inf"), "us")
            )
    print_table(comparisons, args.rounds)
    medians = {kind: statistics.median(supervised[kind]) * 1e6 for kind, _ in KINDS}
    print("per call (landlock, median us): " + ", ".join(f"{k} {v:.0f}" for k, v in medians.items()))
    print(f"calls: {CALLS} of each kind a run; {args.rounds} runs each")


if __name__ == "__main__":
    main()
