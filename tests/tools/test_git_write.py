"""The git write tools through a real SDK client over stdio, with real git, on bubblewrap and landlock.

Each write is asked about with its change (the staged stat and message, the diff that would be
lost), runs the user's identity from their own config as values only, and never a hook; the
sandbox gives git no right on the git folder itself (tested with a process that tries).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import oct_server, only_text
from mcp import Client
from optional import usable_backend

from oct_mcp.backends import EntryRights, Limits, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.runner import run_prepared
from oct_mcp.execution.git_state import PrivateGitFolder
from oct_mcp.tools.git.write.branch import check_branch_name

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BACKENDS = ["bubblewrap", "landlock"]
CORE = "def answer() -> int:\n    return 42\n"
TERMINAL_IDENTITY = ("-c", "user.name=Terminal User", "-c", "user.email=terminal@example.invalid")


class Human:
    """Accepts (or declines) every consent form, and records each question it was shown."""

    def __init__(self, approve: bool = True, meanwhile: Callable[[], None] | None = None) -> None:
        self.approve = approve
        self.meanwhile = meanwhile
        self.questions: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.questions.append(params.message)
        if self.meanwhile is not None:
            self.meanwhile()
        return types.ElicitResult(action="accept", content={"approve": self.approve})


def git(root: Path, *arguments: str) -> str:
    completed = subprocess.run(
        ["git", "-C", str(root), *TERMINAL_IDENTITY, *arguments], check=True, capture_output=True, text=True
    )
    return completed.stdout.strip()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The user's HOME: their identity, and an include, an alias and an fsmonitor git must not honour."""
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "global-config-ran"
    (home / ".gitconfig").write_text(
        '[user]\n\tname = "Ada Lovelace"\n\temail = ada@example.invalid  # work\n'
        "[include]\n\tpath = ~/identity.inc\n"
        f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = {home}/hooks\n"
        f"[alias]\n\tcommit = !touch {marker}\n"
    )
    (home / "identity.inc").write_text("[user]\n\tname = Mallory\n\temail = mallory@example.invalid\n")
    return home


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit, a branch `feature` that changes src/pkg/core.py, and hooks that
    record whether they ran."""
    root = (tmp_path / "repo").resolve()
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "core.py").write_text(CORE)
    (root / "README.md").write_text("# Demo\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "First commit")
    git(root, "switch", "-q", "-c", "feature")
    (root / "src" / "pkg" / "core.py").write_text(CORE.replace("42", "43"))
    git(root, "commit", "-q", "-am", "Answer 43")
    git(root, "switch", "-q", "main")
    for hook in ("pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-checkout"):
        path = root / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\ntouch {tmp_path}/hook-{hook}-ran\n")
        path.chmod(0o755)
    return root


def _config(tmp_path: Path, backend: str) -> Path:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"sandbox_backend": backend, "audit_log_path": str(tmp_path / "audit.jsonl")})
    )
    return config


async def _calls(
    project: Path, config: Path, home: Path, calls: list[tuple[str, dict[str, Any]]], human: Human | None
) -> list[types.CallToolResult]:
    results = []
    server = oct_server(project, config, env={"HOME": str(home)})
    with anyio.fail_after(120):
        async with Client(server, mode="auto", elicitation_callback=human) as client:
            for tool, arguments in calls:
                results.append(await client.call_tool(tool, arguments))
    return results


def _state(root: Path) -> dict[str, bytes]:
    """What no git write may change: the config and every hook."""
    git_dir = root / ".git"
    paths = [git_dir / "config", *sorted((git_dir / "hooks").iterdir())]
    return {str(path.relative_to(root)): path.read_bytes() for path in paths}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_add_and_commit_as_the_user_from_their_config_and_no_hook_runs(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    (repo / "src" / "pkg" / "core.py").write_text(CORE + "\n\ndef more() -> int:\n    return 1\n")
    (repo / "src" / "pkg" / "new.py").write_text("NEW = 1\n")
    before = _state(repo)
    human = Human()

    added, committed = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [
            ("oct_git_add", {"paths": ["src"], "dry_run": False}),
            ("oct_git_commit", {"message": "Add more\n\nAnd a new module.", "dry_run": False}),
        ],
        human,
    )

    assert (added.is_error, committed.is_error) == (False, False), only_text(committed)
    add_question, commit_question = human.questions
    assert "  src/pkg/core.py: stage (modify), +4 -0\n" in add_question
    assert "  src/pkg/new.py: stage (create), +0 -0\n" in add_question
    assert "  src/pkg/core.py: commit, +4 -0\n" in commit_question
    assert "  src/pkg/new.py: commit, +1 -0\n" in commit_question
    assert "  Add more\n  \n  And a new module.\n" in commit_question
    assert "+NEW = 1\n" in commit_question
    # No grant for the session: each later commit is asked about with its own message.
    assert [q for q in human.questions if "for the rest of this session" in q] == []
    log = git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B")
    ada = "Ada Lovelace <ada@example.invalid>"
    assert log == f"{ada}|{ada}|Add more\n\nAnd a new module."
    assert git(repo, "status", "--porcelain") == ""
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith("-ran")) == []
    assert _state(repo) == before
    assert git(repo, "reflog", "-1", "--format=%gs") == "commit: Add more"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_switch_refuses_to_lose_changes_and_names_the_files(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    (repo / "src" / "pkg" / "core.py").write_text(CORE + "# mine, not committed\n")
    human = Human()

    (refused,) = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [("oct_git_switch", {"branch": "feature", "dry_run": False})],
        human,
    )

    assert refused.is_error is True
    assert only_text(refused).startswith("[changes_would_be_lost]")
    assert "src/pkg/core.py" in only_text(refused)
    assert human.questions == []
    assert git(repo, "branch", "--show-current") == "main"
    assert (repo / "src" / "pkg" / "core.py").read_text() == CORE + "# mine, not committed\n"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_switch_asks_with_the_files_it_changes_and_switches(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    human = Human()

    (switched,) = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [("oct_git_switch", {"branch": "feature", "dry_run": False})],
        human,
    )

    assert switched.is_error is False, only_text(switched)
    (question,) = human.questions
    assert "  src/pkg/core.py: switch, +1 -1\n" in question
    assert git(repo, "branch", "--show-current") == "feature"
    assert (repo / "src" / "pkg" / "core.py").read_text() == CORE.replace("42", "43")
    assert git(repo, "status", "--porcelain") == ""
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith("-ran")) == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_restore_asks_with_the_diff_that_would_be_lost(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    (repo / "src" / "pkg" / "core.py").write_text(CORE.replace("42", "7  # an edit to lose"))
    human = Human()

    (restored,) = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [("oct_git_restore", {"paths": ["src"], "dry_run": False})],
        human,
    )

    assert restored.is_error is False, only_text(restored)
    (question,) = human.questions
    assert "The changes that would be lost:\n" in question
    assert "-    return 42\n+    return 7  # an edit to lose\n" in question
    assert (repo / "src" / "pkg" / "core.py").read_text() == CORE


async def test_a_declined_restore_keeps_the_changes(repo: Path, home: Path, tmp_path: Path) -> None:
    usable_backend("bubblewrap")
    (repo / "src" / "pkg" / "core.py").write_text("kept\n")

    (declined,) = await _calls(
        repo,
        _config(tmp_path, "bubblewrap"),
        home,
        [("oct_git_restore", {"paths": ["src/pkg/core.py"], "dry_run": False})],
        Human(approve=False),
    )

    assert declined.is_error is True
    assert (repo / "src" / "pkg" / "core.py").read_text() == "kept\n"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_branch_is_created_at_head_and_bad_names_are_refused(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    human = Human()

    created, leading_dash, dots, exists = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [
            ("oct_git_branch", {"name": "topic/one", "dry_run": False}),
            ("oct_git_branch", {"name": "-D", "dry_run": False}),
            ("oct_git_branch", {"name": "a..b", "dry_run": False}),
            ("oct_git_branch", {"name": "feature", "dry_run": False}),
        ],
        human,
    )

    assert created.is_error is False, only_text(created)
    assert git(repo, "rev-parse", "topic/one") == git(repo, "rev-parse", "main")
    assert git(repo, "branch", "--show-current") == "main"
    assert only_text(leading_dash).startswith("[invalid_arguments]")
    assert only_text(dots).startswith("[invalid_arguments]")
    assert only_text(exists).startswith("[execution_failed]")
    assert len(human.questions) == 1
    assert "refs/heads/topic/one: create branch" in human.questions[0]


async def test_a_staged_protected_path_is_committed_only_when_a_human_saw_it(
    repo: Path, home: Path, tmp_path: Path
) -> None:
    usable_backend("bubblewrap")
    workflows = repo / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "ci.yml").write_text("on: push\n")
    git(repo, "add", ".github/workflows/ci.yml")
    (workflows / "deploy.yml").write_text("on: push\n")
    config = _config(tmp_path, "bubblewrap")
    commit = ("oct_git_commit", {"message": "CI", "dry_run": False})

    # No human: the model's own confirm=true.
    asked, confirmed, add_folder = await _calls(
        repo,
        config,
        home,
        [commit, ("oct_git_commit", {**commit[1], "confirm": True}), ("oct_git_add", {"paths": [".github"]})],
        None,
    )
    human = Human()
    (shown,) = await _calls(repo, config, home, [commit], human)

    assert only_text(asked).startswith("[oct-mcp requires_confirmation]")
    assert confirmed.is_error is True
    assert only_text(confirmed).startswith("[policy]")
    assert only_text(add_folder).startswith("[policy]")
    (question,) = human.questions
    assert (
        "  .github/workflows/ci.yml (configures code that runs later: check it): commit a protected "
        "path (rule ci), +1 -0\n"
    ) in question
    assert shown.is_error is False, only_text(shown)
    assert git(repo, "log", "-1", "--format=%s") == "CI"


def _move_ref(root: Path, ref: str, content: str) -> None:
    """Points `ref` at a new commit that changes src/pkg/core.py, without touching HEAD, the index or the
    work tree: what another process could do while the human reads the question."""
    blob = subprocess.run(
        ["git", "-C", str(root), "hash-object", "-w", "--stdin"],
        input=content, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    parent = git(root, "rev-parse", ref)
    index = root / ".git" / "moved-index"
    environment = {**os.environ, "GIT_INDEX_FILE": str(index)}
    for arguments in (
        ("read-tree", parent),
        ("update-index", "--cacheinfo", f"100644,{blob},src/pkg/core.py"),
    ):
        subprocess.run(["git", "-C", str(root), *arguments], env=environment, check=True)
    tree = subprocess.run(
        ["git", "-C", str(root), "write-tree"], env=environment, capture_output=True, text=True, check=True
    ).stdout.strip()
    index.unlink()
    moved = git(root, "commit-tree", tree, "-p", parent, "-m", "Moved while the question was read")
    git(root, "update-ref", ref, moved)


BACKDOOR = "import os\nos.system('touch /tmp/owned')\n"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_switch_never_checks_out_a_commit_the_question_did_not_show(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    shown = git(repo, "rev-parse", "feature")
    human = Human(meanwhile=lambda: _move_ref(repo, "refs/heads/feature", BACKDOOR))

    (refused,) = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [("oct_git_switch", {"branch": "feature", "dry_run": False})],
        human,
    )

    assert shown[:12] in human.questions[0]
    assert only_text(refused).startswith("[target_changed]")
    assert git(repo, "branch", "--show-current") == "main"
    assert (repo / "src" / "pkg" / "core.py").read_text() == CORE


async def test_a_branch_never_starts_at_a_commit_the_question_did_not_show(
    repo: Path, home: Path, tmp_path: Path
) -> None:
    usable_backend("bubblewrap")
    human = Human(meanwhile=lambda: _move_ref(repo, "refs/heads/main", BACKDOOR))

    (refused,) = await _calls(
        repo,
        _config(tmp_path, "bubblewrap"),
        home,
        [("oct_git_branch", {"name": "topic", "start": "main", "dry_run": False})],
        human,
    )

    assert only_text(refused).startswith("[target_changed]")
    assert subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", "topic"]).returncode != 0


async def test_a_commit_never_lands_on_a_parent_the_question_did_not_show(
    repo: Path, home: Path, tmp_path: Path
) -> None:
    usable_backend("bubblewrap")
    (repo / "README.md").write_text("# Demo, edited\n")
    git(repo, "add", "README.md")
    human = Human(meanwhile=lambda: _move_ref(repo, "refs/heads/main", BACKDOOR))

    (refused,) = await _calls(
        repo,
        _config(tmp_path, "bubblewrap"),
        home,
        [("oct_git_commit", {"message": "Edit the readme", "dry_run": False})],
        human,
    )

    assert only_text(refused).startswith("[target_changed]")
    assert git(repo, "log", "-1", "--format=%s") == "Moved while the question was read"


async def test_a_staged_submodule_pointer_is_shown_in_the_question_and_protected_like_a_file(
    repo: Path, home: Path, tmp_path: Path
) -> None:
    usable_backend("bubblewrap")
    pointer = "1234567890123456789012345678901234567890"
    (repo / "README.md").write_text("# Demo, edited\n")
    git(repo, "add", "README.md")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{pointer},vendor/lib")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{pointer},.github/workflows")
    config = _config(tmp_path, "bubblewrap")
    commit = ("oct_git_commit", {"message": "Edit the readme", "dry_run": False})

    (confirmed,) = await _calls(
        repo, config, home, [("oct_git_commit", {**commit[1], "confirm": True})], None
    )
    human = Human()
    (committed,) = await _calls(repo, config, home, [commit], human)

    # The model's own confirm never commits a protected path it staged, a gitlink included.
    assert only_text(confirmed).startswith("[policy]")
    (question,) = human.questions
    assert "  vendor/lib: commit, +1 -0\n" in question
    assert f"+Subproject commit {pointer}" in question
    assert (
        "  .github/workflows (configures code that runs later: check it): commit a protected path (rule ci), "
        "+1 -0\n"
    ) in question
    assert committed.is_error is False, only_text(committed)
    assert git(repo, "ls-tree", "HEAD", "vendor/lib").split()[:3] == ["160000", "commit", pointer]


def test_branch_names_follow_gits_rules() -> None:
    for good in ("main", "topic/one", "v1.2", "fix-#3"):
        assert check_branch_name(good) == good
    for bad in (
        "-x",
        "a..b",
        "a/.b",
        "a.lock",
        "a/",
        "/a",
        "a b",
        "a~1",
        "a^",
        "a:b",
        "@",
        "HEAD",
        "x@{1}",
        "a//b",
        "é",
    ):
        with pytest.raises(ValueError, match="branch name"):
            check_branch_name(bad)


_ATTACKS = """
import os, sys
git = sys.argv[1]
tries = {
    "write config": lambda: open(f"{git}/config", "a").write("[core]\\n\\tfsmonitor = x\\n"),
    "plant a hook": lambda: open(f"{git}/hooks/pre-commit", "w").write("#!/bin/sh\\n"),
    "replace config": lambda: os.rename(f"{git}/objects/planted", f"{git}/config"),
    "make commondir": lambda: open(f"{git}/commondir", "w").write("/tmp\\n"),
    "remove hooks": lambda: os.rename(f"{git}/hooks", f"{git}/objects/hooks"),
    "write index": lambda: open(f"{git}/index", "ab").write(b"x"),
}
open(f"{git}/objects/planted", "w").write("[core]\\n")
failed = []
for name, attack in tries.items():
    try:
        attack()
    except OSError:
        failed.append(name)
