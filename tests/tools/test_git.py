"""oct_git_status, oct_git_diff and oct_git_log on real repositories, through the chain and its sandbox."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from git_repos import git, new_repo

from oct_mcp.app import CallFailure, build_app, run_call
from oct_mcp.errors import GitLayoutRefusedError, NotFoundError
from oct_mcp.tools._paging.results import model_view
from oct_mcp.tools.git.diff import GIT_DIFF, parse_diff
from oct_mcp.tools.git.layout import worktree_git_folders
from oct_mcp.tools.git.log import GIT_LOG
from oct_mcp.tools.git.runner import GIT_SAFETY_OPTIONS, git_argv
from oct_mcp.tools.git.status import GIT_STATUS, parse_status
from oct_mcp.types import ClientInfo, ToolResult

pytestmark = pytest.mark.e2e

_CLIENTS = itertools.count()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: two commits, one ahead of and one behind its upstream `base`; staged, unstaged, untracked."""
    root = new_repo(tmp_path)
    (root / "a.py").write_text("def f():\n    return 1\n")
    (root / "sp ace.txt").write_text("hello\n")
    (root / "README.md").write_text("# Demo\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "First commit")
    git(root, "checkout", "-q", "-b", "base")
    git(root, "commit", "-q", "--allow-empty", "-m", "On base")
    git(root, "checkout", "-q", "main")
    (root / "README.md").write_text("# Demo\n\nMore.\n")
    git(root, "commit", "-q", "-am", "Describe the demo")
    git(root, "config", "branch.main.remote", ".")
    git(root, "config", "branch.main.merge", "refs/heads/base")
    (root / "a.py").write_text("def f():\n    return 1\nx = 2\n")
    git(root, "mv", "sp ace.txt", "b.txt")
    (root / "staged.py").write_text("one\ntwo\n")
    git(root, "add", "staged.py")
    (root / "new.txt").write_text("untracked\n")
    return root


def call(project: Path, config: Path, tool: str, arguments: dict[str, Any]) -> ToolResult | CallFailure:
    app = build_app(project, config_path=config, environ={})
    client = ClientInfo(client_id=f"git-{next(_CLIENTS)}", transport="memory")
    outcome = anyio.run(run_call, app, tool, arguments, client)
    assert isinstance(outcome, ToolResult | CallFailure)
    return outcome


def result(project: Path, config: Path, tool: str, arguments: dict[str, Any] | None = None) -> ToolResult:
    outcome = call(project, config, tool, arguments or {})
    assert isinstance(outcome, ToolResult), outcome
    assert outcome.is_error is False, outcome.text
    return outcome


# oct_git_status


def test_status_reports_branch_upstream_and_each_entry(repo: Path, config_file: Path) -> None:
    status = result(repo, config_file, "oct_git_status")

    assert status.structured == {
        "branch": "main",
        "commit": git(repo, "rev-parse", "HEAD"),
        "upstream": "base",
        "ahead": 1,
        "behind": 1,
        "stashes": 0,
        "entries": [
            {"path": "a.py", "original_path": None, "xy": ".M", "kind": "changed"},
            {"path": "b.txt", "original_path": "sp ace.txt", "xy": "R.", "kind": "renamed"},
            {"path": "staged.py", "original_path": None, "xy": "A.", "kind": "changed"},
            {"path": "new.txt", "original_path": None, "xy": "??", "kind": "untracked"},
        ],
        "count": 4,
        "truncated": False,
        "clean": False,
        "next_offset": None,
    }
    assert status.text.splitlines() == [
        "## main...base [ahead 1, behind 1]",
        " M a.py",
        "R  sp ace.txt -> b.txt",
        "A  staged.py",
        "?? new.txt",
    ]


def test_status_narrows_to_a_path(repo: Path, config_file: Path) -> None:
    status = result(repo, config_file, "oct_git_status", {"path": "a.py"})

    assert status.structured is not None
    assert [entry["path"] for entry in status.structured["entries"]] == ["a.py"]


def test_status_of_a_clean_tree_says_so(repo: Path, config_file: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "All of it")

    status = result(repo, config_file, "oct_git_status")

    assert status.structured is not None
    assert (status.structured["clean"], status.structured["entries"]) == (True, [])
    assert status.text.endswith("nothing to commit, working tree clean")


def test_status_before_the_first_commit_has_no_commit(tmp_path: Path, config_file: Path) -> None:
    root = (tmp_path / "fresh").resolve()
    root.mkdir()
    git(root, "init", "-q", "-b", "trunk")
    (root / "a.txt").write_text("a\n")

    status = result(root, config_file, "oct_git_status")

    assert status.structured is not None
    assert (status.structured["branch"], status.structured["commit"]) == ("trunk", None)
    assert status.text.startswith("## trunk (no commits yet)")


def test_a_project_that_is_not_a_repository_is_a_clear_error(tmp_path: Path, config_file: Path) -> None:
    root = (tmp_path / "plain").resolve()
    root.mkdir()

    for tool in ("oct_git_status", "oct_git_diff", "oct_git_log"):
        outcome = call(root, config_file, tool, {})
        assert isinstance(outcome, CallFailure)
        assert (outcome.code, outcome.message) == (
            "not_found",
            "the project is not a git repository (no .git at the project root); git init makes one",
        )


def test_a_subfolder_of_a_repository_is_not_treated_as_one(repo: Path, config_file: Path) -> None:
    (repo / "sub").mkdir()

    outcome = call(repo / "sub", config_file, "oct_git_status", {})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "not_found"


def test_a_symlinked_dot_git_is_refused(repo: Path, tmp_path: Path, config_file: Path) -> None:
    other = (tmp_path / "other").resolve()
    other.mkdir()
    (other / ".git").symlink_to(repo / ".git")

    outcome = call(other, config_file, "oct_git_status", {})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "not_found"


# oct_git_diff


@pytest.mark.needs_backend("bubblewrap")
def test_a_linked_worktree_is_read_through_its_repositorys_git_folder(
    repo: Path, tmp_path: Path, config_file: Path
) -> None:
    # Under bubblewrap, which sees only what is bound: the worktree's git folders must be.
    config_file.write_text(json.dumps({"sandbox_backend": "bubblewrap"}))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "All of it")
    worktree = (tmp_path / "feature").resolve()
    git(repo, "worktree", "add", "-q", "-b", "feature", str(worktree))
    (worktree / "a.py").write_text("def f():\n    return 2\n")

    status = result(worktree, config_file, "oct_git_status")
    diff = result(worktree, config_file, "oct_git_diff")
    log = result(worktree, config_file, "oct_git_log", {"max_count": 1})

    assert worktree_git_folders(worktree) == (repo / ".git",)
    assert status.structured is not None
    assert status.structured["branch"] == "feature"
    assert [entry["path"] for entry in status.structured["entries"]] == ["a.py"]
    assert "+    return 2" in diff.text
    assert log.structured is not None
    assert [commit["subject"] for commit in log.structured["commits"]] == ["All of it"]


