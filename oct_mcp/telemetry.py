"""OpenTelemetry traces and metrics of every call, optional: on when the standard OTEL_* variables ask
for OTLP export and the `otel` extra is installed; nothing of OpenTelemetry is imported otherwise.

A call is a SERVER span named as the MCP semantic conventions say (`tools/call TOOL`, with
`mcp.method.name`, `gen_ai.tool.name`, `jsonrpc.request.id`, `mcp.session.id` hashed,
`network.transport`, `error.type`), a child of the host's trace when the request's `_meta` carries a
`traceparent`. Each layer of the chain is a child span (`oct.layer NAME`), so a profile's order shows
as nesting; the human's consent wait and the sandbox run are spans of their own. No argument value
and no output is ever an attribute: the audit's argument digest stands for the arguments.

Off, every helper here is a shared no-op: the chain is not even wrapped (`build_chain`).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib.metadata
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import OctError

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "TelemetryStatus",
    "call_span",
    "is_on",
    "note_failure",
    "span",
    "start_telemetry",
    "stop_telemetry",
    "telemetry_status",
    "traced_layer",
]

_DEFAULT_ENDPOINT: Final = "http://localhost:4318"
_EXPORT_TIMEOUT_SECONDS: Final = 3.0
_FALSE: Final = frozenset({"", "false", "0", "no"})
_SCOPE: Final = "oct_mcp"
_TRANSPORTS: Final = {"stdio": "pipe", "http": "tcp"}
_LAYER_OF_REFUSAL: Final = "_oct_refused_in_layer"

_log = get_logger(__name__)
_CALL_ERROR: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("oct_call_error", default=None)
"""The `error.type` of the call running in this context, once `note_failure` has said it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetryStatus:
    """What the OTEL_* variables and the installed packages say about export."""

    enabled: bool
    destination: str
    reason: str


def _sdk_installed() -> bool:
    # The distribution's metadata, not find_spec: a submodule's spec imports its parent package.
    try:
        importlib.metadata.version("opentelemetry-sdk")
        importlib.metadata.version("opentelemetry-exporter-otlp-proto-http")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def telemetry_status(
    environ: Mapping[str, str] | None = None, *, sdk_installed: bool | None = None
) -> TelemetryStatus:
    """Whether traces and metrics are exported, and where (for `doctor` and the start).

    On when OTEL_EXPORTER_OTLP_ENDPOINT (or the traces one) or OTEL_TRACES_EXPORTER=otlp is set, the
    `otel` extra is installed and OTEL_SDK_DISABLED is not true. Only OTLP over HTTP is offered: a
    console exporter would write into stdio's protocol stream.
    """
    env = os.environ if environ is None else environ
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not endpoint and not exporter:
        return TelemetryStatus(enabled=False, destination="", reason="off: no OTEL_EXPORTER_OTLP_ENDPOINT")
    if exporter == "none":
        return TelemetryStatus(enabled=False, destination="", reason="off: OTEL_TRACES_EXPORTER=none")
    if exporter not in ("", "otlp"):
        return TelemetryStatus(
            enabled=False,
            destination="",
            reason=f"off: OTEL_TRACES_EXPORTER={exporter} (only otlp is offered)",
        )
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() not in _FALSE:
        return TelemetryStatus(enabled=False, destination="", reason="off: OTEL_SDK_DISABLED is set")
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    if protocol not in ("", "http/protobuf"):
        return TelemetryStatus(
            enabled=False,
            destination="",
            reason=f"off: OTLP protocol {protocol} (only http/protobuf is offered)",
        )
    installed = _sdk_installed() if sdk_installed is None else sdk_installed
    if not installed:
        return TelemetryStatus(
            enabled=False,
            destination="",
            reason="off: the otel extra is missing (pip install 'oct-mcp[otel]')",
        )
    destination = f"OTLP/HTTP to {endpoint or _DEFAULT_ENDPOINT}"
    return TelemetryStatus(
        enabled=True, destination=destination, reason=f"on: traces and metrics by {destination}"
    )


