"""Optional parts of the test machine (bubblewrap, Landlock, the MCP Inspector, an unprivileged user).

A test that needs one the machine lacks skips with the reason, so the README's test command passes
on a machine with only Python. `.ci/run` installs every part and sets `OCT_MCP_TESTS_REQUIRE_ALL=1`,
which turns those skips into failures: CI proves every backend and client, never silently less.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, NoReturn

import pytest

if TYPE_CHECKING:
    from oct_mcp.backends.bubblewrap import Bubblewrap
    from oct_mcp.backends.landlock import LandlockBackend

REQUIRE_ALL: Final = "OCT_MCP_TESTS_REQUIRE_ALL"


def is_required() -> bool:
    """Whether this run must have every optional part (`.ci/run` says so)."""
    return os.environ.get(REQUIRE_ALL, "") not in ("", "0")


def missing(part: str, reason: str) -> NoReturn:
    """Skip the test for want of `part`, or fail it where the run requires every part.

    Args:
        part: What is missing, as a person would name it ("bubblewrap").
        reason: Why it is missing and how to get it.
    """
    if is_required():
        pytest.fail(f"{REQUIRE_ALL} is set, yet {part} is missing: {reason}", pytrace=False)
    pytest.skip(f"{part} is missing: {reason}")


_HOW_TO_GET: Final = {
    "bubblewrap": "apt install bubblewrap, with unprivileged user namespaces enabled",
    "landlock": "a Linux kernel with Landlock ABI 6 or newer (6.12+), enabled in the kernel's lsm list",
}


def usable_backend(name: str) -> None:
    """Return where the sandbox backend `name` works here; otherwise the test is missing a part.

    Landlock counts only from ABI 6, where a run's leftover processes can be told apart and ended.
    """
    from oct_mcp.backends.landlock import landlock_support
    from oct_mcp.backends.selection import probe_backends

    availability = dict(probe_backends())[name]
    if name == "landlock" and availability.usable and not landlock_support().sweeps_leftovers:
        missing("Landlock ABI 6+", f"this kernel has an older ABI; {_HOW_TO_GET[name]}")
    if not availability.usable:
        missing(name, f"{availability.detail} ({_HOW_TO_GET.get(name, 'see oct-mcp doctor')})")


def bubblewrap() -> Bubblewrap:
    """A bubblewrap backend that works here."""
    from oct_mcp.backends.bubblewrap import Bubblewrap

    usable_backend("bubblewrap")
    return Bubblewrap()


def landlock() -> LandlockBackend:
    """A landlock backend that works here, with ABI 6+."""
    from oct_mcp.backends.landlock import LandlockBackend

    usable_backend("landlock")
    return LandlockBackend()