def test_a_worktree_whose_folder_names_it_back_by_a_relative_path_is_recognised(
    repo: Path, tmp_path: Path
) -> None:
    # Newer git can write the back link relative to the worktree's folder (worktree.useRelativePaths).
    worktree = (tmp_path / "feature").resolve()
    git(repo, "worktree", "add", "-q", "-b", "feature", str(worktree))
    folder = repo / ".git" / "worktrees" / "feature"
    (folder / "gitdir").write_text(os.path.relpath(worktree / ".git", folder) + "\n")

    assert worktree_git_folders(worktree) == (repo / ".git",)


@pytest.mark.needs_backend("bubblewrap")
def test_a_submodule_checkout_is_read_through_the_superprojects_git_folder(
    tmp_path: Path, config_file: Path
) -> None:
    config_file.write_text(json.dumps({"sandbox_backend": "bubblewrap"}))
    library = (tmp_path / "library").resolve()
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    (library / "lib.py").write_text("VALUE = 1\n")
    git(library, "add", "-A")
    git(library, "commit", "-q", "-m", "The library")
    superproject = (tmp_path / "super").resolve()
    superproject.mkdir()
    git(superproject, "init", "-q", "-b", "main")
    git(
        superproject, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "vendor/lib"
    )
    checkout = superproject / "vendor" / "lib"
    (checkout / "lib.py").write_text("VALUE = 2\n")

    status = result(checkout, config_file, "oct_git_status")
    log = result(checkout, config_file, "oct_git_log")

    assert worktree_git_folders(checkout) == (superproject / ".git" / "modules" / "vendor" / "lib",)
    assert status.structured is not None
    assert [entry["path"] for entry in status.structured["entries"]] == ["lib.py"]
    assert log.structured is not None
    assert [commit["subject"] for commit in log.structured["commits"]] == ["The library"]


