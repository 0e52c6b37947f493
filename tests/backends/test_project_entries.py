"""A writable landlock run makes and removes entries at the project root through the supervisor.

Each case runs a real command under the real backend and checks the project on disk afterwards.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from optional import landlock

from oct_mcp.backends import EntryRights, Limits, SandboxRequest, SecretFile
from oct_mcp.backends.runner import run_prepared

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

LIMITS = Limits(memory_bytes=512 * 1_048_576, cpu_seconds=65)

# Each line of a run's script: `attempt(label, action)` prints the label and DONE or the error.
_ATTEMPT = textwrap.dedent("""
    import os, shutil
    def attempt(label, action):
        try:
            action()
            print(label, "DONE")
        except OSError as exc:
            print(label, type(exc).__name__)
""")


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "setup.cfg").write_text("[old]\n")
    (project / "src.cfg").write_text("[old]\n")
    (project / "old.txt").write_text("old\n")
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / ".github" / "workflows").mkdir(parents=True)
    (project / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    return project


async def _run(project: Path, tmp_path: Path, script: str, **changes: object) -> list[str]:
    backend = landlock()
    if backend.entry_rights is not EntryRights.WRITABLE_FOLDERS:
        pytest.fail("this kernel cannot supervise a landlock run (oct-mcp doctor says why)")
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    fields: dict[str, object] = {
        "argv": (sys.executable, "-I", "-c", _ATTEMPT + textwrap.dedent(script)),
        "project": project,
        "writable": True,
        "network": False,
        "protected": (project / ".git", project / ".github" / "workflows"),
        "read_only_binds": (Path(sys.base_prefix), Path(sys.prefix)),
        "env": {"PATH": "/usr/bin"},
        "limits": LIMITS,
        "scratch": scratch,
    }
    fields.update(changes)
    prepared = backend.prepare(SandboxRequest(**fields))  # type: ignore[arg-type]
    with anyio.fail_after(60):
        run = await run_prepared(prepared, backend="landlock", time_limit=50, max_output=65_536)
    assert run.stderr == b"", run.stderr.decode()
    return run.stdout.decode().splitlines()


async def test_a_writable_run_makes_removes_and_replaces_files_at_the_root(tmp_path: Path) -> None:
    project = _project(tmp_path)

    said = await _run(
        project,
        tmp_path,
        """
        attempt("write in place", lambda: open("src.cfg", "w").write("[src]\\n"))
        attempt("make", lambda: open("notes.md", "w").write("one\\n"))
        attempt("append to what it made", lambda: open("notes.md", "a").write("two\\n"))
        attempt("remove", lambda: os.remove("old.txt"))
        attempt("replace", lambda: (open(".setup.cfg.tmp", "w").write("[new]\\n"), os.replace(".setup.cfg.tmp", "setup.cfg")))
        attempt("makedirs", lambda: os.makedirs("build/lib"))
        attempt("file in a made folder", lambda: open("build/lib/out.txt", "w").write("out\\n"))
        attempt("rmtree", lambda: shutil.rmtree("build"))
        attempt("absolute name", lambda: open(os.getcwd() + "/abs.txt", "w").write("abs\\n"))
        attempt("from a descriptor", lambda: os.close(os.open("at.txt", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=os.open(".", os.O_RDONLY))))
        attempt("move in from a folder", lambda: (open("src/m.py", "w").write("m = 1\\n"), os.rename("src/m.py", "m.py")))
        attempt("hard link", lambda: os.link("m.py", "m2.py"))
        attempt("symlink", lambda: os.symlink("m.py", "m3.py"))
        attempt("beside a protected folder", lambda: open(".github/CODEOWNERS", "w").write("* @ada\\n"))
        """,  # noqa: E501 - one attempt a line
    )

    assert said == [
        "write in place DONE",
        "make DONE",
        "append to what it made DONE",
        "remove DONE",
        "replace DONE",
        "makedirs DONE",
        "file in a made folder DONE",
        "rmtree DONE",
        "absolute name DONE",
        "from a descriptor DONE",
        "move in from a folder DONE",
        "hard link DONE",
        "symlink DONE",
        "beside a protected folder DONE",
    ]
    assert (project / "src.cfg").read_text() == "[src]\n"
    assert (project / "notes.md").read_text() == "one\ntwo\n"
    assert (project / "setup.cfg").read_text() == "[new]\n"
    assert not (project / "old.txt").exists()
    assert not (project / "build").exists()
    assert (project / "m2.py").read_text() == "m = 1\n"
    assert (project / "m3.py").readlink() == Path("m.py")
    assert (project / ".github" / "CODEOWNERS").read_text() == "* @ada\n"


async def test_protected_paths_stay_out_of_reach_at_the_root(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "keep.txt").write_text("keep\n")

    said = await _run(
        project,
        tmp_path,
        """
        attempt("write in .git", lambda: open(".git/config", "w"))
        attempt("make .envrc", lambda: open(".envrc", "w"))
        attempt("make .vscode", lambda: os.mkdir(".vscode"))
        attempt("symlink named .githooks", lambda: os.symlink("src", ".githooks"))
        attempt("rename .git", lambda: os.rename(".git", "dotgit"))
        attempt("rename .github", lambda: os.rename(".github", "gh"))
        attempt("remove .git", lambda: os.rmdir(".git"))
        attempt("move over .git/HEAD", lambda: os.rename("keep.txt", ".git/HEAD"))
        attempt("move into workflows", lambda: os.rename("keep.txt", ".github/workflows/x.yml"))
        attempt("move a workflow out", lambda: os.rename(".github/workflows/ci.yml", "ci.yml"))
        attempt("replace with .git", lambda: os.replace("keep.txt", ".git"))
        """,
    )

    assert said == [
        "write in .git PermissionError",
        "make .envrc PermissionError",
        "make .vscode PermissionError",
        "symlink named .githooks PermissionError",
        "rename .git PermissionError",
        "rename .github PermissionError",
        "remove .git PermissionError",
        "move over .git/HEAD PermissionError",
        "move into workflows PermissionError",
        "move a workflow out PermissionError",
        "replace with .git PermissionError",
    ]
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*")) == [
        ".git",
        ".git/HEAD",
        ".github",
        ".github/workflows",
        ".github/workflows/ci.yml",
        "keep.txt",
        "old.txt",
        "setup.cfg",
        "src",
        "src.cfg",
    ]
    assert (project / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"


async def test_a_file_the_run_may_not_read_is_never_moved_linked_or_removed(tmp_path: Path) -> None:
    project = _project(tmp_path)
    secret = project / ".env"
    secret.write_text("API_KEY=sk-live-0123456789abcdef\n")
    (project / "config").mkdir()
    held = project / "config" / "prod.yaml"
    held.write_text("password: tulip orbit canyon\n")

    said = await _run(
        project,
        tmp_path,
        """
        attempt("read", lambda: open(".env").read())
        attempt("move it where it reads", lambda: os.rename(".env", "src/env.txt"))
        attempt("link it where it reads", lambda: os.link(".env", "src/env.txt"))
        attempt("remove it", lambda: os.remove(".env"))
        attempt("replace it", lambda: (open("x.txt", "w").write("x"), os.replace("x.txt", ".env")))
        attempt("move its folder", lambda: os.rename("config", "src/config"))
        attempt("make one, read it back", lambda: (open("made.txt", "w").write("m"), open("made.txt").read()))
        attempt("write into it again", lambda: open("made.txt", "r+").write("n"))
        """,
        secret_files=(SecretFile(secret), SecretFile(held)),
    )

    assert said == [
        "read PermissionError",
        "move it where it reads PermissionError",
        "link it where it reads PermissionError",
        "remove it PermissionError",
        "replace it PermissionError",
        "move its folder PermissionError",
        "make one, read it back DONE",
        "write into it again DONE",
    ]
    assert (project / "made.txt").read_text() == "n"
    assert secret.read_text() == "API_KEY=sk-live-0123456789abcdef\n"
    assert held.read_text() == "password: tulip orbit canyon\n"
    assert not (project / "src" / "env.txt").exists()


async def test_nothing_is_made_outside_the_project_through_the_root(tmp_path: Path) -> None:
    project = _project(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "away").symlink_to(outside)
    (outside / "theirs.txt").write_text("theirs\n")

    said = await _run(
        project,
        tmp_path,
        f"""
        attempt("make through a root link", lambda: open("away/planted.txt", "w"))
        attempt("move out", lambda: os.rename("setup.cfg", {str(outside / "setup.cfg")!r}))
        attempt("move in", lambda: os.rename({str(outside / "theirs.txt")!r}, "theirs.txt"))
        attempt("make by an absolute name outside", lambda: open({str(outside / "abs.txt")!r}, "w"))
        """,
    )

    assert said == [
        "make through a root link PermissionError",
        "move out OSError",
        "move in OSError",
        "make by an absolute name outside PermissionError",
    ]
    assert sorted(p.name for p in outside.iterdir()) == ["theirs.txt"]
    assert (project / "setup.cfg").read_text() == "[old]\n"


async def test_a_run_without_writes_still_makes_nothing_at_the_root(tmp_path: Path) -> None:
    project = _project(tmp_path)

    said = await _run(
        project,
        tmp_path,
        """
        attempt("make", lambda: open("notes.md", "w"))
        attempt("remove", lambda: os.remove("old.txt"))
        attempt("rename", lambda: os.rename("old.txt", "new.txt"))
        """,
        writable=False,
    )

    assert said == ["make PermissionError", "remove PermissionError", "rename PermissionError"]
    assert (project / "old.txt").exists()
    assert not (project / "notes.md").exists()


async def test_a_root_folder_whose_mode_refuses_writes_gets_no_new_entry(tmp_path: Path) -> None:
    # As a terminal user: the supervisor (the server's thread, maybe root's) must not do more.
    project = _project(tmp_path)
    project.chmod(0o555)
    try:
        said = await _run(
            project,
            tmp_path,
            """
            attempt("make", lambda: open("notes.md", "w"))
            attempt("remove", lambda: os.remove("old.txt"))
            attempt("write in place", lambda: open("setup.cfg", "w").write("[new]\\n"))
            """,
        )
    finally:
        project.chmod(0o755)

    assert said == ["make PermissionError", "remove PermissionError", "write in place DONE"]
    assert not (project / "notes.md").exists()
    assert (project / "old.txt").exists()


async def test_a_hidden_file_renamed_or_linked_in_its_folder_first_is_still_never_moved_out(
    tmp_path: Path,
) -> None:
    # The kernel lets the run rename or link a hidden file inside its own folder: by name the file
    # is then no longer hidden, by inode it is. A hidden folder's entries are hidden too.
    project = _project(tmp_path)
    (project / "config").mkdir()
    held = project / "config" / "prod.yaml"
    held.write_text("password: tulip orbit canyon\n")
    (project / "private").mkdir()
    (project / "private" / "key").write_text("PRIVATE KEY\n")

    said = await _run(
        project,
        tmp_path,
        """
        os.rename("config/prod.yaml", "config/innocent")
        attempt("move the renamed one out", lambda: os.rename("config/innocent", "innocent"))
        os.link("config/innocent", "config/again")
        attempt("move a link of it out", lambda: os.rename("config/again", "again"))
        attempt("move its folder", lambda: os.rename("config", "settings"))
        attempt("move out of a hidden folder", lambda: os.rename("private/key", "key"))
        attempt("make a protected name in another case", lambda: open("JENKINSFILE", "w"))
        open("plain.txt", "w").write("plain")
        attempt("remove a file spelt as a folder", lambda: os.remove("plain.txt/"))
        """,
        secret_files=(SecretFile(held), SecretFile(project / "private")),
    )

    assert said == [
        "move the renamed one out PermissionError",
        "move a link of it out PermissionError",
        "move its folder PermissionError",
        "move out of a hidden folder PermissionError",
        "make a protected name in another case PermissionError",
        "remove a file spelt as a folder NotADirectoryError",
    ]
    assert sorted(p.name for p in project.iterdir()) == [
        ".git",
        ".github",
        "config",
        "old.txt",
        "plain.txt",
        "private",
        "setup.cfg",
        "src",
        "src.cfg",
    ]
