"""A bearer token's lifetime through the real HTTP server: it stops at its expiry, and tokens added,
replaced or removed in the config take effect without a restart (the server reads the file again
when it changes); a config that no longer yields usable tokens accepts none."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from replicas import LIST_TOOLS, MODERN_HEADERS, create_token, replica, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def status_of(url: str, token: str) -> int:
    headers = {**MODERN_HEADERS, "Authorization": f"Bearer {token}", "Mcp-Method": "tools/list"}
    async with httpx2.AsyncClient(timeout=30) as http:
        return (await http.post(url, json=LIST_TOOLS, headers=headers)).status_code


async def until_status(url: str, token: str, wanted: int) -> int:
    """The status the server gives `token`, asked again while it is not `wanted` (for 10 s at most):
    the server looks at its config file at most once a second."""
    deadline = time.monotonic() + 10
    status = await status_of(url, token)
    while status != wanted and time.monotonic() < deadline:
        await anyio.sleep(0.2)
        status = await status_of(url, token)
    return status


def token_cli(config: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "oct_mcp", "token", "create", *arguments, "--config", str(config)]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL
    )


async def test_a_token_is_refused_from_its_expiry_on(project: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log")
    past = token_cli(config, "old", "--expires", "2020-01-01")
    future = token_cli(config, "current", "--expires", "2999-12-31T18:00:00Z")
    assert past.returncode == future.returncode == 0
    assert json.loads(config.read_text())["http_token_expiry"] == {
        "old": "2020-01-01",
        "current": "2999-12-31T18:00:00Z",
    }

    with anyio.fail_after(60):
        async with replica(project, config) as url:
            assert await status_of(url, past.stdout.strip()) == 401
            assert await status_of(url, future.stdout.strip()) == 200


def test_an_expiry_that_is_no_time_is_refused_by_the_command(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log")
    made = token_cli(config, "ci", "--expires", "next week")
    assert made.returncode == 2
    assert "no ISO 8601 date" in made.stderr
    assert "http_tokens" not in json.loads(config.read_text())


async def test_tokens_added_and_removed_take_effect_without_a_restart(project: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.json", tmp_path / "audit.log")
    first = create_token(config, "first")

    with anyio.fail_after(90):
        async with replica(project, config) as url:
            assert await status_of(url, first) == 200
            second = create_token(config, "second")
            assert await until_status(url, second, 200) == 200
            # Removed from the file: refused from then on, the other token still served.
            document = json.loads(config.read_text())
            del document["http_tokens"]["first"]
            config.write_text(json.dumps(document))
            assert await until_status(url, first, 401) == 401
            assert await status_of(url, second) == 200
            # A file that no longer yields usable tokens accepts none (fails closed).
            document["http_token_expiry"] = {"second": "whenever"}
            config.write_text(json.dumps(document))
            assert await until_status(url, second, 401) == 401
