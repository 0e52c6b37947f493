"""Ignore files as a rule source, through a real stdio client: what they list is denied to every
tool and absent from listings and searches; a project's own is read only where its config is
trusted, a user's always, and a user's that is missing stops the server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from clients import oct_server, only_text
from mcp import Client

from oct_mcp.app import build_app

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

IGNORE = "# keys and customer data\nsecrets/\n*.key\n!public.key\n\\#notes.txt\n"


def _project(tmp_path: Path) -> Path:
    root = (tmp_path / "project").resolve()
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "customers.csv").write_text("name,card\nann,4111\n")
    (root / "src").mkdir()
    (root / "src" / "signing.key").write_text("signing material\n")
    (root / "src" / "public.key").write_text("public material\n")
    (root / "#notes.txt").write_text("material notes\n")
    (root / "src" / "app.py").write_text("APP = 'material'\n")
    (root / ".aiignore").write_text(IGNORE)
    return root


async def _look(project: Path, config: Path) -> dict[str, str]:
    with anyio.fail_after(120):
        async with Client(oct_server(project, config)) as client:
            return {
                "read": only_text(await client.call_tool("oct_read_file", {"path": "secrets/customers.csv"})),
                "key": only_text(await client.call_tool("oct_read_file", {"path": "src/signing.key"})),
                "listing": only_text(await client.call_tool("oct_list_files", {})),
                "search": only_text(await client.call_tool("oct_search", {"pattern": "material"})),
            }


async def test_a_trusted_projects_ignore_file_denies_and_hides_what_it_lists(tmp_path: Path) -> None:
    project = _project(tmp_path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"ignore_files": [".aiignore"], "trust_repo_config": True}))

    seen = await _look(project, config)

    assert seen["read"].startswith(
        "[policy] oct_read_file is denied by rule ignore-file (repo tier): .aiignore lists it"
    )
    assert seen["key"].startswith("[policy] oct_read_file is denied by rule ignore-file (repo tier)")
    for hidden in ("customers.csv", "signing.key", "public.key", "#notes.txt"):
        assert hidden not in seen["listing"]
        assert hidden not in seen["search"]
    assert "src/app.py" in seen["listing"]
    assert "src/app.py" in seen["search"]


async def test_an_untrusted_projects_ignore_file_is_not_read(tmp_path: Path) -> None:
    project = _project(tmp_path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"ignore_files": [".aiignore"]}))

    seen = await _look(project, config)

    assert "4111" in seen["read"]
    assert "signing.key" in seen["listing"]
    doctor = subprocess.run(
        [sys.executable, "-m", "oct_mcp", "doctor", "--project-root", str(project), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "ignore file .aiignore: not read (a project file, and trust_repo_config is off)" in doctor.stdout


async def test_a_users_ignore_file_applies_to_every_project_and_a_missing_one_stops_the_server(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    (project / ".aiignore").unlink()
    users = tmp_path / "ignore"
    users.write_text("secrets/\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"ignore_files": [str(users)]}))

    seen = await _look(project, config)
    users.unlink()
    stopped = subprocess.run(
        [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )

    assert seen["read"].startswith("[policy] oct_read_file is denied by rule ignore-file")
    assert "(user tier)" in seen["read"]
    assert "customers.csv" not in seen["listing"]
    assert "signing.key" in seen["listing"]
    assert stopped.returncode == 2
    assert f"the ignore file {users} cannot be read" in stopped.stderr


def test_a_projects_ignore_file_that_is_a_link_is_ignored_and_the_server_starts(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / ".aiignore").unlink()
    (project / ".aiignore").symlink_to("/dev/stdin")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"ignore_files": [".aiignore"], "trust_repo_config": True}))

    app = build_app(project, config_path=config, environ={})
    try:
        status = app.loaded.ignore_status
    finally:
        app.close()

    assert status == (
        ".aiignore: ignored (a path must not pass through a symlink that leads outside the project root)",
    )


def test_a_users_ignore_file_under_a_long_path_still_makes_a_rule(tmp_path: Path) -> None:
    project = _project(tmp_path)
    folder = tmp_path.joinpath(*["deeper-folder-name"] * 16)
    folder.mkdir(parents=True)
    users = folder / "ignore"
    users.write_text("secrets/\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"ignore_files": [str(users)]}))

    app = build_app(project, config_path=config, environ={})
    try:
        status = app.loaded.ignore_status
    finally:
        app.close()

    assert status == (f"{users}: 1 glob(s) denied to every tool (user tier)",)
