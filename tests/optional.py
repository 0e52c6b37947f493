"""Optional parts of the test machine (bubblewrap, Landlock, the MCP Inspector, an unprivileged user).

A test that needs one the machine lacks skips with the reason, so the README's test command passes
on a machine with only Python. `.ci/run` installs every part and sets `OCT_MCP_TESTS_REQUIRE_ALL=1`,
which turns those skips into failures: CI proves every backend and client, never silently less.
"""

from __future__ import annotations

import os
from typing import Final, NoReturn

import pytest

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