print(",".join(failed))
"""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_git_write_run_cannot_touch_the_git_folder_beyond_its_data_folders(
    repo: Path, tmp_path: Path, backend: str
) -> None:
    usable_backend(backend)
    runner = Bubblewrap() if backend == "bubblewrap" else LandlockBackend()
    git_dir = repo / ".git"
    before = _state(repo)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    private = PrivateGitFolder(scratch, git_dir, ("HEAD", "index"), ("objects", "refs", "logs"))
    home, tmp = runner.home_and_tmp(scratch)
    request = SandboxRequest(
        argv=(sys.executable, "-c", _ATTACKS, str(git_dir)),
        project=repo,
        writable=False,
        network=False,
        protected=(),
        read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
        env={"PATH": "/usr/bin", "HOME": home, "TMPDIR": tmp},
        limits=Limits(memory_bytes=None, cpu_seconds=20),
        scratch=scratch,
        writable_dirs=(private.path,),
        writable_inside=private.folders,
    )

    with anyio.fail_after(30):
        run = await run_prepared(runner.prepare(request), backend=backend, time_limit=20, max_output=65_536)

    assert run.exit_code == 0, run.stderr
    assert run.stdout.decode().strip().split(",") == [
        "write config",
        "plant a hook",
        "replace config",
        "make commondir",
        "remove hooks",
        "write index",
    ]
    assert _state(repo) == before
    assert not os.path.lexists(git_dir / "commondir")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_first_commit_of_a_fresh_repository(home: Path, tmp_path: Path, backend: str) -> None:
    root = (tmp_path / "fresh").resolve()
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("A = 1\n")
    git(root, "init", "-q", "-b", "trunk")
    human = Human()

    added, committed = await _calls(
        root,
        _config(tmp_path, backend),
        home,
        [
            ("oct_git_add", {"paths": ["src/a.py"], "dry_run": False}),
            ("oct_git_commit", {"message": "Start", "dry_run": False}),
        ],
        human,
    )

    assert (added.is_error, committed.is_error) == (False, False), only_text(committed)
    assert "commit on trunk after (the first commit)" in human.questions[1]
    assert git(root, "log", "--format=%an|%s") == "Ada Lovelace|Start"
    assert git(root, "status", "--porcelain") == ""


async def test_switch_never_changes_a_protected_path_even_when_the_model_confirms(
    repo: Path, home: Path, tmp_path: Path
) -> None:
    usable_backend("bubblewrap")
    git(repo, "switch", "-q", "-c", "ci")
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "CI")
    git(repo, "switch", "-q", "main")
    switch = {"branch": "ci", "dry_run": False}

    previewed, confirmed = await _calls(
        repo,
        _config(tmp_path, "bubblewrap"),
        home,
        [("oct_git_switch", switch), ("oct_git_switch", {**switch, "confirm": True})],
        None,
    )

    # The preview refuses before anyone is asked; the model's confirm=true, which skips it, as well.
    assert only_text(previewed).startswith("[policy]")
    assert only_text(confirmed).startswith("[policy]")
    assert git(repo, "branch", "--show-current") == "main"
    assert not (repo / ".github").exists()


async def test_a_commit_without_the_users_identity_is_refused(repo: Path, tmp_path: Path) -> None:
    usable_backend("bubblewrap")
    empty_home = tmp_path / "nobody"
    empty_home.mkdir()
    git(repo, "add", "README.md")
    (repo / "README.md").write_text("# Changed\n")
    git(repo, "add", "README.md")

    (refused,) = await _calls(
        repo,
        _config(tmp_path, "bubblewrap"),
        empty_home,
        [("oct_git_commit", {"message": "No one", "dry_run": False, "confirm": True})],
        None,
    )

    assert only_text(refused).startswith("[git_identity_missing]")
    assert git(repo, "log", "-1", "--format=%s") == "First commit"


async def test_what_is_staged_after_the_question_is_not_committed(
    repo: Path, home: Path, tmp_path: Path
) -> None:
    usable_backend("bubblewrap")
    (repo / "src" / "pkg" / "core.py").write_text(CORE + "# shown\n")
    git(repo, "add", "src/pkg/core.py")
    (repo / "README.md").write_text("# Staged while the human read the question\n")
    human = Human(meanwhile=lambda: git(repo, "add", "README.md"))

    (refused,) = await _calls(
        repo,
        _config(tmp_path, "bubblewrap"),
        home,
        [("oct_git_commit", {"message": "Only what was shown", "dry_run": False})],
        human,
    )

    assert only_text(refused).startswith("[target_changed]")
    assert "README.md" not in human.questions[0]
    assert git(repo, "log", "-1", "--format=%s") == "First commit"


async def test_no_git_write_during_a_merge(repo: Path, home: Path, tmp_path: Path) -> None:
    usable_backend("bubblewrap")
    (repo / "src" / "pkg" / "core.py").write_text(CORE.replace("42", "41"))
    git(repo, "commit", "-q", "-am", "Answer 41")
    merge = subprocess.run(
        ["git", "-C", str(repo), *TERMINAL_IDENTITY, "merge", "-q", "feature"],
        capture_output=True,
        check=False,
    )
    assert merge.returncode != 0  # a conflict: the merge is under way
    git(repo, "add", "src/pkg/core.py")
    human = Human()

    (refused,) = await _calls(
        repo,
        _config(tmp_path, "bubblewrap"),
        home,
        [("oct_git_commit", {"message": "Merge", "dry_run": False})],
        human,
    )

    assert only_text(refused).startswith("[git_layout_refused]")
    assert human.questions == []
    assert (repo / ".git" / "MERGE_HEAD").exists()


async def test_add_never_stages_a_nested_repository(repo: Path, home: Path, tmp_path: Path) -> None:
    usable_backend("bubblewrap")
    nested = repo / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    (nested / "x.py").write_text("X = 1\n")

    (refused,) = await _calls(
        repo,
        _config(tmp_path, "bubblewrap"),
        home,
        [("oct_git_add", {"paths": ["vendor"], "dry_run": False})],
        None,
    )

    assert only_text(refused).startswith("[policy]")
    assert git(repo, "diff", "--cached", "--name-only") == ""


def _wide_branch(root: Path) -> None:
    """A branch `wide` that changes a root-level file and a file in a subfolder."""
    git(root, "switch", "-q", "-c", "wide")
    (root / "README.md").write_text("# Demo, wide\n")
    (root / "src" / "pkg" / "core.py").write_text(CORE.replace("42", "44"))
    git(root, "commit", "-q", "-am", "Wide change")
    git(root, "switch", "-q", "main")


def _work_tree(root: Path) -> tuple[str, str, str, str]:
    """HEAD, the status, and the two files a wide change touches."""
    return (
        git(root, "rev-parse", "HEAD") + " " + git(root, "symbolic-ref", "HEAD"),
        git(root, "status", "--porcelain"),
        (root / "README.md").read_text(),
        (root / "src" / "pkg" / "core.py").read_text(),
    )


# A backend that binds the whole project writable (bubblewrap), or whose supervisor makes the
# entries Landlock cannot (landlock on Linux 5.19+), does the whole change; one that grants entry
# rights only on folders clear of protected paths (landlock on an older kernel) cannot replace a
# root-level file: there the call must be refused before anything changes.
CAN_REPLACE_ROOT_FILES = {
    "bubblewrap": True,
    "landlock": LandlockBackend().entry_rights is EntryRights.WRITABLE_FOLDERS,
}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_switch_touching_a_root_file_is_whole_or_refused_before_any_change(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    _wide_branch(repo)
    before = _work_tree(repo)
    human = Human()

    (switched,) = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [("oct_git_switch", {"branch": "wide", "dry_run": False})],
        human,
    )

    if CAN_REPLACE_ROOT_FILES[backend]:
        assert switched.is_error is False, only_text(switched)
        assert git(repo, "branch", "--show-current") == "wide"
        assert git(repo, "status", "--porcelain") == ""
        assert (repo / "README.md").read_text() == "# Demo, wide\n"
        assert (repo / "src" / "pkg" / "core.py").read_text() == CORE.replace("42", "44")
    else:
        assert _work_tree(repo) == before
        assert only_text(switched).startswith("[sandbox_unavailable]"), only_text(switched)
        assert "README.md" in only_text(switched)
        assert human.questions == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_restore_of_a_root_file_is_whole_or_refused_before_any_change(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    (repo / "README.md").write_text("# Changed\n")
    (repo / "src" / "pkg" / "core.py").write_text(CORE.replace("42", "7"))
    before = _work_tree(repo)
    human = Human()

    (restored,) = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [("oct_git_restore", {"paths": ["README.md", "src"], "dry_run": False})],
        human,
    )

    if CAN_REPLACE_ROOT_FILES[backend]:
        assert restored.is_error is False, only_text(restored)
        assert git(repo, "status", "--porcelain") == ""
        assert (repo / "README.md").read_text() == "# Demo\n"
        assert (repo / "src" / "pkg" / "core.py").read_text() == CORE
    else:
        assert _work_tree(repo) == before
        assert only_text(restored).startswith("[sandbox_unavailable]"), only_text(restored)
        assert "README.md" in only_text(restored)
        assert human.questions == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_confirmed_switch_that_makes_a_root_folder_is_whole_or_refused_before_any_change(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    git(repo, "switch", "-q", "-c", "docs")
    (repo / "docs").mkdir()
    (repo / "docs" / "guide.md").write_text("# Guide\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Docs")
    git(repo, "switch", "-q", "main")
    before = _work_tree(repo)

    # confirm=true skips the preview: the plan that runs git checks for itself.
    (switched,) = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [("oct_git_switch", {"branch": "docs", "dry_run": False, "confirm": True})],
        None,
    )

    if CAN_REPLACE_ROOT_FILES[backend]:
        assert switched.is_error is False, only_text(switched)
        assert git(repo, "branch", "--show-current") == "docs"
        assert git(repo, "status", "--porcelain") == ""
        assert (repo / "docs" / "guide.md").read_text() == "# Guide\n"
    else:
        assert _work_tree(repo) == before
        assert only_text(switched).startswith("[sandbox_unavailable]"), only_text(switched)
        assert "docs/guide.md" in only_text(switched)
        assert not (repo / "docs").exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_file_beside_a_protected_folder_is_restored_whole_or_refused_before_any_change(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    # Landlock grants `.github` no right of its own, only one on each entry but `workflows`.
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (repo / ".github" / "CODEOWNERS").write_text("* @ada\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Owners")
    (repo / ".github" / "CODEOWNERS").write_text("* @mallory\n")
    (repo / "src" / "pkg" / "core.py").write_text(CORE.replace("42", "7"))
    before = _work_tree(repo)

    (restored,) = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [("oct_git_restore", {"paths": [".github/CODEOWNERS", "src"], "dry_run": False})],
        Human(),
    )

    if CAN_REPLACE_ROOT_FILES[backend]:
        assert restored.is_error is False, only_text(restored)
        assert git(repo, "status", "--porcelain") == ""
        assert (repo / ".github" / "CODEOWNERS").read_text() == "* @ada\n"
    else:
        assert _work_tree(repo) == before
        assert (repo / ".github" / "CODEOWNERS").read_text() == "* @mallory\n"
        assert only_text(restored).startswith("[sandbox_unavailable]"), only_text(restored)
        assert ".github/CODEOWNERS" in only_text(restored)
    assert (repo / ".github" / "workflows" / "ci.yml").read_text() == "on: push\n"


def test_where_each_backend_can_make_and_remove_entries(tmp_path: Path) -> None:
    root = tmp_path
    protected = (root / ".git", root / ".github" / "workflows")
    folders = [root, root / ".github", root / ".github" / "workflows" / "deep", root / "src" / "pkg"]

    fixed = {
        rights: [rights.fixed(folder, root, protected) for folder in folders]
        for rights in (EntryRights.WRITABLE_FOLDERS, EntryRights.CLEAR_FOLDERS)
    }

    assert fixed == {
        EntryRights.WRITABLE_FOLDERS: [False, False, True, False],
        EntryRights.CLEAR_FOLDERS: [True, True, True, False],
    }
    assert Bubblewrap.entry_rights is EntryRights.WRITABLE_FOLDERS


async def test_on_landlock_a_file_git_could_not_replace_after_all_is_never_reported_as_switched(
    repo: Path, home: Path, tmp_path: Path
) -> None:
    usable_backend("landlock")
    # A folder its owner cannot write: no sandbox rule foresees it, and the run holds no privilege over it.
    (repo / "src" / "pkg").chmod(0o555)
    try:
        (switched,) = await _calls(
            repo,
            _config(tmp_path, "landlock"),
            home,
            [("oct_git_switch", {"branch": "feature", "dry_run": False, "confirm": True})],
            None,
        )
    finally:
        (repo / "src" / "pkg").chmod(0o755)

    assert only_text(switched).startswith("[execution_failed] git could not replace a file"), only_text(
        switched
    )
    assert "only partly switched" in only_text(switched)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_repository_config_cannot_start_a_program_through_a_lazy_fetch(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    # A partial clone fetches a missing object on demand, running `remote.<name>.uploadpack` (or an
    # ssh or ext:: command): a program the config names, which no hook or filter override covers.
    # The config also re-allows the file transport, which beats a `-c protocol.allow=never`.
    marker = repo / ".git" / "objects" / "ran"
    for key, value in (
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.url", str(repo)),
        ("remote.origin.uploadpack", f'sh -c "echo RAN-UPLOADPACK >&2; touch {marker}; exit 1" #'),
        ("remote.origin.partialclonefilter", "blob:none"),
        ("remote.origin.promisor", "true"),
        ("protocol.file.allow", "always"),
    ):
        git(repo, "config", key, value)
    for entry in (repo / ".git" / "objects").iterdir():
        if entry.name not in ("info", "pack"):
            subprocess.run(["rm", "-rf", str(entry)], check=True)
    for pack in (repo / ".git" / "objects" / "pack").iterdir():
        pack.unlink()
    (repo / "README.md").write_text("# changed\n")

    results = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [
            ("oct_git_status", {}),
            ("oct_git_diff", {}),
            ("oct_git_add", {"paths": ["README.md"], "confirm": True}),
        ],
        Human(),
    )

    for result in results:
        assert "RAN-UPLOADPACK" not in json.dumps(result.model_dump(mode="json"))
    assert not marker.exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_switch_in_a_repository_without_reflogs_switches_whole(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    # With no .git/logs, a reflog git wrote could not be installed: git is told to write none.
    subprocess.run(["rm", "-rf", str(repo / ".git" / "logs")], check=True)

    (switched,) = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [("oct_git_switch", {"branch": "feature", "dry_run": False})],
        Human(),
    )

    assert switched.is_error is False, only_text(switched)
    assert git(repo, "branch", "--show-current") == "feature"
    assert (repo / "src" / "pkg" / "core.py").read_text() == CORE.replace("42", "43")
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_line_behind_a_form_feed_is_asked_about_as_added_when_staged_and_committed(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    usable_backend(backend)
    backdoor = '\x0c\tprint("BACKDOOR")\n'
    (repo / "src" / "pkg" / "core.py").write_text(CORE + backdoor)
    human = Human()

    added, committed = await _calls(
        repo,
        _config(tmp_path, backend),
        home,
        [
            ("oct_git_add", {"paths": ["src"], "dry_run": False}),
            ("oct_git_commit", {"message": "Tidy\n+ looks like a diff line", "dry_run": False}),
        ],
        human,
    )

    assert (added.is_error, committed.is_error) == (False, False), only_text(committed)
    add_question, commit_question = human.questions
    for question in (add_question, commit_question):
        assert [line for line in question.split("\n") if "BACKDOOR" in line] == [
            '+\\u000c\tprint("BACKDOOR")'
        ]
    # The message is shown indented (its model refuses control characters): no line of it passes
    # for a line of the diff.
    assert "\n  Tidy\n  + looks like a diff line\n" in commit_question
    assert git(repo, "show", "HEAD:src/pkg/core.py") + "\n" == CORE + backdoor.rstrip("\n") + "\n"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_switch_and_a_restore_are_checkpoints_oct_undo_takes_back(
    repo: Path, home: Path, tmp_path: Path, backend: str
) -> None:
    edited = CORE.replace("42", "7  # work the restore discards")
    (repo / "README.md").write_text("# Demo, an uncommitted edit\n")
    human = Human()
    config = _config(tmp_path, backend)

    switched, listed, undone = await _calls(
        repo,
        config,
        home,
        [
            ("oct_git_switch", {"branch": "feature", "dry_run": False}),
            ("oct_checkpoints", {}),
            ("oct_undo", {"id": "1", "dry_run": False}),
        ],
        human,
    )
    after_switch_undo = (repo / "src" / "pkg" / "core.py").read_text()
    (repo / "src" / "pkg" / "core.py").write_text(edited)
    restored, undone_restore = await _calls(
        repo,
        config,
        home,
        [
            ("oct_git_restore", {"paths": ["src"], "dry_run": False}),
            ("oct_undo", {"id": "3", "dry_run": False}),
        ],
        human,
    )

    assert switched.is_error is False, only_text(switched)
    assert "(checkpoint 1: oct_undo can put these files back)" in only_text(switched)
    assert listed.structured_content is not None
    (entry,) = listed.structured_content["checkpoints"]
    assert (entry["tool"], entry["files"]) == (
        "oct_git_switch",
        [{"path": "src/pkg/core.py", "change": "modified"}],
    )
    assert undone.is_error is False, only_text(undone)
    # The files come back; git's HEAD stays where the switch left it.
    assert after_switch_undo == CORE
    assert git(repo, "branch", "--show-current") == "feature"
    assert restored.is_error is False, only_text(restored)
    assert "(checkpoint 3: oct_undo can put these files back)" in only_text(restored)
    assert undone_restore.is_error is False, only_text(undone_restore)
    assert (repo / "src" / "pkg" / "core.py").read_text() == edited
    assert (repo / "README.md").read_text() == "# Demo, an uncommitted edit\n"
