"""Human consent through real SDK clients over stdio, in both protocol eras, with and without elicitation."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import only_text
from git_repos import git, new_repo
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from oct_mcp.app import CallFailure, build_app, run_call
from oct_mcp.consent import UsedConsents
from oct_mcp.middleware.safety import CONFIRMATION_PREFIX
from oct_mcp.profiles import shipped_profile
from oct_mcp.testing import TEST_CLIENT
from oct_mcp.tools import default_catalog
from oct_mcp.types import ConsentRequest, ToolResult

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

WRITE_SERVER = Path(__file__).parents[1] / "servers" / "write_server.py"
ERAS = [pytest.param("auto", id="2026-07-28"), pytest.param("legacy", id="handshake")]
WRITE = {"path": "notes.txt", "content": "hello\n", "dry_run": False}

ElicitationCallback = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


def _server(project: Path, config_file: Path, profile: str | None = None) -> StdioServerParameters:
    args = [str(WRITE_SERVER), "--project-root", str(project), "--config", str(config_file)]
    return StdioServerParameters(
        command=sys.executable, args=[*args, *(["--profile", profile] if profile else [])]
    )


class Human:
    """Answers each consent form as told, and remembers what it was shown."""

    def __init__(self, approve: bool, action: str = "accept") -> None:
        self.approve = approve
        self.action = action
        self.shown: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.shown.append(params.message)
        content = {"approve": self.approve} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


async def _call(
    project: Path,
    config_file: Path,
    mode: Any,
    arguments: dict[str, Any],
    human: Human | None = None,
    profile: str | None = None,
) -> types.CallToolResult:
    with anyio.fail_after(60):
        async with Client(
            _server(project, config_file, profile), mode=mode, elicitation_callback=human
        ) as client:
            return await client.call_tool("test_write_file", arguments)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_human_who_accepts_lets_the_write_run(project: Path, config_file: Path, mode: Any) -> None:
    human = Human(approve=True)

    result = await _call(project, config_file, mode, WRITE, human)

    assert (result.is_error, only_text(result)) == (False, "wrote notes.txt")
    assert (project / "notes.txt").read_text() == "hello\n"
    (shown,) = human.shown
    assert shown.startswith("test_write_file (Write a file (tests only)) asks to change files")
    assert "notes.txt" in shown
    assert "confirm=true" not in shown


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize(("approve", "action"), [(False, "accept"), (True, "decline"), (True, "cancel")])
async def test_a_human_who_declines_or_cancels_stops_the_write(
    project: Path, config_file: Path, mode: Any, approve: bool, action: str
) -> None:
    result = await _call(project, config_file, mode, WRITE, Human(approve=approve, action=action))

    assert result.is_error is True
    assert only_text(result) == "[declined] the user declined test_write_file; nothing ran."
    assert not (project / "notes.txt").exists()


@pytest.mark.parametrize("mode", ERAS)
async def test_the_model_cannot_confirm_for_a_client_that_can_ask_a_human(
    project: Path, config_file: Path, mode: Any
) -> None:
    human = Human(approve=False)

    result = await _call(project, config_file, mode, {**WRITE, "confirm": True}, human)

    assert len(human.shown) == 1
    assert result.is_error is True
    assert not (project / "notes.txt").exists()


@pytest.mark.parametrize("mode", ERAS)
async def test_without_elicitation_the_seed_sentinel_then_confirm_true_runs(
    project: Path, config_file: Path, mode: Any
) -> None:
    with anyio.fail_after(60):
        async with Client(_server(project, config_file), mode=mode) as client:
            first = await client.call_tool("test_write_file", WRITE)
            written_after_first = (project / "notes.txt").exists()
            second = await client.call_tool("test_write_file", {**WRITE, "confirm": True})

    assert first.is_error is True
    assert only_text(first).startswith(CONFIRMATION_PREFIX)
    assert "re-submit the identical call with confirm=true" in only_text(first)
    assert written_after_first is False
    assert (second.is_error, only_text(second)) == (False, "wrote notes.txt")
    assert (project / "notes.txt").read_text() == "hello\n"


async def test_a_retry_with_changed_arguments_after_consent_does_not_run(
    project: Path, config_file: Path
) -> None:
    accept = types.ElicitResult(action="accept", content={"approve": True})
    with anyio.fail_after(60):
        # The callback declares elicitation; the rounds are driven by hand, so it is never called.
        async with Client(_server(project, config_file), elicitation_callback=Human(approve=True)) as client:
            await client.list_tools()
            first = await client.session.call_tool("test_write_file", WRITE, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            (key,) = first.input_requests or {}
            changed = {**WRITE, "path": "other.txt"}
            try:
                retried: Any = await client.session.call_tool(
                    "test_write_file",
                    changed,
                    input_responses={key: accept},
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            except MCPError as refused:
                retried = refused

    assert not isinstance(retried, types.CallToolResult) or retried.is_error is not False
    assert not (project / "other.txt").exists()
    assert not (project / "notes.txt").exists()


async def test_a_consent_state_the_sdk_refuses_is_audited_and_nothing_runs(
    project: Path, tmp_path: Path
) -> None:
    # The SDK checks the sealed state before the chain: without this record a probe of the seal
    # (a forged state, a state bound to other arguments) would leave no trace in the audit log.
    audit_log = tmp_path / "audit.jsonl"
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"audit_log_path": str(audit_log)}))
    accept = types.ElicitResult(action="accept", content={"approve": True})
    refused: list[MCPError] = []
    with anyio.fail_after(60):
        async with Client(_server(project, config_file), elicitation_callback=Human(approve=True)) as client:
            await client.list_tools()
            first = await client.session.call_tool("test_write_file", WRITE, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            (key,) = first.input_requests or {}
            assert first.request_state is not None
            for arguments, state in (
                ({**WRITE, "path": "other.txt"}, first.request_state),
                (WRITE, first.request_state[:-8] + "AAAAAAAA"),
            ):
                try:
                    await client.session.call_tool(
                        "test_write_file",
                        arguments,
                        input_responses={key: accept},
                        request_state=state,
                        allow_input_required=True,
                    )
                except MCPError as exc:
                    refused.append(exc)

    records = [json.loads(line) for line in audit_log.read_text().splitlines()]
    rejected = [r for r in records if r.get("code") == "consent_state_refused"]
    assert len(refused) == 2
    assert [(r["tool"], r["outcome"]) for r in rejected] == [("test_write_file", "refused")] * 2
    assert all(r["client"]["transport"] == "stdio" for r in rejected)
    assert not (project / "other.txt").exists()
    assert not (project / "notes.txt").exists()


async def test_a_sealed_consent_replayed_a_second_time_is_refused(project: Path, config_file: Path) -> None:
    accept = types.ElicitResult(action="accept", content={"approve": True})
    with anyio.fail_after(60):
        async with Client(_server(project, config_file), elicitation_callback=Human(approve=True)) as client:
            await client.list_tools()
            first = await client.session.call_tool("test_write_file", WRITE, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            (key,) = first.input_requests or {}
            answered = await client.session.call_tool(
                "test_write_file",
                WRITE,
                input_responses={key: accept},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(answered, types.CallToolResult)
            assert answered.is_error is False
            (project / "notes.txt").unlink()
            replayed = await client.session.call_tool(
                "test_write_file",
                WRITE,
                input_responses={key: accept},
                request_state=first.request_state,
                allow_input_required=True,
            )

    assert isinstance(replayed, types.CallToolResult)
    assert replayed.is_error is True
    assert only_text(replayed).startswith("[consent_replayed]")
    assert not (project / "notes.txt").exists()


async def test_the_dry_run_default_holds_after_consent(project: Path, config_file: Path) -> None:
    arguments = {"path": "notes.txt", "content": "hello\n"}

    result = await _call(project, config_file, "auto", arguments, Human(approve=True))

    assert (result.is_error, only_text(result)) == (False, "would write notes.txt")
    assert not (project / "notes.txt").exists()


@pytest.mark.parametrize("mode", ERAS)
async def test_strict_refuses_a_write_where_the_client_cannot_ask_a_human(
    project: Path, config_file: Path, mode: Any
) -> None:
    result = await _call(project, config_file, mode, {**WRITE, "confirm": True}, profile="strict")

    assert result.is_error is True
    assert only_text(result).startswith("[consent_unavailable] ")
    assert "elicitation" in only_text(result)
    assert not (project / "notes.txt").exists()


@pytest.mark.parametrize("mode", ERAS)
async def test_strict_runs_a_write_on_a_human_answer(project: Path, config_file: Path, mode: Any) -> None:
    result = await _call(project, config_file, mode, WRITE, Human(approve=True), profile="strict")

    assert (result.is_error, only_text(result)) == (False, "wrote notes.txt")


async def test_a_read_tool_needs_no_consent_by_default(project: Path, config_file: Path) -> None:
    human = Human(approve=False)
    with anyio.fail_after(60):
        async with Client(_server(project, config_file), elicitation_callback=human) as client:
            result = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert result.is_error is False
    assert human.shown == []


async def test_a_policy_refusal_comes_before_any_question(project: Path, config_file: Path) -> None:
    human = Human(approve=True)

    result = await _call(project, config_file, "auto", {**WRITE, "path": ".git/config"}, human)

    assert only_text(result).startswith("[policy] ")
    assert human.shown == []


def test_used_consents_accepts_a_nonce_once_and_never_an_expired_one() -> None:
    now = [1_000.0]
    used = UsedConsents(capacity=2, clock=lambda: now[0])

    assert used.claim("a", 1_600.0) is True
    assert used.claim("a", 1_600.0) is False
    assert used.claim("late", 999.0) is False


def test_used_consents_full_of_live_nonces_refuses_rather_than_forgets() -> None:
    now = [1_000.0]
    used = UsedConsents(capacity=2, clock=lambda: now[0])
    used.claim("a", 1_100.0)
    used.claim("b", 1_600.0)

    assert used.claim("c", 1_600.0) is False
    now[0] = 1_200.0  # "a" has expired: its place is free again, and "b" is still remembered
    assert used.claim("c", 1_600.0) is True
    assert used.claim("b", 1_600.0) is False


# -- confirm=true for every tool of the catalog ------------------------------------------------------

# A call each tool accepts, in the project of `consent_project`, whose preview (where it has one) works.
MINIMAL_ARGUMENTS: dict[str, dict[str, Any]] = {
    "oct_read_file": {"path": "README.md"},
    "oct_read_files": {"paths": ["README.md"]},
    "oct_list_files": {},
    "oct_search": {"pattern": "Demo"},
    "oct_list_tasks": {},
    "oct_git_status": {},
    "oct_git_diff": {},
    "oct_git_log": {},
    "oct_git_show": {},
    "oct_git_blame": {"path": "README.md"},
    "oct_git_add": {"paths": ["new.txt"]},
    "oct_git_commit": {"message": "Add the staged file"},
    "oct_git_branch": {"name": "feature"},
    "oct_git_switch": {"branch": "other"},
    "oct_git_restore": {"paths": ["README.md"]},
    "oct_lint": {},
    "oct_test": {},
    "oct_typecheck": {},
    "oct_format": {"apply": False},
    "oct_fix": {"dry_run": True},
    "oct_run": {"argv": ["python", "-V"]},
    "oct_edit": {"path": "README.md", "edits": [{"old": "Demo", "new": "Shown"}]},
    "oct_write_file": {"path": "written.txt", "content": "hello\n"},
    "oct_apply_patch": {"patch": "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# Demo\n+# Shown\n"},
    "oct_move": {"source": "README.md", "destination": "READ.md"},
    "oct_delete": {"path": "new.txt"},
    "oct_checkpoints": {},
    # Checkpoint 1 is the write the test makes first for this tool (below).
    "oct_undo": {"id": "1"},
    "oct_grants": {},
}


def test_every_catalog_tool_has_minimal_arguments_its_model_accepts() -> None:
    catalog = default_catalog()

    assert set(MINIMAL_ARGUMENTS) == set(catalog)
    for name, arguments in MINIMAL_ARGUMENTS.items():
        catalog[name].params.model_validate(arguments)


@pytest.fixture
def consent_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with a commit, a branch, a changed, a staged and an untracked file, the project's
    own ruff, pytest and mypy, and a user whose identity a commit takes."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.invalid\n")
    monkeypatch.setenv("HOME", str(home))
    root = new_repo(tmp_path)
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "core.py").write_text("x=1\n")
    (root / "README.md").write_text("# Demo\n")
    (root / ".gitignore").write_text(".venv/\n")
    (root / ".venv" / "bin").mkdir(parents=True)
    for program in ("ruff", "pytest", "mypy"):
        (root / ".venv" / "bin" / program).symlink_to(Path(sys.executable).parent / program)
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    git(root, "branch", "other")
    (root / "README.md").write_text("# Demo\nchanged\n")
    (root / "staged.txt").write_text("staged\n")
    git(root, "add", "staged.txt")
    (root / "new.txt").write_text("new\n")
    return root


@pytest.mark.parametrize("tool", list(default_catalog()))
async def test_a_client_without_elicitation_is_asked_then_confirms_any_tool_with_confirm_true(
    consent_project: Path, tmp_path: Path, tool: str
) -> None:
    config_file = tmp_path / "config.json"
    safety = {"confirm_execute": True}
    profile = {"layers": list(shipped_profile("default").layers), "settings": {"safety": safety}}
    config_file.write_text(
        json.dumps(
            {
                "auto_approve_read_tools": False,
                # Where no backend confines project code, the runs go on under the native one.
                "allow_unconfined_project_code": True,
                "audit_log_path": str(tmp_path / "audit.log"),
                "profile": "everything_asks",
                "profiles": {"everything_asks": profile},
            }
        )
    )
    app = build_app(consent_project, config_path=config_file, environ={})
    # A dry run is never asked about: a write is asked about as the call that makes its change.
    fields = default_catalog()[tool].params.model_fields
    changing = {"dry_run": False} if "dry_run" in fields else {"apply": True} if "apply" in fields else {}
    arguments = {**MINIMAL_ARGUMENTS[tool], **changing}

    try:
        with anyio.fail_after(120):
            if tool == "oct_undo":
                write = {"path": "undone.txt", "content": "x\n", "dry_run": False, "confirm": True}
                made = await run_call(app, "oct_write_file", write, TEST_CLIENT)
                assert isinstance(made, ToolResult), made
                assert made.checkpoint == "1", made.text
            asked = await run_call(app, tool, arguments, TEST_CLIENT)
            confirmed = await run_call(app, tool, {**arguments, "confirm": True}, TEST_CLIENT)
    finally:
        app.close()

    assert isinstance(asked, ConsentRequest)
    if isinstance(confirmed, CallFailure):
        # The tool's own reason (a program missing here), never the argument the question asked for.
        assert confirmed.code != "invalid_arguments"
    else:
        assert isinstance(confirmed, ToolResult)
        assert confirmed.consent is not None
        assert confirmed.consent.given_by == "confirm"
