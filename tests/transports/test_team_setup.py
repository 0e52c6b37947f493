"""The README's "A team of five, worked through", run as written: its config, its token commands
and its two replicas' command lines, with a real Redis and real `oct-mcp serve` processes.

What a test machine cannot be is substituted, each said where it is: Redis's address, the bind
(loopback and a free port, where the README binds 0.0.0.0:8765), the project folder, the consent
key. The proxy's part is played by requests that carry the Host and Origin it forwards, each
person sent to one replica, as its `lb_policy header Authorization` does.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import redis
from clients import only_text
from mcp import Client
from redis_server import RedisServer, redis_server
from replicas import LIST_TOOLS, MODERN_HEADERS, authorised, serving

from oct_mcp.middleware.gateway import SHARED_KEY_PREFIX
from oct_mcp.spec import Risk
from oct_mcp.tools import default_catalog

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
__all__ = ["redis_server"]

README = Path(__file__).resolve().parents[2] / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
PUBLIC_ORIGIN = "https://oct.example.com"
# The proxy passes the Host and Origin of the team's public address through to the replicas.
FORWARDED = {"Host": "oct.example.com", "Origin": PUBLIC_ORIGIN}
CHECKS = ("oct_test", "oct_lint", "oct_typecheck")


def _section() -> list[tuple[str, str]]:
    """The (language, text) of each code block of the README's team walkthrough, in order."""
    text = README.read_text(encoding="utf-8")
    start = text.index("### A team of five, worked through")
    section = text[start : text.index("\n## ", start)]
    return [(match.group(1), match.group(2)) for match in _FENCE.finditer(section)]


def _commands(block: str) -> list[list[str]]:
    return [shlex.split(line) for line in block.splitlines() if line.strip() and not line.startswith("#")]


def _oct_mcp(words: Sequence[str], substitute: Callable[[str], str]) -> list[str]:
    assert words[0] == "oct-mcp", words
    return [sys.executable, "-m", "oct_mcp", *(substitute(word) for word in words[1:])]


@asynccontextmanager
async def _team(
    tmp_path: Path, project: Path, redis: RedisServer
) -> AsyncIterator[tuple[dict[str, str], dict[str, str], Path, list[Path], str]]:
    """The README's setup: tokens by person, replica URLs by id, the config, the audit logs, and
    what `token list` printed."""
    blocks = _section()
    (config_block,) = [text for language, text in blocks if language == "json"]
    token_block, replica_block = [text for language, text in blocks if language == "sh"]
    config = tmp_path / "team.json"
    document = json.loads(config_block)
    assert document["rate_limit_storage"] == "redis://redis:6379/0"
    document["rate_limit_storage"] = redis.url  # substituted: this machine's Redis
    config.write_text(json.dumps(document), encoding="utf-8")

    def substitute(word: str) -> str:
        return {
            "team.json": str(config),
            "/srv/project": str(project),
            "0.0.0.0": "127.0.0.1",  # noqa: S104 - the README's bind, replaced by loopback here
            "8765": "0",
        }.get(word, word)

    tokens: dict[str, str] = {}
    listed = ""
    for words in _commands(token_block):
        done = subprocess.run(
            _oct_mcp(words, substitute), capture_output=True, timeout=60, check=True, stdin=subprocess.DEVNULL
        )
        if words[1:3] == ["token", "create"]:
            tokens[words[3]] = done.stdout.decode().strip()
        else:
            listed = done.stdout.decode()
    key = secrets.token_urlsafe(48)  # substituted: the deployment's secret
    urls: dict[str, str] = {}
    logs: list[Path] = []
    async with AsyncExitStack() as stack:
        for words in _commands(replica_block):
            assignments = [word for word in words if re.fullmatch(r"[A-Z_]+=.*", word)]
            environ = dict(assignment.split("=", 1) for assignment in assignments)
            assert environ["OCT_MCP_CONSENT_KEY"] == "$KEY"
            replica_id = environ["OCT_MCP_REPLICA_ID"]
            # Its own machine: its own home, where its audit log is.
            home = tmp_path / f"home-{replica_id}"
            home.mkdir()
            environ.update(OCT_MCP_CONSENT_KEY=key, HOME=str(home))
            argv = _oct_mcp(words[len(assignments) :], substitute)
            urls[replica_id] = await stack.enter_async_context(serving(argv, environ))
            logs.append(home / ".oct-mcp" / "audit.log")
        yield tokens, urls, config, logs, listed


async def _listed(url: str, token: str) -> list[str]:
    async with Client(authorised(url, token, FORWARDED), mode="legacy") as client:
        return [tool.name for tool in (await client.list_tools()).tools]


