"""Signed audit checkpoints: the writer's cost per record with a signing key, against the same writer
without one, side by side in one run.

The subject: `AuditWriter.write` of one call's record (the audit layer's own `audit_record`), 2,000
records, with an Ed25519 key signing a checkpoint every `audit_checkpoint_records` records: at the
default (1,000), and after every record to show one checkpoint's own cost. The reference: the same
writer, no key. Goal at the default interval: within 5% (one signature, about 50 us, amortised over
1,000 records of a few microseconds each).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import Comparison, arguments, interleave, print_table
from audit_rate import call_record_fields

from oct_mcp.audit import AuditWriter
from oct_mcp.audit.checkpoint import generate_key_pair, load_signer

RECORDS = 2_000
DEFAULT_EVERY = 1_000


def time_writer(directory: Path, fields: dict[str, Any], key: Path | None, every: int) -> float:
    """Seconds to write RECORDS records (and the checkpoints due), from an empty folder."""
    shutil.rmtree(directory, ignore_errors=True)
    signer = None if key is None else load_signer(key, replica="bench", forbidden=(directory,))
    writer = AuditWriter(
        directory / "audit.log", max_bytes=1 << 30, max_files=2, signer=signer, checkpoint_every=every
    )
    started = time.perf_counter()
    for _ in range(RECORDS):
        writer.write(fields)
    elapsed = time.perf_counter() - started
    writer.close()
    if writer.failure is not None:
        raise RuntimeError(f"the audit writer failed: {writer.failure.reason}")
    return elapsed


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=15)
    fields = call_record_fields()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "keys").mkdir()
        key = root / "keys" / "audit.key"
        generate_key_pair(key)
        measures = [
            lambda: time_writer(root / "default", fields, key, DEFAULT_EVERY),
            lambda: time_writer(root / "every", fields, key, 1),
            lambda: time_writer(root / "plain", fields, None, DEFAULT_EVERY),
        ]
        for measure in measures:
            measure()
        default, every, plain = interleave(args.rounds, measures)
    claim = f"audit: {RECORDS} records, a checkpoint every {DEFAULT_EVERY}"
    print_table([Comparison(claim, default, plain, goal=1.05)], args.rounds)
    # The signature's own cost, from the run that signs after every record (no goal: a worst case).
    each = (statistics.median(every) - statistics.median(plain)) / RECORDS
    print(
        f"\none checkpoint (its signature and its record): {each * 1e6:.0f} us; amortised over "
        f"{DEFAULT_EVERY} records: {each / DEFAULT_EVERY * 1e9:.0f} ns a record"
    )


if __name__ == "__main__":
    main()
