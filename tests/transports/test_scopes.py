"""Authorization per identity over HTTP: a token's scopes grant tools (`http_scopes`); a call they do
not grant is refused `[forbidden]` and audited before the chain runs or anyone is asked, and
`tools/list` shows each client only what its scopes grant. Through the real server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import only_text
from mcp import Client
from replicas import authorised, create_token, replica, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SCOPES = {"read": ["risk:read"], "tests": ["oct_test", "oct_run"], "all": ["*"]}
WRITE = {"path": "notes.txt", "content": "hello\n"}


def scoped_config(tmp_path: Path) -> tuple[Path, Path]:
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit)
    return config, audit


async def test_each_token_lists_and_calls_only_what_its_scopes_grant(project: Path, tmp_path: Path) -> None:
    config, audit = scoped_config(tmp_path)
    tokens = {name: create_token(config, name) for name in ("reader", "tester", "admin", "unscoped")}
    document = json.loads(config.read_text())
    document.update(
        http_scopes=SCOPES,
        http_token_scopes={"reader": ["read"], "tester": ["read", "tests"], "admin": ["all"]},
    )
    config.write_text(json.dumps(document))

    listed: dict[str, list[str]] = {}
    writes: dict[str, Any] = {}
    with anyio.fail_after(90):
        async with replica(project, config) as url:
            for name, token in tokens.items():
                async with Client(authorised(url, token)) as client:
                    listed[name] = sorted(tool.name for tool in (await client.list_tools()).tools)
                    writes[name] = await client.call_tool("oct_write_file", WRITE)
                    if name == "reader":
                        read = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert only_text(read).startswith("# Demo")
    assert "oct_read_file" in listed["reader"]
    assert "oct_write_file" not in listed["reader"]
    assert "oct_run" not in listed["reader"]
    assert set(listed["tester"]) == {*listed["reader"], "oct_test", "oct_run"}
    assert "oct_write_file" in listed["admin"]
    assert listed["unscoped"] == []
    for name in ("reader", "tester", "unscoped"):
        assert writes[name].is_error is True
        assert only_text(writes[name]).startswith(
            "[forbidden] this client's token does not grant 'oct_write_file'"
        )
    # The admin's call reached the chain: the safety gate asks (the test client cannot answer).
    assert "[forbidden]" not in only_text(writes["admin"])
    assert not (project / "notes.txt").exists()
    refused = [json.loads(line) for line in audit.read_text().splitlines() if '"code":"forbidden"' in line]
    assert sorted(r["client"]["id"] for r in refused) == ["http:reader", "http:tester", "http:unscoped"]
    assert all(r["tool"] == "oct_write_file" and r["outcome"] == "refused" for r in refused)


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"http_scopes": {"read": "risk:read"}}, "is malformed"),
        ({"http_scopes": {"read": ["risk:delete"]}}, "no tool name, risk class"),
        ({"http_scopes": {"read": ["risk:read"]}, "http_token_scopes": {"ghost": ["read"]}}, "does not have"),
        (
            {"http_scopes": {"read": ["risk:read"]}, "http_token_scopes": {"ci": ["admin"]}},
            "must list scopes",
        ),
        ({"http_scopes": ["read"]}, "is not an object"),
    ],
)
def test_a_scope_map_the_server_cannot_read_stops_it(
    project: Path, tmp_path: Path, values: dict[str, Any], says: str
) -> None:
    config, _ = scoped_config(tmp_path)
    create_token(config, "ci")
    document = json.loads(config.read_text())
    document.update(values)
    config.write_text(json.dumps(document))
    served = subprocess.run(
        [sys.executable, "-m", "oct_mcp", "serve", "--transport", "http", "--port", "0",
         "--project-root", str(project), "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert served.returncode == 2, served.stderr
    assert "configuration error" in served.stderr
    assert says in served.stderr


def test_scopes_without_any_authentication_stop_the_server(project: Path, tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.json", tmp_path / "audit.log", http_scopes={"read": ["risk:read"]}
    )
    served = subprocess.run(
        [sys.executable, "-m", "oct_mcp", "serve", "--transport", "http", "--port", "0",
         "--project-root", str(project), "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert served.returncode == 2
    assert "scopes need identities" in served.stderr


async def test_a_scope_granted_or_taken_away_in_the_config_takes_effect_without_a_restart(
    project: Path, tmp_path: Path
) -> None:
    config, _audit = scoped_config(tmp_path)
    token = create_token(config, "dev")
    document = json.loads(config.read_text())
    document.update(http_scopes={"read": ["risk:read"]}, http_token_scopes={"dev": ["read"]})
    config.write_text(json.dumps(document))

    async def lists(url: str) -> list[str]:
        async with Client(authorised(url, token)) as client:
            return sorted(tool.name for tool in (await client.list_tools()).tools)

    async def until(url: str, check: Any) -> list[str]:
        # The server looks at its config file at most once a second.
        listed = await lists(url)
        for _ in range(50):
            if check(listed):
                break
            await anyio.sleep(0.2)
            listed = await lists(url)
        return listed

    with anyio.fail_after(90):
        async with replica(project, config) as url:
            before = await lists(url)
            # The map itself changes: read also grants writes now.
            document["http_scopes"] = {"read": ["risk:read", "risk:write"]}
            config.write_text(json.dumps(document))
            widened = await until(url, lambda listed: "oct_write_file" in listed)
            # And the token loses its scope.
            document["http_token_scopes"] = {}
            config.write_text(json.dumps(document))
            emptied = await until(url, lambda listed: listed == [])

    assert "oct_read_file" in before
    assert "oct_write_file" not in before
    assert "oct_write_file" in widened
    assert emptied == []