class _Instruments:
    """The providers and instruments of a started telemetry (OpenTelemetry imported by now)."""

    def __init__(
        self, env: Mapping[str, str], span_exporter: SpanExporter | None, metric_reader: MetricReader | None
    ) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "oct-mcp"})
        self.tracer_provider = TracerProvider(resource=resource)
        # Bounded, so a collector that is down holds a shutdown back seconds, not the exporter's 10 s a try.
        timeout = float(env.get("OTEL_EXPORTER_OTLP_TIMEOUT") or _EXPORT_TIMEOUT_SECONDS * 1000) / 1000
        if span_exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            span_exporter = OTLPSpanExporter(endpoint=_signal_endpoint(env, "traces"), timeout=timeout)
            self.tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        else:
            self.tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        if metric_reader is None:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            exporter = OTLPMetricExporter(endpoint=_signal_endpoint(env, "metrics"), timeout=timeout)
            metric_reader = PeriodicExportingMetricReader(exporter)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[metric_reader])
        self.tracer: Tracer = self.tracer_provider.get_tracer(_SCOPE)
        meter = self.meter_provider.get_meter(_SCOPE)
        self.duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request duration, as the server saw it",
        )
        self.calls = meter.create_counter("oct.calls", description="tool calls, by tool and outcome")
        self.refusals = meter.create_counter("oct.refusals", description="refused calls, by reason and layer")

    def shutdown(self) -> None:
        # Each flushes what it holds: the spans of the last calls go out before the process ends.
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def _signal_endpoint(env: Mapping[str, str], signal: str) -> str:
    """Where one signal goes, as the OTLP/HTTP exporters read it: the signal's own variable whole,
    else the base endpoint with `/v1/SIGNAL` (read from `env`, which tests and embedders may give)."""
    own = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    if own:
        return own
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or _DEFAULT_ENDPOINT
    return base.rstrip("/") + f"/v1/{signal}"


_ACTIVE: _Instruments | None = None


def is_on() -> bool:
    return _ACTIVE is not None


def start_telemetry(
    environ: Mapping[str, str] | None = None,
    *,
    span_exporter: SpanExporter | None = None,
    metric_reader: MetricReader | None = None,
) -> TelemetryStatus:
    """Start exporting when the environment asks for it (or exporters of one's own are given).

    Never raises: telemetry that cannot start is logged and left off; calls go on.
    """
    global _ACTIVE
    status = telemetry_status(environ)
    given = span_exporter is not None or metric_reader is not None
    if _ACTIVE is not None or not (status.enabled or given):
        return status
    try:
        _ACTIVE = _Instruments(os.environ if environ is None else environ, span_exporter, metric_reader)
    except Exception as exc:  # noqa: BLE001 - an exporter that cannot start must not stop the server
        _log.error("telemetry_failed", problem=type(exc).__name__)
        return TelemetryStatus(
            enabled=False, destination="", reason=f"off: it failed to start ({type(exc).__name__})"
        )
    if given:
        status = TelemetryStatus(enabled=True, destination="exporters given", reason="on: exporters given")
    _log.info("telemetry_on", destination=status.destination)
    return status


def stop_telemetry() -> None:
    """Flush and stop: what the last calls sent leaves before the process ends."""
    global _ACTIVE
    active, _ACTIVE = _ACTIVE, None
    if active is not None:
        active.shutdown()


@dataclass(slots=True)
class CallFacts:
    """What the transport knows of a call, for its span: none of it an argument value."""

    tool: str | None
    """The tool's name when it is one of the catalog's; None for a name the client made up."""
    transport: str
    request_id: Any = None
    session_id: str | None = None
    protocol_version: str | None = None
    meta: Mapping[str, Any] | None = None
    """The request's `_meta`, for the host's `traceparent` and `tracestate`."""


