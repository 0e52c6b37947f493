"""Rules over arguments as a client meets them over stdio: deny, ask (the human reads the reason),
allow, and tiers a lower one cannot loosen: the repository's below the user's, the user's below the
admin file's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import oct_server
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

PROD = "production settings stay out of the model's reach; ask the on-call engineer"
README_ASK = "the README is the project's front page: a person looks before the model reads it"


class Human:
    """A person who reads each consent form and gives one answer to all."""

    def __init__(self, action: str = "accept") -> None:
        self.questions: list[str] = []
        self.action = action

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params.message)
        if self.action == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def deny_prod(**extra: Any) -> dict[str, Any]:
    return {
        "name": "no-prod-config",
        "effect": "deny",
        "when": {"paths": ["config/prod.yaml"]},
        "reason": PROD,
        **extra,
    }


def allow_prod() -> dict[str, Any]:
    return {"name": "prod-ok", "effect": "allow", "when": {"paths": ["config/"]}, "reason": "fine"}


@pytest.fixture
def prod(project: Path) -> Path:
    (project / "config").mkdir()
    path = project / "config" / "prod.yaml"
    path.write_text("database: primary\n")
    return path


def write_config(config_file: Path, tmp_path: Path, **values: Any) -> None:
    config_file.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log"), **values}))


def admin_file(tmp_path: Path, rules: list[dict[str, Any]], mode: int = 0o644) -> Path:
    """An admin policy as an administrator keeps it: owned by root, writable by root alone."""
    folder = tmp_path / "etc-oct-mcp"
    folder.mkdir(exist_ok=True)
    path = folder / "policy.toml"
    lines: list[str] = []
    for rule in rules:
        lines.append("[[rules]]")
        for key, value in rule.items():
            if key == "when":
                lines.append(f"when = {_toml_inline(value)}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
    path.write_text("\n".join(lines) + "\n")
    path.chmod(mode)
    return path


def _toml_inline(value: dict[str, Any]) -> str:
    return "{ " + ", ".join(f"{key} = {json.dumps(item)}" for key, item in value.items()) + " }"


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("an admin policy must be owned by root: this test writes one, so it runs as root")


async def test_a_deny_rule_refuses_the_call_with_its_code_and_reason(
    project: Path, config_file: Path, tmp_path: Path, prod: Path
) -> None:
    write_config(config_file, tmp_path, rules=[deny_prod()])

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            denied = await client.call_tool("oct_read_file", {"path": "config/../config/prod.yaml"})
            other = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert denied.is_error is True
    assert text_of(denied).startswith("[policy]")
    assert PROD in text_of(denied)
    assert "database" not in text_of(denied)
    assert other.is_error is not True


async def test_a_deny_rule_holds_for_a_link_that_leads_to_the_denied_file(
    project: Path, config_file: Path, tmp_path: Path, prod: Path
) -> None:
    (project / "innocent.yaml").symlink_to(prod)
    write_config(config_file, tmp_path, rules=[deny_prod()])

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            denied = await client.call_tool("oct_read_file", {"path": "innocent.yaml"})

    assert denied.is_error is True
    assert PROD in text_of(denied)


async def test_an_ask_rule_asks_the_human_with_its_reason_before_a_read(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    rule = {
        "effect": "ask",
        "tools": ["oct_read_file"],
        "when": {"paths": ["README.md"]},
        "reason": README_ASK,
    }
    write_config(config_file, tmp_path, rules=[rule])
    human = Human("accept")
    refuser = Human("decline")

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), elicitation_callback=human) as client:
            read = await client.call_tool("oct_read_file", {"path": "README.md"})
            unasked = await client.call_tool("oct_read_file", {"path": "src/pkg/core.py"})
        async with Client(oct_server(project, config_file), elicitation_callback=refuser) as client:
            declined = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert len(human.questions) == 1
    assert README_ASK in human.questions[0]
    assert read.is_error is not True
    assert "# Demo" in text_of(read)
    assert unasked.is_error is not True
    assert declined.is_error is True
    assert "# Demo" not in text_of(declined)


async def test_an_allow_rule_lets_a_write_run_without_asking(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    rule = {
        "effect": "allow",
        "tools": ["oct_write_file"],
        "when": {"paths": ["notes/"]},
        "reason": "scratch",
    }
    write_config(config_file, tmp_path, rules=[rule])
    human = Human("decline")
    arguments = {"path": "notes/todo.md", "content": "- ship\n", "dry_run": False}

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), elicitation_callback=human) as client:
            allowed = await client.call_tool("oct_write_file", arguments)
            elsewhere = await client.call_tool("oct_write_file", {**arguments, "path": "todo.md"})

    assert allowed.is_error is not True, text_of(allowed)
    assert (project / "notes" / "todo.md").read_text() == "- ship\n"
    assert len(human.questions) == 1  # only the write outside notes/ was asked about, and declined
    assert elsewhere.is_error is True
    assert not (project / "todo.md").exists()


async def test_a_repository_config_cannot_loosen_a_user_rule(
    project: Path, config_file: Path, tmp_path: Path, prod: Path
) -> None:
    write_config(config_file, tmp_path, trust_repo_config=True, rules=[deny_prod()])
    repo_rules = [allow_prod(), {"effect": "ask", "tools": ["oct_read_file"], "reason": "the repo asks"}]
    (project / ".octrc.json").write_text(json.dumps({"rules": repo_rules}))
    human = Human("accept")

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file), elicitation_callback=human) as client:
            denied = await client.call_tool("oct_read_file", {"path": "config/prod.yaml"})
            asked = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert denied.is_error is True
    assert PROD in text_of(denied)
    # What the repository may do is tighten: its ask holds where the user said nothing.
    assert len(human.questions) == 1
    assert "the repo asks" in human.questions[0]
    assert asked.is_error is not True


async def test_a_user_config_cannot_loosen_an_admin_rule(
    project: Path, config_file: Path, tmp_path: Path, prod: Path
) -> None:
    needs_root()
    admin = admin_file(tmp_path, [deny_prod()])
    write_config(config_file, tmp_path, rules=[allow_prod()])

    with anyio.fail_after(60):
        server = oct_server(project, config_file, env={"OCT_MCP_ADMIN_POLICY": str(admin)})
        async with Client(server) as client:
            denied = await client.call_tool("oct_read_file", {"path": "config/prod.yaml"})

    assert denied.is_error is True
    assert PROD in text_of(denied)
    assert "admin tier" in text_of(denied)


async def test_an_admin_ask_holds_over_a_user_allow(project: Path, config_file: Path, tmp_path: Path) -> None:
    needs_root()
    admin = admin_file(
        tmp_path, [{"effect": "ask", "tools": ["oct_write_file"], "reason": "admins look first"}]
    )
    allow = {"effect": "allow", "tools": ["oct_write_file"], "reason": "mine"}
    write_config(config_file, tmp_path, rules=[allow])
    human = Human("decline")

    with anyio.fail_after(60):
        server = oct_server(project, config_file, env={"OCT_MCP_ADMIN_POLICY": str(admin)})
        async with Client(server, elicitation_callback=human) as client:
            declined = await client.call_tool(
                "oct_write_file", {"path": "a.txt", "content": "x", "dry_run": False}
            )

    assert [("admins look first" in question) for question in human.questions] == [True]
    assert declined.is_error is True
    assert not (project / "a.txt").exists()


def start(
    project: Path, config_file: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The server started as a host starts it, with no client: it serves, or stops at start-up."""
    return subprocess.run(
        [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config_file)],
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_rule_whose_example_disagrees_stops_the_start_up_naming_both(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    rule = deny_prod(
        examples={
            "match": [{"tool": "oct_read_file", "arguments": {"path": "config/prod.yaml"}}],
            "not_match": [{"tool": "oct_read_file", "arguments": {"path": "config/prod.yaml"}}],
        }
    )
    write_config(config_file, tmp_path, rules=[rule])

    stopped = start(project, config_file)

    assert stopped.returncode == 2
    assert "rule no-prod-config" in stopped.stderr
    assert 'not_match example oct_read_file {"path": "config/prod.yaml"} matches it' in stopped.stderr


def test_an_admin_file_others_may_write_is_refused_at_start_up(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    needs_root()
    admin = admin_file(tmp_path, [deny_prod()], mode=0o666)
    write_config(config_file, tmp_path)

    stopped = start(project, config_file, {"OCT_MCP_ADMIN_POLICY": str(admin)})

    assert stopped.returncode == 2
    assert "must be owned by root and writable by root alone" in stopped.stderr


async def test_where_no_human_can_be_asked_an_ask_rule_is_answered_by_confirm(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    rule = {
        "effect": "ask",
        "tools": ["oct_read_file"],
        "when": {"paths": ["README.md"]},
        "reason": README_ASK,
    }
    write_config(config_file, tmp_path, rules=[rule])

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            asked = await client.call_tool("oct_read_file", {"path": "README.md"})
            confirmed = await client.call_tool("oct_read_file", {"path": "README.md", "confirm": True})

    assert "confirm" in listed["oct_read_file"].input_schema["properties"]
    assert text_of(asked).startswith("[oct-mcp requires_confirmation]")
    assert README_ASK in text_of(asked)
    assert "# Demo" not in text_of(asked)
    assert "# Demo" in text_of(confirmed)