@pytest.mark.parametrize("backend", ["bubblewrap", "native"])
def test_a_dot_git_file_naming_another_repositorys_git_folder_is_refused(
    repo: Path, tmp_path: Path, config_file: Path, backend: str
) -> None:
    # Another repository's git folder, named by a .git file it never wrote: not a worktree of it.
    config_file.write_text(json.dumps({"sandbox_backend": backend}))
    project = (tmp_path / "forged").resolve()
    project.mkdir()
    (project / ".git").write_text(f"gitdir: {repo / '.git'}\n")

    outcome = call(project, config_file, "oct_git_log", {})

    with pytest.raises(GitLayoutRefusedError):
        worktree_git_folders(project)
    assert isinstance(outcome, CallFailure)
    assert outcome.code == "git_layout_refused"


def test_diff_shows_unstaged_changes_with_counts(repo: Path, config_file: Path) -> None:
    diff = result(repo, config_file, "oct_git_diff")

    assert diff.structured is not None
    assert diff.structured["files"] == [
        {"path": "a.py", "original_path": None, "added": 1, "removed": 0, "binary": False}
    ]
    assert (diff.structured["staged"], diff.structured["added"], diff.structured["removed"]) == (False, 1, 0)
    assert diff.structured["diff"].startswith("diff --git a/a.py b/a.py\n")
    assert "+x = 2\n" in diff.structured["diff"]
    assert diff.text.startswith("1 file(s) with unstaged changes, +1 -0:\n  a.py (+1 -0)\n")


def test_diff_shows_staged_changes_with_renames(repo: Path, config_file: Path) -> None:
    diff = result(repo, config_file, "oct_git_diff", {"staged": True})

    assert diff.structured is not None
    assert diff.structured["files"] == [
        {"path": "b.txt", "original_path": "sp ace.txt", "added": 0, "removed": 0, "binary": False},
        {"path": "staged.py", "original_path": None, "added": 2, "removed": 0, "binary": False},
    ]
    assert "rename from sp ace.txt\nrename to b.txt\n" in diff.structured["diff"]
    assert "sp ace.txt -> b.txt (+0 -0)" in diff.text


def test_diff_marks_a_binary_file(repo: Path, config_file: Path) -> None:
    (repo / "blob.bin").write_bytes(b"\x00\x01")
    git(repo, "add", "blob.bin")

    diff = result(repo, config_file, "oct_git_diff", {"staged": True, "path": "blob.bin"})

    assert diff.structured is not None
    assert diff.structured["files"] == [
        {"path": "blob.bin", "original_path": None, "added": None, "removed": None, "binary": True}
    ]
    assert "blob.bin (binary)" in diff.text


def test_diff_narrows_to_a_path_and_sets_the_context(repo: Path, config_file: Path) -> None:
    diff = result(
        repo, config_file, "oct_git_diff", {"staged": True, "path": "staged.py", "context_lines": 0}
    )

    assert diff.structured is not None
    assert [f["path"] for f in diff.structured["files"]] == ["staged.py"]
    assert "@@ -0,0 +1,2 @@" in diff.structured["diff"]


def test_diff_with_no_changes_says_so(repo: Path, config_file: Path) -> None:
    diff = result(repo, config_file, "oct_git_diff", {"path": "README.md"})

    assert diff.structured is not None
    assert (diff.structured["files"], diff.structured["diff"]) == ([], "")
    assert diff.text == "no unstaged changes"


