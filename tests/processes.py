"""The processes of the machine, found as a test that starts some looks for them."""

from __future__ import annotations

from pathlib import Path

MIB = 1_048_576


def processes_with(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry.name))
    return found
