"""Prometheus metrics of the calls, counted from the audit records, served on 127.0.0.1 only."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from oct_mcp.diagnostics import get_logger

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry

__all__ = [
    "METRICS_HOST",
    "MISSING_EXTRA_MESSAGE",
    "CallMetrics",
    "MetricsEndpoint",
    "create_metrics",
    "serve_metrics",
]

METRICS_HOST: Final = "127.0.0.1"
MISSING_EXTRA_MESSAGE: Final = (
    "metrics_port is set but prometheus-client is not installed: pip install 'oct-mcp[metrics]'"
)
UNKNOWN_TOOL_LABEL: Final = "(unknown)"
# Seconds: from an in-process read (a millisecond) to a long test run (minutes).
DURATION_BUCKETS: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

_log = get_logger(__name__)


class CallMetrics:
    """The counters, in a registry of their own (never the process-wide default one).

    `observe` takes an audit record, so the metrics and the log count the same calls. A tool
    name outside the catalog is counted as `(unknown)`: a host must not grow the label set.
    """

    def __init__(self, known_tools: Iterable[str]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.known_tools = frozenset(known_tools)
        self.registry: CollectorRegistry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.calls = Counter(
            "oct_mcp_calls", "Tool calls by tool and outcome.", ["tool", "outcome"], registry=registry
        )
        self.refusals = Counter(
            "oct_mcp_refusals", "Calls a layer refused, by the refusal's code.", ["code"], registry=registry
        )
        self.duration = Histogram(
            "oct_mcp_call_duration_seconds",
            "Time a call spent in the chain, by tool.",
            ["tool"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.redactions = Counter("oct_mcp_redactions", "Secrets masked in tool output.", registry=registry)
        self.rate_limited = Counter(
            "oct_mcp_rate_limited_calls", "Calls refused by the rate limit.", registry=registry
        )
        self.timeouts = Counter(
            "oct_mcp_sandbox_timeouts", "Tool runs the sandbox stopped at their timeout.", registry=registry
        )
        self.truncations = Counter(
            "oct_mcp_truncations", "Tool results cut at the output limit.", registry=registry
        )
        self.audit_failures = Counter(
            "oct_mcp_audit_write_failures", "Audit records that could not be written.", registry=registry
        )

    def observe(self, record: Mapping[str, Any], *, written: bool = True) -> None:
        """Count one call from its audit record; `written` is False if the record was lost."""
        tool = record.get("tool")
        label = tool if isinstance(tool, str) and tool in self.known_tools else UNKNOWN_TOOL_LABEL
        outcome = str(record.get("outcome"))
        code = record.get("code")
        self.calls.labels(tool=label, outcome=outcome).inc()
        duration = record.get("duration_ms")
        if isinstance(duration, int | float):
            self.duration.labels(tool=label).observe(duration / 1000)
        if outcome == "refused":
            self.refusals.labels(code=str(code)).inc()
        if code == "rate_limited":
            self.rate_limited.inc()
        if code == "timeout":
            self.timeouts.inc()
        if record.get("truncated") is True:
            self.truncations.inc()
        redactions = record.get("redactions")
        if isinstance(redactions, int) and redactions > 0:
            self.redactions.inc(redactions)
        if not written:
            self.audit_failures.inc()


@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    """A running `/metrics` endpoint and the metrics it serves."""

    metrics: CallMetrics
    port: int
    _server: WSGIServer
    _thread: threading.Thread

    @property
    def host(self) -> str:
        """The address the endpoint listens on: always the loopback one."""
        return str(self._server.server_address[0])

    def close(self) -> None:
        """Stop serving and wait for the server's thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def create_metrics(known_tools: Iterable[str]) -> CallMetrics | None:
    """The call metrics, or None (logged at L1) without the `metrics` extra.

    Args:
        known_tools: The catalog's tool names, the only ones counted by name.
    """
    try:
        return CallMetrics(known_tools)
    except ImportError:
        _log.error("metrics_unavailable", problem=MISSING_EXTRA_MESSAGE)
        return None


def serve_metrics(metrics: CallMetrics, port: int) -> MetricsEndpoint | None:
    """Serve `metrics` at `/metrics` on 127.0.0.1:`port`, from a background thread.

    Args:
        metrics: What to serve.
        port: The TCP port; 0 takes a free one (see `MetricsEndpoint.port`).

    Returns:
        The running endpoint, or None (logged at L1) when the port cannot be bound: the server
        runs on without it.
    """
    from prometheus_client import start_http_server

    try:
        server, thread = start_http_server(port, addr=METRICS_HOST, registry=metrics.registry)
    except OSError as exc:
        _log.error("metrics_port_unavailable", port=port, problem=exc.strerror or type(exc).__name__)
        return None
    bound = server.server_port
    _log.info("metrics_serving", address=f"http://{METRICS_HOST}:{bound}/metrics")
    return MetricsEndpoint(metrics=metrics, port=bound, _server=server, _thread=thread)
