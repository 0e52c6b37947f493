"""Naming what the sandbox refused a test, from what the test's report shows, and what would allow it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from oct_mcp.tools.python.pytest_report import TestFailure

__all__ = ["refusal_notes"]

_EXAMPLES: Final = 3
_DETAILS: Final = 3
_DETAIL_CHARS: Final = 120
_REFUSED: Final = re.compile(r"\[Errno (?:13|1)\][^\n]*?(?:permission denied|operation not permitted)", re.I)
_SOCKET_CALL: Final = re.compile(
    r"\.(?:bind|connect|listen)\(|create_connection|create_server|start_server|start_unix_server|"
    r"open_connection|bind_sockets|socket\.socket\(|socketpair|while attempting to bind"
)
_BIND_ADDRESS: Final = re.compile(r"while attempting to bind on address (\(.{1,100}?\))\)?")
_CALL_ADDRESS: Final = re.compile(r"\.(?:bind|connect)\((.{1,100})\)\s*$", re.MULTILINE)
_DENIED_PATH: Final = re.compile(r"\[Errno 13\] Permission denied: '([^']{1,300})'")
_READ_ONLY_PATH: Final = re.compile(r"\[Errno 30\] Read-only file system: '([^']{1,300})'")

# What each refusal is, and what allows it, by backend: only what the backend really refuses.
_RIGHTS: Final = {
    "tcp": "bind, listen on or connect a TCP socket",
    "udp": "create a UDP socket",
    "unix": "create a unix socket",
    "outside": "open a path the sandbox does not show",
    "project": "open or create a path in the project",
    "read_only": "write in the project, which runs see read-only",
    "read_only_outside": "write a path outside the project, which runs see read-only",
}
# The refusals each backend makes, so that no other cause is taken for one: native confines
# nothing, bubblewrap gives loopback, ptys and /dev/shm and hides (not refuses) what it does not
# show; an EACCES there (a port below 1024, a folder of another user) is the system's own answer.
# A pty, a semaphore or shared memory is told apart (so it is not read as a path or a socket) and
# left to the note the sandbox adds for the devices a run lacks (backends/devices.py: landlock on a
# kernel that cannot supervise a run; elsewhere landlock's supervisor gives them).
_MADE_BY: Final = {
    "landlock": frozenset(_RIGHTS) - {"read_only_outside"},
    "bubblewrap": frozenset({"read_only", "read_only_outside"}),
}
_PROJECT_READ_ONLY: Final = (
    "a test that writes into the project fails under oct_test; write under tmp_path or TMPDIR, or run "
    "the command with oct_run and writes=true (consent)"
)
_ALLOWS: Final = {
    ("tcp", "landlock"): (
        "landlock runs without network bind and listen on 127.0.0.0/8 and ::1 only (a bind to 0.0.0.0, "
        ":: or '' is made on loopback), and reach only their own sockets there, where `oct-mcp doctor` "
        "says loopback is supervised (none where it is not); the bubblewrap backend "
        '(sandbox_backend = "bubblewrap", where doctor says it works) gives each run a loopback of its '
        "own, and oct_run with network=true (consent, a profile without no_network) gives it the network"
    ),
    ("udp", "landlock"): (
        "landlock runs without network use UDP on 127.0.0.0/8 and ::1 between their own sockets only, "
        "where `oct-mcp doctor` says loopback is supervised (none where it is not); the bubblewrap backend "
        "gives each run a loopback of its own, and oct_run with network=true gives it the network"
    ),
    ("unix", "landlock"): (
        "landlock runs without network make and reach unix sockets under their scratch folder (TMPDIR, "
        "tmp_path) only, no abstract names, where `oct-mcp doctor` says loopback is supervised (none where "
        "it is not); the bubblewrap backend allows them in the run's own folders"
    ),
    ("outside", "landlock"): (
        "runs see the project, their scratch folder (TMPDIR, HOME) and the tools' and system's folders; "
        "the bubblewrap backend also shows a minimal /dev; put what the tests need in the project or "
        "create it under TMPDIR"
    ),
}
_ALLOWS_ANY: Final = {
    "project": (
        "runs see the project read-only (and under landlock not the files that hold secrets, which a "
        f"note names); {_PROJECT_READ_ONLY}"
    ),
    "read_only": _PROJECT_READ_ONLY,
    "read_only_outside": "runs write only in their scratch folder (TMPDIR, HOME, tmp_path): write there",
}
_ALLOWS_DEFAULT: Final = "`oct-mcp doctor` shows what this backend lets a run do"


@dataclass
class _Seen:
    tests: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def refusal_notes(failures: Iterable[TestFailure], backend: str, root: Path) -> list[str]:
    """A note per kind of refusal the failed tests' reports show.

    Only what a report shows counts: an `[Errno 13]` or `[Errno 1]` at a socket call, a path
    refused, a write into the read-only project; no cause is guessed.

    Args:
        failures: The failures pytest reported, with their messages and tracebacks.
        backend: The sandbox backend the run had.
        root: The project root, to tell a path in the project from one outside it.

    Returns:
        The notes, most tests first.
    """
    seen: dict[str, _Seen] = {}
    for failure in failures:
        found = _refusal(f"{failure.message}\n{failure.traceback}", root)
        if found is None:
            continue
        kind, detail = found
        if kind not in _MADE_BY.get(backend, frozenset()):
            continue
        entry = seen.setdefault(kind, _Seen())
        entry.tests.append(failure.node_id)
        if detail and detail not in entry.details and len(entry.details) < _DETAILS:
            entry.details.append(detail)
    notes = []
    for kind, entry in sorted(seen.items(), key=lambda item: -len(item[1].tests)):
        where = f" ({', '.join(entry.details)})" if entry.details else ""
        examples = ", ".join(entry.tests[:_EXAMPLES]) + (", ..." if len(entry.tests) > _EXAMPLES else "")
        allows = _ALLOWS.get((kind, backend)) or _ALLOWS_ANY.get(kind) or _ALLOWS_DEFAULT
        notes.append(
            f"sandbox refusal: {len(entry.tests)} test(s) failed because the {backend} sandbox refused to "
            f"{_RIGHTS[kind]}{where}, for example {examples}; {allows}"
        )
    return notes


def _refusal(report: str, root: Path) -> tuple[str, str] | None:
    """The kind of refusal a test's report shows, with the address or path it printed; None if none."""
    if "out of pty devices" in report:
        return "pty", ""
    refused = _REFUSED.search(report) is not None
    if refused and ("synchronize.py" in report or "SemLock" in report):
        return "semaphore", ""
    denied = _DENIED_PATH.search(report)
    if denied is not None and denied.group(1).startswith("/psm_"):
        return "shared_memory", ""
    if refused and _SOCKET_CALL.search(report):
        kind = "unix" if "AF_UNIX" in report else "udp" if "SOCK_DGRAM" in report else "tcp"
        address = _BIND_ADDRESS.search(report) or _CALL_ADDRESS.search(report)
        return kind, "" if address is None else _cut(address.group(1))
    read_only = _READ_ONLY_PATH.search(report)
    if read_only is not None:
        return ("read_only" if _inside(Path(read_only.group(1)), root) else "read_only_outside"), _cut(
            read_only.group(1)
        )
    if denied is not None:
        return ("project" if _inside(Path(denied.group(1)), root) else "outside"), _cut(denied.group(1))
    return None


def _inside(path: Path, root: Path) -> bool:
    """Whether a path a test printed lies in the project (a relative one is: tests start at the root)."""
    return not path.is_absolute() or path == root or root in path.parents


def _cut(detail: str) -> str:
    return detail if len(detail) <= _DETAIL_CHARS else detail[: _DETAIL_CHARS - 3] + "..."