def test_diff_never_runs_an_external_diff_or_textconv(
    repo: Path, tmp_path: Path, native_config: Path
) -> None:
    marker = tmp_path / "ran"
    git(repo, "config", "diff.external", f"touch {marker}")
    git(repo, "config", "diff.evil.textconv", f"touch {marker}; cat")
    (repo / ".gitattributes").write_text("*.py diff=evil\n")

    diff = result(repo, native_config, "oct_git_diff")

    assert diff.structured is not None
    assert "+x = 2\n" in diff.structured["diff"]
    assert not marker.exists()


# oct_git_log


def test_log_lists_commits_newest_first(repo: Path, config_file: Path) -> None:
    log = result(repo, config_file, "oct_git_log")

    assert log.structured is not None
    commits = log.structured["commits"]
    assert [(c["subject"], c["author"], c["email"]) for c in commits] == [
        ("Describe the demo", "Ada Lovelace", "ada@example.invalid"),
        ("First commit", "Ada Lovelace", "ada@example.invalid"),
    ]
    assert commits[0]["sha"] == git(repo, "rev-parse", "HEAD")
    assert commits[0]["date"] == git(repo, "log", "-1", "--format=%aI")
    assert len(log.structured["commits"]) == 2
    assert log.text.splitlines()[0].endswith("Ada Lovelace: Describe the demo")


def test_log_is_bounded_by_max_count_and_narrowed_by_path(repo: Path, config_file: Path) -> None:
    latest = result(repo, config_file, "oct_git_log", {"max_count": 1})
    touching = result(repo, config_file, "oct_git_log", {"path": "a.py"})

    assert latest.structured is not None
    assert touching.structured is not None
    assert [c["subject"] for c in latest.structured["commits"]] == ["Describe the demo"]
    assert [c["subject"] for c in touching.structured["commits"]] == ["First commit"]


@pytest.mark.parametrize("max_count", [0, 201])
def test_log_refuses_a_max_count_out_of_bounds(repo: Path, config_file: Path, max_count: int) -> None:
    outcome = call(repo, config_file, "oct_git_log", {"max_count": max_count})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "invalid_arguments"


def test_log_before_the_first_commit_is_empty(tmp_path: Path, config_file: Path) -> None:
    root = (tmp_path / "fresh").resolve()
    root.mkdir()
    git(root, "init", "-q")

    log = result(root, config_file, "oct_git_log")

    assert (log.structured, log.text) == ({"commits": []}, "no commits yet")


def test_a_path_that_looks_like_an_option_is_refused(repo: Path, config_file: Path) -> None:
    outcome = call(repo, config_file, "oct_git_log", {"path": "--output=/tmp/x"})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "path_refused"


def test_a_path_is_literal_not_pathspec_magic(repo: Path, config_file: Path) -> None:
    status = result(repo, config_file, "oct_git_status", {"path": ":(glob)*.txt"})

    assert status.structured is not None
    assert status.structured["entries"] == []


# git defanged


@pytest.fixture
def native_config(tmp_path: Path) -> Path:
    """The native backend: no namespaces, so a command git ran would show on the host."""
    path = tmp_path / "native-config.json"
    path.write_text(json.dumps({"sandbox_backend": "native", "allow_unconfined_project_code": True}))
    return path


def test_status_and_diff_never_run_the_repositorys_filters_or_fsmonitor(
    repo: Path, tmp_path: Path, native_config: Path
) -> None:
    marker = tmp_path / "ran"
    (repo / "hook.sh").write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    (repo / "hook.sh").chmod(0o755)
    (repo / "extra.config").write_text(f'[filter "Sneaky"]\n\tclean = {repo / "hook.sh"}\n')
    (repo / ".gitattributes").write_text("*.py filter=evil\n*.md filter=Sneaky\n")
    git(repo, "add", ".gitattributes")
    git(repo, "config", "filter.evil.clean", str(repo / "hook.sh"))
    git(repo, "config", "filter.evil.process", str(repo / "hook.sh"))
    git(repo, "config", "include.path", "../extra.config")
    # Set last: from here on, plain git here would run the hook itself.
    git(repo, "config", "core.fsmonitor", str(repo / "hook.sh"))
    # Stat data changed, content not: git must re-read these files, through their filters if it could.
    for name in ("a.py", "README.md"):
        (repo / name).touch()

    status = result(repo, native_config, "oct_git_status")
    diff = result(repo, native_config, "oct_git_diff")

    assert status.structured is not None
    assert diff.structured is not None
    assert not marker.exists()


