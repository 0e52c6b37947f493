"""Metrics: counted from the audit records, scraped through a real HTTP client, optional at start-up."""

from __future__ import annotations

import json
import socket
import sys
import urllib.request
from pathlib import Path

import anyio
import prometheus_client
import pytest
from fakes import TEST_CLIENT
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from oct_mcp.app import App, build_app, run_call
from oct_mcp.metrics import MISSING_EXTRA_MESSAGE, CallMetrics, create_metrics, serve_metrics

pytestmark = pytest.mark.e2e

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _app(project: Path, tmp_path: Path, **values: object) -> App:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log"), **values}))
    return build_app(project, config_path=config, environ={}, serve_metrics_endpoint=True)


def _scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.anyio
async def test_a_scrape_after_a_few_calls_shows_calls_refusals_rate_limits_and_durations(
    project: Path, tmp_path: Path
) -> None:
    app = _app(project, tmp_path, metrics_port=_free_port(), rate_limit_per_minute=3)
    assert app.metrics is not None
    try:
        with anyio.fail_after(10):
            await run_call(app, "oct_read_file", {"path": "README.md"}, TEST_CLIENT)
            await run_call(app, "oct_read_file", {"path": "../outside.txt"}, TEST_CLIENT)
            await run_call(app, "made_up_tool", {}, TEST_CLIENT)
            await run_call(app, "oct_read_file", {"path": "README.md"}, TEST_CLIENT)
            samples = await anyio.to_thread.run_sync(_scrape, app.metrics.port)
    finally:
        app.close()

    def value(name: str, **labels: str) -> float | None:
        return samples.get((name, tuple(sorted(labels.items()))))

    assert app.metrics.host == "127.0.0.1"
    assert value("oct_mcp_calls_total", tool="oct_read_file", outcome="ok") == 1
    assert value("oct_mcp_calls_total", tool="oct_read_file", outcome="refused") == 2
    assert value("oct_mcp_calls_total", tool="(unknown)", outcome="refused") == 1
    assert value("oct_mcp_refusals_total", code="path_refused") == 1
    assert value("oct_mcp_refusals_total", code="rate_limited") == 1
    assert value("oct_mcp_rate_limited_calls_total") == 1
    assert value("oct_mcp_call_duration_seconds_count", tool="oct_read_file") == 3
    assert value("oct_mcp_sandbox_timeouts_total") == 0
    assert value("oct_mcp_audit_write_failures_total") == 0


@pytest.mark.anyio
async def test_the_metrics_live_in_a_registry_of_their_own(project: Path, tmp_path: Path) -> None:
    app = _app(project, tmp_path, metrics_port=_free_port())
    try:
        await run_call(app, "oct_read_file", {"path": "README.md"}, TEST_CLIENT)
    finally:
        app.close()

    assert prometheus_client.REGISTRY.get_sample_value("oct_mcp_calls_total") is None


def test_timeouts_truncations_redactions_and_lost_records_are_counted() -> None:
    metrics = CallMetrics(["oct_test"])

    metrics.observe({"tool": "oct_test", "outcome": "error", "code": "timeout", "duration_ms": 60_000.0})
    metrics.observe({"tool": "oct_test", "outcome": "ok", "truncated": True, "redactions": 3}, written=False)

    def value(name: str) -> float | None:
        return metrics.registry.get_sample_value(name)

    assert value("oct_mcp_sandbox_timeouts_total") == 1
    assert value("oct_mcp_truncations_total") == 1
    assert value("oct_mcp_redactions_total") == 3
    assert value("oct_mcp_audit_write_failures_total") == 1
    assert (
        metrics.registry.get_sample_value(
            "oct_mcp_call_duration_seconds_bucket", {"tool": "oct_test", "le": "60.0"}
        )
        == 1
    )


def test_without_the_extra_the_server_says_how_to_install_it_and_runs_on(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)

    with capture_logs() as logs:
        app = _app(project, tmp_path, metrics_port=_free_port())

    assert app.metrics is None
    assert [(e["event"], e["log_level"], e["problem"]) for e in logs if e["log_level"] == "error"] == [
        ("metrics_unavailable", "error", MISSING_EXTRA_MESSAGE)
    ]
    assert create_metrics(["oct_read_file"]) is None


def test_a_port_already_taken_is_logged_and_the_server_runs_on() -> None:
    metrics = CallMetrics(["oct_read_file"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])

        with capture_logs() as logs:
            endpoint = serve_metrics(metrics, port)

    assert endpoint is None
    assert [e["event"] for e in logs] == ["metrics_port_unavailable"]


def test_one_shot_commands_serve_no_metrics(project: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"metrics_port": _free_port()}))

    app = build_app(project, config_path=config, environ={})

    assert app.metrics is None
    assert app.audit is not None
    assert app.audit.metrics is None
