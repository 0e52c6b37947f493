"""A landlock run's /dev/shm: its own names in a folder of its own, another's out of reach even racing.

The supervisor copies the path once: a name right in /dev/shm is made in the run's folder, any
other path goes on under Landlock, which gives no right on /dev/shm. A run that rewrites the path
in its memory while the call is looked at (a thread flipping it between a file of its scratch
folder and another process's segment) must never open the segment.
"""

from __future__ import annotations

import os
import sys
import textwrap
from multiprocessing import shared_memory
from pathlib import Path

import anyio
import pytest
from optional import landlock, missing

from oct_mcp.backends import Limits, SandboxRequest
from oct_mcp.backends.loopback import loopback_support
from oct_mcp.backends.runner import run_prepared

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

RACE = """
import ctypes, errno, os, sys, threading
segment, scratch_file = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
size = max(len(segment), len(scratch_file)) + 1
buffer = ctypes.create_string_buffer(size)
paths = [p.encode().ljust(size, b"\\0") for p in (scratch_file, f"/dev/shm/{segment}")]
stop = threading.Event()

def flip():
    while not stop.is_set():
        for path in paths:
            ctypes.memmove(buffer, path, size)

threading.Thread(target=flip, daemon=True).start()
outside = os.stat(f"/dev/shm/{segment}").st_ino
counts = {"scratch": 0, "refused": 0, "segment": 0, "missing": 0}
for _ in range(3000):
    # As shm_open asks (O_NOFOLLOW): the supervisor looks at each.
    fd = libc.open(buffer, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    if fd < 0:
        error = ctypes.get_errno()
        counts["refused" if error == errno.EACCES else "missing"] += 1
        continue
    counts["segment" if os.fstat(fd).st_ino == outside else "scratch"] += 1
    os.close(fd)
stop.set()
print(" ".join(f"{key}={value}" for key, value in counts.items()))
"""


async def test_a_run_racing_its_path_between_a_scratch_file_and_another_segment_never_opens_it(
    tmp_path: Path,
) -> None:
    backend = landlock()
    if loopback_support() is not None:
        missing("seccomp user notification", f"{loopback_support()} (Linux 5.19+)")
    project = tmp_path.resolve() / "project"
    project.mkdir()
    scratch = tmp_path.resolve() / "scratch"
    scratch.mkdir()
    (scratch / "mine").write_text("mine")
    (project / "race.py").write_text(textwrap.dedent(RACE))
    segment = shared_memory.SharedMemory(create=True, size=16)
    segment.buf[:7] = b"private"
    # Open to all: only the sandbox stands between the run and the segment.
    os.chmod(f"/dev/shm/{segment.name}", 0o666)  # noqa: S103
    try:
        request = SandboxRequest(
            argv=(sys.executable, "-I", str(project / "race.py"), segment.name, str(scratch / "mine")),
            project=project,
            writable=False,
            network=False,
            protected=(),
            read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
            env={"PATH": "/usr/bin:/bin"},
            limits=Limits(memory_bytes=512 * 1_048_576, cpu_seconds=60),
            scratch=scratch,
        )
        with anyio.fail_after(120):
            run = await run_prepared(
                backend.prepare(request), backend="landlock", time_limit=90, max_output=1 << 20
            )
        assert bytes(segment.buf[:7]) == b"private"
    finally:
        segment.close()
        segment.unlink()

    assert run.exit_code == 0, run.stderr.decode()
    counts = dict(item.split("=") for item in run.stdout.decode().split())
    # Both paths were seen (the race ran); the segment's name answered as missing, never opened.
    assert int(counts["scratch"]) > 0, counts
    assert int(counts["missing"]) + int(counts["refused"]) > 0, counts
    assert counts["segment"] == "0", counts
