"""oct-mcp over streamable HTTP under load: one replica and three (round-robin) against a bare SDK server.

N concurrent clients (1, 8, 32), each with its own token, make read calls, in each protocol era:
2026-07-28 (each request self-contained) and the handshake era (`initialize`, then a session).
Side by side per round: calls per second, p50 and p99 latency, the servers' CPU per call. Goals
(issue 35) in 2026-07-28: >= 0.9x the bare server's calls/s and <= 1.2x its CPU per call, at 1
and 8 clients; the handshake era's ratios are shown beside them. Then the replica's RSS before and
after `--rss-calls` calls, and, where redis-server is installed, the rate limit's exactness across
three replicas (a burst of 3x the limit lets exactly the limit through). Loopback only; every
loop is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from oct_mcp.transports.auth import hash_token, new_token

CLIENT_COUNTS: Final = (1, 8, 32)
CALLS_PER_MEASURE: Final = 256
"""Calls per measurement, spread over the clients."""
SERVING: Final = "oct-mcp: serving "
FILE_TEXT: Final = "def answer() -> int:\n    return 42\n" * 20
BURST_LIMIT: Final = 20
RSS_CALLS: Final = 10_000
SMOKE_RSS_CALLS: Final = 256
GOAL_RATE: Final = 0.9
GOAL_CPU: Final = 1.2
GOAL_P99: Final = 1.5
ERAS: Final = {"2026-07-28": "auto", "handshake": "legacy"}
"""Each protocol era, by the SDK client's mode that speaks it (auto: 2026-07-28 where the server has it)."""
GOAL_ERA: Final = "2026-07-28"


