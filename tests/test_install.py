"""`oct-mcp install HOST` / `uninstall HOST` against each host's real config file shape (tests/data/hosts)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from oct_mcp.cli import main
from oct_mcp.install import (
    CLAUDE_CODE_DENY,
    HOSTS,
    HostConfigError,
    ProjectRootError,
    apply_plan,
    claude_desktop_config,
    plan_install,
    plan_uninstall,
)

pytestmark = pytest.mark.e2e

DATA = Path(__file__).parent / "data" / "hosts"
LINUX = "linux"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def _place(host: str, project: Path, home: Path, variant: str = "") -> list[Path]:
    """Copy the host's fixture files where the host keeps them; returns the paths placed."""
    sources: dict[str, list[tuple[str, Path]]] = {
        "claude-code": [
            ("claude-code.mcp.json", project / ".mcp.json"),
            ("claude-code.settings.local.json", project / ".claude" / "settings.local.json"),
        ],
        "claude-desktop": [
            ("claude_desktop_config.json", claude_desktop_config(home, LINUX, {})),
        ],
        "cursor": [("cursor.mcp.json", project / ".cursor" / "mcp.json")],
        "vscode": [(f"vscode{variant}.mcp.json", project / ".vscode" / "mcp.json")],
        "codex": [(f"codex{variant}.config.toml", project / ".codex" / "config.toml")],
    }
    placed = []
    for name, target in sources[host]:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / name, target)
        placed.append(target)
    return placed


def _install(host: str, project: Path, home: Path, *, keep_host_tools: bool = False) -> list[Path]:
    plan = plan_install(host, project, home=home, keep_host_tools=keep_host_tools, platform=LINUX, environ={})
    return apply_plan(plan)


def _uninstall(host: str, project: Path, home: Path) -> list[Path]:
    return apply_plan(plan_uninstall(host, project, home=home, platform=LINUX, environ={}))


def _servers(host: str, path: Path) -> dict[str, object]:
    if host == "codex":
        servers = tomllib.loads(path.read_text())["mcp_servers"]
    else:
        servers = json.loads(path.read_text())["servers" if host == "vscode" else "mcpServers"]
    assert isinstance(servers, dict)
    return servers


@pytest.mark.parametrize("host", HOSTS)
def test_install_adds_the_server_keeps_the_rest_and_uninstall_gives_the_files_back_byte_for_byte(
    host: str, project: Path, home: Path
) -> None:
    placed = _place(host, project, home)
    originals = {path: path.read_bytes() for path in placed}
    others = set(_servers(host, placed[0]))

    backups = _install(host, project, home)

    servers = _servers(host, placed[0])
    assert set(servers) == others | {"oct"}
    entry = servers["oct"]
    assert isinstance(entry, dict)
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][-2:] == ["--project-root", str(project.resolve())]
    assert sorted(backups) == sorted(path.with_name(path.name + ".bak") for path in placed)
    assert {backup.read_bytes() for backup in backups} == set(originals.values())

    _uninstall(host, project, home)

    assert {path: path.read_bytes() for path in placed} == originals


def test_claude_code_denies_its_own_tools_and_uninstall_leaves_the_users_own_rules(
    project: Path, home: Path
) -> None:
    _, settings = _place("claude-code", project, home)

    _install("claude-code", project, home)

    deny = json.loads(settings.read_text())["permissions"]["deny"]
    # The user's own rules stay first and as they were; "Grep" was theirs already, so it is not added twice.
    assert deny == ["Read(./.env)", "Bash(curl *)", "Grep", *(r for r in CLAUDE_CODE_DENY if r != "Grep")]

    _uninstall("claude-code", project, home)

    assert json.loads(settings.read_text())["permissions"]["deny"] == ["Read(./.env)", "Bash(curl *)", "Grep"]


def test_keep_host_tools_leaves_claude_codes_settings_and_codexs_shell_alone(
    project: Path, home: Path
) -> None:
    _, settings = _place("claude-code", project, home)
    (config,) = _place("codex", project, home)
    settings_before, config_before = settings.read_bytes(), tomllib.loads(config.read_text())

    _install("claude-code", project, home, keep_host_tools=True)
    _install("codex", project, home, keep_host_tools=True)

    assert settings.read_bytes() == settings_before
    assert tomllib.loads(config.read_text())["features"] == config_before["features"]


