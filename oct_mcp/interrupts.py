"""Ctrl-C for the commands the server starts, whatever the server inherited.

A process started as a shell's background job (`oct-mcp serve &` in a script) inherits SIGINT
ignored, and every command it starts inherits that in turn: a test run past its time limit then
cannot be asked for its report (the runner's SIGINT first), and waits for SIGTERM. A signal this
process *handles* is reset to its default in each command it execs; one it ignores is not.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

__all__ = ["pass_interrupts_to_children"]


def _ignore(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C sent to this process: ignored here, as the parent asked."""


def pass_interrupts_to_children() -> None:
    """Where SIGINT is ignored, handle it by doing nothing instead: this process still ignores it,
    and the commands it starts get the default. Main thread only (Python's rule); elsewhere, and
    where SIGINT is not ignored, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, _ignore)
