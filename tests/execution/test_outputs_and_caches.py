"""The run's output folder and the project's cache folder: what is read back, and what is trusted."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from oct_mcp.execution.caches import CACHE_SUBFOLDERS, prepare_project_cache, project_cache
from oct_mcp.execution.outputs import OutputFolder


def test_an_output_file_comes_back_whole_up_to_the_limit(tmp_path: Path) -> None:
    outputs = OutputFolder(tmp_path)
    (outputs.path / "report.json").write_bytes(b"x" * 100)

    files, cut = outputs.read(["report.json", "absent.json"], limit=60)

    assert files == {"report.json": b"x" * 60}
    assert cut == ["report.json"]


def test_a_link_planted_in_the_output_folder_is_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the model\n")
    outputs = OutputFolder(tmp_path)
    (outputs.path / "report.json").symlink_to(secret)

    files, cut = outputs.read(["report.json"])

    assert (files, cut) == ({}, [])


def test_an_output_folder_swapped_for_a_link_is_still_read_where_it_was(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "report.json").write_text("planted")
    (tmp_path / "run").mkdir()
    outputs = OutputFolder(tmp_path / "run")
    (outputs.path / "report.json").write_text("real")
    outputs.path.rename(tmp_path / "run" / "moved")
    outputs.path.symlink_to(elsewhere)

    files, _ = outputs.read(["report.json"])

    assert files == {"report.json": b"real"}


def test_a_file_name_cannot_leave_the_output_folder(tmp_path: Path) -> None:
    (tmp_path / "outside.json").write_text("outside")
    (tmp_path / "run").mkdir()
    outputs = OutputFolder(tmp_path / "run")

    assert outputs.environment([("REPORT", "../../outside.json")]) == [
        ("REPORT", str(outputs.path / "outside.json"))
    ]
    assert outputs.read(["../../outside.json"]) == ({}, [])


def test_the_cache_folder_is_per_project_owner_only_and_outside_the_project(tmp_path: Path) -> None:
    host = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path / "home")}
    one, other = tmp_path / "one", tmp_path / "other"

    folder = prepare_project_cache(one, host)

    assert folder is not None
    assert folder == project_cache(one, host) != project_cache(other, host)
    assert folder.is_relative_to(tmp_path / "cache")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert sorted(p.name for p in folder.iterdir()) == sorted(CACHE_SUBFOLDERS)


def test_a_cache_folder_others_can_write_is_not_used(tmp_path: Path) -> None:
    host = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    folder = project_cache(tmp_path / "project", host)
    folder.mkdir(parents=True)
    os.chmod(folder, 0o777)  # noqa: S103 - the folder under test is meant to be unsafe

    assert prepare_project_cache(tmp_path / "project", host) is None


def test_a_cache_folder_that_is_a_link_is_not_used(tmp_path: Path) -> None:
    host = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    folder = project_cache(tmp_path / "project", host)
    folder.parent.mkdir(parents=True, mode=0o700)
    os.chmod(folder.parent.parent, 0o700)
    (tmp_path / "target").mkdir(mode=0o700)
    folder.symlink_to(tmp_path / "target")

    assert prepare_project_cache(tmp_path / "project", host) is None


def test_a_cache_folder_inside_the_project_is_not_used(tmp_path: Path) -> None:
    project = tmp_path / "project"
    host = {"XDG_CACHE_HOME": str(project / ".cache")}

    assert prepare_project_cache(project, host) is None
    assert not (project / ".cache").exists()
