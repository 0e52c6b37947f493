"""A writable run that hides what it planted from the check after it: the check fails closed.

The run plants a `.git` whose config sets core.fsmonitor (a command the user's next `git status`
runs) and an IDE's tasks, then makes the folder holding them something the server cannot list: a
path longer than the system takes in one call (which stops root as well), or, with the server as
an unprivileged user, a folder mode without the owner's read or search right. The check must list
what it can by descriptor, give the run's folder its owner's rights back, remove the plants, and
fail the call naming the folder; what it still cannot list fails the call too.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from clients import oct_server, only_text
from mcp import Client
from optional import bubblewrap, landlock
from unprivileged import NOBODY, PACKAGES, copied_packages, unprivileged_python

from oct_mcp.errors import PathRefusedError
from oct_mcp.execution.changes import tree_state
from oct_mcp.execution.protected_walk import SNAPSHOT_MAX_DEPTH, settle_protected_paths, snapshot_protected
from oct_mcp.workspace import Workspace

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

FIXTURE = Path(__file__).parent.parent / "data" / "projects" / "cli_package"
FSMONITOR = "[core]\n\tfsmonitor = touch pwned\n"
LONG = "d" * 250
LEVELS = 20  # 20 folders of 250 characters: a path past the 4,096 a single system call takes
# The run's program: go LEVELS folders deep inside pkg/ one step at a time (no call sees the whole
# path), and plant a repository with an fsmonitor and an IDE's tasks there.
PLANT_DEEP = textwrap.dedent(
    f"""
    import os
    os.chdir("pkg")
    for _ in range({LEVELS}):
        os.mkdir({LONG!r})
        os.chdir({LONG!r})
    os.makedirs("sub/.git")
    with open("sub/.git/config", "w") as config:
        config.write({FSMONITOR!r})
    os.mkdir(".vscode")
    with open(".vscode/tasks.json", "w") as tasks:
        tasks.write("{{}}")
    """
)


def _package(where: Path) -> Path:
    root = where.resolve() / "cli_package"
    shutil.copytree(FIXTURE, root)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    return root


def _deep_entry(root: Path, parts: list[str]) -> bool:
    """Whether `root/parts...` is there, reached one folder at a time (no path is too long)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return False
            os.close(fd)
            fd = inner
        try:
            os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True
    finally:
        os.close(fd)


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock", "native"])
async def test_a_repository_planted_past_the_longest_path_fails_the_run_over_stdio_and_is_removed(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    if backend != "native":
        (bubblewrap if backend == "bubblewrap" else landlock)()
    project = _package(tmp_path)
    # native confines nothing: the user opted in, so the check after the run is all there is.
    config_file.write_text(json.dumps({"sandbox_backend": backend, "allow_unconfined_project_code": True}))
    arguments = {"argv": ["python", "-c", PLANT_DEEP], "writes": True, "confirm": True}

    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file)) as client:
            result = await client.call_tool("oct_run", arguments)

    deep = ["pkg", *[LONG] * LEVELS]
    assert result.is_error is True
    text = only_text(result)
    assert text.startswith(
        "[protected_path_created] the tool wrote protected paths, which no tool may write: "
    )
    assert "(created; removed again); its other changes were kept" in text
    assert not _deep_entry(project, [*deep, "sub", ".git"])
    assert not _deep_entry(project, [*deep, ".vscode"])
    assert _deep_entry(project, [*deep, "sub"])  # the run's other changes are kept


