"""The FastMCP adapter through FastMCP's own Client: the same chain on FastMCP's typed hooks."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from fastmcp import Client, FastMCP

from oct_mcp.embed import BINARY_DROPPED_NOTE
from oct_mcp.embed.fastmcp import guard_fastmcp

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))

from guarded_fastmcp_server import TOOLS, build

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SECRET = "ghp_" + "x7Kq2" * 7 + "Z"


@pytest.fixture
def notes() -> dict[str, str]:
    return {"todo": "ship it", "creds": f"deploy with token {SECRET}"}


def _guarded(project: Path, config: Path, notes: dict[str, str]) -> Any:
    server = build(project, notes)
    guard_fastmcp(server, project_root=project, config_path=config, environ={}, tools=TOOLS)
    return server


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_a_read_tool_runs_and_a_secret_in_its_output_is_masked(
    project: Path, config: Path, notes: dict[str, str]
) -> None:
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes)) as client:
            plain = await client.call_tool("read_note", {"name": "todo"})
            secret = await client.call_tool("read_note", {"name": "creds"}, raise_on_error=False)

    assert _text(plain) == "ship it"
    assert SECRET not in _text(secret)
    assert "[REDACTED:" in _text(secret)


@pytest.mark.parametrize("approve", [True, False])
async def test_a_destructive_tool_runs_only_on_the_humans_accept(
    project: Path, config: Path, notes: dict[str, str], approve: bool
) -> None:
    asked: list[str] = []

    async def human(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(message)
        return types.ElicitResult(action="accept", content={"approve": approve})

    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes), elicitation_handler=human) as client:
            result = await client.call_tool("delete_note", {"name": "todo"}, raise_on_error=False)

    assert len(asked) == 1
    assert asked[0].startswith("delete_note")
    assert "confirm=true" not in asked[0]
    assert ("todo" not in notes) is approve
    assert result.is_error is not approve


async def test_a_path_argument_is_contained_and_every_call_audited(
    project: Path, config: Path, notes: dict[str, str], audit_log: Path
) -> None:
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes)) as client:
            listed = {tool.name: tool for tool in await client.list_tools()}
            escape = await client.call_tool("read_file", {"path": "../outside.txt"}, raise_on_error=False)

    assert "confirm" in listed["delete_note"].input_schema["properties"]
    assert _text(escape).startswith("[path_refused] ")
    records = [json.loads(line) for line in audit_log.read_text().splitlines()]
    assert [(r["tool"], r["outcome"]) for r in records] == [("read_file", "refused")]


async def test_an_embedded_resources_text_and_uri_are_redacted_and_an_image_is_left_out(
    project: Path, config: Path
) -> None:
    server: FastMCP[Any] = FastMCP("resources")

    @server.tool(annotations={"readOnlyHint": True})
    def fetch() -> list[types.ContentBlock]:
        """Fetch a document."""
        return [
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri=f"file://{project}/n.txt", text=f"token {SECRET}"),
            ),
            types.ImageContent(
                type="image", data=base64.b64encode(SECRET.encode()).decode(), mime_type="image/png"
            ),
        ]

    guard_fastmcp(server, project_root=project, config_path=config, environ={})
    with anyio.fail_after(20):
        async with Client(server) as client:
            result = await client.call_tool("fetch", {})

    wire = json.dumps([block.model_dump(by_alias=True, exclude_none=True) for block in result.content])
    assert SECRET not in wire
    assert str(project) not in wire
    assert [block.type for block in result.content] == ["text", "resource"]
    assert _text(result) == BINARY_DROPPED_NOTE.format(count=1)


async def test_a_rule_example_over_a_host_tool_that_disagrees_withholds_every_tool(
    project: Path, tmp_path: Path, notes: dict[str, str], audit_log: Path
) -> None:
    config = tmp_path / "rules.json"
    rule = {
        "effect": "deny",
        "tools": ["read_file"],
        "when": {"paths": ["secrets/"]},
        "reason": "secrets stay out",
        "examples": {"match": [{"arguments": {"path": "docs/secrets.md"}}]},
    }
    config.write_text(json.dumps({"audit_log_path": str(audit_log), "rules": [rule]}))
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes)) as client:
            called_first = await client.call_tool("read_note", {"name": "todo"}, raise_on_error=False)
            listed = await client.list_tools()
            called_after = await client.call_tool("read_note", {"name": "todo"}, raise_on_error=False)

    assert _text(called_first) == "ship it"  # read_note names no example: judged with what is known
    assert listed == []
    assert called_after.is_error
    assert _text(called_after).startswith("[rule_examples] 1 rule example(s) over this server's tools")
