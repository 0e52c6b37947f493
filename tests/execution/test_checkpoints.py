"""Checkpoints and undo through the chain: what a change leaves can be taken back, and nothing else is."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from oct_mcp.app import App, CallFailure, build_app, run_call
from oct_mcp.testing import TEST_CLIENT
from oct_mcp.types import ConsentRequest, ToolResult

pytestmark = pytest.mark.e2e


def _app(tmp_path: Path, **settings: Any) -> tuple[App, Path]:
    project = (tmp_path / "project").resolve()
    project.mkdir(exist_ok=True)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "audit_log_path": str(tmp_path / "audit.log"),
                "checkpoint_dir": str(tmp_path / "store"),
                "dry_run_default_for_writes": False,
                "rate_limit_per_minute": 1000,
                **settings,
            }
        )
    )
    return build_app(project, config_path=config, environ={}), project


def _call(app: App, tool: str, arguments: dict[str, Any]) -> ToolResult:
    outcome = anyio.run(run_call, app, tool, {**arguments, "confirm": True}, TEST_CLIENT)
    assert isinstance(outcome, ToolResult), outcome
    return outcome


def test_each_change_names_its_checkpoint_in_the_answer_and_the_audit_record(tmp_path: Path) -> None:
    app, project = _app(tmp_path)

    written = _call(app, "oct_write_file", {"path": "a.txt", "content": "one\n"})
    records = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]

    assert written.checkpoint == "1"
    assert "(checkpoint 1: oct_undo can take this change back)" in written.text
    assert [record.get("checkpoint") for record in records] == ["1"]
    assert (project / "a.txt").read_text() == "one\n"


def test_an_undo_after_an_outside_change_is_refused_naming_the_file_unless_told_to_overwrite(
    tmp_path: Path,
) -> None:
    app, project = _app(tmp_path)
    (project / "a.txt").write_text("before\n")
    _call(app, "oct_write_file", {"path": "a.txt", "content": "by the tool\n"})
    (project / "a.txt").write_text("by hand since\n")

    refused = _call(app, "oct_undo", {"id": "1"})
    kept = (project / "a.txt").read_text()
    forced = _call(app, "oct_undo", {"id": "1", "overwrite": True})

    assert refused.is_error is True
    assert "a.txt" in refused.text
    assert "overwrite=true" in refused.text
    assert kept == "by hand since\n"
    assert forced.is_error is False
    assert (project / "a.txt").read_text() == "before\n"


def test_an_undo_is_a_checkpoint_itself_so_it_can_be_undone(tmp_path: Path) -> None:
    app, project = _app(tmp_path)
    _call(app, "oct_write_file", {"path": "a.txt", "content": "made\n"})

    undone = _call(app, "oct_undo", {"id": "1"})
    gone = (project / "a.txt").exists()
    redone = _call(app, "oct_undo", {"id": undone.checkpoint or ""})

    assert gone is False
    assert redone.is_error is False
    assert (project / "a.txt").read_text() == "made\n"


def test_undoing_everything_after_a_checkpoint_goes_back_to_before_it(tmp_path: Path) -> None:
    app, project = _app(tmp_path)
    (project / "a.txt").write_text("0\n")
    for number in range(1, 4):
        _call(app, "oct_write_file", {"path": "a.txt", "content": f"{number}\n"})
    _call(app, "oct_write_file", {"path": "b.txt", "content": "b\n"})

    undone = _call(app, "oct_undo", {"id": "2", "and_later": True})

    assert undone.is_error is False
    assert (project / "a.txt").read_text() == "1\n"
    assert not (project / "b.txt").exists()


def test_an_undo_shows_its_diff_masked_and_asks_before_it_changes_anything(tmp_path: Path) -> None:
    app, project = _app(tmp_path, dry_run_default_for_writes=True)
    secret = "ghp_R8k2Qz7LmX4vT9bW1nYc5JdF3hS6pA0eUgKi"  # noqa: S105 - made up, for the redactor to mask
    (project / ".env.sample").write_text(f"TOKEN={secret}\n")
    _call(app, "oct_delete", {"path": ".env.sample", "dry_run": False})

    asked = anyio.run(run_call, app, "oct_undo", {"id": "1", "dry_run": False}, TEST_CLIENT)
    dry = _call(app, "oct_undo", {"id": "1", "dry_run": True})

    assert isinstance(asked, ConsentRequest)
    assert secret not in asked.message
    assert asked.preview is not None
    assert [(f.path, f.action) for f in asked.preview.files] == [(".env.sample", "create")]
    assert "[REDACTED:github_token]" in dry.text
    assert secret not in dry.text
    assert not (project / ".env.sample").exists()


def test_the_store_is_owner_only_and_outside_every_tools_reach(tmp_path: Path) -> None:
    app, _project = _app(tmp_path)
    _call(app, "oct_write_file", {"path": "a.txt", "content": "x\n"})
    store = tmp_path / "store"

    folders = {stat.S_IMODE(p.stat().st_mode) for p in [store, *store.rglob("*")] if p.is_dir()}
    files = {stat.S_IMODE(p.stat().st_mode) for p in store.rglob("*") if p.is_file()}

    assert folders == {0o700}
    assert files == {0o600}


def test_a_store_inside_the_project_is_protected_like_the_audit_log(tmp_path: Path) -> None:
    project = (tmp_path / "project").resolve()
    app, _project = _app(tmp_path, checkpoint_dir=str(project / ".undo-store"))
    _call(app, "oct_write_file", {"path": "a.txt", "content": "x\n"})
    (document,) = (project / ".undo-store").rglob("*.json")

    outcome = anyio.run(
        run_call,
        app,
        "oct_write_file",
        {"path": str(document.relative_to(project)), "content": "{}", "confirm": True},
        TEST_CLIENT,
    )

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "policy"


def test_a_file_over_the_size_limit_is_recorded_as_not_undoable(tmp_path: Path) -> None:
    app, project = _app(tmp_path, checkpoint_file_max_mb=0.01)
    (project / "big.txt").write_text("x" * 20_000 + "\n")
    _call(app, "oct_write_file", {"path": "big.txt", "content": "small\n"})

    listed = _call(app, "oct_checkpoints", {})
    refused = _call(app, "oct_undo", {"id": "1"})

    assert listed.structured is not None
    assert listed.structured["checkpoints"][0]["undoable"] is False
    assert refused.is_error is True
    assert "big.txt" in refused.text


def test_the_oldest_checkpoints_are_dropped_past_the_count(tmp_path: Path) -> None:
    app, _project = _app(tmp_path, checkpoint_max_count=3)
    for number in range(5):
        _call(app, "oct_write_file", {"path": "a.txt", "content": f"{number}\n"})

    listed = _call(app, "oct_checkpoints", {})

    assert listed.structured is not None
    assert [entry["id"] for entry in listed.structured["checkpoints"]] == ["5", "4", "3"]
    assert listed.structured["total"] == 3


def test_without_checkpoints_an_undo_says_why(tmp_path: Path) -> None:
    app, _project = _app(tmp_path, checkpoint_max_count=0)

    written = _call(app, "oct_write_file", {"path": "a.txt", "content": "x\n"})
    refused = _call(app, "oct_undo", {"id": "1"})

    assert written.checkpoint is None
    assert refused.is_error is True
    assert "checkpoint_max_count" in refused.text


@pytest.mark.parametrize("checkpoint_id", ["0x1", "-1", "123456789", "1; rm", ""])
def test_a_checkpoint_id_is_digits_only(tmp_path: Path, checkpoint_id: str) -> None:
    app, _project = _app(tmp_path)

    outcome = anyio.run(run_call, app, "oct_undo", {"id": checkpoint_id, "confirm": True}, TEST_CLIENT)

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "invalid_arguments"


def test_a_command_checkpoint_keeps_the_files_before_and_is_settled_or_dropped_after(tmp_path: Path) -> None:
    from oct_mcp.execution.checkpoints import PENDING_STATE, CheckpointStore, record_paths_before

    root = (tmp_path / "project").resolve()
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("before\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.txt").write_text("not the project's\n")
    (root / "linked").symlink_to(tmp_path / "elsewhere")
    store = CheckpointStore(tmp_path / "store")

    changed = record_paths_before(
        store, root, ["src/a.py", "linked/secret.txt"], tool="oct_git_switch", call_id="c1"
    )
    (root / "src" / "a.py").write_text("after\n")
    settled = store.settle(changed, root)
    untouched = record_paths_before(store, root, ["src/a.py"], tool="oct_git_restore", call_id="c2")
    dropped = store.settle(untouched, root)

    assert [e.after for e in changed.entries] == [PENDING_STATE, PENDING_STATE]
    # Never read through a linked folder: kept as not undoable.
    assert [e.before.kind for e in changed.entries] == ["file", "unrecorded"]
    assert store.blob(changed.entries[0].before.digest) == b"before\n"
    assert settled is not None
    assert settled.entries[0].after.kind == "file"
    assert store.get(changed.id) == settled
    assert dropped is None
    assert [c.id for c in store.list()] == [changed.id]