def test_codex_turns_its_shell_off_in_an_existing_features_table_or_a_new_one(
    project: Path, home: Path
) -> None:
    (config,) = _place("codex", project, home)
    _install("codex", project, home)
    assert tomllib.loads(config.read_text())["features"] == {"web_search_request": True, "shell_tool": False}
    assert "# web search stays on for docs look-ups" in config.read_text()

    config.unlink()
    _place("codex", project, home, "-no-features")
    original = config.read_bytes()
    _install("codex", project, home)
    assert tomllib.loads(config.read_text())["features"] == {"shell_tool": False}
    _uninstall("codex", project, home)
    assert config.read_bytes() == original


@pytest.mark.parametrize("host", HOSTS)
def test_install_twice_changes_nothing_the_second_time(host: str, project: Path, home: Path) -> None:
    placed = _place(host, project, home)
    _install(host, project, home)
    after_first = {path: path.read_bytes() for path in placed}

    again = plan_install(host, project, home=home, platform=LINUX, environ={})
    backups = apply_plan(again)

    assert again.changed == ()
    assert backups == []
    assert {path: path.read_bytes() for path in placed} == after_first


@pytest.mark.parametrize("host", HOSTS)
def test_install_into_no_config_then_uninstall_leaves_no_config(host: str, project: Path, home: Path) -> None:
    plan = plan_install(host, project, home=home, platform=LINUX, environ={})
    apply_plan(plan)
    written = [change.path for change in plan.changes]
    assert all(path.is_file() for path in written)

    _uninstall(host, project, home)

    assert [path for path in written if path.exists()] == []
    assert not (home / ".oct-mcp" / "installs.json").exists()


@pytest.mark.parametrize(
    ("host", "variant", "line"),
    [("vscode", "-with-comments", 2), ("codex", "-broken", 5)],
)
def test_a_file_that_does_not_parse_is_refused_named_with_its_line_and_left_untouched(
    host: str, variant: str, line: int, project: Path, home: Path
) -> None:
    (config,) = _place(host, project, home, variant)
    original = config.read_bytes()

    with pytest.raises(HostConfigError) as refused:
        plan_install(host, project, home=home, platform=LINUX, environ={})

    assert refused.value.code == "host_config"
    assert str(config) in refused.value.message
    assert f"line {line}" in refused.value.message
    assert config.read_bytes() == original
    assert sorted(p.name for p in config.parent.iterdir()) == [config.name]


