"""A cgroup per run: made only under a delegated cgroup v2, capping the run's processes, killed at its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from oct_mcp.execution.cgroups import RunCgroup, delegated_cgroup

pytestmark = pytest.mark.e2e

BOMB = (
    "import os, time\n"
    "children = 0\n"
    "try:\n"
    "    while children < 200:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(60)\n"
    "            os._exit(0)\n"
    "        children += 1\n"
    "except OSError:\n"
    "    print('STOPPED', children)\n"
    "else:\n"
    "    print('UNBOUNDED', children)\n"
)


def _parent() -> Path:
    parent = delegated_cgroup()
    if parent is None:
        pytest.skip(
            "needs a cgroup v2 this user may write whose subtree_control enables memory and pids "
            "(a delegated one); here the server's cgroup is not (on a v1 or hybrid machine the memory "
            "controller belongs to v1)"
        )
    return parent


def test_a_run_in_its_own_cgroup_stops_at_pids_max_and_is_killed_and_removed_at_its_end() -> None:
    cgroup = RunCgroup.create(_parent(), memory_bytes=64 * 1_048_576, processes=16)
    try:
        bomb = subprocess.Popen(
            [*cgroup.join_prefix(), sys.executable, "-I", "-c", BOMB], stdout=subprocess.PIPE, text=True
        )
        out, _ = bomb.communicate(timeout=60)
        left = (cgroup.folder / "cgroup.procs").read_text().split()
    finally:
        cgroup.close()

    words = out.split()
    assert words[0] == "STOPPED"
    assert int(words[1]) < 16
    assert left  # the sleeping children were still there until the cgroup was killed
    assert not cgroup.folder.exists()
