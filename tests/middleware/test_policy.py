"""PolicyEngine: the allowlist hides and refuses; protected paths refuse writes whatever the profile."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import WRITE_TOOL, RecordingNext, WriteFileParams, catalog_with_write_tool, make_context

from oct_mcp.config import McpConfig
from oct_mcp.errors import ConfigError, PolicyError
from oct_mcp.middleware.policy import LAYER, PolicyEngine, PolicySettings
from oct_mcp.tools import default_catalog
from oct_mcp.tools.files import ReadFileParams
from oct_mcp.types import CallContext, LayerRuntime
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.anyio


def _policy(
    project: Path, *, tools: tuple[str, ...] = ("*",), server_files: tuple[str, ...] = ()
) -> PolicyEngine:
    runtime = LayerRuntime(
        config=McpConfig(audit_log_path=str(project / "logs" / "audit.log")),
        workspace=Workspace(project),
        catalog=catalog_with_write_tool(),
        profile="test",
        server_files=server_files,
    )
    engine = LAYER.build(PolicySettings(tools=tools), runtime)
    assert isinstance(engine, PolicyEngine)
    return engine


def _write(project: Path, path: str) -> CallContext:
    ctx = make_context(WRITE_TOOL.name, Workspace(project), path=path)
    return replace(ctx, spec=WRITE_TOOL, params=WriteFileParams(path=path), risk=WRITE_TOOL.own_risk)


def _read(project: Path, path: str) -> CallContext:
    ctx = make_context("oct_read_file", Workspace(project), path=path)
    spec = default_catalog()["oct_read_file"]
    return replace(ctx, spec=spec, params=ReadFileParams(path=path), risk=spec.own_risk)


async def test_an_allowed_write_to_an_ordinary_file_passes_on(project: Path) -> None:
    call_next = RecordingNext()

    await _policy(project)(_write(project, "src/pkg/new.py"), call_next)

    assert len(call_next.seen) == 1


async def test_a_tool_outside_the_allowlist_is_hidden_and_refused(project: Path) -> None:
    policy = _policy(project, tools=("oct_read_file",))
    call_next = RecordingNext()

    with pytest.raises(PolicyError) as caught:
        await policy(_write(project, "notes.txt"), call_next)

    assert caught.value.code == "policy"
    assert "allowlist" in caught.value.message
    assert call_next.seen == []
    assert policy.is_visible(WRITE_TOOL) is False
    assert policy.is_visible(default_catalog()["oct_read_file"]) is True


def test_an_allowlist_naming_a_tool_that_does_not_exist_fails_at_build(project: Path) -> None:
    with pytest.raises(ConfigError):
        _policy(project, tools=("oct_read_file", "oct_read_fiel"))


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        (".git/config", "git"),
        (".git/hooks/pre-commit", "git"),
        (".git", "git"),
        ("vendor/lib/.git/HEAD", "git"),
        (".GIT/config", "git"),
        (".oct-mcp/config.json", "oct_mcp_config"),
        (".octrc.json", "oct_mcp_config"),
        ("debug_config.json", "oct_mcp_config"),
        (".github/workflows/ci.yml", "ci"),
        (".github/actions/setup/action.yml", "ci"),
        (".gitlab-ci.yml", "ci"),
        (".circleci/config.yml", "ci"),
        ("Jenkinsfile", "ci"),
        (".pre-commit-config.yaml", "git_hooks"),
        (".husky/pre-commit", "git_hooks"),
        ("lefthook.yml", "git_hooks"),
        (".githooks/pre-push", "git_hooks"),
        (".vscode/settings.json", "agent_config"),
        (".vscode/tasks.json", "agent_config"),
        (".idea/workspace.xml", "agent_config"),
        (".claude/settings.json", "agent_config"),
        (".cursor/mcp.json", "agent_config"),
        (".mcp.json", "agent_config"),
        (".devcontainer/devcontainer.json", "agent_config"),
        (".bashrc", "shell_rc"),
        (".zshrc", "shell_rc"),
        (".profile", "shell_rc"),
        (".envrc", "shell_rc"),
        ("logs/audit.log", "server_files"),
        ("logs/audit.log.3", "server_files"),
    ],
)
async def test_a_write_to_a_protected_path_is_refused_naming_the_rule(
    project: Path, path: str, rule: str
) -> None:
    call_next = RecordingNext()

    with pytest.raises(PolicyError) as caught:
        await _policy(project)(_write(project, path), call_next)

    assert f"protected path rule: {rule}" in caught.value.message
    assert call_next.seen == []


async def test_the_config_and_policy_files_inside_the_project_are_protected(project: Path) -> None:
    policy = _policy(project, server_files=(str(project / "my-config.json"),))

    with pytest.raises(PolicyError) as caught:
        await policy(_write(project, "my-config.json"), RecordingNext())

    assert "server_files" in caught.value.message


async def test_a_symlink_to_a_protected_folder_is_the_protected_folder(project: Path) -> None:
    (project / ".git").mkdir()
    (project / "notes").symlink_to(project / ".git")

    with pytest.raises(PolicyError) as caught:
        await _policy(project)(_write(project, "notes/config"), RecordingNext())

    assert "protected path rule: git" in caught.value.message


@pytest.mark.parametrize(
    "path", [".github/ISSUE_TEMPLATE/bug.md", "docs/.github.md", "gitlab-ci.md", "src/git.py"]
)
async def test_look_alikes_of_protected_paths_are_not_protected(project: Path, path: str) -> None:
    call_next = RecordingNext()

    await _policy(project)(_write(project, path), call_next)

    assert len(call_next.seen) == 1


async def test_read_tools_may_read_protected_paths(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    call_next = RecordingNext()

    await _policy(project)(_read(project, ".git/HEAD"), call_next)

    assert len(call_next.seen) == 1


async def test_the_refusal_does_not_repeat_the_path(project: Path) -> None:
    with pytest.raises(PolicyError) as caught:
        await _policy(project)(_write(project, ".git/secret-name"), RecordingNext())

    assert "secret-name" not in caught.value.message
    assert os.sep + ".git" not in caught.value.message


async def test_a_protected_name_linked_to_an_ordinary_folder_is_still_protected(project: Path) -> None:
    (project / "settings").mkdir()
    (project / ".vscode").symlink_to(project / "settings")

    with pytest.raises(PolicyError) as caught:
        await _policy(project)(_write(project, ".vscode/tasks.json"), RecordingNext())

    assert "protected path rule: agent_config" in caught.value.message


RUN_TOOL = default_catalog()["oct_run"]


def _command(project: Path, argv: list[str], **arguments: object) -> CallContext:
    params = RUN_TOOL.params.model_validate({"argv": argv, **arguments})
    ctx = make_context(RUN_TOOL.name, Workspace(project), **params.model_dump())
    return replace(ctx, spec=RUN_TOOL, params=params, risk=RUN_TOOL.risk_of(params.model_dump()))


def _runs_programs(
    project: Path, programs: tuple[str, ...] | None = None, guarantees: frozenset[str] = frozenset()
) -> PolicyEngine:
    runtime = LayerRuntime(
        config=McpConfig(audit_log_path=str(project / "logs" / "audit.log")),
        workspace=Workspace(project),
        catalog=default_catalog(),
        profile="test",
        guarantees=guarantees,
    )
    settings = PolicySettings() if programs is None else PolicySettings(programs=programs)
    engine = LAYER.build(settings, runtime)
    assert isinstance(engine, PolicyEngine)
    return engine


@pytest.mark.parametrize(
    "argv",
    [["python", "-m", "pkg"], ["pytest"], ["nox", "-s", "docs"], ["make", "check"], ["uv", "run", "x"]],
)
async def test_the_default_programs_pass_on(project: Path, argv: list[str]) -> None:
    call_next = RecordingNext()

    await _runs_programs(project)(_command(project, argv), call_next)

    assert len(call_next.seen) == 1


@pytest.mark.parametrize(
    "argv", [["sh", "-c", "id"], ["uv", "pip", "install", "x"], ["npm", "install"], ["uv"]]
)
async def test_a_program_outside_programs_is_refused_by_the_rule(project: Path, argv: list[str]) -> None:
    call_next = RecordingNext()

    with pytest.raises(PolicyError) as caught:
        await _runs_programs(project)(_command(project, argv), call_next)

    assert caught.value.code == "policy"
    assert (
        "(rule: programs; allowed: hatch, make, nox, npm run, pytest, python, tox, uv run)"
        in caught.value.message
    )
    assert argv[0] not in caught.value.message.split("allowed:")[0]
    assert call_next.seen == []


async def test_a_profile_s_programs_replace_the_default(project: Path) -> None:
    policy = _runs_programs(project, ("just", "cargo test"))

    await policy(_command(project, ["just", "lint"]), RecordingNext())
    await policy(_command(project, ["cargo", "test"]), RecordingNext())
    with pytest.raises(PolicyError):
        await policy(_command(project, ["python", "-V"]), RecordingNext())
    with pytest.raises(PolicyError):
        await policy(_command(project, ["cargo", "run"]), RecordingNext())


@pytest.mark.parametrize("entry", ["/usr/bin/python", "-x", "a b c", ""])
def test_a_programs_entry_that_is_no_command_fails_at_build(project: Path, entry: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _runs_programs(project, (entry,))

    assert caught.value.code == "config"


async def test_oct_run_with_writes_may_not_start_in_a_protected_folder(project: Path) -> None:
    (project / ".github" / "workflows").mkdir(parents=True)
    call_next = RecordingNext()

    with pytest.raises(PolicyError) as caught:
        await _runs_programs(project)(
            _command(project, ["make"], cwd=".github/workflows", writes=True), call_next
        )

    assert "(protected path rule: ci, argument: cwd)" in caught.value.message
    assert call_next.seen == []


async def test_oct_run_without_writes_may_read_a_protected_folder(project: Path) -> None:
    (project / ".github" / "workflows").mkdir(parents=True)
    call_next = RecordingNext()

    await _runs_programs(project)(_command(project, ["make"], cwd=".github/workflows"), call_next)

    assert len(call_next.seen) == 1


async def test_the_network_is_refused_where_the_profile_requires_no_network(project: Path) -> None:
    call_next = RecordingNext()
    policy = _runs_programs(project, guarantees=frozenset({"no_network"}))

    with pytest.raises(PolicyError) as caught:
        await policy(_command(project, ["pytest"], network=True), call_next)
    await policy(_command(project, ["pytest"]), call_next)

    assert "(rule: no_network)" in caught.value.message
    assert len(call_next.seen) == 1


async def test_the_network_passes_on_where_the_profile_allows_it(project: Path) -> None:
    call_next = RecordingNext()

    await _runs_programs(project)(_command(project, ["pytest"], network=True), call_next)

    assert len(call_next.seen) == 1