def _serve_bare(project: Path) -> None:
    """The reference: a bare SDK Server with one read tool, on the SDK's own streamable HTTP app."""
    from typing import Any as AnyType

    import mcp_types as types
    import uvicorn
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import Server

    tool = types.Tool(
        name="oct_read_file",
        description="Read a file.",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )

    async def list_tools(
        ctx: ServerRequestContext[AnyType], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(
        ctx: ServerRequestContext[AnyType], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        path = anyio.Path(project / str((params.arguments or {})["path"]))
        return types.CallToolResult(content=[types.TextContent(type="text", text=await path.read_text())])

    server = Server("bare", version="0", on_list_tools=list_tools, on_call_tool=call_tool)
    # As uvicorn makes it when it binds host:port itself: with the protocol named, asyncio sets
    # TCP_NODELAY on each accepted connection (left at 0, every SSE event waits ~40 ms for an ACK).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    listener.listen(2048)
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    print(f"{SERVING}http://127.0.0.1:{listener.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    anyio.run(uvicorn.Server(config).serve, [listener])


class Process:
    """A server subprocess, its URL read from its stderr, stderr drained after."""

    def __init__(self, argv: list[str], environ: dict[str, str] | None = None) -> None:
        self.popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(environ or {})}
        )
        assert self.popen.stderr is not None
        seen = []
        for raw in self.popen.stderr:
            line = raw.decode(errors="replace")
            seen.append(line)
            if line.startswith(SERVING):
                self.url = line[len(SERVING) :].strip()
                break
        else:
            raise RuntimeError("the server ended before serving:\n" + "".join(seen))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.popen.stderr is not None
        for _ in self.popen.stderr:
            pass

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """User and system CPU this server has used so far."""
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.popen.terminate()
        self.popen.wait(timeout=60)


def oct_replica(project: Path, work: Path, name: str, tokens: Sequence[str], **fields: Any) -> Process:
    config = work / f"config-{name}.json"
    document = {
        "audit_log_path": str(work / f"audit-{name}.log"),
        "rate_limit_per_minute": 10_000,
        "http_tokens": {f"c{index}": hash_token(token) for index, token in enumerate(tokens)},
        **fields,
    }
    config.write_text(json.dumps(document), encoding="utf-8")
    argv = [sys.executable, "-m", "oct_mcp", "serve", "--transport", "http", "--port", "0"]
    argv += ["--project-root", str(project), "--config", str(config)]
    return Process(argv, {"OCT_MCP_REPLICA_ID": name})


@asynccontextmanager
async def session(url: str, token: str | None, mode: Any = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def measure(
    urls: Sequence[str], tokens: Sequence[str | None], clients: int, mode: Any = "auto"
) -> tuple[float, list[float]]:
    """(calls per second, latencies): `clients` at once, each rotating over `urls`, in `mode`'s era."""
    latencies: list[float] = []
    per_client = max(1, CALLS_PER_MEASURE // clients)
    async with AsyncExitStack() as stack:
        pools = [
            [await stack.enter_async_context(session(url, tokens[index % len(tokens)], mode)) for url in urls]
            for index in range(clients)
        ]

        async def run(pool: list[Client]) -> None:
            for call in range(per_client):
                started = time.perf_counter()
                result = await pool[call % len(pool)].call_tool("oct_read_file", {"path": "data.py"})
                latencies.append(time.perf_counter() - started)
                if result.is_error:
                    raise RuntimeError("a call failed under load")

        started = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for pool in pools:
                tasks.start_soon(run, pool)
        elapsed = time.perf_counter() - started
    return len(latencies) / elapsed, latencies


def p(latencies: list[float], q: float) -> float:
    return statistics.quantiles(latencies, n=100)[q - 1] if len(latencies) >= 2 else latencies[0]


async def burst(urls: Sequence[str], token: str) -> int:
    """3x the limit spread over the replicas at once; how many got through."""
    admitted = 0
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(session(url, token)) for url in urls]

        async def one(index: int) -> None:
            nonlocal admitted
            result = await clients[index % len(clients)].call_tool("oct_read_file", {"path": "data.py"})
            admitted += not result.is_error

        async with anyio.create_task_group() as tasks:
            for index in range(3 * BURST_LIMIT):
                tasks.start_soon(one, index)
    return admitted


async def rss_run(url: str, tokens: Sequence[str], calls: int) -> None:
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(session(url, token)) for token in tokens[:8]]

        async def run(client: Client, count: int) -> None:
            for _ in range(count):
                await client.call_tool("oct_read_file", {"path": "data.py"})

        async with anyio.create_task_group() as tasks:
            for client in clients:
                tasks.start_soon(run, client, calls // len(clients))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median taken)")
    parser.add_argument(
        "--rss-calls",
        type=int,
        help="calls between the two RSS readings (default 10,000; 256 with --rounds 1, the smoke run)",
    )
    parser.add_argument("--serve-bare", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare is not None:
        _serve_bare(args.serve_bare)
        return
    if args.rss_calls is None:
        args.rss_calls = SMOKE_RSS_CALLS if args.rounds == 1 else RSS_CALLS
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        project = work / "project"
        project.mkdir()
        (project / "data.py").write_text(FILE_TEXT)
        tokens = [new_token() for _ in range(max(CLIENT_COUNTS))]
        bare = Process([sys.executable, __file__, "--serve-bare", str(project)])
        replicas = [oct_replica(project, work, name, tokens) for name in ("a", "b", "c")]
        try:
            report(args, bare, replicas, tokens, project, work)
        finally:
            for process in [bare, *replicas]:
                process.stop()


def report(
    args: argparse.Namespace,
    bare: Process,
    replicas: list[Process],
    tokens: list[str],
    project: Path,
    work: Path,
) -> None:
    setups = {
        "bare SDK": ([bare.url], [None]),
        "oct-mcp x1": ([replicas[0].url], tokens),
        "oct-mcp x3": ([r.url for r in replicas], tokens),
    }
    servers = {"bare SDK": [bare], "oct-mcp x1": [replicas[0]], "oct-mcp x3": replicas}
    rates: dict[tuple[str, str, int], list[float]] = {}
    lat: dict[tuple[str, str, int], list[float]] = {}
    cpu: dict[tuple[str, str, int], list[float]] = {}
    for _ in range(args.rounds):
        order = [(name, era, clients) for name in setups for era in ERAS for clients in CLIENT_COUNTS]
        random.shuffle(order)
        for name, era, clients in order:
            urls, keys = setups[name]
            cpu_before = sum(server.cpu_seconds() for server in servers[name])
            rate, latencies = anyio.run(measure, urls, keys, clients, ERAS[era])
            used = sum(server.cpu_seconds() for server in servers[name]) - cpu_before
            cpu.setdefault((name, era, clients), []).append(used / len(latencies))
            rates.setdefault((name, era, clients), []).append(rate)
            lat.setdefault((name, era, clients), []).extend(latencies)
    print(f"rounds: {args.rounds}, cores: {os.cpu_count()}, calls per measurement: {CALLS_PER_MEASURE}")
    print("| setup | era | clients | calls/s (median) | p50 | p99 | server CPU per call |")
    print("|---|---|---|---|---|---|---|")
    for name in setups:
        for era in ERAS:
            for clients in CLIENT_COUNTS:
                key = (name, era, clients)
                print(
                    f"| {name} | {era} | {clients} | {statistics.median(rates[key]):.0f} "
                    f"| {p(lat[key], 50) * 1e3:.2f} ms | {p(lat[key], 99) * 1e3:.2f} ms "
                    f"| {statistics.median(cpu[key]) * 1e3:.2f} ms |"
                )
    print()
    print("| claim | subject | reference | ratio | goal | |")
    print("|---|---|---|---|---|---|")
    for era in ERAS:
        for clients in (1, 8):
            ours, bare_key = ("oct-mcp x1", era, clients), ("bare SDK", era, clients)
            rate_ratio = statistics.median(rates[ours]) / statistics.median(rates[bare_key])
            cpu_ratio = statistics.median(cpu[ours]) / statistics.median(cpu[bare_key])
            judged = era == GOAL_ERA
            print(
                f"| calls/s, {era}, {clients} client(s), oct-mcp x1 over bare "
                f"| {statistics.median(rates[ours]):.0f} | {statistics.median(rates[bare_key]):.0f} "
                f"| {rate_ratio:.3f} | {f'>= {GOAL_RATE}' if judged else '(shown)'} "
                f"| {('met' if rate_ratio >= GOAL_RATE else 'MISSED') if judged else ''} |"
            )
            print(
                f"| server CPU per call, {era}, {clients} client(s), oct-mcp x1 over bare "
                f"| {statistics.median(cpu[ours]) * 1e3:.2f} ms "
                f"| {statistics.median(cpu[bare_key]) * 1e3:.2f} ms "
                f"| {cpu_ratio:.3f} | {f'<= {GOAL_CPU}' if judged else '(shown)'} "
                f"| {('met' if cpu_ratio <= GOAL_CPU else 'MISSED') if judged else ''} |"
            )
        ours, bare_key = ("oct-mcp x1", era, 8), ("bare SDK", era, 8)
        p99_ratio = p(lat[ours], 99) / p(lat[bare_key], 99)
        print(
            f"| p99, {era}, 8 clients, oct-mcp x1 over bare | {p(lat[ours], 99) * 1e3:.2f} ms "
            f"| {p(lat[bare_key], 99) * 1e3:.2f} ms | {p99_ratio:.3f} | <= {GOAL_P99} "
            f"| {'met' if p99_ratio <= GOAL_P99 else 'MISSED'} |"
        )
    before = replicas[0].rss_kib()
    anyio.run(rss_run, replicas[0].url, tokens, args.rss_calls)
    after = replicas[0].rss_kib()
    print(f"\nRSS of replica a: {before} KiB before, {after} KiB after {args.rss_calls} more calls")
    print(exactness(project, work))


def exactness(project: Path, work: Path) -> str:
    program = shutil.which("redis-server")
    if program is None:
        return "rate limit across replicas: not measured (redis-server is not installed)"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    redis = subprocess.Popen(
        [program, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert redis.stdout is not None
        for line in redis.stdout:
            if b"Ready to accept connections" in line:
                break
        threading.Thread(target=lambda: [None for _ in redis.stdout or ()], daemon=True).start()
        token = new_token()
        url = f"redis://127.0.0.1:{port}/0"
        limited = [
            oct_replica(
                project, work, f"r{name}", [token], rate_limit_storage=url, rate_limit_per_minute=BURST_LIMIT
            )
            for name in ("a", "b", "c")
        ]
        try:
            admitted = anyio.run(burst, [r.url for r in limited], token)
        finally:
            for process in limited:
                process.stop()
    finally:
        redis.terminate()
        redis.wait(timeout=30)
    verdict = "exact" if admitted == BURST_LIMIT else "NOT EXACT"
    return (
        f"rate limit across 3 replicas (Redis): {3 * BURST_LIMIT} calls at once, limit {BURST_LIMIT}, "
        f"{admitted} let through: {verdict}"
    )


if __name__ == "__main__":
    main()
