"""The parts of a landlock run's own ptys, put together by a supervisor of the test's own.

The run's real supervisor is the one seccomp listener of a run (sockets use it too): here a
minimal one, on a thread of the test, answers the run's TIOCGPTPEER with `answer_pty_peer`, under
real Landlock rules that grant `/dev/ptmx` and `/dev/tty` only (`allow_pty_master`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from oct_mcp.backends.ptys import allow_pty_master, answer_pty_peer, notify_pty_peer

pytestmark = [pytest.mark.needs_backend("landlock"), pytest.mark.e2e]

PROBE = Path(__file__).with_name("device_probe.py")
PTY_PROBES = ("other pts", "pair", "forkpty", "spawn")
SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", sys.prefix, sys.base_prefix)


def _run_supervised(project: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`argv` under Landlock (system reads, the project, /dev/null, the pty master) and a filter
    whose TIOCGPTPEER the calling thread answers."""
    from landlockpy import AccessFS, Ruleset
    from seccompy import Action, Filter, FilterFlag, SeccompError

    started = threading.Event()
    outcome: dict[str, object] = {}

    def confined() -> None:
        read = AccessFS.EXECUTE | AccessFS.READ_FILE | AccessFS.READ_DIR
        with Ruleset() as ruleset:
            for path in (
                "/usr",
                "/bin",
                "/lib",
                "/lib64",
                "/etc",
                "/proc",
                sys.prefix,
                sys.base_prefix,
                project,
            ):
                if os.path.exists(path):
                    ruleset.allow_path(path, read)
            ruleset.allow_path("/dev/null", AccessFS.READ_FILE | AccessFS.WRITE_FILE)
            allow_pty_master(ruleset)
            ruleset.restrict(no_new_privs=True)
        rules = Filter(default=Action.ALLOW, flags=FilterFlag.NEW_LISTENER)
        notify_pty_peer(rules)
        outcome["listener"] = rules.load()
        started.set()
        outcome["run"] = subprocess.run(  # fixed argv, no shell
            argv, cwd=project, capture_output=True, text=True, timeout=120, check=False,
            start_new_session=True,
        )  # fmt: skip

    thread = threading.Thread(target=confined, daemon=True)
    thread.start()
    started.wait(30)
    listener = outcome["listener"]
    while thread.is_alive():
        ready, _, _ = select.select([listener], [], [], 0.05)  # type: ignore[list-item]
        if not ready:
            continue
        try:
            notification = listener.recv()  # type: ignore[attr-defined]
        except SeccompError:
            continue  # the calling thread was gone before its notification was read
        answer_pty_peer(listener, notification)  # type: ignore[arg-type]
    listener.close()  # type: ignore[attr-defined]
    return outcome["run"]  # type: ignore[return-value]


def test_a_supervised_landlock_run_gets_its_own_ptys_and_never_the_users_terminal(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(PROBE, project / PROBE.name)
    master, terminal = os.openpty()
    number = os.ttyname(terminal).rsplit("/", 1)[1]
    try:
        run = _run_supervised(project, [sys.executable, "-I", PROBE.name, number, "none", "none"])
        typed = bool(select.select([master], [], [], 0)[0])
    finally:
        os.close(master)
        os.close(terminal)

    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert {name: results[name] for name in PTY_PROBES} == {
        "other pts": "ERR PermissionError",
        "pair": "OK ping",
        "forkpty": "OK child:1",
        "spawn": "OK True",
    }
    assert typed is False


def test_without_a_supervisor_the_pty_rule_leaves_a_run_no_pty_and_no_terminal(tmp_path: Path) -> None:
    """The notify rule in a filter with no listener: the kernel answers ENOSYS, the fallback by name
    stays refused."""
    from landlockpy import AccessFS, Ruleset
    from seccompy import Action, Filter

    code = (
        "import os\n"
        "try:\n    os.openpty()\n    print('OPENED')\n"
        "except OSError as exc:\n    print(type(exc).__name__)\n"
    )
    outcome: list[subprocess.CompletedProcess[str]] = []

    def confined() -> None:
        read = AccessFS.EXECUTE | AccessFS.READ_FILE | AccessFS.READ_DIR
        with Ruleset() as ruleset:
            for path in SYSTEM:
                if os.path.exists(path):
                    ruleset.allow_path(path, read)
            allow_pty_master(ruleset)
            ruleset.restrict(no_new_privs=True)
        rules = Filter(default=Action.ALLOW)
        notify_pty_peer(rules)
        rules.load()
        outcome.append(
            subprocess.run(
                [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=False
            )
        )

    thread = threading.Thread(target=confined, daemon=True)
    thread.start()
    thread.join()

    assert outcome[0].stdout.split() == ["PermissionError"]
