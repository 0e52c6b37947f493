"""Doors a secret could take to the client besides a tool's output, each tried over stdio.

An error that names an argument, a consent question, a git log message, a file name in a listing:
the client (and the audit log) must see the mask, never the secret.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import model_view, oct_server
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

KEY_ID = "AKIAQYLPMN5HHHFPZAM2"
PASSWORD = "Zk3vQ9pL2mX8rT5w"  # noqa: S105  (made up, to be masked)


@pytest.fixture
def audited(config_file: Path, tmp_path: Path) -> Path:
    """The config file, with an audit log of the test's own; returns the log's path."""
    log = tmp_path / "audit" / "audit.log"
    config_file.write_text(json.dumps({"audit_log_path": str(log)}))
    return log


def _seen(result: types.CallToolResult) -> str:
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    return "\n".join([model_view(result), *texts, json.dumps(result.structured_content)])


class Recorder:
    """A human who reads each consent form and declines it."""

    def __init__(self) -> None:
        self.questions: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params.message + json.dumps(params.model_dump(mode="json")))
        return types.ElicitResult(action="decline")


async def test_an_error_that_names_a_file_of_the_patch_shows_the_mask(
    project: Path, config_file: Path, audited: Path
) -> None:
    patch = f"--- a/keys/{KEY_ID}.txt\n+++ b/keys/{KEY_ID}.txt\n@@ -1 +1 @@\n-old\n+new\n"

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            result = await client.call_tool("oct_apply_patch", {"patch": patch, "dry_run": True})

    assert result.is_error is True
    assert KEY_ID not in _seen(result)
    assert "[REDACTED:aws_access_key_id]" in _seen(result)
    assert KEY_ID not in audited.read_text()


async def test_a_consent_question_shows_the_mask_of_a_secret_in_its_arguments(
    project: Path, config_file: Path
) -> None:
    human = Recorder()
    arguments = {"path": f"notes/{KEY_ID}.txt", "content": f"password = '{PASSWORD}'\n", "dry_run": False}

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), elicitation_callback=human) as client:
            asked = await client.call_tool("oct_write_file", arguments)
        async with Client(oct_server(project, config_file)) as stateless:
            sentinel = await stateless.call_tool("oct_write_file", arguments)

    assert len(human.questions) == 1
    assert [q for q in human.questions if KEY_ID in q or PASSWORD in q] == []
    assert KEY_ID not in _seen(asked)
    assert PASSWORD not in _seen(asked)
    assert KEY_ID not in _seen(sentinel)
    assert PASSWORD not in _seen(sentinel)


async def test_a_git_log_message_shows_the_mask(project: Path, config_file: Path) -> None:
    git = ["git", "-C", str(project), "-c", "user.name=dev", "-c", "user.email=dev@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    message = f"rotate the deploy key {KEY_ID}\n\ndb password={PASSWORD}\n"
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            log = await client.call_tool("oct_git_log", {})

    assert log.is_error is False
    assert KEY_ID not in _seen(log)
    assert PASSWORD not in _seen(log)
    assert "[REDACTED:aws_access_key_id]" in _seen(log)


async def test_a_file_name_in_a_listing_shows_the_mask(project: Path, config_file: Path) -> None:
    (project / "keys").mkdir()
    (project / "keys" / f"{KEY_ID}.pem").write_text("not a key\n")

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            listing = await client.call_tool("oct_list_files", {"path": "keys"})
            found = await client.call_tool("oct_search", {"pattern": "not a key"})

    assert listing.is_error is False
    assert KEY_ID not in _seen(listing)
    assert "[REDACTED:aws_access_key_id]" in _seen(listing)
    assert KEY_ID not in _seen(found)


async def test_a_tool_name_the_client_sent_is_masked_in_the_audit_log(
    project: Path, config_file: Path, audited: Path
) -> None:
    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            result = await client.call_tool(f"oct_read_{KEY_ID}", {})

    assert result.is_error is True
    assert KEY_ID not in _seen(result)
    logged = audited.read_text()
    assert KEY_ID not in logged
    assert '"tool":"[REDACTED:aws_access_key_id]"' in logged  # glued: the whole word is masked


async def test_an_unknown_method_is_answered_without_echoing_a_secret_in_it(
    project: Path, config_file: Path
) -> None:
    params = oct_server(project, config_file)
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": f"tools/{KEY_ID}", "params": {}},
    ]
    request = "".join(json.dumps(line) + "\n" for line in lines)

    with anyio.fail_after(60):
        async with await anyio.open_process([params.command, *params.args]) as server:
            assert server.stdin is not None
            assert server.stdout is not None
            await server.stdin.send(request.encode())
            answers = b""
            while answers.count(b"\n") < 2:
                answers += await server.stdout.receive()
            await server.stdin.aclose()

    error = json.loads(answers.splitlines()[1])
    assert error["id"] == 2
    assert error["error"]["code"] == -32601
    assert KEY_ID not in answers.decode()