def test_the_filter_test_would_see_a_filter_that_ran(repo: Path, tmp_path: Path) -> None:
    # The check above is meaningful: plain git, on this setup, runs the filter.
    marker = tmp_path / "ran"
    (repo / "hook.sh").write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    (repo / "hook.sh").chmod(0o755)
    git(repo, "config", "filter.evil.clean", str(repo / "hook.sh"))
    (repo / ".gitattributes").write_text("*.md filter=evil\n")
    # Its size as the index has it, its time not: git must read it, through the filter, to know
    # whether it changed (a size that differs, or a time in the index's second, would not be certain).
    readme = repo / "README.md"
    later = readme.stat().st_mtime + 100
    os.utime(readme, (later, later))

    git(repo, "status", "--porcelain")

    assert marker.exists()


def test_git_argv_puts_every_safety_option_before_the_subcommand(repo: Path) -> None:
    argv = git_argv(repo, "status")

    assert argv[0].endswith("/git")
    assert argv[1 : 1 + len(GIT_SAFETY_OPTIONS)] == GIT_SAFETY_OPTIONS
    assert argv[-3:] == (f"--git-dir={repo / '.git'}", f"--work-tree={repo}", "status")
    assert "core.hooksPath=/dev/null" in argv
    assert "core.fsmonitor=false" in argv
    assert "--no-pager" in argv


