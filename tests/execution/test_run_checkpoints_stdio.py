"""oct_run with writes=true: what the run changed is a checkpoint, and oct_undo takes it back over stdio."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from clients import Accept, oct_server, only_text, own_tools_path
from mcp import Client

from oct_mcp.execution.checkpoints import CheckpointStore

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

# python as the test's own environment has it (the project has none of its own).
_PATH = own_tools_path()

# In a folder of the project, then at its root (where landlock's supervisor makes the entries).
_SCRIPT = (
    "import os, pathlib\n"
    "os.chdir('src')\n"
    "pathlib.Path('app.py').write_text('changed = True\\n')\n"
    "pathlib.Path('made/new.txt').parent.mkdir()\n"
    "pathlib.Path('made/new.txt').write_text('new\\n')\n"
    "os.remove('old.txt')\n"
    "os.replace('keep.cfg', 'moved.cfg')\n"
    "os.chdir('..')\n"
    "pathlib.Path('NOTES.md').write_text('notes\\n')\n"
    "os.remove('gone.md')\n"
    "pathlib.Path('.root.cfg.tmp').write_text('[root, new]\\n')\n"
    "os.replace('.root.cfg.tmp', 'root.cfg')\n"
)


def _files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_writing_run_is_a_checkpoint_oct_undo_takes_back(tmp_path: Path, backend: str) -> None:
    project = tmp_path.resolve() / "demo"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("changed = False\n")
    (project / "src" / "old.txt").write_text("to be deleted\n")
    (project / "src" / "keep.cfg").write_text("[keep]\n")
    (project / "untouched.md").write_text("# stays\n")
    (project / "gone.md").write_text("# to be deleted\n")
    (project / "root.cfg").write_text("[root]\n")
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "sandbox_backend": backend,
                "checkpoint_dir": str(tmp_path / "store"),
                "rate_limit_per_minute": 1000,
            }
        )
    )
    start = _files(project)
    with anyio.fail_after(120):
        async with Client(
            oct_server(project, config, env={"PATH": _PATH}), elicitation_callback=Accept()
        ) as client:
            ran = await client.call_tool("oct_run", {"argv": ["python", "-c", _SCRIPT], "writes": True})
            changed = _files(project)
            listed = await client.call_tool("oct_checkpoints", {})
            undone = await client.call_tool("oct_undo", {"id": "1", "dry_run": False})
            again = await client.call_tool(
                "oct_run", {"argv": ["python", "-c", "print('reads only')"], "writes": True}
            )

    assert ran.is_error is False, only_text(ran)
    assert (ran.structured_content or {})["changed_files"] == [
        "NOTES.md",
        "gone.md",
        "root.cfg",
        "src/app.py",
        "src/keep.cfg",
        "src/made/new.txt",
        "src/moved.cfg",
        "src/old.txt",
    ]
    assert "checkpoint 1: oct_undo can put these files back" in only_text(ran)
    assert changed != start
    assert listed.structured_content is not None
    (entry,) = listed.structured_content["checkpoints"]
    assert entry["tool"] == "oct_run"
    assert undone.is_error is False, only_text(undone)
    assert _files(project) == start
    assert not (project / "src" / "made").exists() or list((project / "src" / "made").iterdir()) == []
    # A run that changes nothing leaves no checkpoint.
    assert again.is_error is False, only_text(again)
    assert "checkpoint" not in only_text(again)


# Changes a file and makes one, then writes an IDE's settings, which no tool may write.
_PROTECTED_TOO = (
    "import os, pathlib\n"
    "os.chdir('src')\n"
    "pathlib.Path('app.py').write_text('changed = True\\n')\n"
    "pathlib.Path('made.txt').write_text('new\\n')\n"
    "os.mkdir('.vscode')\n"
    "pathlib.Path('.vscode/settings.json').write_text('{}\\n')\n"
)


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_writing_run_refused_for_a_protected_path_leaves_its_other_changes_undoable(
    tmp_path: Path, backend: str
) -> None:
    project = tmp_path.resolve() / "demo"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("changed = False\n")
    (project / "untouched.md").write_text("# stays\n")
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "sandbox_backend": backend,
                "checkpoint_dir": str(tmp_path / "store"),
                "rate_limit_per_minute": 1000,
            }
        )
    )
    start = _files(project)
    with anyio.fail_after(120):
        async with Client(
            oct_server(project, config, env={"PATH": _PATH}), elicitation_callback=Accept()
        ) as client:
            ran = await client.call_tool(
                "oct_run", {"argv": ["python", "-c", _PROTECTED_TOO], "writes": True}
            )
            changed = _files(project)
            listed = await client.call_tool("oct_checkpoints", {})
            undone = await client.call_tool("oct_undo", {"id": "1", "dry_run": False})

    assert ran.is_error is True
    assert only_text(ran).startswith("[protected_path_created] ")
    assert only_text(ran).endswith(
        "its other changes were kept (checkpoint 1: oct_undo can put the files it changed back)"
    )
    assert changed == {**start, "src/app.py": b"changed = True\n", "src/made.txt": b"new\n"}
    assert listed.structured_content is not None
    (entry,) = listed.structured_content["checkpoints"]
    assert sorted(file["path"] for file in entry["files"]) == ["src/app.py", "src/made.txt"]
    assert undone.is_error is False, only_text(undone)
    assert _files(project) == start
    assert not (project / "src" / ".vscode").exists()


async def test_a_writing_run_stopped_at_its_time_limit_leaves_what_it_changed_undoable(
    tmp_path: Path,
) -> None:
    project = tmp_path.resolve() / "demo"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("changed = False\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"checkpoint_dir": str(tmp_path / "store"), "rate_limit_per_minute": 1000}))
    script = (
        "import pathlib, time\npathlib.Path('src/app.py').write_text('changed = True\\n')\ntime.sleep(60)\n"
    )
    start = _files(project)
    with anyio.fail_after(120):
        async with Client(
            oct_server(project, config, env={"PATH": _PATH}), elicitation_callback=Accept()
        ) as client:
            ran = await client.call_tool(
                "oct_run", {"argv": ["python", "-c", script], "writes": True, "timeout_seconds": 3}
            )
            changed = _files(project)
            undone = await client.call_tool("oct_undo", {"id": "1", "dry_run": False})

    assert ran.is_error is True
    assert only_text(ran).startswith("[timeout] ")
    assert only_text(ran).endswith("; checkpoint 1: oct_undo can put the files it changed back")
    assert changed == {"src/app.py": b"changed = True\n"}
    assert undone.is_error is False, only_text(undone)
    assert _files(project) == start


def test_the_baseline_reads_a_file_again_only_when_its_key_changed_and_keeps_what_it_was(
    tmp_path: Path,
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("first\n")
    (root / "b.txt").write_text("bee\n")
    store = CheckpointStore(tmp_path / "store")
    key = (1, 1, 6, 1)
    store.keep_baseline(root, {"a.txt": key, "b.txt": (2, 2, 4, 2)})
    # The same key: not read again, so the content kept is the first one even though the file changed.
    (root / "a.txt").write_text("second\n")
    store.keep_baseline(root, {"a.txt": key, "b.txt": (2, 2, 4, 2)})
    first = store.record_command(root, ["a.txt"], tool="oct_run", call_id="c1")
    # A new key: read again; what a file was before is what the baseline kept at the last look.
    store.keep_baseline(root, {"a.txt": (3, 3, 7, 1)})
    (root / "a.txt").write_text("third\n")
    second = store.record_command(root, ["a.txt", "b.txt"], tool="oct_run", call_id="c2")

    assert first is not None
    assert second is not None
    (entry,) = first.entries
    assert store.blob(entry.before.digest) == b"first\n"
    a, b = second.entries
    assert store.blob(a.before.digest) == b"second\n"
    # b.txt left the listing: it was not there before this run, as far as the baseline knows.
    assert b.before.kind == "absent"
    # The baseline keeps only what its files are now: first's content is the checkpoint's alone.
    kept = {path.name for path in (store.folder / "baseline").iterdir()}
    assert entry.before.digest.removeprefix("sha256:") not in kept
    assert store.record_command(root, [], tool="oct_run", call_id="c3") is None
    assert os.stat(store.folder / "baseline").st_mode & 0o077 == 0
