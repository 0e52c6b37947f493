"""The spawning thread of a confined run: what the server has loaded before the thread is confined."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e

# A fresh interpreter, where no thread has ended yet: glibc has not loaded its unwinder (libgcc_s),
# which it loads the first time a thread ends. Printed: whether it was loaded before the run, and
# whether it was when the spawning thread was about to be confined.
PROBE = """
import sys
from pathlib import Path

import anyio

from oct_mcp.backends.confined import start_confined

def unwinder_loaded() -> bool:
    return "libgcc_s" in Path("/proc/self/maps").read_text()

seen = [unwinder_loaded()]

class Probe:
    def restrict_current_thread(self) -> None:
        seen.append(unwinder_loaded())

    def end_domain(self, leader: int) -> None:
        pass

async def main() -> None:
    run = await start_confined(Probe(), [sys.executable, "-c", "pass"], {}, Path("/"))
    await run.wait()
    await run.aclose()

anyio.run(main)
print(seen)
"""


def test_the_unwinder_is_loaded_before_the_spawning_thread_is_confined() -> None:
    # Loaded later, by the confined thread as it ends, its open of /etc/ld.so.cache waits on the
    # loopback supervisor while the thread holds the loader's lock: both wait for good.
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split("\n")[0] == "[False, True]"
