"""A file replaced whole: the old file or the new one, never half, whatever was left beside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oct_mcp.atomic_write import write_atomically


def test_the_file_is_replaced_whole_with_the_mode_asked_for(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    target.write_text("old\n")

    write_atomically(target, "new\n", 0o640)

    assert target.read_text() == "new\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.json"]


def test_a_scratch_file_a_killed_process_left_does_not_stand_in_the_way(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    # The name a scratch file of this process id had: a process killed mid-write leaves it behind,
    # and a later one given the same id must still write.
    (tmp_path / f".config.json.oct-mcp-{os.getpid()}.tmp").write_text("half")

    write_atomically(target, "{}\n", 0o600)

    assert target.read_text() == "{}\n"


def test_a_write_that_fails_leaves_the_old_file_and_no_scratch(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    target.write_text("old\n")

    with pytest.raises(UnicodeEncodeError):
        write_atomically(target, "bad \udc80 text", 0o600)

    assert target.read_text() == "old\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.json"]