# Each way to take a folder from its owner's listing, after planting in it.
HIDE = {
    "0311": "os.chmod('pkg', 0o311)",
    "0300": "os.chmod('pkg', 0o300)",
    "0000": "os.chmod('pkg', 0o000)",
    "0600-no-search": "os.chmod('pkg', 0o600)",
    "root-0311": "os.chmod('.', 0o311)",
    # An access ACL (as setfacl -m u::---,g:<the run's group>:rwx writes it): the owner's entry empty.
    "acl": (
        "import struct; os.setxattr('pkg', 'system.posix_acl_access', struct.pack('<I', 2) + b''.join("
        "struct.pack('<HHI', tag, perm, ident) for tag, perm, ident in ((1, 0, 0xFFFFFFFF), "
        "(4, 5, 0xFFFFFFFF), (8, 7, os.getgid()), (0x10, 7, 0xFFFFFFFF), (0x20, 5, 0xFFFFFFFF))))"
    ),
}
PLANT_AND_HIDE = (
    "import os\n"
    "os.makedirs('pkg/sub/.git')\n"
    f"open('pkg/sub/.git/config', 'w').write({FSMONITOR!r})\n"
    "os.makedirs('pkg/.vscode')\n"
    "open('pkg/.vscode/tasks.json', 'w').write('{{}}')\n"
    "{hide}\n"
)
APP_PACKAGES = (*PACKAGES, "re2", "attr", "pygments", "rich")
# The server's chain in process, as the unprivileged user: each hiding, on each backend, in a
# fresh copy of the project; the outcome's code and text, and what is left on disk.
HARNESS = """
import json, shutil, sys
from pathlib import Path
import anyio
from oct_mcp.app import build_app, run_call
from oct_mcp.errors import ConfigError
from oct_mcp.types import ClientInfo

base, hides, plant = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
results = {}
for backend in ("native", "bubblewrap", "landlock"):
    for name, hide in hides.items():
        project = base / f"{backend}-{name}"
        (project / "pkg").mkdir(parents=True)
        (project / "pkg" / "mod.py").write_text("x = 1\\n")
        config = base / f"{backend}-{name}.json"
        # HOME is /nonexistent here: no checkpoint store can be made, and a writing run would be refused.
        settings = {"sandbox_backend": backend, "allow_unconfined_project_code": True}
        settings["checkpoint_max_count"] = 0
        config.write_text(json.dumps(settings))
        try:
            app = build_app(project, config_path=config, environ={})
        except ConfigError:
            results[backend] = None
            break
        arguments = {"argv": ["python", "-c", plant.format(hide=hide)], "writes": True, "confirm": True}
        client = ClientInfo(client_id="nobody-" + backend, transport="memory")
        outcome = anyio.run(run_call, app, "oct_run", arguments, client)
        (project / "pkg").chmod(0o755) if (project / "pkg").exists() else None
        results[f"{backend} {name}"] = {
            "code": getattr(outcome, "code", None),
            "text": getattr(outcome, "message", None) or getattr(outcome, "text", ""),
            "git": (project / "pkg" / "sub" / ".git").exists(),
            "vscode": (project / "pkg" / ".vscode").exists(),
        }
print(json.dumps(results))
"""


@pytest.fixture
def unprivileged() -> Iterator[tuple[str, Path]]:
    """The system's Python, and oct_mcp with its dependencies where the unprivileged user reads them."""
    python = unprivileged_python()
    with copied_packages(APP_PACKAGES, HARNESS) as base:
        # One folder a run each, made by the harness as nobody.
        projects = base / "projects"
        projects.mkdir()
        projects.chmod(0o755)
        shutil.chown(projects, NOBODY, NOBODY)
        yield python, base


def test_as_its_own_user_the_server_fails_a_run_that_hides_its_plants_by_mode_and_removes_them(
    unprivileged: tuple[str, Path],
) -> None:
    python, base = unprivileged
    command = [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
        "env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={base / 'site'}", "HOME=/nonexistent",
        python, "-s", str(base / "harness.py"), str(base / "projects"), json.dumps(HIDE), PLANT_AND_HIDE,
    ]  # fmt: skip

    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)

    assert completed.returncode == 0, completed.stderr[-3_000:]
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    ran = {key: value for key, value in results.items() if value is not None and " " in key}
    assert {key.split()[0] for key in ran} >= {"native"}
    for key, outcome in ran.items():
        assert outcome["code"] == "protected_path_created", (key, outcome)
        hidden = "." if key.endswith("root-0311") else "pkg"
        unreadable = (
            f"{hidden} (made unreadable by the run, which hides what is inside from this check; made "
            "readable again (chmod u+rwx) and checked); "
        )
        if key.endswith(" acl") and not key.startswith("native"):
            # The seccomp filter of bubblewrap and landlock runs refuses every extended attribute, an
            # ACL included: the folder was never hidden, and the plants are found as they are.
            unreadable = ""
        assert outcome["text"] == (
            "the tool wrote protected paths, which no tool may write: pkg/.vscode, pkg/sub/.git (created; "
            f"removed again); {unreadable}its other changes were kept"
        ), key
        assert (outcome["git"], outcome["vscode"]) == (False, False), key


def test_the_walk_lists_no_deeper_than_its_bound_and_says_so(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(SNAPSHOT_MAX_DEPTH + 1):
        os.mkdir("d", dir_fd=folder)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
        os.close(folder)
        folder = inner
    os.close(folder)

    snapshot = snapshot_protected(root)

    assert snapshot.unlisted == {
        "/".join(["d"] * (SNAPSHOT_MAX_DEPTH + 1)): f"more than {SNAPSHOT_MAX_DEPTH} folders deep"
    }


async def test_a_fifo_a_socket_and_a_symlink_loop_where_the_check_looks_neither_block_nor_hide(
    tmp_path: Path,
) -> None:
    root = tmp_path.resolve()
    (root / ".vscode").mkdir()
    before = snapshot_protected(root)
    os.mkfifo(root / ".vscode" / "tasks.json")
    os.mkfifo(root / "pipe")
    (root / "loop").symlink_to("loop")
    (root / "sub").mkdir()
    (root / "sub" / ".idea").symlink_to("../sub")

    with anyio.fail_after(30):
        changes = await anyio.to_thread.run_sync(settle_protected_paths, root, before, abandon_on_cancel=True)

    assert changes.changed == (".vscode/tasks.json",)
    assert changes.removed == ("sub/.idea",)
    assert not changes.unlisted
    assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode)


