"""An audit bundle: the records from a checkpoint (or the chain's start) to the last checkpoint, with
the public key, for `verify_bundle` to check on another machine."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from oct_mcp.audit.verify import audit_files, lines_of
from oct_mcp.audit.verify_bundle import BUNDLE_FORMAT, CHECKPOINT_EVENT, check_signatures, parse_record

__all__ = ["Bundle", "NothingSignedError", "build_bundle", "write_bundle"]


class NothingSignedError(Exception):
    """No checkpoint in the log verifies with the keys given, or one of them does not."""


@dataclass(frozen=True, slots=True)
class Bundle:
    lines: tuple[bytes, ...]
    first_seq: int
    last_seq: int
    left_out: int
    """Records after the last checkpoint, not in the bundle: nothing vouches for them yet."""


def _seq_and_event(line: bytes) -> tuple[int | None, Any]:
    record = parse_record(line)
    if record is None:
        return None, None
    seq = record.get("seq")
    return (seq if isinstance(seq, int) else None), record.get("event")


def build_bundle(path: Path, keys: Sequence[Ed25519PublicKey], *, since: int) -> Bundle:
    """The records from the anchor at or before `since` to the last checkpoint of the log at `path`.

    Raises:
        NothingSignedError: See the class.
    """
    lines = [line for file in audit_files(path) for line in lines_of(file.read_bytes())]
    report = check_signatures(((str(n), line) for n, line in enumerate(lines, start=1)), keys)
    if report.signed_through is None or report.problems:
        raise NothingSignedError
    parsed = [_seq_and_event(line) for line in lines]
    end = max(i for i, (_, event) in enumerate(parsed) if event == CHECKPOINT_EVENT)
    # The bundle starts where a verifier can anchor it: the chain's first record, or a checkpoint
    # (it signs the record before it, its own `prev`); the last such at or before `since`.
    anchors = [i for i, (seq, event) in enumerate(parsed[: end + 1]) if event == CHECKPOINT_EVENT or seq == 1]
    start = max((i for i in anchors if (parsed[i][0] or 0) <= since), default=anchors[0])
    return Bundle(
        lines=tuple(lines[start : end + 1]),
        first_seq=parsed[start][0] or 0,
        last_seq=parsed[end][0] or 0,
        left_out=len(lines) - end - 1,
    )


def write_bundle(output: Path, bundle: Bundle, public_pem: str) -> None:
    """Write `bundle` as JSON at `output` (owner-only; replaced if there, never through a link)."""
    document = {
        "format": BUNDLE_FORMAT,
        "public_key": public_pem,
        "records": [line.decode("ascii", "backslashreplace") for line in bundle.lines],
    }
    data = json.dumps(document, indent=1).encode() + b"\n"
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
