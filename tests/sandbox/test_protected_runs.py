"""Writable runs and protected paths: a project's own `.venv/bin/ruff`, run by oct_format apply=true.

The program is a shell script standing in for a malicious formatter. Each test makes one of the
moves a red-team review made; bubblewrap must block it or the check after the run must catch it,
native (which confines nothing) must catch it after the run, and the call fails either way.
"""

from __future__ import annotations

import json
import os
import stat
import textwrap
from pathlib import Path

import anyio
import pytest
from clients import oct_server, only_text
from command_tool import command_sandbox
from fakes import make_context
from mcp import Client
from optional import bubblewrap

from oct_mcp.backends import Backend
from oct_mcp.backends.native import Native
from oct_mcp.errors import LinkedFileError, ProtectedPathCreatedError
from oct_mcp.execution.protected_walk import ProjectTooLargeError, settle_protected_paths, snapshot_protected
from oct_mcp.testing import validated
from oct_mcp.tools.python.format import FORMAT, FormatParams
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


# What printf turns into a git config whose fsmonitor runs a program at the next `git status`.
FSMONITOR = r"[core]\n\tfsmonitor = touch pwned\n"
CI = "on: push\njobs: {}\n"


@pytest.fixture(params=["bubblewrap", "native"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return bubblewrap() if request.param == "bubblewrap" else Native()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with CI, a vendored repository, a subfolder and a Python file to format."""
    root = tmp_path.resolve() / "project"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text(CI)
    (root / "vendor" / "lib" / ".git").mkdir(parents=True)
    (root / "vendor" / "lib" / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (root / "vendor" / "lib" / "mod.py").write_text("x=1\n")
    (root / "sub").mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("y=2\n")
    return root


def _fake_ruff(project: Path, body: str) -> None:
    """`.venv/bin/ruff`: a shell script that, asked for its diff, names app.py; asked to format,
    does `body`, then formats app.py and exits 0."""
    bin_folder = project / ".venv" / "bin"
    bin_folder.mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text("include-system-site-packages = false\n")
    script = bin_folder / "ruff"
    diff = "--- src/app.py\\n+++ src/app.py\\n@@ -1 +1 @@\\n-y=2\\n+y = 2\\n"
    asked_for_diff = f'case " $* " in *" --diff "*) printf \'{diff}\'; exit 1;; esac\n'
    script.write_text(
        "#!/bin/sh\n" + asked_for_diff + textwrap.dedent(body) + "\necho 'y = 2' > src/app.py\nexit 0\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


async def _format(backend: Backend, project: Path) -> ToolResult | ProtectedPathCreatedError:
    """oct_format apply=true, as the chain hands it to the sandbox once the human said yes."""
    params = FormatParams(apply=True)
    ctx = validated(make_context("oct_format", Workspace(project)), FORMAT, params)
    try:
        with anyio.fail_after(60):
            outcome = await command_sandbox(backend, timeout_seconds=30)(
                ctx, lambda ctx: pytest.fail("terminal layer called next")
            )
    except ProtectedPathCreatedError as error:
        return error
    assert isinstance(outcome, ToolResult)
    return outcome


async def test_renaming_github_away_for_a_new_workflows_folder_is_blocked_or_caught(
    backend: Backend, project: Path
) -> None:
    _fake_ruff(
        project,
        """
        mv .github .github-old
        mkdir -p .github/workflows
        echo 'on: push' > .github/workflows/pwn.yml
        """,
    )

    outcome = await _format(backend, project)

    assert not (project / ".github" / "workflows" / "pwn.yml").exists()
    if backend.name == "bubblewrap":
        # .github is a mount point in the sandbox: it cannot be renamed (EBUSY), its workflows not written.
        assert isinstance(outcome, ToolResult)
        assert outcome.is_error is False
        assert (project / ".github" / "workflows" / "ci.yml").read_text() == CI
        assert not (project / ".github-old").exists()
    else:
        assert isinstance(outcome, ProtectedPathCreatedError)
        assert outcome.code == "protected_path_created"
        assert outcome.message == (
            "the tool wrote protected paths, which no tool may write: .github/workflows (created; removed "
            "again); .github/workflows (changed, moved or deleted; restore it from version control or a "
            "backup); its other changes were kept"
        )
        assert (project / ".github-old" / "workflows" / "ci.yml").read_text() == CI
    assert (project / "src" / "app.py").read_text() == "y = 2\n"  # its other changes are kept


async def test_renaming_a_vendored_repository_away_for_a_new_git_config_is_blocked_or_caught(
    backend: Backend, project: Path
) -> None:
    _fake_ruff(
        project,
        f"""
        mv vendor/lib vendor/lib-old
        mkdir -p vendor/lib/.git
        printf '{FSMONITOR}' > vendor/lib/.git/config
        """,
    )

    outcome = await _format(backend, project)

    if backend.name == "bubblewrap":
        # vendor/lib leads to a protected path: bound onto itself, it cannot be renamed either.
        assert isinstance(outcome, ToolResult)
        assert (project / "vendor" / "lib" / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    else:
        assert isinstance(outcome, ProtectedPathCreatedError)
        assert outcome.message.startswith(
            "the tool wrote protected paths, which no tool may write: vendor/lib/.git (created; removed "
            "again); vendor/lib-old/.git (created; left: "
        )
        assert "; vendor/lib/.git (changed, moved or deleted;" in outcome.message
        assert not (project / "vendor" / "lib" / ".git").exists()
        assert (project / "vendor" / "lib-old" / ".git" / "config").read_text() == "[core]\n\tbare = false\n"


PLANTED = [
    pytest.param(
        f"mkdir -p vendor/other/.git && printf '{FSMONITOR}' > vendor/other/.git/config",
        "vendor/other/.git",
        id="a-git-config-planted-deep",
    ),
    pytest.param(
        "mkdir -p sub/.vscode && echo '{\"tasks\": []}' > sub/.vscode/tasks.json",
        "sub/.vscode",
        id="vscode-tasks-in-a-subfolder",
    ),
    pytest.param(
        "mkdir -p .config/fish && echo 'echo pwned' > .config/fish/config.fish",
        ".config/fish/config.fish",
        id="a-fish-config",
    ),
    pytest.param("echo 'echo pwned' > .bash_login", ".bash_login", id="bash-login"),
    pytest.param("echo 'echo pwned' > sub/.zlogin", "sub/.zlogin", id="a-zlogin-in-a-subfolder"),
]


@pytest.mark.parametrize(("script", "planted"), PLANTED)
async def test_a_protected_path_created_at_any_depth_fails_the_call_and_is_removed(
    backend: Backend, project: Path, script: str, planted: str
) -> None:
    _fake_ruff(project, script)

    outcome = await _format(backend, project)

    assert isinstance(outcome, ProtectedPathCreatedError)
    assert outcome.message == (
        f"the tool wrote protected paths, which no tool may write: {planted} (created; removed again); "
        "its other changes were kept"
    )
    assert not (project / planted).exists()
    assert (project / "src" / "app.py").read_text() == "y = 2\n"


async def test_a_folder_made_a_git_directory_fails_the_call(backend: Backend, project: Path) -> None:
    _fake_ruff(
        project,
        f"""
        mkdir -p src/objects src/refs
        echo 'ref: refs/heads/main' > src/HEAD
        printf '{FSMONITOR}' > src/config
        """,
    )

    outcome = await _format(backend, project)

    assert isinstance(outcome, ProtectedPathCreatedError)
    assert outcome.message.startswith(
        "the tool wrote protected paths, which no tool may write: src (created; left: "
    )


async def test_a_protected_file_changed_in_place_fails_the_call_on_native(project: Path) -> None:
    (project / ".bash_login").write_text("# mine\n")
    _fake_ruff(project, "echo 'echo pwned' >> .bash_login")

    outcome = await _format(Native(), project)

    assert isinstance(outcome, ProtectedPathCreatedError)
    assert ".bash_login (changed, moved or deleted;" in outcome.message


async def test_a_run_that_leaves_protected_paths_alone_succeeds(backend: Backend, project: Path) -> None:
    _fake_ruff(project, "true")

    outcome = await _format(backend, project)

    assert isinstance(outcome, ToolResult)
    assert outcome.text == "changed 1 file(s):\nsrc/app.py"


def test_the_walk_finds_protected_names_at_any_depth_and_git_directories(project: Path) -> None:
    (project / "a" / "b" / ".idea").mkdir(parents=True)
    (project / "a" / "b" / "config.fish").write_text("")
    (project / "bare" / "objects").mkdir(parents=True)
    (project / "bare" / "refs").mkdir()
    (project / "bare" / "HEAD").write_text("ref: refs/heads/main\n")

    snapshot = snapshot_protected(project)

    assert {name: rule.name for name, rule in snapshot.roots.items()} == {
        ".github/workflows": "ci",
        "vendor/lib/.git": "git",
        "a/b/.idea": "agent_config",
        "a/b/config.fish": "shell_rc",
        "bare": "git_directory",
    }


async def test_oct_format_apply_over_stdio_reports_the_protected_path_it_created(
    project: Path, config_file: Path, backend: Backend
) -> None:
    config = {"sandbox_backend": backend.name, "allow_unconfined_project_code": True}
    config_file.write_text(json.dumps(config))
    _fake_ruff(project, "mkdir -p sub/.vscode && echo '{}' > sub/.vscode/tasks.json")
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            result = await client.call_tool("oct_format", {"apply": True, "confirm": True})

    assert result.is_error is True
    assert only_text(result).startswith(
        "[protected_path_created] the tool wrote protected paths, which no tool may write: sub/.vscode "
        "(created; removed again)"
    )
    assert not (project / "sub" / ".vscode").exists()


def test_the_walk_gives_up_past_its_limit(project: Path) -> None:
    with pytest.raises(ProjectTooLargeError):
        snapshot_protected(project, limit=5)


def test_the_check_leaves_git_churn_alone_but_not_a_hook(project: Path) -> None:
    git = project / "vendor" / "lib" / ".git"
    (git / "hooks").mkdir()
    before = snapshot_protected(project)
    (git / "index").write_text("rewritten by an IDE's git status\n")
    (git / "objects").mkdir()
    (git / "objects" / "ab").write_text("an object\n")
    assert not settle_protected_paths(project, before)

    (git / "hooks" / "pre-commit").write_text("#!/bin/sh\n")

    changes = settle_protected_paths(project, before)
    assert changes.changed == ("vendor/lib/.git/hooks/pre-commit",)


def test_repositories_come_first_among_the_paths_a_sandbox_keeps_read_only(project: Path) -> None:
    (project / ".vscode").mkdir()

    paths = snapshot_protected(project).bind_paths(project)

    assert paths == (
        project / "vendor" / "lib" / ".git",
        project / ".vscode",
        project / ".github" / "workflows",
    )


async def test_a_protected_file_with_another_name_in_the_project_refuses_a_writable_run_before_it_runs(
    backend: Backend, project: Path
) -> None:
    hook = project / "vendor" / "lib" / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir()
    hook.write_text("#!/bin/sh\n")
    # A read-only bind keeps the path, not the file: written through its other name, the hook changes.
    # That name is outside the project, where the listing of what a writing run changed never looks
    # (a project file with another name is refused by that listing, with oct_run's own message).
    os.link(hook, project.parent / "hook-elsewhere")
    _fake_ruff(project, "echo 'touch pwned' >> ../hook-elsewhere")

    with pytest.raises(LinkedFileError) as refused:
        await _format(backend, project)

    assert refused.value.code == "linked_file"
    assert refused.value.message == (
        "protected files have another name (a hard link) a writable run could change them through: "
        "vendor/lib/.git/hooks/pre-commit; replace each with a copy of itself (cp F F.new && mv F.new F), "
        "then call again; nothing ran"
    )
    assert hook.read_text() == "#!/bin/sh\n"
    assert (project / "src" / "app.py").read_text() == "y=2\n"
