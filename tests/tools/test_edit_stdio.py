"""oct_edit and forgiving patches end to end: a real SDK client over stdio, a human who accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import Accept, oct_server, only_text
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CORE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "demo"
    root.mkdir()
    (root / "core.py").write_text(CORE)
    (root / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    return root


def _edit(path: str, *edits: dict[str, Any]) -> dict[str, Any]:
    return {"path": path, "edits": list(edits), "dry_run": False}


async def test_oct_edit_over_stdio(project: Path, config_file: Path) -> None:
    results: dict[str, types.CallToolResult] = {}
    disk: dict[str, str] = {}
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), elicitation_callback=Accept()) as client:
            call = client.call_tool
            results["single"] = await call("oct_edit", _edit("core.py", {"old": "a + b", "new": "b + a"}))
            results["several"] = await call(
                "oct_edit",
                _edit(
                    "core.py", {"old": "def add", "new": "def plus"}, {"old": "def sub", "new": "def minus"}
                ),
            )
            disk["after several"] = (project / "core.py").read_text()
            results["all"] = await call(
                "oct_edit", _edit("core.py", {"old": "(a, b)", "new": "(x, y)", "replace_all": True})
            )
            results["count"] = await call(
                "oct_edit", _edit("core.py", {"old": "return", "new": "yield", "expected_count": 3})
            )
            results["missing"] = await call(
                "oct_edit", _edit("core.py", {"old": "    return a * b", "new": ""})
            )
            results["blanks"] = await call(
                "oct_edit", _edit("core.py", {"old": "def minus(x, y):\n  return a - b", "new": ""})
            )
            results["crlf"] = await call(
                "oct_edit", _edit("win.txt", {"old": "two\nthree\n", "new": "2\n3\n"})
            )
            results["protected"] = await call(
                "oct_edit", _edit(".github/workflows/ci.yml", {"old": "push", "new": "pull_request"})
            )
            disk["before the half"] = (project / "core.py").read_text()
            results["half"] = await call(
                "oct_edit",
                _edit("core.py", {"old": "def plus", "new": "def add"}, {"old": "nowhere", "new": "x"}),
            )

    for name in ("single", "several", "all", "crlf"):
        assert results[name].is_error is False, (name, only_text(results[name]))
    assert disk["after several"] == CORE.replace("a + b", "b + a").replace("add", "plus").replace(
        "sub", "minus"
    )
    structured = results["all"].structured_content
    assert structured is not None
    assert structured["replacements"] == [2]
    assert "is in the file 2 time(s), not the expected_count of 3" in only_text(results["count"])
    assert results["missing"].is_error is True
    assert "The nearest candidates start at lines 6, 2." in only_text(results["missing"])
    assert "    return a {-*-}{+-+} b" in only_text(results["missing"])
    assert "Only whitespace differs" in only_text(results["blanks"])
    assert (project / "win.txt").read_bytes() == b"one\r\n2\r\n3\r\n"
    assert results["protected"].is_error is True
    assert only_text(results["protected"]).startswith("[policy] ")
    assert (project / ".github" / "workflows" / "ci.yml").read_text() == "on: push\n"
    assert results["half"].is_error is True
    assert only_text(results["half"]).startswith("the edit does not apply; nothing was changed.\nedit 2 of 2")
    assert (project / "core.py").read_text() == disk["before the half"]


async def test_patches_as_models_write_them_over_stdio(project: Path, config_file: Path) -> None:
    core = "--- a/core.py\n+++ b/core.py\n"
    patches = {
        "counts one short": f"{core}@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n"
        "+    total = a + b\n+    return total\n",
        "bare": f"{core}@@\n def sub(a, b):\n-    return a - b\n+    return -(b - a)\n",
        "no prefixes": "--- win.txt\n+++ win.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n",
        "crlf": "--- a/core.py\r\n+++ b/core.py\r\n@@ -1 +1 @@\r\n-def add(a, b):\r\n+def plus(a, b):\r\n",
        "context differs": f"{core}@@ -5,2 +5,2 @@\n def sub(a, b):\n-  return -(b - a)\n+  pass\n",
    }
    results: dict[str, types.CallToolResult] = {}
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), elicitation_callback=Accept()) as client:
            for name, text in patches.items():
                results[name] = await client.call_tool("oct_apply_patch", {"patch": text, "dry_run": False})

    for name in ("counts one short", "bare", "no prefixes", "crlf"):
        assert results[name].is_error is False, (name, only_text(results[name]))
    assert (project / "core.py").read_text() == (
        "def plus(a, b):\n    total = a + b\n    return total\n\n\ndef sub(a, b):\n    return -(b - a)\n"
    )
    assert (project / "win.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"
    refused = only_text(results["context differs"])
    assert results["context differs"].is_error is True
    assert refused.endswith(
        "Its nearest place is at line 6 (2 of its 2 lines are alike there); its line 2 "
        "('  return -(b - a)') differs from the file's line 7, which reads '    return -(b - a)'. Only "
        "whitespace differs: copy the line exactly, indentation included."
    )


async def test_move_and_delete_over_stdio_with_their_refusals(project: Path, config_file: Path) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "a.md").write_text("# a\n")
    (project / "linked").symlink_to(project / "docs")
    (project / "old.txt").write_text("old\n")
    calls: dict[str, tuple[str, dict[str, Any]]] = {
        "move": ("oct_move", {"source": "docs", "destination": "guide"}),
        "overwrite refused": ("oct_move", {"source": "core.py", "destination": "old.txt"}),
        "overwrite": ("oct_move", {"source": "win.txt", "destination": "old.txt", "overwrite": True}),
        "outside": ("oct_move", {"source": "core.py", "destination": "../core.py"}),
        "protected": ("oct_move", {"source": "core.py", "destination": ".github/workflows/x.yml"}),
        "through a link": ("oct_move", {"source": "linked/a.md", "destination": "a.md"}),
        "delete": ("oct_delete", {"path": "old.txt"}),
        "folder not recursive": ("oct_delete", {"path": "guide"}),
        "delete protected": ("oct_delete", {"path": ".github", "recursive": True}),
        "delete a link": ("oct_delete", {"path": "linked"}),
        "delete outside": ("oct_delete", {"path": "../demo"}),
        "folder recursive": ("oct_delete", {"path": "guide", "recursive": True}),
    }
    results: dict[str, types.CallToolResult] = {}
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), elicitation_callback=Accept()) as client:
            for name, (tool, arguments) in calls.items():
                results[name] = await client.call_tool(tool, {**arguments, "dry_run": False})

    for name in ("move", "overwrite", "delete", "folder recursive"):
        assert results[name].is_error is False, (name, only_text(results[name]))
    codes = {
        name: only_text(result).split("]", 1)[0] + "]"
        for name, result in results.items()
        if result.is_error and only_text(result).startswith("[")
    }
    assert codes == {
        "outside": "[path_refused]",
        "protected": "[policy]",
        "through a link": "[path_refused]",
        "delete protected": "[policy]",
        "delete a link": "[path_refused]",
        "delete outside": "[path_refused]",
    }
    assert "set overwrite=true" in only_text(results["overwrite refused"])
    assert "set recursive=true" in only_text(results["folder not recursive"])
    assert not (project / "guide").exists()
    assert not (project / "old.txt").exists()
    assert (project / "core.py").read_text() == CORE
    assert (project / ".github" / "workflows" / "ci.yml").read_text() == "on: push\n"
    assert (project / "linked").is_symlink()


_SECRET = "django-insecure-9f8d7s6a5d4f3g2h1j0k9l8m7n6b5v4c3x2z1"  # noqa: S105 - a test secret
_AWS = "AKIAIOSFODNN7EXAMPLE"
_PASSWORD = "s3cr3tPassw0rd"  # noqa: S105 - a test secret
_SETTINGS = (
    f'SECRET_KEY = "{_SECRET}"\nAWS_ACCESS_KEY_ID = "{_AWS}"\n'
    f'DATABASE_URL = "postgres://admin:{_PASSWORD}@db.example.com:5432/app"\nDEBUG = True\n'
)


async def test_secrets_survive_edits_made_from_what_the_model_read(project: Path, config_file: Path) -> None:
    settings = project / "settings.py"
    settings.write_text(_SETTINGS)
    results: dict[str, types.CallToolResult] = {}
    disk: dict[str, str] = {}
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), elicitation_callback=Accept()) as client:
            read = await client.call_tool("oct_read_file", {"path": "settings.py"})
            seen = only_text(read)
            results["other line"] = await client.call_tool(
                "oct_edit", _edit("settings.py", {"old": "DEBUG = True", "new": "DEBUG = False"})
            )
            disk["other line"] = settings.read_text()
            masked_line = seen.splitlines()[0]
            results["masked old"] = await client.call_tool(
                "oct_edit", _edit("settings.py", {"old": masked_line, "new": f"{masked_line}  # rotate"})
            )
            disk["masked old"] = settings.read_text()
            results["write back"] = await client.call_tool(
                "oct_write_file",
                {
                    "path": "settings.py",
                    "content": seen.replace("DEBUG = True", "DEBUG = 1"),
                    "dry_run": False,
                },
            )
            disk["write back"] = settings.read_text()
            moved = "\n".join(seen.splitlines()[::-1]) + "\n"
            results["moved"] = await client.call_tool(
                "oct_write_file", {"path": "settings.py", "content": moved, "dry_run": False}
            )
            disk["moved"] = settings.read_text()

    assert '"[REDACTED:django_secret_key]"' in seen
    assert _SECRET not in seen
    for name in ("other line", "masked old", "write back"):
        assert results[name].is_error is False, (name, only_text(results[name]))
        for secret in (_SECRET, _AWS, _PASSWORD):
            assert secret in disk[name], name
            assert secret not in only_text(results[name])
    assert disk["masked old"] == _SETTINGS.replace(f'"{_SECRET}"', f'"{_SECRET}"  # rotate').replace(
        "DEBUG = True", "DEBUG = False"
    )
    assert disk["write back"] == _SETTINGS.replace("DEBUG = True", "DEBUG = 1")
    assert results["moved"].is_error is True
    assert "has a mask ([REDACTED:...]) where the file has no masked value" in only_text(results["moved"])
    assert disk["moved"] == disk["write back"]


async def test_a_change_that_cannot_happen_is_refused_before_anyone_is_asked(
    project: Path, config_file: Path
) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "a.md").write_text("# a\n")
    calls: dict[str, tuple[str, dict[str, Any]]] = {
        "patch": ("oct_apply_patch", {"patch": "--- a/core.py\n+++ b/core.py\n@@ -1 +1 @@\n-nothing\n+x\n"}),
        "patch to .git": (
            "oct_apply_patch",
            {"patch": "--- /dev/null\n+++ b/.git/hooks/pre-push\n@@ -0,0 +1 @@\n+x\n"},
        ),
        "edit": ("oct_edit", {"path": "core.py", "edits": [{"old": "nowhere", "new": "x"}]}),
        "move": ("oct_move", {"source": "core.py", "destination": "win.txt"}),
        "delete": ("oct_delete", {"path": "docs"}),
        "write a mask": ("oct_write_file", {"path": "new.py", "content": 'KEY = "[REDACTED:secret]"\n'}),
    }
    human = Accept()
    results: dict[str, types.CallToolResult] = {}
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), elicitation_callback=human) as client:
            for name, (tool, arguments) in calls.items():
                results[name] = await client.call_tool(tool, {**arguments, "dry_run": False})
            refused = human.asked
            good = await client.call_tool("oct_edit", _edit("core.py", {"old": "a + b", "new": "b + a"}))

    assert {name: result.is_error for name, result in results.items()} == dict.fromkeys(calls, True)
    assert only_text(results["patch to .git"]).startswith("[policy] ")
    assert refused == 0
    assert good.is_error is False, only_text(good)
    assert human.asked == 1
    assert (project / "core.py").read_text() == CORE.replace("a + b", "b + a")
    assert (project / "docs" / "a.md").exists()
    assert not (project / "new.py").exists()
