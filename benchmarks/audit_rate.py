"""Audit write rate: records per second through the hash-chained, rotating writer, against a plain write.

The subject: `AuditWriter.write` of one call's record (built by the audit layer's own
`audit_record`), rotating every 64 KiB (about 130 records per file), 5 files kept. The
reference, in the same run on the same kind of file: `json.dumps` of the same fields with a
time stamp, `file.write`, `flush`, per record, no chain, no rotation, no lock. Goal: ratio <= 4
(time per record): the chain, the rotation, and the cross-process lock cost a few microseconds
each, and a server writes one record per tool call.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import Comparison, arguments, interleave, print_table

from oct_mcp.audit import AuditWriter, verify_chain
from oct_mcp.middleware.audit import audit_record
from oct_mcp.types import CallContext, ClientInfo, ToolResult

RECORDS = 2_000
ROTATE_BYTES = 64 * 1024
KEEP_FILES = 5


def call_record_fields() -> dict[str, Any]:
    """One oct_read_file call's record, as the audit layer builds it."""
    client = ClientInfo(
        client_id="stdio", transport="stdio", name="claude-code", version="2.1", protocol_version="2025-11-25"
    )
    ctx = CallContext(
        tool="oct_read_file",
        arguments={"path": "src/pkg/core.py", "start_line": 1, "end_line": 200},
        client=client,
        call_id="0f3c2a9e8b7d4c1f9a6e5d4c3b2a1f0e",
    )
    result = ToolResult(text="x" * 4_000, exit_code=0, backend="native")
    return audit_record(ctx, result, None, duration=0.0042, profile="default")


def time_ours(directory: Path, fields: dict[str, Any]) -> float:
    """Seconds to write RECORDS records with the audit writer, rotation on."""
    shutil.rmtree(directory, ignore_errors=True)
    writer = AuditWriter(directory / "audit.log", max_bytes=ROTATE_BYTES, max_files=KEEP_FILES)
    started = time.perf_counter()
    for _ in range(RECORDS):
        writer.write(fields)
    elapsed = time.perf_counter() - started
    writer.close()
    if writer.failure is not None:
        raise RuntimeError(f"the audit writer failed: {writer.failure.reason}")
    return elapsed


def time_reference(directory: Path, fields: dict[str, Any]) -> float:
    """Seconds to write RECORDS records as `json.dumps` + `write` + `flush` each."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(mode=0o700)
    started = time.perf_counter()
    with (directory / "plain.log").open("a", encoding="ascii") as file:
        for _ in range(RECORDS):
            record = {"time": datetime.now(UTC).isoformat(), **fields}
            file.write(json.dumps(record, separators=(",", ":")) + "\n")
            file.flush()
    return time.perf_counter() - started


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    fields = call_record_fields()
    with tempfile.TemporaryDirectory() as scratch:
        ours_dir, reference_dir = Path(scratch) / "ours", Path(scratch) / "reference"
        time_ours(ours_dir, fields)
        time_reference(reference_dir, fields)
        subject, reference = interleave(
            args.rounds,
            [lambda: time_ours(ours_dir, fields), lambda: time_reference(reference_dir, fields)],
        )
        verification = verify_chain(ours_dir / "audit.log")
        if not verification.breaks == ():
            raise RuntimeError(f"the chain the benchmark wrote does not verify: {verification.breaks[0]}")
        files = len(verification.files)
    comparison = Comparison(
        f"audit: {RECORDS} records, rotating every {ROTATE_BYTES // 1024} KiB", subject, reference, goal=4.0
    )
    print_table([comparison], args.rounds)
    per_second = RECORDS / min(subject)
    print(f"\naudit writer: {per_second:,.0f} records/s at best; {files} files kept after the last round")


if __name__ == "__main__":
    main()
