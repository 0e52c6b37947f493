"""Ctrl-C reaches the commands the server starts even where the server inherited SIGINT ignored."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _child_disposition(setup: str, tmp_path: Path) -> str:
    """What a command started after `setup` finds SIGINT set to, in a process that inherited it ignored."""
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import signal, subprocess, sys
            {setup}
            child = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
            run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
            print(run.stdout.strip())
            print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
            """
        )
    )
    ignored = (
        "import signal, sys, os; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "os.execv(sys.executable, sys.argv[1:])"
    )
    argv = [sys.executable, "-c", ignored, sys.executable, str(script)]
    completed = subprocess.run(argv, capture_output=True, text=True, check=True)
    return completed.stdout


def test_a_background_job_passes_its_ignored_sigint_to_its_commands(tmp_path: Path) -> None:
    # The failure this module exists for, shown without it: the child inherits the ignore.
    assert _child_disposition("", tmp_path).splitlines() == ["True", "True"]


def test_the_server_handles_it_so_its_commands_get_the_default(tmp_path: Path) -> None:
    lines = _child_disposition(
        "from oct_mcp.interrupts import pass_interrupts_to_children; pass_interrupts_to_children()", tmp_path
    ).splitlines()

    # The child gets the default (Python's own Ctrl-C); this process handles it by doing nothing.
    assert lines == ["False", "False"]


def test_where_sigint_is_not_ignored_nothing_changes() -> None:
    code = (
        "import signal; from oct_mcp.interrupts import pass_interrupts_to_children; "
        "before = signal.getsignal(signal.SIGINT); pass_interrupts_to_children(); "
        "print(signal.getsignal(signal.SIGINT) is before)"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert completed.stdout.strip() == "True"
