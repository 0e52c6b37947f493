"""OpenTelemetry, optional: spans of every call and layer through the real server, to an in-memory
exporter in-process and to a real OTLP/HTTP receiver on loopback from the stdio server; the host's
trace followed from `_meta`; never an argument value or a secret in an attribute."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import oct_server
from git_repos import git, new_repo
from mcp import Client
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from oct_mcp.app import build_app
from oct_mcp.server import build_server
from oct_mcp.telemetry import TelemetryStatus, start_telemetry, stop_telemetry, telemetry_status

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SECRET = "ghp_" + "T3lemetry" * 4 + "Zq"
HOST_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{HOST_TRACE}-{HOST_SPAN}-01"


def test_telemetry_is_off_without_an_endpoint_and_says_why() -> None:
    assert telemetry_status({}, sdk_installed=True).reason == "off: no OTEL_EXPORTER_OTLP_ENDPOINT"


def test_telemetry_is_on_with_an_endpoint_and_the_extra_and_says_where() -> None:
    status = telemetry_status({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, sdk_installed=True)
    destination = "OTLP/HTTP to http://127.0.0.1:4318"
    assert status == TelemetryStatus(
        enabled=True, destination=destination, reason=f"on: traces and metrics by {destination}"
    )


@pytest.mark.parametrize(
    ("env", "installed", "why"),
    [
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, True, "OTEL_SDK_DISABLED"),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, False, "the otel extra is missing"),
        ({"OTEL_TRACES_EXPORTER": "none"}, True, "OTEL_TRACES_EXPORTER=none"),
        # A console exporter would write into the stdio protocol stream.
        ({"OTEL_TRACES_EXPORTER": "console"}, True, "only otlp is offered"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, True, "only http/protobuf"),
    ],
)
def test_telemetry_stays_off_where_it_cannot_or_must_not_export(
    env: dict[str, str], installed: bool, why: str
) -> None:
    status = telemetry_status(env, sdk_installed=installed)
    assert status.enabled is False
    assert why in status.reason


def test_the_server_imports_no_opentelemetry_sdk_while_telemetry_is_off(tmp_path: Path) -> None:
    # The MCP SDK itself imports the OpenTelemetry API (its no-op tracer); the SDK and the exporter,
    # which start threads and sockets, are loaded only when telemetry is on.
    code = (
        "import sys, oct_mcp.cli, oct_mcp.server, oct_mcp.telemetry as t; "
        "t.start_telemetry({}); "
        "loaded = ('opentelemetry.sdk', 'opentelemetry.exporter'); "
        "print(sorted(m for m in sys.modules if m.startswith(loaded)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = new_repo(tmp_path)
    (root / "notes.md").write_text(f"token {SECRET}\n")
    git(root, "add", "notes.md")
    git(root, "commit", "-q", "-m", "notes")
    (root / "notes.md").write_text(f"token {SECRET}\nchanged\n")
    return root


@pytest.fixture
def exporters() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    spans, metrics = InMemorySpanExporter(), InMemoryMetricReader()
    start_telemetry({}, span_exporter=spans, metric_reader=metrics)
    try:
        yield spans, metrics
    finally:
        stop_telemetry()


def _every_attribute_value(spans: Any, metrics: Any) -> list[str]:
    values = [str(v) for s in spans for v in (s.attributes or {}).values()]
    values += [s.name for s in spans]
    data = metrics.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    values += [str(v) for v in (point.attributes or {}).values()]
    return values


async def test_a_call_is_a_span_with_a_child_per_layer_under_the_hosts_trace(
    repo: Path,
    config_file: Path,
    tmp_path: Path,
    exporters: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, metrics = exporters
    config_file.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log")}))
    app = build_app(repo, config_path=config_file)
    try:
        with anyio.fail_after(60):
            async with Client(build_server(app, transport="memory")) as client:
                read = await client.call_tool(
                    "oct_search", {"pattern": SECRET, "path": "."}, meta={"traceparent": TRACEPARENT}
                )
                refused = await client.call_tool("oct_read_file", {"path": f"../{SECRET}.txt"})
                diff = await client.call_tool("oct_git_diff", {})
    finally:
        app.close()
    assert read.is_error is not True
    assert refused.is_error is True
    assert diff.is_error is not True

    finished = spans.get_finished_spans()
    calls = [s for s in finished if s.name.startswith("tools/call")]
    assert [s.name for s in calls] == [
        "tools/call oct_search",
        "tools/call oct_read_file",
        "tools/call oct_git_diff",
    ]
    search, read_file, git_diff = calls
    assert search.attributes is not None
    assert search.attributes["mcp.method.name"] == "tools/call"
    assert search.attributes["gen_ai.tool.name"] == "oct_search"
    assert "jsonrpc.request.id" in search.attributes
    # The host's trace is followed: the call's span is a child of the span named in _meta.
    assert format(search.context.trace_id, "032x") == HOST_TRACE
    assert search.parent is not None
    assert format(search.parent.span_id, "016x") == HOST_SPAN
    assert read_file.parent is None  # no traceparent: a trace of its own

    layers = [
        s
        for s in finished
        if s.name.startswith("oct.layer ") and s.context.trace_id == search.context.trace_id
    ]
    by_id = {s.context.span_id: s for s in layers}
    outermost = [s for s in layers if s.parent is not None and s.parent.span_id == search.context.span_id]
    assert len(outermost) == 1
    # The profile's order shows as nesting: each layer's span is the parent of the next one's.
    chain, current = [], outermost[0]
    while True:
        chain.append(current.attributes["oct.layer"] if current.attributes else "")
        children = [s for s in layers if s.parent is not None and s.parent.span_id == current.context.span_id]
        if not children:
            break
        (current,) = children
    assert chain == list(app.chain.layer_names)
    assert len(by_id) == len(chain)

    assert read_file.attributes is not None
    assert read_file.attributes["error.type"] == "path_refused"
    refusing = [
        s.attributes["oct.layer"]
        for s in finished
        if s.context.trace_id == read_file.context.trace_id
        and s.attributes
        and s.attributes.get("error.type")
        and s.name.startswith("oct.layer ")
    ]
    assert refusing == ["validator"]

    runs = [
        s for s in finished if s.name == "oct.sandbox.run" and s.context.trace_id == git_diff.context.trace_id
    ]
    assert len(runs) == 1
    assert runs[0].attributes is not None
    assert runs[0].attributes["process.exit.code"] == 0
    assert runs[0].attributes["oct.sandbox.backend"] in ("bubblewrap", "landlock", "native")

    values = _every_attribute_value(finished, metrics)
    assert not [v for v in values if SECRET in v or "T3lemetry" in v]
    assert "refused" not in values  # outcomes are codes, never the message text
    names = {
        m.name
        for r in metrics.get_metrics_data().resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
    }
    assert {"mcp.server.operation.duration", "oct.calls", "oct.refusals"} <= names


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps each request's path and decoded body."""

    received: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def test_the_stdio_server_exports_its_spans_to_a_real_otlp_receiver(
    repo: Path, config_file: Path, tmp_path: Path
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[tuple[str, bytes]] = []
    handler = type("Receiver", (_Receiver,), {"received": received})
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    config_file.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log")}))
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_address[1]}",
        "OTEL_SERVICE_NAME": "oct-under-test",
    }
    try:
        with anyio.fail_after(90):
            async with Client(oct_server(repo, config_file, env=env)) as client:
                result = await client.call_tool(
                    "oct_search", {"pattern": SECRET, "path": "."}, meta={"traceparent": TRACEPARENT}
                )
        assert result.is_error is not True
    finally:
        receiver.shutdown()
        receiver.server_close()

    traces = [body for path, body in received if path == "/v1/traces"]
    assert traces, [path for path, _ in received]
    spans = []
    for body in traces:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"]
            assert service == "oct-under-test"
            spans += [span for scope in resource.scope_spans for span in scope.spans]
    call = next(span for span in spans if span.name == "tools/call oct_search")
    assert call.trace_id.hex() == HOST_TRACE
    assert call.parent_span_id.hex() == HOST_SPAN
    assert any(span.name.startswith("oct.layer ") and span.parent_span_id == call.span_id for span in spans)
    everything = b"".join(body for _, body in received)
    assert SECRET.encode() not in everything
    assert any(path == "/v1/metrics" for path, _ in received)