def test_a_broken_file_is_refused_through_the_command_with_its_code(
    project: Path, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (config,) = _place("vscode", project, home, "-with-comments")
    original = config.read_bytes()
    monkeypatch.setenv("HOME", str(home))

    exit_code = main(["install", "vscode", "--project-root", str(project)])

    assert exit_code == 2
    assert capsys.readouterr().err.startswith("oct-mcp install: [host_config] ")
    assert config.read_bytes() == original


def test_a_codex_server_of_the_same_name_that_install_did_not_write_is_refused(
    project: Path, home: Path
) -> None:
    config = project / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('[mcp_servers.oct]\ncommand = "elsewhere"\n')

    with pytest.raises(HostConfigError):
        plan_install("codex", project, home=home, platform=LINUX, environ={})
    with pytest.raises(HostConfigError):
        plan_uninstall("codex", project, home=home, platform=LINUX, environ={})


@pytest.mark.parametrize("host", HOSTS)
def test_print_shows_the_changes_and_writes_nothing(
    host: str,
    project: Path,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    placed = _place(host, project, home)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    if sys.platform == "darwin":  # pragma: no cover - the fixture sits where Linux keeps it
        pytest.skip("Claude Desktop's file is elsewhere on macOS")
    before = sorted((p, p.read_bytes()) for p in [*project.rglob("*"), *home.rglob("*")] if p.is_file())

    exit_code = main(["install", host, "--project-root", str(project), "--print"])

    shown = capsys.readouterr().out
    assert exit_code == 0
    assert f"+++ {placed[0]}" in shown
    assert str(project.resolve()) in shown
    assert (
        sorted((p, p.read_bytes()) for p in [*project.rglob("*"), *home.rglob("*")] if p.is_file()) == before
    )


def test_a_missing_or_too_broad_project_root_is_refused(project: Path, home: Path) -> None:
    with pytest.raises(ProjectRootError):
        plan_install("cursor", project / "absent", home=home)
    with pytest.raises(ProjectRootError):
        plan_install("cursor", home, home=home)


def test_a_file_keeps_its_mode_and_its_backup_has_it_too(project: Path, home: Path) -> None:
    (config,) = _place("cursor", project, home)
    config.chmod(0o600)

    (backup,) = _install("cursor", project, home)

    assert config.stat().st_mode & 0o777 == 0o600
    assert backup.stat().st_mode & 0o777 == 0o600


def test_a_second_backup_gets_a_timestamped_name_and_the_first_is_kept(project: Path, home: Path) -> None:
    (config,) = _place("cursor", project, home)
    original = config.read_bytes()
    (first,) = _install("cursor", project, home)

    (second,) = _uninstall("cursor", project, home)

    assert first.read_bytes() == original
    assert second != first
    assert second.name.startswith("mcp.json.")
    assert second.name.endswith(".bak")


def test_claude_desktops_file_is_where_each_platform_keeps_it(home: Path) -> None:
    assert claude_desktop_config(home, "darwin", {}) == (
        home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    )
    assert claude_desktop_config(home, "win32", {"APPDATA": str(home / "Roaming")}) == (
        home / "Roaming" / "Claude" / "claude_desktop_config.json"
    )
    assert (
        claude_desktop_config(home, LINUX, {}) == home / ".config" / "Claude" / "claude_desktop_config.json"
    )


@pytest.mark.anyio
async def test_the_command_claude_code_is_given_starts_a_server_that_lists_its_tools(
    project: Path, home: Path
) -> None:
    (project / "README.md").write_text("hello\n")
    env = {**os.environ, "HOME": str(home)}
    installed = subprocess.run(
        [sys.executable, "-m", "oct_mcp", "install", "claude-code", "--project-root", str(project)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr

    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["oct"]
    # Started as the host starts it: the command and args as written, from another folder, with the
    # user's home; PYTHONPATH only so a source checkout runs its own code.
    server = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        cwd=str(home),
        env={
            "HOME": str(home),
            **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
        },
    )
    with anyio.fail_after(120):
        async with Client(server) as client:
            listed = await client.list_tools()

    names = {tool.name for tool in listed.tools}
    assert {"oct_read_file", "oct_search", "oct_apply_patch"} <= names


def test_a_codex_shell_switch_the_user_set_is_left_as_it_is_and_said(project: Path, home: Path) -> None:
    config = project / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text("[features]\nshell_tool = true  # I want the shell\n")

    plan = plan_install("codex", project, home=home, platform=LINUX, environ={})
    apply_plan(plan)

    assert tomllib.loads(config.read_text())["features"] == {"shell_tool": True}
    assert any("features.shell_tool is already set" in note for note in plan.notes)
    assert not any("shell tool is off" in note for note in plan.notes)


@pytest.mark.parametrize(
    ("host", "relative", "text"),
    [
        # An inline mcp_servers table cannot take a [mcp_servers.oct] table after it.
        ("codex", ".codex/config.toml", 'mcp_servers = { docs = { command = "npx" } }\n'),
        ("cursor", ".cursor/mcp.json", '{"mcpServers": ["not", "an", "object"]}\n'),
        ("cursor", ".cursor/mcp.json", "[]\n"),
        ("claude-code", ".claude/settings.local.json", '{"permissions": {"deny": "Bash"}}\n'),
    ],
)
def test_a_file_of_a_shape_that_cannot_take_the_entry_safely_is_refused_and_untouched(
    host: str, relative: str, text: str, project: Path, home: Path
) -> None:
    config = project / relative
    config.parent.mkdir()
    config.write_text(text)

    with pytest.raises(HostConfigError):
        plan_install(host, project, home=home, platform=LINUX, environ={})

    assert config.read_text() == text


def test_a_file_changed_after_the_plan_was_made_is_not_overwritten(project: Path, home: Path) -> None:
    (config,) = _place("cursor", project, home)
    plan = plan_install("cursor", project, home=home, platform=LINUX, environ={})
    config.write_text('{"mcpServers": {}, "edited": true}\n')

    with pytest.raises(HostConfigError):
        apply_plan(plan)

    assert json.loads(config.read_text()) == {"mcpServers": {}, "edited": True}


def test_a_linked_config_file_stays_a_link_and_its_target_changes(project: Path, home: Path) -> None:
    dotfiles = home / "dotfiles" / "mcp.json"
    dotfiles.parent.mkdir()
    shutil.copyfile(DATA / "cursor.mcp.json", dotfiles)
    link = project / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)

    _install("cursor", project, home)

    assert link.is_symlink()
    assert "oct" in json.loads(dotfiles.read_text())["mcpServers"]


def test_the_profile_is_passed_to_the_server(project: Path, home: Path) -> None:
    plan = plan_install("vscode", project, home=home, profile="strict", platform=LINUX, environ={})

    (change,) = plan.changes
    assert change.after is not None
    assert json.loads(change.after)["servers"]["oct"]["args"][-2:] == ["--profile", "strict"]