@contextlib.contextmanager
def call_span(facts: CallFacts) -> Iterator[None]:
    """The span (and the duration metric) of one `tools/call`, current while the call runs."""
    active = _ACTIVE
    if active is None:
        yield
        return
    from opentelemetry import context as otel_context
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {
        k: v
        for k, v in (facts.meta or {}).items()
        if k in ("traceparent", "tracestate") and isinstance(v, str)
    }
    parent = TraceContextTextMapPropagator().extract(carrier) if carrier else otel_context.Context()
    attributes: dict[str, Any] = {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool"}
    if facts.tool is not None:
        attributes["gen_ai.tool.name"] = facts.tool
    if facts.request_id is not None:
        attributes["jsonrpc.request.id"] = str(facts.request_id)
    if facts.session_id:
        # Hashed: the session id lets its holder speak for the session; a trace backend must not hold it.
        attributes["mcp.session.id"] = hashlib.sha256(facts.session_id.encode()).hexdigest()[:16]
    if facts.protocol_version:
        attributes["mcp.protocol.version"] = facts.protocol_version
    transport = _TRANSPORTS.get(facts.transport)
    if transport is not None:
        attributes["network.transport"] = transport
    name = "tools/call" if facts.tool is None else f"tools/call {facts.tool}"
    started = time.perf_counter()
    error: list[str] = []
    token = _CALL_ERROR.set(error)
    try:
        with active.tracer.start_as_current_span(
            name,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ):
            yield
    finally:
        _CALL_ERROR.reset(token)
        metric: dict[str, Any] = {
            k: attributes[k] for k in ("mcp.method.name", "gen_ai.tool.name") if k in attributes
        }
        if error:
            metric["error.type"] = error[0]
        active.duration.record(time.perf_counter() - started, metric)
        active.calls.add(1, {"tool": facts.tool or "unknown", "outcome": error[0] if error else "ok"})


def note_failure(code: str, error: BaseException | None = None) -> None:
    """The call ended as `code` (a refusal, a timeout, an internal error): on its span and in the
    refusal count, with the layer that raised it."""
    active = _ACTIVE
    if active is None:
        return
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    current = trace.get_current_span()
    current.set_attribute("error.type", code)
    current.set_status(Status(StatusCode.ERROR))
    said = _CALL_ERROR.get()
    if said is not None and not said:
        said.append(code)
    layer = getattr(error, _LAYER_OF_REFUSAL, None) or "endpoint"
    active.refusals.add(1, {"reason": code, "layer": layer})


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span | None]:
    """A child span of the current call (the consent wait, the sandbox run); None when off."""
    active = _ACTIVE
    if active is None:
        yield None
        return
    with active.tracer.start_as_current_span(
        name, attributes=dict(attributes or {}), record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except OctError as exc:
            _mark_error(current, exc.code)
            raise
        except Exception as exc:
            _mark_error(current, type(exc).__name__)
            raise


def _mark_error(current: Span, code: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    current.set_attribute("error.type", code)
    current.set_status(Status(StatusCode.ERROR))


def traced_layer(
    name: str, layer: Callable[[Any, Any], Awaitable[Any]], call_next: Any
) -> Callable[[Any], Awaitable[Any]]:
    """`layer` linked to `call_next` inside a span `oct.layer NAME`: nested as the profile orders them.

    A refusal is marked with the innermost layer that raised it, for the refusal count.
    """

    async def call(ctx: Any, /) -> Any:
        active = _ACTIVE
        if active is None:
            return await layer(ctx, call_next)
        with active.tracer.start_as_current_span(
            f"oct.layer {name}",
            attributes={"oct.layer": name},
            record_exception=False,
            set_status_on_exception=False,
        ) as current:
            try:
                return await layer(ctx, call_next)
            except OctError as exc:
                if getattr(exc, _LAYER_OF_REFUSAL, None) is None:
                    setattr(exc, _LAYER_OF_REFUSAL, name)
                    _mark_error(current, exc.code)
                raise

    return call
