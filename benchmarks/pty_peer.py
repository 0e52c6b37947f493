"""A landlock run's own pty through the server (oct_mcp/backends/ptys.py) against a bare openpty.

Each sample is one run that opens and closes 500 ptys and times them itself (the spawn is not
counted): under Landlock with the pty master's rights and a supervisor on a thread of this
script answering its TIOCGPTPEER, against the same code in a bare subprocess. A pty is opened once
for each program a test drives (pexpect), so the goal is per call: <= 250 us an openpty.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading

from _common import PerCall, arguments, interleave, print_table

from oct_mcp.backends.landlock import landlock_support
from oct_mcp.backends.ptys import allow_pty_master, answer_pty_peer, notify_pty_peer

CALLS = 500
CODE = (
    "import os, time\n"
    "started = time.perf_counter()\n"
    f"for _ in range({CALLS}):\n"
    "    master, terminal = os.openpty()\n"
    "    os.close(master)\n"
    "    os.close(terminal)\n"
    f"print((time.perf_counter() - started) / {CALLS})\n"
)
SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", sys.prefix, sys.base_prefix)


def bare() -> float:
    completed = subprocess.run(  # fixed argv, no shell
        [sys.executable, "-I", "-c", CODE], capture_output=True, text=True, check=True, timeout=60
    )
    return float(completed.stdout)


def supervised() -> float:
    from landlockpy import AccessFS, Ruleset
    from seccompy import Action, Filter, FilterFlag, SeccompError

    started = threading.Event()
    outcome: dict[str, object] = {}

    def confined() -> None:
        read = AccessFS.EXECUTE | AccessFS.READ_FILE | AccessFS.READ_DIR
        with Ruleset() as ruleset:
            for path in SYSTEM:
                if os.path.exists(path):
                    ruleset.allow_path(path, read)
            allow_pty_master(ruleset)
            ruleset.restrict(no_new_privs=True)
        rules = Filter(default=Action.ALLOW, flags=FilterFlag.NEW_LISTENER)
        notify_pty_peer(rules)
        outcome["listener"] = rules.load()
        started.set()
        outcome["run"] = subprocess.run(  # fixed argv, no shell
            [sys.executable, "-I", "-c", CODE], capture_output=True, text=True, check=True, timeout=60
        )

    thread = threading.Thread(target=confined, daemon=True)
    thread.start()
    started.wait(30)
    listener = outcome["listener"]
    while thread.is_alive():
        if not select.select([listener], [], [], 0.05)[0]:  # type: ignore[list-item]
            continue
        try:
            notification = listener.recv()  # type: ignore[attr-defined]
        except SeccompError:
            continue
        answer_pty_peer(listener, notification)  # type: ignore[arg-type]
    listener.close()  # type: ignore[attr-defined]
    return float(outcome["run"].stdout)  # type: ignore[attr-defined]


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    if landlock_support().abi < 5:
        print("no Landlock ABI 5 (ioctl rights on devices) here: not measured")
        print_table([], args.rounds)
        return
    for measure in (bare, supervised):
        measure()
    reference, subject = interleave(args.rounds, [bare, supervised])
    print_table([PerCall("openpty, supervised / bare", subject, reference, goal_us=250)], args.rounds)


if __name__ == "__main__":
    main()