def test_git_argv_refuses_a_folder_without_dot_git(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        git_argv(tmp_path, "status")


# parsing


def test_parse_status_reads_unmerged_copied_detached_and_stashes() -> None:
    records = [
        "# branch.oid 0123",
        "# branch.head (detached)",
        "# stash 2",
        "u UU N... 100644 100644 100644 100644 a b c both.py",
        "2 C. N... 100644 100644 100644 a b C75 copy.py",
        "orig.py",
        "1 .D N... 100644 100644 000000 a b gone file.py",
    ]

    output = parse_status("\0".join(records).encode() + b"\0")

    assert (output.branch, output.commit, output.stashes, output.upstream) == (None, "0123", 2, None)
    assert [(e.path, e.original_path, e.xy, e.kind) for e in output.entries] == [
        ("both.py", None, "UU", "unmerged"),
        ("copy.py", "orig.py", "C.", "copied"),
        ("gone file.py", None, ".D", "changed"),
    ]


def test_parse_status_bounds_the_entries() -> None:
    output = parse_status(b"? a\0? b\0? c\0", max_entries=2)

    assert ([e.path for e in output.entries], output.count, output.truncated) == (["a", "b"], 3, True)


def test_parse_status_pages_from_an_offset_past_its_entry_bound() -> None:
    output = parse_status(b"? a\0? b\0? c\0? d\0", offset=1, max_entries=2)

    assert ([e.path for e in output.entries], output.count, output.next_offset, output.truncated) == (
        ["b", "c"],
        4,
        3,
        True,
    )


def test_status_from_an_offset_shows_the_entries_after_it(repo: Path, native_config: Path) -> None:
    status = result(repo, native_config, "oct_git_status", {"offset": 1})

    assert status.structured is not None
    assert [entry["path"] for entry in status.structured["entries"]] == ["b.txt", "staged.py", "new.txt"]
    assert (status.structured["next_offset"], status.structured["truncated"]) == (None, False)


def test_parse_diff_keeps_the_counts_of_a_cut_output() -> None:
    stdout = b"1\t2\ta.py\x003\t0\t\x00old.py\x00new.py\x00\x00diff --git a/a.py b/a.py\n-x"

    output = parse_diff(stdout, staged=False, truncated=True)

    assert [(f.path, f.original_path, f.added, f.removed) for f in output.files] == [
        ("a.py", None, 1, 2),
        ("new.py", "old.py", 3, 0),
    ]
    assert (output.added, output.removed, output.diff_cut) == (4, 2, True)
    assert output.diff == "diff --git a/a.py b/a.py\n-x"


def test_the_git_tools_are_read_only_idempotent_and_closed_world() -> None:
    for spec in (GIT_STATUS, GIT_DIFF, GIT_LOG):
        annotations = spec.annotations
        assert (annotations["readOnlyHint"], annotations["destructiveHint"]) == (True, False)
        assert (annotations["idempotentHint"], annotations["openWorldHint"]) == (True, False)
        assert spec.output is not None


# which git runs


@pytest.mark.parametrize("venv", [".venv", "venv"])
def test_the_git_tools_never_run_a_git_the_project_holds(
    repo: Path, tmp_path: Path, native_config: Path, venv: str
) -> None:
    # A read tool asks no consent: a program inside the project would be project code run unasked.
    marker = tmp_path / "ran"
    planted = repo / venv / "bin" / "git"
    planted.parent.mkdir(parents=True)
    planted.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    planted.chmod(0o755)

    status = result(repo, native_config, "oct_git_status")
    log = result(repo, native_config, "oct_git_log", {"max_count": 1})

    assert not marker.exists()
    assert status.structured is not None
    assert status.structured["branch"] == "main"
    assert log.structured is not None
    assert len(log.structured["commits"]) == 1


def test_a_path_entry_inside_the_project_is_not_the_servers_git(
    repo: Path, tmp_path: Path, native_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    planted = repo / "tools" / "git"
    planted.parent.mkdir()
    planted.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"{planted.parent}{os.pathsep}tools{os.pathsep}{os.environ['PATH']}")

    argv = git_argv(repo, "status")
    status = result(repo, native_config, "oct_git_status")

    assert Path(argv[0]).parent != planted.parent
    assert not marker.exists()
    assert status.structured is not None


# filter drivers in every spelling git reads


FILTER_SPELLINGS = {
    "a byte order mark before the first header": lambda existing, clean: (
        f'\ufeff[filter "evil"]\n\tclean = {clean}\n' + existing
    ),
    "two headers on one line": lambda existing, clean: (
        existing + f'[core][filter "evil"]\n\tclean = {clean}\n'
    ),
    "two headers on one line with a space": lambda existing, clean: (
        existing + f'[core] [filter "evil"]\n\tclean = {clean}\n'
    ),
    "a lone carriage return between headers": lambda existing, clean: (
        existing + f'[core]\r[filter "evil"]\n\tclean = {clean}\n'
    ),
    "an include through /proc/self/cwd": lambda existing, clean: (
        existing + "[include]\n\tpath = /proc/self/cwd/included.config\n"
    ),
    "an old-style subsection": lambda existing, clean: existing + f"[filter.Evil]\n\tclean = {clean}\n",
}


@pytest.fixture
def filtered_repo(tmp_path: Path) -> Path:
    """One committed file, whose stat data changed since: git must re-read it, through its filter if any."""
    root = (tmp_path / "filtered").resolve()
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "data.txt").write_text("hello\n")
    (root / ".gitattributes").write_text("data.txt filter=evil\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Data")
    return root


def _plant_filter(root: Path, marker: Path, spelling: str) -> None:
    # The filter's output differs from the file: had it run, status would report data.txt changed.
    script = root / "filter.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker} 2>/dev/null\necho FILTERED\n")
    script.chmod(0o755)
    (root / "included.config").write_text(f'[filter "evil"]\n\tclean = {script}\n')
    config = root / ".git" / "config"
    write = FILTER_SPELLINGS[spelling]
    if spelling == "an old-style subsection":
        (root / ".gitattributes").write_text("data.txt filter=evil\n")
    config.write_bytes(write(config.read_text(), str(script)).encode("utf-8"))
    os.utime(root / "data.txt", (1, 1))


