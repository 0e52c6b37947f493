"""OpenTelemetry's cost per call: oct_read_file through the server and the full default chain, with
telemetry off (as shipped), on with an in-memory exporter, and on with OTLP/HTTP export to a receiver
on loopback, against the reference: the same server with the call's span helper taken out (the code
as it was before telemetry). Side by side in one run, through the SDK's in-memory client.

Goals: off within 2% of the reference (noise); on, in memory, within 1.5x (a span per call and one
per layer of the default profile); OTLP within 1.5x too (the export runs in a background thread, in
batches, but that thread shares the two cores).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

import anyio
from _common import Comparison, arguments, interleave_async, print_table
from mcp import Client
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import oct_mcp.transports.consent_adapter as consent_adapter
from oct_mcp.app import App, build_app
from oct_mcp.diagnostics import configure_diagnostics
from oct_mcp.server import build_server
from oct_mcp.telemetry import call_span, start_telemetry, stop_telemetry

CALLS_PER_ROUND: Final = 100
FILE: Final = "notes.md"


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _build(project: Path, name: str) -> App:
    folder = project / name
    folder.mkdir()
    (folder / FILE).write_text("# Notes\n\n" + "- check the build and the docs\n" * 12)
    config = folder / "config.json"
    config.write_text(
        json.dumps({"audit_log_path": str(project / f"{name}.log"), "rate_limit_per_minute": 10_000})
    )
    return build_app(folder, config_path=config, environ={})


async def _calls(client: Client, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        result = await client.call_tool("oct_read_file", {"path": FILE})
        if result.is_error:
            raise RuntimeError(f"the call failed: {result.content}")
    return (time.perf_counter() - started) / count


def _measure(
    client: Client, *, start: Callable[[], object] | None = None, reference: bool = False
) -> Callable[[], Awaitable[float]]:
    async def measure() -> float:
        if reference:
            consent_adapter.call_span = lambda facts: contextlib.nullcontext()  # type: ignore[assignment]
        if start is not None:
            start()
        try:
            return await _calls(client, CALLS_PER_ROUND)
        finally:
            consent_adapter.call_span = call_span
            if start is not None:
                stop_telemetry()  # the flush is not timed: it runs once per batch, off the call path

    return measure


async def _run(rounds: int, project: Path, endpoint: str) -> list[list[float]]:
    plain_app = _build(project, "plain")
    start_telemetry({}, span_exporter=InMemorySpanExporter(), metric_reader=InMemoryMetricReader())
    traced_app = _build(project, "traced")  # built while on: its layers are wrapped in spans
    stop_telemetry()
    otlp_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "oct-bench"}

    def in_memory() -> object:
        return start_telemetry({}, span_exporter=InMemorySpanExporter(), metric_reader=InMemoryMetricReader())

    try:
        async with (
            Client(build_server(plain_app, transport="memory")) as plain,
            Client(build_server(traced_app, transport="memory")) as traced,
        ):
            measures = [
                _measure(plain, reference=True),
                _measure(plain),
                _measure(traced, start=in_memory),
                _measure(traced, start=lambda: start_telemetry(otlp_env)),
            ]
            for measure in measures:
                await measure()
            return await interleave_async(rounds, measures)
    finally:
        plain_app.close()
        traced_app.close()


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=15)
    configure_diagnostics(1)
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    try:
        with tempfile.TemporaryDirectory() as temp:
            reference, off, memory, otlp = anyio.run(_run, args.rounds, Path(temp).resolve(), endpoint)
    finally:
        receiver.shutdown()
        receiver.server_close()
    print_table(
        [
            Comparison("a call, telemetry off / before telemetry", off, reference, 1.02, "us"),
            Comparison("a call, spans to memory / before telemetry", memory, reference, 1.5, "us"),
            Comparison("a call, OTLP/HTTP export / before telemetry", otlp, reference, 1.5, "us"),
        ],
        args.rounds,
    )


if __name__ == "__main__":
    main()
