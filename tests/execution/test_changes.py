"""The one applier: every file-writing tool's changes pass the same checks, whatever the profile."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from changes import carried_out

from oct_mcp.app import CallFailure, build_app, run_call
from oct_mcp.errors import ExecutionError, PolicyError, TargetChangedError
from oct_mcp.execution.applier import ChangeApplier
from oct_mcp.execution.changes import ChangePlan, PathChange, Proposal, targets_of
from oct_mcp.preview import ABSENT, content_digest
from oct_mcp.testing import TEST_CLIENT
from oct_mcp.tools.edit.moves import DELETE, DeleteParams
from oct_mcp.tools.edit.write_file import WRITE_FILE, WriteFileParams
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.e2e

_WITH_POLICY = ["gateway", "validator", "policy", "safety", "sandbox"]
_WITHOUT_POLICY = ["gateway", "validator", "safety", "sandbox"]

# Each way a write tool could reach the server's audit log, its seal or its config when they lie
# inside the project: path arguments, paths inside a patch, both ends of a move, a folder's inside.
_FORGERIES: list[tuple[str, dict[str, Any]]] = [
    ("oct_write_file", {"path": "logs/audit.jsonl", "content": "forged\n"}),
    ("oct_write_file", {"path": "oct.json", "content": "{}\n"}),
    ("oct_edit", {"path": "logs/audit.jsonl", "edits": [{"old": "real", "new": "forged"}]}),
    (
        "oct_apply_patch",
        {"patch": "--- a/logs/audit.jsonl\n+++ b/logs/audit.jsonl\n@@ -1 +1 @@\n-real\n+forged\n"},
    ),
    ("oct_apply_patch", {"patch": "--- a/logs/audit.jsonl\n+++ /dev/null\n@@ -1 +0,0 @@\n-real\n"}),
    ("oct_apply_patch", {"patch": "--- /dev/null\n+++ b/logs/audit.jsonl.head\n@@ -0,0 +1 @@\n+forged\n"}),
    (
        "oct_apply_patch",
        {
            "patch": "diff --git a/logs/audit.jsonl b/kept.jsonl\nsimilarity index 100%\n"
            "rename from logs/audit.jsonl\nrename to kept.jsonl\n"
        },
    ),
    (
        "oct_apply_patch",
        {"patch": "--- a/linked/audit.jsonl\n+++ b/linked/audit.jsonl\n@@ -1 +1 @@\n-real\n+forged\n"},
    ),
    ("oct_move", {"source": "logs/audit.jsonl", "destination": "kept.jsonl"}),
    ("oct_move", {"source": "notes.txt", "destination": "logs/audit.jsonl", "overwrite": True}),
    ("oct_move", {"source": "logs", "destination": "old-logs"}),
    ("oct_delete", {"path": "logs/audit.jsonl"}),
    ("oct_delete", {"path": "logs", "recursive": True}),
]


def _files_of(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


@pytest.mark.parametrize("layers", [_WITH_POLICY, _WITHOUT_POLICY], ids=["with-policy", "without-policy"])
@pytest.mark.parametrize(
    ("tool", "arguments"), _FORGERIES, ids=[f"{t}-{i}" for i, (t, _a) in enumerate(_FORGERIES)]
)
def test_no_write_tool_changes_the_servers_own_files_inside_the_project(
    tmp_path: Path, layers: list[str], tool: str, arguments: dict[str, Any]
) -> None:
    project = (tmp_path / "project").resolve()
    (project / "logs").mkdir(parents=True)
    (project / "logs" / "audit.jsonl").write_text("real\n")
    (project / "notes.txt").write_text("notes\n")
    # A link inside the project to the log's folder: the patch names the log through it.
    (project / "linked").symlink_to("logs")
    config = project / "oct.json"
    config.write_text(
        json.dumps(
            {
                "audit_log_path": str(project / "logs" / "audit.jsonl"),
                "dry_run_default_for_writes": False,
                "profile": "bare",
                "profiles": {"bare": {"layers": layers}},
            }
        )
    )
    before = _files_of(project)
    app = build_app(project, config_path=config, environ={})

    outcome = anyio.run(run_call, app, tool, {**arguments, "confirm": True}, TEST_CLIENT)

    assert isinstance(outcome, CallFailure), outcome
    assert outcome.code == "policy"
    assert _files_of(project) == before


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    return Workspace(root)


def _plan(changes: tuple[PathChange, ...]) -> ChangePlan:
    def answer(applied: bool) -> ToolResult:
        return ToolResult(text="applied" if applied else "not applied")

    return ChangePlan(lambda: Proposal(changes=changes, files=(), diff="", answer=answer), dry_run=False)


def test_a_file_changed_after_the_tool_read_it_is_not_overwritten(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("read\n")
    read = content_digest(workspace, "a.txt")
    (workspace.root / "a.txt").write_text("changed since\n")
    change = PathChange(action="write", path="a.txt", read=read, data=b"new\n")

    with pytest.raises(TargetChangedError) as caught:
        ChangeApplier().carry_out(workspace, _plan((change,)), tool="t")

    assert caught.value.code == "target_changed"
    assert (workspace.root / "a.txt").read_text() == "changed since\n"


def test_a_file_that_appeared_where_the_tool_found_nothing_is_not_overwritten(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("appeared\n")
    change = PathChange(action="write", path="a.txt", read=ABSENT, data=b"new\n")

    with pytest.raises(TargetChangedError):
        ChangeApplier().carry_out(workspace, _plan((change,)), tool="t")

    assert (workspace.root / "a.txt").read_text() == "appeared\n"


def test_a_consent_covers_exactly_the_change_it_was_shown(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("a\n")
    (workspace.root / "b.txt").write_text("b\n")
    shown = (PathChange(action="write", path="a.txt", read=content_digest(workspace, "a.txt"), data=b"A\n"),)
    wider = (
        *shown,
        PathChange(action="write", path="b.txt", read=content_digest(workspace, "b.txt"), data=b"B\n"),
    )

    with pytest.raises(TargetChangedError):
        ChangeApplier().carry_out(workspace, _plan(wider), tool="t", approved=targets_of(shown))
    applied = ChangeApplier().carry_out(workspace, _plan(shown), tool="t", approved=targets_of(shown))

    assert applied.text == "applied"
    assert _files_of(workspace.root) == {"a.txt": b"A\n", "b.txt": b"b\n"}


def test_a_folder_that_gained_a_file_since_the_tool_walked_it_is_not_deleted(workspace: Workspace) -> None:
    (workspace.root / "build").mkdir()
    (workspace.root / "build" / "out.o").write_bytes(b"\x7fELF")
    plan = WRITE_FILE  # only to have a spec name in the failure message below
    proposal = DELETE.plan(DeleteParams(path="build", recursive=True), _env(workspace))
    assert isinstance(proposal, ChangePlan)
    proposed = proposal.propose()
    assert isinstance(proposed, Proposal)
    (workspace.root / "build" / "late.txt").write_text("written after the walk\n")

    with pytest.raises(TargetChangedError):
        ChangeApplier().carry_out(workspace, ChangePlan(lambda: proposed, dry_run=False), tool=plan.name)

    assert sorted(os.listdir(workspace.root / "build")) == ["late.txt", "out.o"]


def test_every_change_of_a_call_is_undone_when_a_later_one_fails(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace.root / "a.txt").write_text("a\n")
    (workspace.root / "gone.txt").write_text("gone\n")
    changes = (
        PathChange(action="write", path="a.txt", read=content_digest(workspace, "a.txt"), data=b"A\n"),
        PathChange(action="write", path="sub/new.txt", read=ABSENT, data=b"new\n"),
        PathChange(action="delete", path="gone.txt", read=content_digest(workspace, "gone.txt")),
        PathChange(action="write", path="last.txt", read=ABSENT, data=b"last\n"),
    )
    before = _files_of(workspace.root)
    real_replace, calls = os.replace, []

    def full_disk_on_the_third(*args: Any, **kwargs: Any) -> None:
        calls.append(args)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real_replace(*args, **kwargs)

    monkeypatch.setattr(os, "replace", full_disk_on_the_third)

    with pytest.raises(ExecutionError) as caught:
        ChangeApplier().carry_out(workspace, _plan(changes), tool="t")

    assert (
        caught.value.message == "the change could not be made (No space left on device); nothing was changed"
    )
    assert _files_of(workspace.root) == before
    assert sorted(os.listdir(workspace.root)) == ["a.txt", "gone.txt"]


def test_a_change_that_would_make_a_folder_a_git_directory_is_refused(workspace: Workspace) -> None:
    changes = tuple(
        PathChange(action="write", path=f"vendor/{name}", read=ABSENT, data=b"x\n")
        for name in ("HEAD", "objects/keep", "refs/keep")
    )

    with pytest.raises(PolicyError):
        ChangeApplier().carry_out(workspace, _plan(changes), tool="t")

    assert _files_of(workspace.root) == {}


def test_a_dry_run_applies_nothing_and_a_preview_carries_the_targets_of_the_changes(
    workspace: Workspace,
) -> None:
    params = WriteFileParams(path="src/new.py", content="x = 1\n")

    dry = carried_out(workspace, WRITE_FILE, params, dry_run=True)
    shown = carried_out(workspace, WRITE_FILE, params, preview=True)

    assert dry.structured is not None
    assert dry.structured["applied"] is False
    assert shown.preview is not None
    assert [(t.path, t.digest) for t in shown.preview.targets] == [("src/new.py", ABSENT)]
    assert _files_of(workspace.root) == {}


def _env(workspace: Workspace) -> Any:
    from oct_mcp.spec import ToolEnv

    return ToolEnv(workspace=workspace, max_output_bytes=1 << 20)