@pytest.mark.parametrize("spelling", sorted(FILTER_SPELLINGS))
def test_plain_git_runs_the_filter_of_each_spelling(
    filtered_repo: Path, tmp_path: Path, spelling: str
) -> None:
    # The check below is meaningful: git itself reads each of these spellings and runs the filter.
    marker = tmp_path / "ran"
    _plant_filter(filtered_repo, marker, spelling)

    subprocess.run(
        ["git", "status", "--porcelain"],
        cwd=filtered_repo,
        env={"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)},
        check=True,
        capture_output=True,
    )

    assert marker.exists()


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock", "native"])
@pytest.mark.parametrize("spelling", sorted(FILTER_SPELLINGS))
def test_status_never_runs_a_filter_in_any_spelling_git_reads(
    filtered_repo: Path, tmp_path: Path, config_file: Path, spelling: str, backend: str
) -> None:
    # native confines nothing, so it runs git only where the user opted in; the filters stay off there too.
    config_file.write_text(json.dumps({"sandbox_backend": backend, "allow_unconfined_project_code": True}))
    marker = tmp_path / "ran"
    _plant_filter(filtered_repo, marker, spelling)

    status = result(filtered_repo, config_file, "oct_git_status")

    assert not marker.exists()
    assert status.structured is not None
    assert [entry["path"] for entry in status.structured["entries"]] == [
        "filter.sh",
        "included.config",
    ]


def test_a_config_git_cannot_list_stops_the_call(filtered_repo: Path, native_config: Path) -> None:
    with (filtered_repo / ".git" / "config").open("a") as config:
        config.write("[broken\n")

    outcome = call(filtered_repo, native_config, "oct_git_status", {})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "git_config_unreadable"


def test_a_filter_name_git_cannot_address_stops_the_call(filtered_repo: Path, native_config: Path) -> None:
    with (filtered_repo / ".git" / "config").open("a") as config:
        config.write('[filter "a=b"]\n\tclean = x\n')

    outcome = call(filtered_repo, native_config, "oct_git_status", {})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "execution_failed"


# a .git file and a commondir naming another repository


@pytest.fixture
def other_repository(tmp_path: Path) -> Path:
    other = (tmp_path / "elsewhere").resolve()
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    (other / "private.txt").write_text("OTHER REPOSITORY CONTENT\n")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "Other repository history")
    return other


def _borrowing_project(tmp_path: Path, other: Path) -> Path:
    """A `.git` file naming `.gitreal/` inside the project, which names it back and borrows `other`."""
    project = (tmp_path / "borrower").resolve()
    real = project / ".gitreal"
    real.mkdir(parents=True)
    (project / ".git").write_text("gitdir: .gitreal\n")
    (real / "gitdir").write_text(f"{project / '.git'}\n")
    (real / "commondir").write_text(f"{other / '.git'}\n")
    (real / "HEAD").write_text("ref: refs/heads/main\n")
    return project


@pytest.mark.parametrize(
    "settings",
    [{"sandbox_backend": "bubblewrap"}, {"sandbox_backend": "native"}, {"profile": "airgapped"}],
    ids=["bubblewrap", "native", "airgapped"],
)
def test_a_commondir_inside_the_project_never_borrows_another_repository(
    tmp_path: Path, other_repository: Path, config_file: Path, settings: dict[str, str]
) -> None:
    config_file.write_text(json.dumps(settings))
    project = _borrowing_project(tmp_path, other_repository)

    log = call(project, config_file, "oct_git_log", {})
    staged = call(project, config_file, "oct_git_diff", {"staged": True})

    for outcome in (log, staged):
        assert isinstance(outcome, CallFailure), outcome
        assert outcome.code == "git_layout_refused"


def test_a_commondir_in_a_dot_git_folder_never_borrows_another_repository(
    repo: Path, other_repository: Path, native_config: Path
) -> None:
    (repo / ".git" / "commondir").write_text(f"{other_repository / '.git'}\n")

    outcome = call(repo, native_config, "oct_git_log", {})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "git_layout_refused"


