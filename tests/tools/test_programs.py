"""Finding the programs tools run: a PATH the server inherited may hold folders it cannot look into."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oct_mcp.errors import ToolUnavailableError
from oct_mcp.tools._project.programs import find_program, find_server_program


def test_a_path_entry_that_cannot_be_looked_at_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder the server's user may not enter (`/root/.cargo/bin` under `sudo -u`) makes stat fail
    for root too when its name is too long for the system: either way the next entry is tried."""
    git = shutil.which("git")
    assert git is not None
    unreadable = "/" + "x" * 300
    monkeypatch.setenv("PATH", f"{unreadable}:{Path(git).parent}")

    assert find_server_program(tmp_path, "git") == Path(git)
    assert find_program(tmp_path, "git") == Path(git)


def test_a_program_on_no_usable_path_entry_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/" + "x" * 300)

    with pytest.raises(ToolUnavailableError):
        find_server_program(tmp_path, "git")
