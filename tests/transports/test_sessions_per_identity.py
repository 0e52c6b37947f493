"""Handshake-era sessions per identity, through the real HTTP server: one token that opens session
after session is stopped at its own cap (503, audited) while another token opens its own; a
session it ends makes room again."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest
from replicas import INITIALIZE, create_token, replica, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_one_token_is_capped_at_its_own_sessions_and_another_is_still_served(
    project: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.log"
    config = write_config(tmp_path / "config.json", audit, http_max_sessions_per_client=2)
    greedy, other = create_token(config, "greedy"), create_token(config, "other")

    def headers(token: str) -> dict[str, str]:
        return {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}

    with anyio.fail_after(60):
        async with replica(project, config) as url, httpx2.AsyncClient(timeout=30) as http:
            opened = [await http.post(url, json=INITIALIZE, headers=headers(greedy)) for _ in range(3)]
            others = await http.post(url, json=INITIALIZE, headers=headers(other))
            ended = await http.delete(
                url,
                headers={
                    **headers(greedy),
                    "Mcp-Session-Id": opened[0].headers["mcp-session-id"],
                    "MCP-Protocol-Version": "2025-11-25",
                },
            )
            again = await http.post(url, json=INITIALIZE, headers=headers(greedy))

    assert [response.status_code for response in opened] == [200, 200, 503]
    assert others.status_code == 200
    assert ended.status_code == 200
    assert again.status_code == 200
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    refused = [r for r in records if r.get("code") == "too_many_sessions"]
    assert [(r["outcome"], r["http_status"], r["client"]["id"]) for r in refused] == [
        ("refused", 503, "http:greedy")
    ]