def test_a_worktree_folder_outside_worktrees_is_refused(
    repo: Path, tmp_path: Path, native_config: Path
) -> None:
    # Names the project back and names a real common folder, but sits where git never puts a worktree.
    folder = (tmp_path / "loose").resolve()
    folder.mkdir()
    project = (tmp_path / "checkout").resolve()
    project.mkdir()
    (project / ".git").write_text(f"gitdir: {folder}\n")
    (folder / "gitdir").write_text(f"{project / '.git'}\n")
    (folder / "commondir").write_text(f"{repo / '.git'}\n")
    (folder / "HEAD").write_text("ref: refs/heads/main\n")

    outcome = call(project, native_config, "oct_git_log", {})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "git_layout_refused"


def test_a_submodule_folder_that_names_another_checkout_is_refused(
    tmp_path: Path, native_config: Path
) -> None:
    library = (tmp_path / "library").resolve()
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    git(library, "commit", "-q", "--allow-empty", "-m", "The library")
    superproject = (tmp_path / "super").resolve()
    superproject.mkdir()
    git(superproject, "init", "-q", "-b", "main")
    git(
        superproject, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "vendor/lib"
    )
    project = (tmp_path / "impostor").resolve()
    project.mkdir()
    (project / ".git").write_text(f"gitdir: {superproject / '.git' / 'modules' / 'vendor' / 'lib'}\n")

    outcome = call(project, native_config, "oct_git_log", {})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "git_layout_refused"


def test_a_commondir_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path, native_config: Path) -> None:
    project = (tmp_path / "piped").resolve()
    real = project / ".gitreal"
    real.mkdir(parents=True)
    (project / ".git").write_text("gitdir: .gitreal\n")
    (real / "HEAD").write_text("ref: refs/heads/main\n")
    os.mkfifo(real / "commondir")

    with pytest.raises(GitLayoutRefusedError):
        worktree_git_folders(project)


# paging


def _pages(project: Path, config: Path, tool: str, key: str, **arguments: Any) -> list[Any]:
    entries: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        page = result(project, config, tool, {**arguments, "offset": offset, "max_chars": 1_000})
        assert page.structured is not None
        assert len(model_view(page.structured, page.text)) <= 1_000
        entries += [page.structured[key]] if key == "diff" else page.structured[key]
        offset = page.structured.get("next_offset")
    return entries


@pytest.fixture
def busy_repo(tmp_path: Path) -> Path:
    root = (tmp_path / "busy").resolve()
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "lock.txt").write_text("".join(f"package-{n} = 1.0.{n}\n" for n in range(400)))
    git(root, "add", "-A")
    for n in range(30):
        git(root, "commit", "-q", "--allow-empty", "-m", f"Step {n}")
    (root / "lock.txt").write_text("".join(f"package-{n} = 2.0.{n}\n" for n in range(400)))
    for n in range(80):
        (root / f"untracked_{n:02}.txt").write_text("x\n")
    return root


def test_status_pages_return_every_entry_exactly_once(busy_repo: Path, config_file: Path) -> None:
    whole = result(busy_repo, config_file, "oct_git_status")
    assert whole.structured is not None

    paged = _pages(busy_repo, config_file, "oct_git_status", "entries")

    assert len(whole.structured["entries"]) == 81
    assert paged == whole.structured["entries"]


def test_log_pages_return_every_commit_exactly_once(busy_repo: Path, config_file: Path) -> None:
    whole = result(busy_repo, config_file, "oct_git_log", {"max_count": 100})
    assert whole.structured is not None

    paged = _pages(busy_repo, config_file, "oct_git_log", "commits", max_count=4)

    assert len(whole.structured["commits"]) == 30
    assert paged == whole.structured["commits"]


def test_diff_pages_return_the_whole_patch_and_stat_leaves_it_out(busy_repo: Path, config_file: Path) -> None:
    whole = git(busy_repo, "diff", "--no-color", "--src-prefix=a/", "--dst-prefix=b/")
    stat = result(busy_repo, config_file, "oct_git_diff", {"stat": True})
    assert stat.structured is not None

    paged = _pages(busy_repo, config_file, "oct_git_diff", "diff")

    assert len(paged) > 3
    assert "".join(paged) == whole + "\n"  # the helper strips git's last line break
    assert (stat.structured["diff"], stat.structured["files"]) == (
        "",
        [{"path": "lock.txt", "original_path": None, "added": 400, "removed": 400, "binary": False}],
    )
