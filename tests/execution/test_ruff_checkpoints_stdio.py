"""oct_format and oct_fix applying: a checkpoint of exactly the files ruff rewrites, undone over stdio."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from clients import Accept, oct_server, only_text, own_tools_path
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

_KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    + "\n".join(["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + "a" * 12] * 6)
    + "\n-----END PRIVATE KEY-----"
)


def _project(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "demo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "ugly.py").write_text("x=1\ny = [1,2 ,3]\n")
    (root / "pkg" / "unused.py").write_text("import os\nimport sys\n\nprint(sys.argv)\n")
    (root / "pkg" / "tidy.py").write_text("TIDY = 1\n")
    # A file that holds a secret: the server's ruff reads it as it is, and undo puts it back whole.
    (root / "settings.py").write_text(f'KEY = """{_KEY}"""\nx=1\n')
    return root


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_format_and_a_fix_record_what_ruff_rewrote_and_oct_undo_puts_it_back(
    tmp_path: Path, backend: str
) -> None:
    project = _project(tmp_path)
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
    start = {path: path.read_bytes() for path in project.rglob("*.py")}
    # ruff as the test's own environment has it: the server's ruff, not the project's.
    path = own_tools_path()
    with anyio.fail_after(180):
        async with Client(
            oct_server(project, config, env={"PATH": path}), elicitation_callback=Accept()
        ) as client:
            formatted = await client.call_tool("oct_format", {"apply": True})
            after_format = {path: path.read_bytes() for path in project.rglob("*.py")}
            fixed = await client.call_tool("oct_fix", {"dry_run": False, "select": ["F401"]})
            after_fix = (project / "pkg" / "unused.py").read_text()
            listed = await client.call_tool("oct_checkpoints", {})
            undone = [
                await client.call_tool("oct_undo", {"id": checkpoint, "dry_run": False})
                for checkpoint in ("2", "1")
            ]

    assert formatted.is_error is False, only_text(formatted)
    assert "(checkpoint 1: oct_undo can put these files back)" in only_text(formatted)
    assert after_format[project / "pkg" / "ugly.py"] == b"x = 1\ny = [1, 2, 3]\n"
    assert after_format[project / "settings.py"].endswith(b'"""\nx = 1\n')
    assert fixed.is_error is False, only_text(fixed)
    assert "(checkpoint 2: oct_undo can put these files back)" in only_text(fixed)
    assert "import os" not in after_fix
    assert listed.structured_content is not None
    entries = {entry["id"]: entry for entry in listed.structured_content["checkpoints"]}
    # Exactly the files ruff rewrote: not the tidy one, nor those it found nothing to do in.
    assert (entries["1"]["tool"], sorted(file["path"] for file in entries["1"]["files"])) == (
        "oct_format",
        ["pkg/ugly.py", "settings.py"],
    )
    assert (entries["2"]["tool"], [file["path"] for file in entries["2"]["files"]]) == (
        "oct_fix",
        ["pkg/unused.py"],
    )
    assert [result.is_error for result in undone] == [False, False], [only_text(result) for result in undone]
    assert {path: path.read_bytes() for path in project.rglob("*.py")} == start
    assert all(
        _KEY.splitlines()[1] not in only_text(result) for result in (formatted, fixed, listed, *undone)
    )


async def test_a_format_with_nothing_to_change_records_no_checkpoint(tmp_path: Path) -> None:
    project = tmp_path.resolve() / "tidy"
    project.mkdir()
    (project / "tidy.py").write_text("TIDY = 1\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"checkpoint_dir": str(tmp_path / "store"), "rate_limit_per_minute": 1000}))
    path = own_tools_path()
    with anyio.fail_after(120):
        async with Client(
            oct_server(project, config, env={"PATH": path}), elicitation_callback=Accept()
        ) as client:
            formatted = await client.call_tool("oct_format", {"apply": True})
            listed = await client.call_tool("oct_checkpoints", {})

    assert formatted.is_error is False, only_text(formatted)
    assert "checkpoint" not in only_text(formatted)
    assert (formatted.structured_content or {})["changed_files"] == []
    assert (listed.structured_content or {})["checkpoints"] == []


# A project's own ruff is project code. This one, asked for a diff (the question's, then the one that
# names the files to change), first tries to change the file it names and to plant one of its own;
# asked to format the file the diff named, it formats it, and also changes a file the diff did not
# name, plants one and deletes one.
_HOSTILE_RUFF = """#!/bin/sh
case " $* " in
  *" --diff "*)
    printf 'x=2\\n' > pkg/ugly.py 2>/dev/null
    printf 'planted\\n' > planted-early.txt 2>/dev/null
    printf -- '--- pkg/ugly.py\\n+++ pkg/ugly.py\\n@@ -1,2 +1,2 @@\\n-x=1\\n+x = 1\\n y = [1,2 ,3]\\n'
    exit 1 ;;
esac
printf 'x = 1\\ny = [1, 2, 3]\\n' > pkg/ugly.py
printf 'TIDY = 2\\n' > pkg/tidy.py
printf 'planted\\n' > pkg/planted.txt
rm pkg/unused.py
"""


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_hostile_project_ruff_writes_nothing_before_the_checkpoint_and_its_format_is_undone(
    tmp_path: Path, backend: str
) -> None:
    project = _project(tmp_path)
    ruff = project / ".venv" / "bin" / "ruff"
    ruff.parent.mkdir(parents=True)
    ruff.write_text(_HOSTILE_RUFF)
    ruff.chmod(0o755)
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
    start = {path: path.read_bytes() for path in project.rglob("*") if path.is_file()}
    human = Accept()
    with anyio.fail_after(180):
        async with Client(oct_server(project, config), elicitation_callback=human) as client:
            formatted = await client.call_tool("oct_format", {"apply": True, "paths": ["pkg/ugly.py"]})
            after_format = {path: path.read_bytes() for path in project.rglob("*") if path.is_file()}
            undone = await client.call_tool("oct_undo", {"id": "1", "dry_run": False})

    assert formatted.is_error is False, only_text(formatted)
    assert human.asked >= 1
    # The question's diff and the diff that named the files ran read-only: nothing was planted, and
    # the file was checkpointed as it was, then formatted by the run the human approved.
    assert project / "planted-early.txt" not in after_format
    assert after_format[project / "pkg" / "ugly.py"] == b"x = 1\ny = [1, 2, 3]\n"
    assert "(checkpoint 1: oct_undo can put these files back)" in only_text(formatted)
    # What the approved run did beyond the diff it was shown is listed, and undone with the rest.
    assert after_format[project / "pkg" / "planted.txt"] == b"planted\n"
    assert project / "pkg" / "unused.py" not in after_format
    changed = ["pkg/planted.txt", "pkg/tidy.py", "pkg/ugly.py", "pkg/unused.py"]
    assert (formatted.structured_content or {})["changed_files"] == changed
    assert f"changed 4 file(s):\n{chr(10).join(changed)}\n" in only_text(formatted)
    assert undone.is_error is False, only_text(undone)
    assert {path: path.read_bytes() for path in project.rglob("*") if path.is_file()} == start
