"""The consent question through the real chain and tools: what it shows is what is applied, and what
a session grant covers never includes a file that configures code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from git_repos import git, new_repo

from oct_mcp.app import App, CallFailure, build_app, run_call
from oct_mcp.code_config import (
    CODE_CONFIG_FOLDERS,
    CODE_CONFIG_NAMES,
    CODE_CONFIG_STEMS,
    CODE_CONFIG_SUFFIXES,
    configures_code,
)
from oct_mcp.consent import SessionGrants
from oct_mcp.protected import PROTECTED_RULES
from oct_mcp.testing import TEST_CLIENT
from oct_mcp.types import ClientInfo, ConsentRequest, ToolResult

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ASKING_CLIENT = ClientInfo(client_id="asking", transport="memory", can_elicit=True)
HELLO = 'def main():\n\tprint("hello")\n'
SPLITTERS = ["\x0c", "\r", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.fixture
def app(project: Path, tmp_path: Path) -> Iterator[App]:
    config = tmp_path / "config.json"
    # One call per entry of the table: more than a minute's default rate.
    config.write_text(
        json.dumps({"audit_log_path": str(tmp_path / "audit.log"), "rate_limit_per_minute": 10_000})
    )
    built = build_app(project, config_path=config, environ={})
    yield built
    built.close()


def _question_lines(request: ConsentRequest) -> list[list[str]]:
    """Both texts a human may be shown: the sentinel's, and the one a form or InputRequired carries."""
    return [request.message.split("\n"), (request.question or "").split("\n")]


@pytest.mark.parametrize("splitter", SPLITTERS, ids=lambda c: f"U+{ord(c):04X}")
async def test_a_line_hidden_behind_a_line_splitter_is_shown_as_the_added_line_it_is(
    app: App, project: Path, splitter: str
) -> None:
    (project / "app.py").write_text(HELLO)
    content = f'{HELLO}{splitter}\tprint("BACKDOOR: runs on import")\n'
    arguments = {"path": "app.py", "content": content, "dry_run": False}

    with anyio.fail_after(30):
        asked = await run_call(app, "oct_write_file", arguments, TEST_CLIENT)
        confirmed = await run_call(app, "oct_write_file", {**arguments, "confirm": True}, TEST_CLIENT)

    assert isinstance(asked, ConsentRequest)
    escaped = f"\\u{ord(splitter):04x}"
    for lines in _question_lines(asked):
        # One line, added, its splitter visible: nothing reads as unchanged context.
        assert [line for line in lines if "BACKDOOR" in line] == [
            f'+{escaped}\tprint("BACKDOOR: runs on import")'
        ]
        assert "  app.py: replace, +1 -0" in lines
    assert isinstance(confirmed, ToolResult), confirmed
    assert (project / "app.py").read_bytes() == content.encode()


async def test_a_git_preview_shows_a_staged_line_behind_a_form_feed_as_added(tmp_path: Path) -> None:
    repo = new_repo(tmp_path)
    (repo / "app.py").write_text(HELLO)
    git(repo, "add", "app.py")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "one")
    (repo / "app.py").write_text(f'{HELLO}\x0c\tprint("BACKDOOR")\n')
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log")}))
    built = build_app(repo, config_path=config, environ={})
    try:
        with anyio.fail_after(60):
            asked = await run_call(built, "oct_git_add", {"paths": ["app.py"], "dry_run": False}, TEST_CLIENT)
    finally:
        built.close()

    assert isinstance(asked, ConsentRequest), asked
    for lines in _question_lines(asked):
        assert [line for line in lines if "BACKDOOR" in line] == ['+\\u000c\tprint("BACKDOOR")']


def _table_paths() -> list[str]:
    """One project path for every entry of the table, and for every protected rule's names."""
    paths = sorted(CODE_CONFIG_NAMES)
    paths += [f"{stem}.js" for stem in sorted(CODE_CONFIG_STEMS)]
    paths += [f"tool{suffix}" for suffix in CODE_CONFIG_SUFFIXES]
    paths += [f"{folder}/x.txt" for folder in sorted(CODE_CONFIG_FOLDERS)]
    paths += [
        "requirements-dev.txt",
        "constraints.in",
        "Dockerfile.dev",
        ".env.local",
        "src/sub/package.json",
    ]
    for rule in PROTECTED_RULES:
        paths += [f"{name}/x" if "." not in name else name for name in sorted(rule.components)]
        paths += ["/".join((*prefix, "x.yml")) for prefix in rule.prefixes]
    paths += [".git/hooks/pre-commit", ".git/config", ".git/info/attributes", "vendor/lib/.git/config"]
    return paths


