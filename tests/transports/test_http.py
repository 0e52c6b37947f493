"""The streamable HTTP transport, served by a real `oct-mcp serve --transport http` subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from clients import only_text
from mcp import Client
from replicas import ENVELOPE, LIST_TOOLS, MODERN_HEADERS, authorised, create_token, replica, write_config

from oct_mcp.tools import default_catalog

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def audit_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(("mode", "protocol"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_a_client_over_http_lists_reads_and_is_refused_outside_the_project_in_both_eras(
    project: Path, tmp_path: Path, mode: Any, protocol: str
) -> None:
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit)
    with anyio.fail_after(60):
        async with replica(project, config) as url, Client(url, mode=mode) as client:
            negotiated = client.session.protocol_version
            listed = await client.list_tools()
            read = await client.call_tool("oct_read_file", {"path": "src/pkg/core.py"})
            refused = await client.call_tool("oct_read_file", {"path": "../outside.txt"})

    assert negotiated == protocol
    assert [tool.name for tool in listed.tools] == list(default_catalog())
    assert only_text(read) == "def answer() -> int:\n    return 42\n"
    assert refused.is_error is True
    assert only_text(refused).startswith("[path_refused]")
    records = [r for r in audit_records(audit) if r.get("tool") == "oct_read_file"]
    assert [(r["outcome"], r["client"]["transport"], r["client"]["id"]) for r in records] == [
        ("ok", "http", "http"),
        ("refused", "http", "http"),
    ]


async def test_a_request_from_an_unlisted_origin_gets_403_and_runs_nothing(
    project: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit, http_allowed_origins=["https://ok.example"])
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "oct_read_file", "arguments": {"path": "README.md"}, "_meta": ENVELOPE},
    }
    with anyio.fail_after(60):
        async with replica(project, config) as url, httpx2.AsyncClient(timeout=30) as http:
            evil = await http.post(
                url, json=call, headers={**MODERN_HEADERS, "Origin": "https://evil.example"}
            )
            rebound = await http.post(url, json=call, headers={**MODERN_HEADERS, "Host": "evil.example"})
            listed = await http.post(
                url,
                json=LIST_TOOLS,
                headers={**MODERN_HEADERS, "Origin": "https://ok.example", "Mcp-Method": "tools/list"},
            )

    assert (evil.status_code, rebound.status_code, listed.status_code) == (403, 421, 200), listed.text
    assert [(r["outcome"], r["code"], r["http_status"]) for r in audit_records(audit)] == [
        ("refused", "forbidden", 403),
        ("refused", "host_refused", 421),
    ]


async def test_an_oversized_body_gets_413_before_anything_runs(project: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit, http_max_request_bytes=2048)
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "oct_search", "arguments": {"pattern": "x" * 4096}, "_meta": ENVELOPE},
    }
    with anyio.fail_after(60):
        async with replica(project, config) as url, httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(url, json=call, headers=MODERN_HEADERS)

    assert response.status_code == 413
    assert [(r["outcome"], r["code"]) for r in audit_records(audit)] == [("refused", "body_too_large")]


def test_a_non_loopback_bind_without_authentication_refuses_to_start(project: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log")
    argv = [sys.executable, "-m", "oct_mcp", "serve", "--transport", "http", "--host", "0.0.0.0"]  # noqa: S104
    argv += ["--port", "0", "--project-root", str(project), "--config", str(config)]
    done = subprocess.run(argv, capture_output=True, timeout=60, check=False, stdin=subprocess.DEVNULL)

    assert done.returncode == 2
    assert b"without authentication" in done.stderr
    assert b"serving" not in done.stderr


async def test_tokens_are_kept_as_hashes_and_each_is_a_client_for_the_rate_limit_and_the_audit(
    project: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit, rate_limit_per_minute=2)
    ci, review = create_token(config, "ci"), create_token(config, "review")
    stored = config.read_text(encoding="utf-8")
    read = {"path": "README.md"}
    with anyio.fail_after(60):
        async with replica(project, config, host="::1") as url:
            async with Client(authorised(url, ci)) as client:
                first = await client.call_tool("oct_read_file", read)
                second = await client.call_tool("oct_read_file", read)
                third = await client.call_tool("oct_read_file", read)
            async with Client(authorised(url, review)) as client:
                other = await client.call_tool("oct_read_file", read)

    assert ci not in stored
    assert review not in stored
    assert sorted(json.loads(stored)["http_tokens"]) == ["ci", "review"]
    assert [first.is_error, second.is_error, other.is_error] == [False, False, False]
    assert only_text(third).startswith("[rate_limited]")
    records = [r for r in audit_records(audit) if r.get("tool") == "oct_read_file"]
    assert [(r["client"]["id"], r["outcome"]) for r in records] == [
        ("http:ci", "ok"),
        ("http:ci", "ok"),
        ("http:ci", "refused"),
        ("http:review", "ok"),
    ]


@pytest.mark.parametrize("token", [None, "oct_not-a-token-anyone-made"])
async def test_a_missing_or_bad_token_gets_401_with_www_authenticate_and_the_refusal_is_audited(
    project: Path, tmp_path: Path, token: str | None
) -> None:
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit)
    create_token(config, "ci")
    headers = {**MODERN_HEADERS, "Mcp-Method": "tools/list"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    with anyio.fail_after(60):
        async with replica(project, config) as url, httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(url, json=LIST_TOOLS, headers=headers)

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert [(r["outcome"], r["code"], r["http_status"]) for r in audit_records(audit)] == [
        ("refused", "unauthenticated", 401)
    ]


async def test_a_body_that_does_not_arrive_in_time_is_cut_with_408_and_the_app_never_sees_it(
    project: Path, tmp_path: Path
) -> None:
    from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings

    from oct_mcp.app import build_app
    from oct_mcp.transports.http import RequestGuard

    app = build_app(project, config_path=write_config(tmp_path / "config.json", tmp_path / "audit.log"))
    bodies: list[bytes] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        if message["type"] == "http.request" and not message.get("more_body"):
            bodies.append(message["body"])

    never = anyio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await never.wait()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"host", b"127.0.0.1:1")]}
    settings = TransportSecuritySettings(allowed_hosts=["127.0.0.1:1"], allowed_origins=[])
    guard = RequestGuard(inner, TransportSecurityMiddleware(settings), app, body_seconds=0.2)
    try:
        with anyio.fail_after(30):
            await guard(scope, receive, send)
    finally:
        app.close()

    assert bodies == []
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [408]
    records = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert [(r["code"], r["http_status"]) for r in records] == [("body_too_slow", 408)]


def test_a_calls_param_headers_are_checked_against_the_listed_schema_without_listing_per_call(
    project: Path, tmp_path: Path
) -> None:
    from oct_mcp.app import build_app
    from oct_mcp.server import build_server, listed_input_schema

    app = build_app(project, config_path=write_config(tmp_path / "config.json", tmp_path / "audit.log"))
    try:
        server = build_server(app, transport="http")
    finally:
        app.close()
    lookup = server.get_tool_input_schema

    assert lookup is not None
    # The schema as tools/list shows it (without pydantic's generated titles).
    assert lookup("oct_read_file") == listed_input_schema(
        app.catalog["oct_read_file"].params.model_json_schema()
    )
    assert lookup("no_such_tool") is None


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_fastmcps_client_over_http_calls_with_a_token(project: Path, tmp_path: Path, mode: Any) -> None:
    from fastmcp import Client as FastMCPClient

    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit)
    token = create_token(config, "fleet")
    with anyio.fail_after(60):
        async with replica(project, config) as url, FastMCPClient(url, auth=token, mode=mode) as client:
            read = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert read.is_error is False
    assert read.content[0].text.startswith("# Demo")  # type: ignore[union-attr]
    (record,) = [r for r in audit_records(audit) if r.get("tool") == "oct_read_file"]
    assert record["client"]["id"] == "http:fleet"


@pytest.mark.parametrize(("mode", "protocol"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_an_answer_that_takes_longer_than_a_body_may_still_arrives_in_both_eras(
    project: Path, tmp_path: Path, mode: Any, protocol: str
) -> None:
    # The body deadline is for the request's body alone: a human who reads the diff for longer, or
    # a run that lasts longer, still gets the answer on the open response (an SSE stream).
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log", http_body_timeout_seconds=1)
    asked: list[str] = []

    async def slow_human(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        await anyio.sleep(2.5)
        return types.ElicitResult(action="accept", content={"approve": True})

    code = "import time; time.sleep(2.5); print('slept')"
    with anyio.fail_after(90):
        async with (
            # The system's interpreter for the run, found as a terminal finds it.
            replica(project, config, environ={"PATH": "/usr/bin:/bin"}) as url,
            Client(url, mode=mode, elicitation_callback=slow_human) as client,
        ):
            negotiated = client.session.protocol_version
            write = {"path": "notes.txt", "content": "read slowly\n", "dry_run": False}
            written = await client.call_tool("oct_write_file", write)
            ran = await client.call_tool("oct_run", {"argv": ["python", "-c", code]})

    assert negotiated == protocol
    assert len(asked) == 1, (only_text(written), only_text(ran))
    assert written.is_error is not True, only_text(written)
    assert (project / "notes.txt").read_text() == "read slowly\n"
    assert ran.is_error is not True, only_text(ran)
    assert "slept" in only_text(ran)


def _running(marker: str) -> int:
    """How many processes of this machine carry `marker` in their command line."""
    found = 0
    for entry in Path("/proc").iterdir():
        try:
            found += marker.encode() in (entry / "cmdline").read_bytes()
        except OSError:
            continue
    return found


async def _until(condition: Any, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        while not condition():
            await anyio.sleep(0.1)
        return True
    return False


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_call_whose_client_goes_away_ends_its_run_in_both_eras(
    project: Path, tmp_path: Path, mode: Any
) -> None:
    # Handshake-era requests run in their session, not in the POST that carried them: without the
    # guard's cancellation a killed client's run went on to its end.
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit)
    marker = f"oct-abandoned-{os.getpid()}-{mode}"
    code = f"import time; time.sleep(120)  # {marker}"
    with anyio.fail_after(90):
        async with replica(project, config, environ={"PATH": "/usr/bin:/bin"}) as url:
            async with anyio.create_task_group() as client_side:

                async def call() -> None:
                    async with Client(url, mode=mode) as client:
                        await client.call_tool("oct_run", {"argv": ["python", "-c", code]})

                client_side.start_soon(call)
                started = await _until(lambda: _running(marker) > 0, 30)
                client_side.cancel_scope.cancel()  # the client goes, its connection with it
            ended = await _until(lambda: _running(marker) == 0, 30)
            still = _running(marker)

    assert started
    assert (ended, still) == (True, 0)
    records = [r for r in audit_records(audit) if r.get("tool") == "oct_run"]
    assert [r["outcome"] for r in records] == ["interrupted"]


async def test_a_call_whose_token_expires_before_its_client_goes_away_still_ends_its_run(
    project: Path, tmp_path: Path
) -> None:
    # The guard's cancel keeps the authentication of the request it cancels: authenticated again,
    # a token that expired (or was revoked) during the call got 401 and the run went on.
    import datetime

    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit)
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=8)
    argv = [sys.executable, "-m", "oct_mcp", "token", "create", "brief", "--config", str(config)]
    argv += ["--expires", expires.strftime("%Y-%m-%dT%H:%M:%SZ")]
    token = subprocess.run(argv, capture_output=True, timeout=60, check=True).stdout.decode().strip()
    marker = f"oct-expired-{os.getpid()}"
    code = f"import time; time.sleep(120)  # {marker}"
    with anyio.fail_after(90):
        async with replica(project, config, environ={"PATH": "/usr/bin:/bin"}) as url:
            async with anyio.create_task_group() as client_side:

                async def call() -> None:
                    async with Client(authorised(url, token), mode="legacy") as client:
                        await client.call_tool("oct_run", {"argv": ["python", "-c", code]})

                client_side.start_soon(call)
                started = await _until(lambda: _running(marker) > 0, 30)
                # Past the token's expiry, which the server then enforces on any new request.
                await anyio.sleep(
                    max(0.0, (expires - datetime.datetime.now(datetime.UTC)).total_seconds()) + 1
                )
                async with httpx2.AsyncClient(timeout=30) as http:
                    late = await http.post(
                        url,
                        json=LIST_TOOLS,
                        headers={
                            **MODERN_HEADERS,
                            "Mcp-Method": "tools/list",
                            "Authorization": f"Bearer {token}",
                        },
                    )
                client_side.cancel_scope.cancel()  # the client goes, its connection with it
            ended = await _until(lambda: _running(marker) == 0, 30)
            still = _running(marker)

    assert started
    assert late.status_code == 401
    assert (ended, still) == (True, 0)
    records = [r for r in audit_records(audit) if r.get("tool") == "oct_run"]
    assert [(r["outcome"], r["client"]["id"]) for r in records] == [("interrupted", "http:brief")]
