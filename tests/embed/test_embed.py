"""Embedding: oct-mcp's chain around a host's own tools, through the SDK's Client in memory and over stdio."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import structlog.testing
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict

from oct_mcp import Profile, shipped_profile
from oct_mcp.audit.verify import verify_chain
from oct_mcp.embed import BINARY_DROPPED_NOTE, guard
from oct_mcp.types import CallContext, CallNext, ConfigError, LayerType, Outcome, RefusedError

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))

from guarded_sdk_server import TOOLS, build

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ERAS = [pytest.param("auto", id="2026-07-28"), pytest.param("legacy", id="handshake")]
SECRET = "ghp_" + "x7Kq2" * 7 + "Z"


class Human:
    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.asked = 0

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked += 1
        return types.ElicitResult(action="accept", content={"approve": self.approve})


@pytest.fixture
def notes() -> dict[str, str]:
    return {"todo": "ship it", "creds": f"deploy with token {SECRET}"}


def _guarded(project: Path, config: Path, notes: dict[str, str], **options: Any) -> Any:
    server = build(project, notes)
    guard(server, project_root=project, config_path=config, environ={}, tools=TOOLS, **options)
    return server


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("mode", ERAS)
async def test_a_guarded_hosts_read_tool_runs_and_its_secret_is_masked(
    project: Path, config: Path, notes: dict[str, str], mode: Any
) -> None:
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes), mode=mode) as client:
            plain = await client.call_tool("read_note", {"name": "todo"})
            secret = await client.call_tool("read_note", {"name": "creds"})

    assert (plain.is_error, _text(plain)) == (False, "ship it")
    assert SECRET not in _text(secret)
    assert "[REDACTED:github_token]" in _text(secret) or "[REDACTED:" in _text(secret)


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("approve", [True, False])
async def test_a_destructive_host_tool_runs_only_on_the_humans_accept(
    project: Path, config: Path, notes: dict[str, str], mode: Any, approve: bool
) -> None:
    human = Human(approve)
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes), mode=mode, elicitation_callback=human) as client:
            result = await client.call_tool("delete_note", {"name": "todo"})

    assert human.asked == 1
    assert ("todo" not in notes) is approve
    assert result.is_error is not approve


@pytest.mark.parametrize("mode", ERAS)
async def test_without_elicitation_the_sentinel_then_confirm_runs_and_the_host_never_sees_confirm(
    project: Path, config: Path, notes: dict[str, str], mode: Any
) -> None:
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes), mode=mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            first = await client.call_tool("delete_note", {"name": "todo"})
            kept = "todo" in notes
            second = await client.call_tool("delete_note", {"name": "todo", "confirm": True})

    assert "confirm" in tools["delete_note"].input_schema["properties"]
    assert "confirm" not in tools["read_note"].input_schema.get("properties", {})
    assert _text(first).startswith("[oct-mcp requires_confirmation]")
    assert kept is True
    assert (second.is_error, _text(second)) == (False, "deleted")


async def test_where_reads_need_consent_the_guard_lists_confirm_for_a_read_tool_and_confirm_settles_it(
    project: Path, config: Path, notes: dict[str, str]
) -> None:
    config.write_text(json.dumps({**json.loads(config.read_text()), "auto_approve_read_tools": False}))
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            first = await client.call_tool("read_note", {"name": "todo"})
            second = await client.call_tool("read_note", {"name": "todo", "confirm": True})

    assert tools["read_note"].input_schema["properties"]["confirm"]["type"] == "boolean"
    assert _text(first).startswith("[oct-mcp requires_confirmation]")
    assert (second.is_error, _text(second)) == (False, "ship it")


async def test_a_confirm_that_is_not_a_boolean_is_refused_before_the_host_sees_the_call(
    project: Path, config: Path, notes: dict[str, str]
) -> None:
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes)) as client:
            result = await client.call_tool("delete_note", {"name": "todo", "confirm": "yes"})

    assert result.is_error is True
    assert _text(result).startswith("[invalid_arguments] ")
    assert "todo" in notes


async def test_a_confirmed_host_write_under_the_dry_run_default_is_refused_and_never_reaches_the_host(
    project: Path, tmp_path: Path, audit_log: Path, notes: dict[str, str]
) -> None:
    dry_by_default = tmp_path / "dry.json"
    dry_by_default.write_text(json.dumps({"audit_log_path": str(audit_log), "rate_limit_per_minute": 1000}))
    with anyio.fail_after(20):
        async with Client(
            _guarded(project, dry_by_default, notes), elicitation_callback=Human(True)
        ) as client:
            asked = await client.call_tool("delete_note", {"name": "todo"})
        async with Client(_guarded(project, dry_by_default, notes)) as client:
            confirmed = await client.call_tool("delete_note", {"name": "todo", "confirm": True})

    for result in (asked, confirmed):
        assert result.is_error is True
        assert _text(result).startswith("[dry_run_unsupported]")
    assert notes["todo"] == "ship it"


async def test_a_host_tool_with_its_own_dry_run_argument_is_called_with_it_under_the_dry_run_default(
    project: Path, tmp_path: Path, audit_log: Path
) -> None:
    dry_by_default = tmp_path / "dry.json"
    dry_by_default.write_text(json.dumps({"audit_log_path": str(audit_log), "rate_limit_per_minute": 1000}))
    purged: list[tuple[str, bool]] = []
    server = MCPServer("purger")

    @server.tool()
    def purge(name: str, dry_run: bool = False) -> str:
        purged.append((name, dry_run))
        return "would purge" if dry_run else "purged"

    guard(server, project_root=project, config_path=dry_by_default, environ={})
    with anyio.fail_after(20):
        async with Client(server) as client:
            result = await client.call_tool("purge", {"name": "old", "confirm": True})

    assert (result.is_error, _text(result)) == (False, "would purge")
    assert purged == [("old", True)]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_declared_path_argument_is_contained(
    project: Path, config: Path, notes: dict[str, str], mode: Any
) -> None:
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes), mode=mode) as client:
            inside = await client.call_tool("read_file", {"path": "README.md"})
            outside = await client.call_tool("read_file", {"path": "../outside.txt"})

    assert _text(inside) == "# Demo\n\nline 3\nline 4\n"
    assert _text(outside).startswith("[path_refused] ")


async def test_a_tool_the_policy_forbids_is_neither_listed_nor_callable(
    project: Path, tmp_path: Path, notes: dict[str, str], audit_log: Path
) -> None:
    config = tmp_path / "readonly.json"
    config.write_text(
        json.dumps(
            {
                "audit_log_path": str(audit_log),
                "profiles": {
                    "notes-readonly": {
                        "layers": ["audit", "gateway", "validator", "policy", "safety", "redactor"],
                        "settings": {"policy": {"tools": ["read_note"]}},
                    }
                },
            }
        )
    )
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes, profile="notes-readonly")) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            refused = await client.call_tool("delete_note", {"name": "todo", "confirm": True})

    assert listed == ["read_note"]
    assert _text(refused).startswith("[policy] ")
    assert "todo" in notes


async def test_every_call_is_audited_and_resources_pass_untouched(
    project: Path, config: Path, notes: dict[str, str], audit_log: Path
) -> None:
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes)) as client:
            await client.call_tool("read_note", {"name": "todo"})
            await client.call_tool("delete_note", {"name": "todo"})
            resource = await client.read_resource("notes://index")

    records = [json.loads(line) for line in audit_log.read_text().splitlines()]
    assert [(r["tool"], r["outcome"]) for r in records] == [
        ("read_note", "ok"),
        ("delete_note", "consent_requested"),
    ]
    assert verify_chain(audit_log).is_intact
    (content,) = resource.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.text == "creds, todo"


async def test_the_example_server_runs_guarded_over_stdio(project: Path, config: Path) -> None:
    example = Path(__file__).parents[2] / "examples" / "guarded_sdk_server.py"
    server = StdioServerParameters(
        command=sys.executable, args=[str(example), "--project-root", str(project), "--config", str(config)]
    )
    with anyio.fail_after(60):
        async with Client(server, mode="legacy") as client:
            listed = sorted(tool.name for tool in (await client.list_tools()).tools)
            read = await client.call_tool("read_note", {"name": "todo"})
            escape = await client.call_tool("read_file", {"path": "/etc/passwd"})

    assert listed == ["delete_note", "read_file", "read_note"]
    assert _text(read) == "ship it"
    assert _text(escape).startswith("[path_refused] ")


def _resource_host(project: Path) -> MCPServer:
    """A host whose read tool answers with an embedded resource, a resource link and an image."""
    server = MCPServer("resources")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def fetch() -> list[types.ContentBlock]:
        """Fetch a document."""
        return [
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=f"file://{project}/notes.txt?token={SECRET}", text=f"deploy with token {SECRET}"
                ),
                _meta={"fetched-with": SECRET},
            ),
            types.ResourceLink(
                type="resource_link", name=f"notes-{SECRET}", uri=f"file://{project}/notes.txt"
            ),
            types.ImageContent(
                type="image", data=base64.b64encode(SECRET.encode()).decode(), mime_type="image/png"
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///blob.bin", blob=base64.b64encode(b"\x00").decode()
                ),
            ),
        ]

    return server


@pytest.mark.parametrize("mode", ERAS)
async def test_every_string_of_a_resource_result_is_redacted_and_binary_items_are_left_out(
    project: Path, config: Path, mode: Any
) -> None:
    server = _resource_host(project)
    guard(server, project_root=project, config_path=config, environ={})
    with anyio.fail_after(20):
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("fetch", {})

    wire = json.dumps([item.model_dump(by_alias=True, exclude_none=True) for item in result.content])
    assert SECRET not in wire
    assert str(project) not in wire
    assert [item.type for item in result.content] == ["text", "resource", "resource_link"]
    assert _text(result) == BINARY_DROPPED_NOTE.format(count=2)
    resource = result.content[1]
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.TextResourceContents)
    assert resource.resource.text == "deploy with token [REDACTED:github_token]"
    assert resource.resource.uri == "file://<project>/notes.txt?token=[REDACTED:github_token]"
    assert resource.meta == {"fetched-with": "[REDACTED:github_token]"}


async def test_binary_items_pass_when_the_host_opts_in_and_their_text_is_still_redacted(
    project: Path, config: Path
) -> None:
    server = _resource_host(project)
    guard(server, project_root=project, config_path=config, environ={}, keep_binary_content=True)
    with anyio.fail_after(20):
        async with Client(server) as client:
            result = await client.call_tool("fetch", {})

    assert [item.type for item in result.content] == [
        "text",
        "resource",
        "resource_link",
        "image",
        "resource",
    ]
    image = result.content[3]
    assert isinstance(image, types.ImageContent)
    assert base64.b64decode(image.data) == SECRET.encode()
    assert SECRET not in json.dumps([item.model_dump(by_alias=True) for item in result.content[:3]])


@pytest.mark.parametrize("mode", ERAS)
async def test_two_clients_of_one_guarded_host_have_their_own_rate_limit_windows(
    project: Path, tmp_path: Path, notes: dict[str, str], audit_log: Path, mode: Any
) -> None:
    config = tmp_path / "two-calls.json"
    config.write_text(json.dumps({"audit_log_path": str(audit_log), "rate_limit_per_minute": 2}))
    server = _guarded(project, config, notes)
    with anyio.fail_after(20):
        async with Client(server, mode=mode) as first, Client(server, mode=mode) as second:
            by_first = [await first.call_tool("read_note", {"name": "todo"}) for _ in range(3)]
            by_second = await second.call_tool("read_note", {"name": "todo"})

    assert [result.is_error for result in by_first] == [False, False, True]
    assert _text(by_first[2]).startswith("[rate_limited] ")
    assert (by_second.is_error, _text(by_second)) == (False, "ship it")
    clients = [json.loads(line)["client"]["id"] for line in audit_log.read_text().splitlines()]
    assert len(set(clients)) == 2


async def test_the_rules_judge_a_host_tools_arguments_by_json_pointer_and_its_declared_paths(
    project: Path, tmp_path: Path, notes: dict[str, str], audit_log: Path
) -> None:
    config = tmp_path / "rules.json"
    rules = [
        {
            "effect": "deny",
            "tools": ["read_note"],
            "when": {"fields": {"/name": ["creds*"]}},
            "reason": "credentials are not for the model",
        },
        {
            "effect": "deny",
            "tools": ["read_file"],
            "when": {"paths": ["README.md"]},
            "reason": "the README is being rewritten",
        },
    ]
    config.write_text(json.dumps({"audit_log_path": str(audit_log), "rules": rules}))
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes)) as client:
            todo = await client.call_tool("read_note", {"name": "todo"})
            creds = await client.call_tool("read_note", {"name": "creds"})
            readme = await client.call_tool("read_file", {"path": "./README.md"})

    assert _text(todo) == "ship it"
    assert _text(creds).startswith("[policy] read_note is denied by rule #1 (user tier): credentials are")
    assert _text(readme).startswith("[policy] read_file is denied by rule #2 (user tier): the README is")


def _rules_config(tmp_path: Path, audit_log: Path, examples: dict[str, Any]) -> Path:
    config = tmp_path / "rules.json"
    rule = {
        "effect": "deny",
        "tools": ["read_file"],
        "when": {"paths": ["secrets/"]},
        "reason": "secrets stay out",
        "examples": examples,
    }
    config.write_text(json.dumps({"audit_log_path": str(audit_log), "rules": [rule]}))
    return config


async def test_a_rule_example_over_a_host_tool_that_disagrees_withholds_every_tool(
    project: Path, tmp_path: Path, notes: dict[str, str], audit_log: Path
) -> None:
    """The host's tools are known once it lists them: the example is run then, and, as a failing
    example stops oct-mcp's server, nothing is served; the log names the rule and the example."""
    # The declared path argument makes `docs/secrets.md` a path under no `secrets/` folder.
    config = _rules_config(tmp_path, audit_log, {"match": [{"arguments": {"path": "docs/secrets.md"}}]})
    with structlog.testing.capture_logs() as logs, anyio.fail_after(20):
        async with Client(_guarded(project, config, notes)) as client:
            called_first = await client.call_tool("read_note", {"name": "todo"})
            listed = await client.list_tools()
            called_after = await client.call_tool("read_file", {"path": "README.md"})

    for result in (called_first, called_after):
        assert result.is_error
        assert _text(result).startswith("[rule_examples] 1 rule example(s) over this server's tools disagree")
    assert listed.tools == []
    described = [entry["example"] for entry in logs if entry["event"] == "rule_example_disagrees"]
    assert described
    assert all(
        text == "rule #1 (user tier, " + str(config) + "): its match example read_file "
        '{"path": "docs/secrets.md"} does not match it'
        for text in described
    )
    records = [json.loads(line) for line in audit_log.read_text().splitlines()]
    refused = [(r["tool"], r["outcome"], r["code"]) for r in records if "tool" in r]
    assert refused == [("read_note", "refused", "rule_examples"), ("read_file", "refused", "rule_examples")]