def test_the_table_names_the_files_the_red_team_wrote_under_a_grant_in_every_case() -> None:
    written = [
        "package.json",
        "Makefile",
        "eslint.config.js",
        ".yarnrc.yml",
        "Cargo.toml",
        "build.rs",
        ".npmrc",
    ]
    more = ["go.mod", "pom.xml", "build.gradle.kts", "Gemfile", ".gitattributes", ".envrc", "Dockerfile"]
    others = [".pre-commit-config.yaml", "compose.yaml", ".gitlab-ci.yml", "x.gemspec", "BUILD.bazel"]

    assert [p for p in [*written, *more, *others] if not configures_code(p)] == []
    assert [
        p
        for p in ["README.md", "src/app.py", "docs/venv.md", "notes.txt", "build/out.txt"]
        if configures_code(p)
    ] == []


async def test_a_session_grant_for_the_root_never_covers_a_file_that_configures_code(
    app: App, project: Path
) -> None:
    grants = SessionGrants()
    readme = {"path": "README.md", "content": "# Demo, typo fixed\n", "dry_run": False}
    paths = _table_paths()
    grants.grant("oct_write_file", tuple({"."} | {p.rsplit("/", 1)[0] for p in paths if "/" in p}))

    with anyio.fail_after(120):
        covered = await run_call(app, "oct_write_file", readme, ASKING_CLIENT, session_grants=grants)
        outcomes = {
            path: await run_call(
                app,
                "oct_write_file",
                {"path": path, "content": "x = 1\n", "dry_run": False},
                ASKING_CLIENT,
                session_grants=grants,
            )
            for path in paths
        }

    # The grant works for the file it was given for, so what follows is the table's doing.
    assert isinstance(covered, ToolResult)
    assert covered.consent is not None
    assert covered.consent.given_by == "session_grant"
    ran = {path: outcome for path, outcome in outcomes.items() if isinstance(outcome, ToolResult)}
    assert ran == {}
    asked = {p: o for p, o in outcomes.items() if isinstance(o, ConsentRequest)}
    refused = {p: o.code for p, o in outcomes.items() if isinstance(o, CallFailure)}
    assert set(asked) | set(refused) == set(paths)
    # Asked, each flagged where the question lists it, and no grant offered for it.
    assert [
        p for p, o in asked.items() if o.grant_folders or "configures code" not in (o.question or "")
    ] == []
    # Refused only by the policy's protected paths, before anyone is asked, or as a folder the
    # project has (its `build/`).
    assert {p: c for p, c in refused.items() if c != "policy" and not (project / p).is_dir()} == {}
    assert [p for p in paths if (project / p).is_file()] == []


@pytest.mark.parametrize("splitter", SPLITTERS, ids=lambda c: f"U+{ord(c):04X}")
async def test_a_dry_run_shows_people_the_line_behind_a_splitter_and_the_model_its_bytes(
    app: App, project: Path, splitter: str
) -> None:
    (project / "app.py").write_text(HELLO)
    content = f'{HELLO}{splitter}\tprint("BACKDOOR")\n'
    arguments = {"path": "app.py", "content": content, "dry_run": True, "confirm": True}

    with anyio.fail_after(30):
        result = await run_call(app, "oct_write_file", arguments, TEST_CLIENT)

    assert isinstance(result, ToolResult), result
    assert result.structured is not None
    shown = result.text.split("\n")
    assert [line for line in shown if "BACKDOOR" in line] == [f'+\\u{ord(splitter):04x}\tprint("BACKDOOR")']
    assert f'+{splitter}\tprint("BACKDOOR")\n' in result.structured["diff"]
    assert (project / "app.py").read_text() == HELLO


async def test_git_diff_shows_people_the_line_behind_a_form_feed_and_the_model_its_bytes(
    tmp_path: Path,
) -> None:
    repo = new_repo(tmp_path)
    (repo / "app.py").write_text(HELLO)
    git(repo, "add", "app.py")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "one")
    (repo / "app.py").write_text(f'{HELLO}\x0c\tprint("BACKDOOR")\n')
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log")}))
    built = build_app(repo, config_path=config, environ={})
    try:
        with anyio.fail_after(60):
            result = await run_call(built, "oct_git_diff", {}, TEST_CLIENT)
    finally:
        built.close()

    assert isinstance(result, ToolResult), result
    assert result.structured is not None
    assert [line for line in result.text.split("\n") if "BACKDOOR" in line] == ['+\\u000c\tprint("BACKDOOR")']
    assert '+\x0c\tprint("BACKDOOR")\n' in result.structured["diff"]
