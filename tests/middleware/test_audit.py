"""AuditLogger: one record per call whatever became of it, errors re-raised as they were, no secrets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes import TEST_CLIENT, RecordingNext, catalog_with_write_tool, make_context

from oct_mcp.app import CallFailure, build_app, run_call
from oct_mcp.audit import AuditSink, AuditWriter, iter_records, verify_chain
from oct_mcp.consent import Consent, ConsentFacts, argument_digest
from oct_mcp.errors import INTERNAL_ERROR_CODE, INTERNAL_ERROR_MESSAGE, PolicyError, ToolTimeoutError
from oct_mcp.middleware.audit import AuditLogger
from oct_mcp.types import CallContext, ClientInfo, ConsentRequest, Outcome, ToolResult

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

GITHUB_TOKEN = "ghp_R8xq2LmZ7vTn4KpW9sYb3HcJ6dFg1Ae5QuNo"  # noqa: S105 - a made-up token in the real format


def _audit(path: Path) -> AuditLogger:
    return AuditLogger(sink=AuditSink(AuditWriter(path, max_bytes=1_000_000, max_files=5)), profile="default")


def _records(path: Path) -> list[dict[str, Any]]:
    return list(iter_records(path))


async def test_a_call_that_runs_is_recorded_ok_with_the_facts_of_its_run(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    result = ToolResult(
        text="héllo",
        exit_code=0,
        truncated=True,
        redactions=2,
        backend="bubblewrap",
        degraded=("no_network",),
    )
    client = ClientInfo(
        client_id="stdio", transport="stdio", name="claude-code", version="2.1", protocol_version="2025-11-25"
    )
    ctx = CallContext(tool="oct_read_file", arguments={"path": "README.md"}, client=client, call_id="c-1")

    outcome = await _audit(path)(ctx, RecordingNext(outcome=result))

    (record,) = _records(path)
    assert outcome is result
    assert record["client"] == {
        "id": "stdio",
        "transport": "stdio",
        "name": "claude-code",
        "version": "2.1",
        "protocol_version": "2025-11-25",
    }
    assert {k: record[k] for k in ("call_id", "profile", "tool", "outcome", "code", "message")} == {
        "call_id": "c-1",
        "profile": "default",
        "tool": "oct_read_file",
        "outcome": "ok",
        "code": None,
        "message": None,
    }
    assert {k: record[k] for k in ("exit_code", "output_bytes", "truncated", "redactions", "backend")} == {
        "exit_code": 0,
        "output_bytes": 6,
        "truncated": True,
        "redactions": 2,
        "backend": "bubblewrap",
    }
    assert record["degraded"] == ["no_network"]
    assert record["args_digest"] == argument_digest({"path": "README.md"})
    assert record["duration_ms"] >= 0
    assert "arguments" not in record


async def test_output_size_is_what_the_tool_printed_in_all_when_the_result_says_so(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"

    await _audit(path)(make_context(), RecordingNext(outcome=ToolResult(text="cut", output_bytes=9_000)))

    assert _records(path)[0]["output_bytes"] == 9_000


async def test_a_tool_that_answers_with_an_error_result_is_recorded_as_an_error(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"

    await _audit(path)(
        make_context(), RecordingNext(outcome=ToolResult(text="1 failed", is_error=True, exit_code=1))
    )

    (record,) = _records(path)
    assert (record["outcome"], record["code"], record["exit_code"]) == ("error", None, 1)


async def test_a_refusal_is_recorded_with_its_code_and_safe_message_then_raised_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.log"
    refusal = PolicyError("the tool is not allowed in profile 'strict' (rule: allowlist)")

    with pytest.raises(PolicyError) as caught:
        await _audit(path)(make_context(), RecordingNext(error=refusal))

    (record,) = _records(path)
    assert caught.value is refusal
    assert (record["outcome"], record["code"], record["message"]) == ("refused", "policy", refusal.message)
    assert "exit_code" not in record


async def test_an_execution_error_is_recorded_as_an_error_with_its_code(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"

    with pytest.raises(ToolTimeoutError):
        await _audit(path)(make_context(), RecordingNext(error=ToolTimeoutError("stopped after 60 s")))

    (record,) = _records(path)
    assert (record["outcome"], record["code"], record["message"]) == (
        "error",
        "timeout",
        "stopped after 60 s",
    )


async def test_an_unexpected_exception_is_recorded_as_internal_error_without_its_text(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.log"
    crash = KeyError(f"/home/dev/.aws/credentials {GITHUB_TOKEN}")

    with pytest.raises(KeyError) as caught:
        await _audit(path)(make_context(), RecordingNext(error=crash))

    (record,) = _records(path)
    assert caught.value is crash
    assert (record["outcome"], record["code"]) == ("error", INTERNAL_ERROR_CODE)
    assert record["message"] == f"{INTERNAL_ERROR_MESSAGE} (KeyError)"
    assert GITHUB_TOKEN not in path.read_text()
    assert ".aws" not in path.read_text()


async def test_a_consent_request_is_recorded_as_consent_requested(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    request = ConsentRequest(tool="test_write_file", digest="sha256:abc", message="[oct-mcp ...]")

    outcome = await _audit(path)(make_context("test_write_file"), RecordingNext(outcome=request))

    (record,) = _records(path)
    assert outcome is request
    assert (record["outcome"], record["digest"]) == ("consent_requested", "sha256:abc")


async def test_the_safety_gate_s_reason_is_recorded_for_a_consent_request_and_a_consented_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.log"
    request = ConsentRequest(tool="oct_run", digest="sha256:abc", message="[oct-mcp ...]", reason="why asked")
    ran = ToolResult(text="ran", consent=ConsentFacts(given_by="confirm", reason="why it ran"))

    await _audit(path)(make_context("oct_run"), RecordingNext(outcome=request))
    await _audit(path)(make_context("oct_run"), RecordingNext(outcome=ran))

    asked, consented = _records(path)
    assert asked["reason"] == "why asked"
    assert consented["consent"]["reason"] == "why it ran"


async def test_a_cancelled_call_is_recorded_as_interrupted_and_the_cancellation_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.log"
    entered = anyio.Event()
    after_the_call: list[str] = []

    async def hang(ctx: CallContext, /) -> Outcome:
        entered.set()
        await anyio.Event().wait()
        raise AssertionError("never woken")

    async def call() -> None:
        await _audit(path)(make_context(), hang)
        after_the_call.append("returned")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            await entered.wait()
            tasks.cancel_scope.cancel()

    (record,) = _records(path)
    assert after_the_call == []
    assert record["outcome"] == "interrupted"


async def test_the_arguments_are_recorded_only_at_deep_trace_and_then_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.log"
    audit = _audit(path)
    arguments = {"path": "notes.txt", "content": f"token = {GITHUB_TOKEN}"}
    ctx = CallContext(tool="test_write_file", arguments=arguments, client=TEST_CLIENT, call_id="c")

    await audit(ctx, RecordingNext())
    monkeypatch.setattr("oct_mcp.diagnostics._deep_trace", True)
    await audit(ctx, RecordingNext())

    shallow, deep = _records(path)
    assert "arguments" not in shallow
    assert deep["arguments"] == {"path": "notes.txt", "content": "token = [REDACTED:github_token]"}
    assert deep["argument_redactions"] == 1
    assert shallow["args_digest"] == deep["args_digest"] == argument_digest(arguments)
    assert GITHUB_TOKEN not in path.read_text()


async def test_host_given_names_are_cut_to_a_bounded_length(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"

    await _audit(path)(make_context("x" * 10_000), RecordingNext())

    assert _records(path)[0]["tool"] == "x" * 200 + "..."


async def test_an_audit_that_cannot_write_neither_loses_the_result_nor_hides_the_error(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    audit = _audit(blocker / "audit.log")
    result = ToolResult(text="the result")

    outcome = await audit(make_context(), RecordingNext(outcome=result))
    with pytest.raises(PolicyError):
        await audit(make_context(), RecordingNext(error=PolicyError("refused")))

    assert outcome is result
    failure = audit.sink.writer.failure
    assert failure is not None
    assert failure.lost == 2


async def test_eight_concurrent_calls_through_the_layer_are_each_recorded_once(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    audit = AuditLogger(sink=AuditSink(AuditWriter(path, max_bytes=2_000, max_files=50)), profile="default")

    async def one_call(index: int) -> None:
        ctx = CallContext(
            tool="oct_read_file", arguments={"i": index}, client=TEST_CLIENT, call_id=f"c{index}"
        )
        await audit(ctx, RecordingNext())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            for index in range(8):
                tasks.start_soon(one_call, index)

    assert sorted(r["call_id"] for r in _records(path)) == [f"c{i}" for i in range(8)]
    assert verify_chain(path).is_intact


def _config(tmp_path: Path, **values: object) -> Path:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit" / "audit.log"), **values}))
    return config


def _outcomes(tmp_path: Path) -> list[tuple[str, str | None]]:
    return [(r["outcome"], r["code"]) for r in _records(tmp_path / "audit" / "audit.log")]


async def test_through_the_real_chain_refusals_and_both_consent_rounds_are_on_record(
    project: Path, tmp_path: Path
) -> None:
    app = build_app(project, config_path=_config(tmp_path), environ={}, catalog=catalog_with_write_tool())
    client = ClientInfo(client_id="memory", transport="memory")
    arguments: Mapping[str, Any] = {"path": "notes.txt", "content": "x"}

    read = await run_call(app, "oct_read_file", {"path": "README.md"}, client)
    outside = await run_call(app, "oct_read_file", {"path": "../outside.txt"}, client)
    unknown = await run_call(app, "no_such_tool", {}, client)
    request = await run_call(app, "test_write_file", arguments, client)
    assert isinstance(request, ConsentRequest)
    consent = Consent(tool=request.tool, digest=request.digest, approved=False)
    declined = await run_call(app, "test_write_file", arguments, client, consent=consent)

    assert isinstance(read, ToolResult)
    assert isinstance(outside, CallFailure)
    assert isinstance(unknown, CallFailure)
    assert isinstance(declined, ToolResult)
    assert _outcomes(tmp_path) == [
        ("ok", None),
        ("refused", outside.code),
        ("refused", unknown.code),
        ("consent_requested", None),
        ("declined", None),
    ]
    assert not (project / "notes.txt").exists()


async def test_through_the_real_chain_safe_mode_refusals_are_on_record(project: Path, tmp_path: Path) -> None:
    app = build_app(project, config_path=_config(tmp_path), environ={"OCT_MCP_SAFE_MODE": "1"})

    await run_call(app, "oct_read_file", {"path": "README.md"}, TEST_CLIENT)

    assert _outcomes(tmp_path) == [("refused", "safe_mode")]


async def test_through_the_real_chain_an_unwritable_audit_log_costs_no_call_its_result(
    project: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"audit_log_path": str(blocker / "audit.log")}))
    app = build_app(project, config_path=config, environ={})

    read = await run_call(app, "oct_read_file", {"path": "README.md"}, TEST_CLIENT)
    refused = await run_call(app, "oct_read_file", {"path": "../outside.txt"}, TEST_CLIENT)

    assert isinstance(read, ToolResult)
    assert read.text.startswith("# Demo")
    assert isinstance(refused, CallFailure)
    assert app.audit is not None
    assert app.audit.writer.status().startswith("failing since ")
