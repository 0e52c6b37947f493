"""Ref arguments of the git tools: checked as text, then resolved to a commit by git before the real call."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest
from clients import model_view, oct_server
from git_repos import git, new_repo
from mcp import Client
from pydantic import BaseModel, ConfigDict, ValidationError

from oct_mcp.errors import ExecutionError, NotFoundError
from oct_mcp.spec import NextCommand, RunResult
from oct_mcp.tools.git.refs import (
    REF_MAX_LENGTH,
    GitRef,
    check_ref,
    verified_commit,
    verify_arguments,
    verify_chain,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main with two commits, a branch `feature` off the first."""
    root = new_repo(tmp_path)
    (root / "a.py").write_text("one\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "First")
    git(root, "branch", "feature")
    (root / "a.py").write_text("one\ntwo\n")
    git(root, "commit", "-q", "-am", "Second")
    return root


@pytest.fixture
def native_config(tmp_path: Path) -> Path:
    """The native backend: no namespaces, so a file git wrote would show on the host."""
    path = tmp_path / "native-config.json"
    path.write_text(json.dumps({"sandbox_backend": "native", "allow_unconfined_project_code": True}))
    return path


# the text


class _Refs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    base: GitRef


@pytest.mark.parametrize(
    "ref",
    [
        "HEAD",
        "@",
        "main",
        "feature/login-2",
        "origin/main",
        "v1.2.3",
        "HEAD~1",
        "HEAD~",
        "HEAD^",
        "HEAD^2~3",
        "main@{upstream}",
        "@{u}",
        "@{-1}",
        "main@{2}",
        "0123456789abcdef0123456789abcdef01234567",
        "user@feature",
        "naïve",
    ],
)
def test_a_ref_git_names_one_commit_by_is_accepted(ref: str) -> None:
    assert check_ref(ref) == ref


@pytest.mark.parametrize(
    "ref",
    [
        "--output=/tmp/x",
        "-n",
        "-",
        "main..feature",
        "main...HEAD",
        "HEAD:a.py",
        ":/fix",
        "feat*",
        "feat?",
        "feat[1]",
        "back\\slash",
        "two words",
        "tab\there",
        "new\nline",
        "nul\0byte",
        "bidi\u202eoverride",
        "zero\u200bwidth",
        ".hidden",
        "main/.hidden",
        "main.lock",
        "main.",
        "main/",
        "main//x",
        "HEAD^{tree}",
        "main@{yesterday}",
        "main@{2 days ago}",
        "~1",
        "^",
        "x" * (REF_MAX_LENGTH + 1),
    ],
)
def test_a_ref_that_is_an_option_a_path_or_other_syntax_is_refused(ref: str) -> None:
    with pytest.raises(ValidationError) as refused:
        _Refs(base=ref)

    (error,) = refused.value.errors(include_url=False, include_input=False, include_context=False)
    assert error["loc"] == ("base",)
    # The message says which rule, never the ref.
    assert len(ref) < 4 or ref not in error["msg"]


# the resolution


def test_the_ref_is_resolved_after_end_of_options_and_peeled_to_a_commit() -> None:
    assert verify_arguments("main") == (
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        "main^{commit}",
    )


def test_resolving_an_option_shaped_ref_never_runs_the_option(repo: Path, tmp_path: Path) -> None:
    # Past the text check, git's own resolution still reads it as a revision, not an option.
    written = tmp_path / "written"

    completed = subprocess.run(
        ["git", "-C", str(repo), *verify_arguments(f"--output={written}")], capture_output=True, check=False
    )

    assert completed.returncode != 0
    assert not written.exists()


def test_git_diff_writes_the_file_an_output_option_names(repo: Path, tmp_path: Path) -> None:
    # The refusals below are meaningful: a ref git took as an option would write this file.
    written = tmp_path / "written"

    git(repo, "diff", f"--output={written}", "HEAD~1")

    assert written.exists()


def _run(stdout: bytes, exit_code: int = 0) -> RunResult:
    return RunResult(
        exit_code=exit_code,
        stdout=stdout,
        stderr=b"",
        output_bytes=len(stdout),
        truncated=False,
        timed_out=False,
        duration_seconds=0.0,
        backend="test",
    )


def test_a_ref_git_cannot_resolve_names_its_argument() -> None:
    with pytest.raises(NotFoundError) as missing:
        verified_commit(_run(b"", exit_code=1), "target")

    assert missing.value.code == "not_found"
    assert "target argument" in str(missing.value)


def test_a_resolution_that_printed_no_object_id_stops_the_call() -> None:
    with pytest.raises(ExecutionError) as refused:
        verified_commit(_run(b"--output=x\n"), "base")

    assert refused.value.code == "execution_failed"


def test_the_chain_resolves_each_ref_in_turn_and_passes_the_commit_ids() -> None:
    first, second = "a" * 40, "b" * 40

    step = verify_chain(
        (("base", "main"), ("target", "HEAD~1")),
        lambda arguments: ("git", *arguments),
        lambda commits: ("diff", commits["base"], commits["target"]),
    )
    assert isinstance(step, NextCommand)
    assert step.argv == ("git", *verify_arguments("main"))
    step = step.then(_run(first.encode() + b"\n"))
    assert isinstance(step, NextCommand)
    assert step.argv == ("git", *verify_arguments("HEAD~1"))

    assert step.then(_run(second.encode() + b"\n")) == ("git", "diff", first, second)


# through a real client


async def _calls(
    project: Path, config: Path, *calls: tuple[str, dict[str, object]]
) -> list[tuple[bool, str]]:
    with anyio.fail_after(90):
        async with Client(oct_server(project, config)) as client:
            outcomes = [await client.call_tool(tool, arguments) for tool, arguments in calls]
    return [(bool(outcome.is_error), model_view(outcome)) for outcome in outcomes]


@pytest.mark.anyio
async def test_an_option_given_as_a_ref_is_refused_and_never_runs(
    repo: Path, tmp_path: Path, native_config: Path
) -> None:
    written = tmp_path / "written"
    option = f"--output={written}"

    outcomes = await _calls(
        repo,
        native_config,
        ("oct_git_diff", {"base": option}),
        ("oct_git_diff", {"base": "HEAD", "target": option}),
        ("oct_git_log", {"target": option}),
        ("oct_git_show", {"commit": option}),
        ("oct_git_blame", {"path": "a.py", "commit": option}),
    )

    for is_error, text in outcomes:
        assert is_error is True
        assert text.startswith("[invalid_arguments]")
        assert str(written) not in text
    assert not written.exists()


@pytest.mark.anyio
async def test_a_ref_that_names_a_path_or_a_tree_is_not_found(repo: Path, native_config: Path) -> None:
    tree = git(repo, "rev-parse", "HEAD^{tree}")

    outcomes = await _calls(
        repo,
        native_config,
        ("oct_git_diff", {"base": "a.py"}),
        ("oct_git_diff", {"base": "HEAD", "target": tree}),
        ("oct_git_show", {"commit": "a.py"}),
        ("oct_git_blame", {"path": "a.py", "commit": tree}),
    )

    for (is_error, text), argument in zip(outcomes, ("base", "target", "commit", "commit"), strict=True):
        assert is_error is True
        assert text.startswith(f"[not_found] the {argument} argument names no commit")