async def test_rule_examples_that_agree_or_name_another_server_s_tool_leave_the_host_served(
    project: Path, tmp_path: Path, notes: dict[str, str], audit_log: Path
) -> None:
    examples = {
        "match": [{"arguments": {"path": "secrets/db.txt"}}],
        "not_match": [
            {"arguments": {"path": "README.md"}},
            {"tool": "oct_read_file", "arguments": {"path": "a"}},
        ],
    }
    config = _rules_config(tmp_path, audit_log, examples)
    with anyio.fail_after(20):
        async with Client(_guarded(project, config, notes)) as client:
            listed = await client.list_tools()
            readme = await client.call_tool("read_file", {"path": "README.md"})

    assert {tool.name for tool in listed.tools} >= {"read_note", "read_file"}
    assert not readme.is_error


class _NotesClosedError(RefusedError):
    code = "notes_closed"


class _NoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _ClosedNotes:
    """A layer of the embedder's own: refuses every call to one tool."""

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        if ctx.tool == "read_note":
            raise _NotesClosedError("notes are closed today")
        return await call_next(ctx)


_CLOSED_NOTES = LayerType(
    name="closed_notes", settings=_NoSettings, build=lambda settings, runtime: _ClosedNotes()
)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_profile_made_in_code_with_a_layer_of_ones_own_guards_the_host_without_a_config_profile(
    project: Path, config: Path, notes: dict[str, str], mode: Any
) -> None:
    embedded = shipped_profile("embedded")
    mine = Profile(name="closed-notes", layers=(*embedded.layers[:3], "closed_notes", *embedded.layers[3:]))

    server = _guarded(project, config, notes, profile=mine, layers=[_CLOSED_NOTES])
    with anyio.fail_after(20):
        async with Client(server, mode=mode) as client:
            refused = await client.call_tool("read_note", {"name": "todo"})
            listed = await client.list_tools()

    assert refused.is_error is True
    assert _text(refused).startswith("[notes_closed] notes are closed today")
    assert "read_note" in {tool.name for tool in listed.tools}


def test_a_profile_made_in_code_is_checked_as_a_config_files_profile_is(
    project: Path, config: Path, notes: dict[str, str]
) -> None:
    unknown = Profile(name="typo", layers=("audit", "gateway", "validatr"))

    with pytest.raises(ConfigError, match="validatr"):
        _guarded(project, config, notes, profile=unknown)
