"""Rules over the calling client: a rule whose `client` globs name one person's token applies to
that person alone. Through the real HTTP server, two bearer tokens, the same calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from clients import only_text
from mcp import Client
from replicas import authorised, create_token, replica, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

RULE = {
    "name": "contractors-keep-out-of-billing",
    "effect": "deny",
    "tools": ["*"],
    "when": {"paths": ["billing/"], "client": ["http:contractor-*"]},
    "reason": "billing code is for staff only",
    "examples": {
        "match": [
            {
                "tool": "oct_read_file",
                "arguments": {"path": "billing/rates.py"},
                "client": "http:contractor-ann",
            }
        ],
        "not_match": [
            {"tool": "oct_read_file", "arguments": {"path": "billing/rates.py"}, "client": "http:staff"}
        ],
    },
}


async def test_a_rule_over_clients_denies_one_token_what_another_may_read_and_hides_it_from_its_listings(
    project: Path, tmp_path: Path
) -> None:
    (project / "billing").mkdir()
    (project / "billing" / "rates.py").write_text("RATE = 42\n")
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log")
    tokens = {name: create_token(config, name) for name in ("staff", "contractor-ann")}
    document = json.loads(config.read_text())
    document["rules"] = [RULE]
    config.write_text(json.dumps(document))

    reads, listings = {}, {}
    with anyio.fail_after(90):
        async with replica(project, config) as url:
            for name, token in tokens.items():
                async with Client(authorised(url, token)) as client:
                    reads[name] = await client.call_tool("oct_read_file", {"path": "billing/rates.py"})
                    listings[name] = await client.call_tool("oct_list_files", {})

    assert reads["staff"].is_error is False
    assert "RATE = 42" in only_text(reads["staff"])
    assert reads["contractor-ann"].is_error is True
    denied = "[policy] oct_read_file is denied by rule contractors-keep-out-of-billing (user tier): "
    assert only_text(reads["contractor-ann"]).startswith(denied + "billing code is for staff only")
    assert "billing/rates.py" in only_text(listings["staff"])
    assert "billing" not in only_text(listings["contractor-ann"])
    refused = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    refused = [r for r in refused if r.get("outcome") == "refused" and r["tool"] == "oct_read_file"]
    assert [r["client"]["id"] for r in refused] == ["http:contractor-ann"]


def test_policy_check_judges_a_call_as_the_client_it_names(project: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log", rules=[RULE])
    base = [
        sys.executable,
        "-m",
        "oct_mcp",
        "policy",
        "check",
        "oct_read_file",
        "--json",
        '{"path": "billing/x.py"}',
    ]
    base += ["--project-root", str(project), "--config", str(config)]

    def check(*extra: str) -> str:
        done = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60, check=True)
        return done.stdout

    contractor = check("--client", "http:contractor-bob")
    staff = check("--client", "http:staff")
    local = check()

    assert "client: http:contractor-bob\n" in contractor
    assert "decision: deny\nby: rule contractors-keep-out-of-billing (user tier" in contractor
    assert "decision: none" in staff
    assert "client: stdio\n" in local
    assert "decision: none" in local