def test_a_plant_in_a_folder_whose_name_is_no_utf_8_is_found_and_removed(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    before = snapshot_protected(root)
    hidden = os.path.join(os.fsencode(root), b"caf\xe9")
    os.makedirs(os.path.join(hidden, b".git"))
    with open(os.path.join(hidden, b".git", b"config"), "w") as config:
        config.write(FSMONITOR)

    changes = settle_protected_paths(root, before)

    assert changes.removed == ("caf\udce9/.git",)
    assert not os.path.lexists(os.path.join(hidden, b".git"))


def _chain(root: Path, depth: int) -> None:
    """`root/d/d/...`, `depth` folders deep, made one level at a time."""
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=folder)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
        os.close(folder)
        folder = inner
    os.close(folder)


async def _run_over_stdio(project: Path, config_file: Path, code: str) -> tuple[bool, str]:
    config_file.write_text(json.dumps({"sandbox_backend": "native", "allow_unconfined_project_code": True}))
    arguments = {"argv": ["python", "-c", code], "writes": True, "confirm": True}
    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file)) as client:
            result = await client.call_tool("oct_run", arguments)
    return bool(result.is_error), only_text(result)


async def test_a_folder_the_check_cannot_list_before_a_writable_run_refuses_it_and_nothing_runs(
    tmp_path: Path, config_file: Path
) -> None:
    project = _package(tmp_path)
    _chain(project / "pkg", SNAPSHOT_MAX_DEPTH)

    is_error, text = await _run_over_stdio(project, config_file, "open('ran', 'w').close()")

    assert is_error is True
    assert text.startswith(
        "[folder_unlisted] the check of protected paths around a writable run cannot list "
    )
    assert f"(more than {SNAPSHOT_MAX_DEPTH} folders deep), so it could not tell what a run put there" in text
    assert not (project / "ran").exists()


async def test_a_run_that_leaves_a_folder_deeper_than_the_check_goes_fails_with_unchecked_folder(
    tmp_path: Path, config_file: Path
) -> None:
    project = _package(tmp_path)
    code = (
        f"import os\nos.chdir('pkg')\nfor _ in range({SNAPSHOT_MAX_DEPTH}):\n"
        "    os.mkdir('d')\n    os.chdir('d')\n"
    )

    is_error, text = await _run_over_stdio(project, config_file, code)

    assert is_error is True
    assert text.startswith(
        "[unchecked_folder] the check of protected paths after the run could not see into every folder: "
        "pkg/d/d/"
    )
    assert text.endswith(
        f"(more than {SNAPSHOT_MAX_DEPTH} folders deep) (cannot be listed, so a .git or an IDE's config may "
        "hide inside: do not run git or open an editor there; make it readable (chmod u+rwx) and check it "
        "with oct_git_status, or remove it); the call's result is withheld and its other changes were kept"
    )


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock", "native"])
async def test_oct_run_with_writes_refuses_files_hard_linked_to_a_hook_or_outside_and_runs_nothing(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    if backend != "native":
        (bubblewrap if backend == "bubblewrap" else landlock)()
    project = _package(tmp_path)
    hook = project / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True)
    hook.write_text("#!/bin/sh\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own\n")
    os.link(hook, project / "pkg" / "hook.sh")
    os.link(outside, project / "pkg" / "notes.txt")
    config_file.write_text(json.dumps({"sandbox_backend": backend, "allow_unconfined_project_code": True}))
    code = "for name in ('pkg/hook.sh', 'pkg/notes.txt'): open(name, 'a').write('touch pwned\\n')"
    arguments = {"argv": ["python", "-c", code], "writes": True, "confirm": True}

    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file)) as client:
            result = await client.call_tool("oct_run", arguments)

    assert result.is_error is True
    assert only_text(result) == (
        "[linked_file] 2 project file(s) have another name (a hard link), which may lie outside the project "
        "or be protected, and a writable run that changes one in place changes the other too: pkg/hook.sh, "
        "pkg/notes.txt; replace each with a copy of itself (cp F F.new && mv F.new F), or run without "
        "writes; nothing ran"
    )
    assert hook.read_text() == "#!/bin/sh\n"
    assert outside.read_text() == "the user's own\n"


def test_a_folders_tree_a_human_approves_refuses_what_it_cannot_list_rather_than_leave_it_out(
    tmp_path: Path,
) -> None:
    root = tmp_path.resolve()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    os.mkdir("build", dir_fd=fd)
    for _ in range(LEVELS):
        inner = os.open("build" if _ == 0 else LONG, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
        os.mkdir(LONG, dir_fd=fd)
    os.close(fd)

    with pytest.raises(PathRefusedError) as refused:
        tree_state(Workspace(root), "build")

    assert refused.value.code == "path_refused"
    assert refused.value.message == (
        "a folder inside cannot be listed (File name too long); make it readable to the server's user "
        "(chmod u+rx) and not nested past the longest path the system takes, then call again"
    )