async def _call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> str:
    async with Client(authorised(url, token, FORWARDED)) as client:
        return only_text(await client.call_tool(tool, arguments))


async def _status_of_a_listing(url: str, token: str) -> int:
    headers = {**MODERN_HEADERS, **FORWARDED, "Mcp-Method": "tools/list", "Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(timeout=30) as http:
        return (await http.post(url, json=LIST_TOOLS, headers=headers)).status_code


async def test_the_readmes_team_of_five_works_as_written(
    tmp_path: Path, project: Path, redis_server: RedisServer
) -> None:
    catalog = default_catalog()
    reads = [name for name, spec in catalog.items() if spec.risk is Risk.READ]
    developers = [name for name in catalog if name in reads or name in CHECKS]
    with anyio.fail_after(240):
        async with _team(tmp_path, project, redis_server) as (tokens, urls, config, logs, listed):
            # The proxy's policy: each person always on one replica.
            home = {"ana": urls["a"], "bo": urls["b"], "cy": urls["a"], "dee": urls["b"], "eve": urls["a"]}
            shown = {person: await _listed(home[person], token) for person, token in tokens.items()}
            eve_tests = await _call(home["eve"], tokens["eve"], "oct_test", {})
            bo_writes = await _call(
                home["bo"], tokens["bo"], "oct_write_file", {"path": "x.txt", "content": "x"}
            )
            # A 2026-07-28 client needs no stickiness: Dee's reads on either replica, one count.
            dee_reads = [
                await _call(url, tokens["dee"], "oct_read_file", {"path": "README.md"})
                for url in urls.values()
            ]
            revoke = shlex.split("oct-mcp token revoke eve --config team.json")
            subprocess.run(
                _oct_mcp(revoke, lambda word: str(config) if word == "team.json" else word),
                capture_output=True,
                timeout=60,
                check=True,
            )
            refused_after = {}
            deadline = time.monotonic() + 10
            for replica_id, url in urls.items():
                while (status := await _status_of_a_listing(url, tokens["eve"])) != 401:
                    assert time.monotonic() < deadline, f"eve's revoked token still served by {replica_id}"
                    await anyio.sleep(0.2)
                refused_after[replica_id] = status
            ana_still = await _status_of_a_listing(urls["b"], tokens["ana"])

    assert set(tokens) == {"ana", "bo", "cy", "dee", "eve"}
    assert listed.splitlines() == [
        "ana\tno expiry\tscopes all",
        "bo\tno expiry\tscopes read,check",
        "cy\tno expiry\tscopes read,check",
        "dee\tno expiry\tscopes read,check",
        "eve\tno expiry\tscopes read",
    ]
    assert shown == {
        "ana": list(catalog),
        "bo": developers,
        "cy": developers,
        "dee": developers,
        "eve": reads,
    }
    assert len(catalog) == 29  # the README says Ana lists all 29
    assert eve_tests.startswith("[forbidden]")
    assert bo_writes.startswith("[forbidden]")
    assert [text.startswith("# Demo") for text in dee_reads] == [True, True]
    assert refused_after == {"a": 401, "b": 401}
    assert ana_still == 200
    # The calls that reached the chain were counted in the one Redis, whichever replica served
    # them: Dee's two reads, one on each (listings are not calls; a [forbidden] is refused before).
    store = redis.Redis.from_url(redis_server.url)
    counted = {key.decode(): store.llen(key) for key in store.scan_iter(f"{SHARED_KEY_PREFIX}*")}
    assert counted == {f"{SHARED_KEY_PREFIX}:LIMITER/http:dee/120/1/minute": 2}
    # Each replica's audit log names the people it served and itself, and verifies intact.
    records = {log: [json.loads(line) for line in log.read_text().splitlines()] for log in logs}
    assert {r.get("replica") for r in records[logs[0]]} == {"a"}
    assert {r.get("replica") for r in records[logs[1]]} == {"b"}
    served = {
        (r["client"]["id"], r["tool"], r["outcome"]) for rs in records.values() for r in rs if r.get("tool")
    }
    assert served == {
        ("http:eve", "oct_test", "refused"),
        ("http:bo", "oct_write_file", "refused"),
        ("http:dee", "oct_read_file", "ok"),
    }
    verify = [sys.executable, "-m", "oct_mcp", "audit", "verify", *map(str, logs)]
    verified = subprocess.run(verify, capture_output=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert verified.returncode == 0, verified.stdout
    assert [line.split(": ")[1] for line in verified.stdout.decode().splitlines()] == ["intact"] * 2
