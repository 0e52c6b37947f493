"""Three oct-mcp replicas (subprocesses) and one Redis: one rate limit, one consent key, own audit chains."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import only_text
from mcp import Client
from redis_server import RedisServer, redis_server
from replicas import authorised, replica, write_config

from oct_mcp.transports.auth import hash_token, new_token

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
__all__ = ["redis_server"]

NAMES = ("a", "b", "c")


async def say_yes(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


@asynccontextmanager
async def three_replicas(
    project: Path, tmp_path: Path, redis: RedisServer, token: str, limit: int
) -> AsyncIterator[list[str]]:
    """Replicas a, b, c: one config (Redis, the token's hash), each its own audit log and replica id."""
    key = secrets.token_urlsafe(48)
    async with AsyncExitStack() as stack:
        urls = []
        for name in NAMES:
            config = write_config(
                tmp_path / f"config-{name}.json",
                tmp_path / f"audit-{name}.log",
                rate_limit_per_minute=limit,
                rate_limit_storage=redis.url,
                http_tokens={"ci": hash_token(token)},
            )
            environ = {"OCT_MCP_REPLICA_ID": name, "OCT_MCP_CONSENT_KEY": key}
            urls.append(await stack.enter_async_context(replica(project, config, environ=environ)))
        yield urls


async def test_a_burst_of_three_times_the_limit_spread_over_three_replicas_lets_exactly_the_limit_through(
    project: Path, tmp_path: Path, redis_server: RedisServer
) -> None:
    token = new_token()
    texts: list[str] = []
    with anyio.fail_after(120):
        async with (
            three_replicas(project, tmp_path, redis_server, token, limit=5) as urls,
            AsyncExitStack() as stack,
        ):
            clients = [await stack.enter_async_context(Client(authorised(url, token))) for url in urls]
            for index in range(15):
                result = await clients[index % 3].call_tool("oct_read_file", {"path": "README.md"})
                texts.append(only_text(result))

    assert sum(text.startswith("# Demo") for text in texts) == 5
    assert sum(text.startswith("[rate_limited]") for text in texts) == 10
    logs = [tmp_path / f"audit-{name}.log" for name in NAMES]
    replicas = {json.loads(line)["replica"] for log in logs for line in log.read_text().splitlines()}
    assert replicas == set(NAMES)
    argv = [sys.executable, "-m", "oct_mcp", "audit", "verify", *map(str, logs)]
    verified = subprocess.run(argv, capture_output=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert verified.returncode == 0
    assert [line.split(": ")[1] for line in verified.stdout.decode().splitlines()] == ["intact"] * 3


async def test_redis_gone_refuses_calls_on_every_replica_and_they_are_served_again_when_it_is_back(
    project: Path, tmp_path: Path, redis_server: RedisServer
) -> None:
    token = new_token()
    read = {"path": "README.md"}
    with anyio.fail_after(120):
        async with (
            three_replicas(project, tmp_path, redis_server, token, limit=100) as urls,
            AsyncExitStack() as stack,
        ):
            clients = [await stack.enter_async_context(Client(authorised(url, token))) for url in urls]
            redis_server.stop()
            during = [only_text(await client.call_tool("oct_read_file", read)) for client in clients]
            redis_server.start()
            after = [only_text(await client.call_tool("oct_read_file", read)) for client in clients]

    assert [text.split("]")[0] for text in during] == ["[rate_limit_unavailable"] * 3
    assert all(text.startswith("# Demo") for text in after)


async def test_a_consent_asked_by_one_replica_is_answered_through_another(
    project: Path, tmp_path: Path, redis_server: RedisServer
) -> None:
    token = new_token()
    write = {"path": "notes.txt", "content": "hello\n", "dry_run": False}
    accept = types.ElicitResult(action="accept", content={"approve": True})
    with anyio.fail_after(120):
        async with (
            three_replicas(project, tmp_path, redis_server, token, limit=100) as urls,
            Client(authorised(urls[0], token), elicitation_callback=say_yes) as asker,
            Client(authorised(urls[1], token), elicitation_callback=say_yes) as answerer,
        ):
            first = await asker.session.call_tool("oct_write_file", write, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            written_before = (project / "notes.txt").exists()
            (key,) = first.input_requests or {}
            answered = await answerer.session.call_tool(
                "oct_write_file",
                write,
                input_responses={key: accept},
                request_state=first.request_state,
                allow_input_required=True,
            )

    assert written_before is False
    assert isinstance(answered, types.CallToolResult)
    assert answered.is_error is False
    assert (project / "notes.txt").read_text() == "hello\n"


async def test_a_consent_answered_through_one_replica_cannot_be_replayed_through_another(
    project: Path, tmp_path: Path, redis_server: RedisServer
) -> None:
    token = new_token()
    write = {"path": "notes.txt", "content": "hello\n", "dry_run": False}
    accept = types.ElicitResult(action="accept", content={"approve": True})
    with anyio.fail_after(120):
        async with (
            three_replicas(project, tmp_path, redis_server, token, limit=100) as urls,
            Client(authorised(urls[0], token), elicitation_callback=say_yes) as asker,
            Client(authorised(urls[1], token), elicitation_callback=say_yes) as answerer,
            Client(authorised(urls[2], token), elicitation_callback=say_yes) as replayer,
        ):
            first = await asker.session.call_tool("oct_write_file", write, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            (key,) = first.input_requests or {}
            retry: dict[str, Any] = {
                "input_responses": {key: accept},
                "request_state": first.request_state,
                "allow_input_required": True,
            }
            answered = await answerer.session.call_tool("oct_write_file", write, **retry)
            (project / "notes.txt").unlink()
            replayed = await replayer.session.call_tool("oct_write_file", write, **retry)

    assert isinstance(answered, types.CallToolResult)
    assert answered.is_error is False
    assert isinstance(replayed, types.CallToolResult)
    assert only_text(replayed).startswith("[consent_replayed]")
    assert not (project / "notes.txt").exists()
