"""Where the audit layer sends each call's record: the log on disk, and the metrics when they are on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oct_mcp.audit.writer import AuditWriter

if TYPE_CHECKING:
    from oct_mcp.config import McpConfig
    from oct_mcp.metrics import CallMetrics

__all__ = ["AuditSink"]


@dataclass(frozen=True, slots=True)
class AuditSink:
    """One record per call, to the writer and to the metrics. Never raises."""

    writer: AuditWriter
    metrics: CallMetrics | None = None
    replica: str | None = None
    """Which replica wrote the record, when several serve one workspace (each keeps its own chain)."""

    @classmethod
    def from_config(
        cls, config: McpConfig, metrics: CallMetrics | None = None, *, project: Path | None = None
    ) -> AuditSink:
        """The sink the config describes; `project` is where its signing key may not live.

        Raises:
            ConfigError: The audit signing key is set but cannot be used.
        """
        writer = AuditWriter.from_config(config, project=project)
        return cls(writer=writer, metrics=metrics, replica=config.replica_id)

    async def record(self, record: Mapping[str, Any]) -> None:
        """Write `record`, waiting a bounded time for another process's hold on the lock."""
        if self.replica is not None:
            record = {**record, "replica": self.replica}
        written = await self.writer.write_async(record)
        if self.metrics is not None:
            self.metrics.observe(record, written=written)
