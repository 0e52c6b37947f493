"""Check oct-mcp audit records against their signed checkpoints: standard library and `cryptography` only.

On any machine: `python verify_bundle.py BUNDLE`, for the bundle `oct-mcp audit export` writes. Exit 0
when every record is chained to the one before it and covered by a checkpoint the bundle's key
signed, 1 when anything is not, 2 when the file is no bundle. This file imports nothing from oct_mcp
on purpose, so it can be copied alone (`oct-mcp audit verifier > verify_bundle.py`); `oct-mcp audit
verify --key` runs the same checks on the log itself.

A checkpoint is a record of the chain (`"event": "checkpoint"`) whose `checkpoint` field signs, with
Ed25519, the `seq` and line hash of the record just before it, the time and the replica. As each
line carries the hash of the one before it, that signature vouches for every record up to it: a
record changed, removed or inserted before a checkpoint changes the hash it signed, a forged
checkpoint does not verify, and records after the last checkpoint are reported as unsigned.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

GENESIS = "0" * 64
CHECKPOINT_EVENT = "checkpoint"
BUNDLE_FORMAT = "oct-mcp-audit-bundle/1"
SIGNED_FIELDS = ("seq", "hash", "time", "replica")
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def checkpoint_payload(checkpoint: dict[str, Any]) -> bytes:
    """The exact bytes a checkpoint signs: its signed fields as canonical JSON."""
    fields = {name: checkpoint[name] for name in SIGNED_FIELDS}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def key_id(public: Ed25519PublicKey) -> str:
    """A short name for a public key: the first 16 hex digits of the SHA-256 of its raw bytes."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM.

    Raises:
        ValueError: Not a PEM public key, or not an Ed25519 one.
    """
    public = serialization.load_pem_public_key(pem)
    if not isinstance(public, Ed25519PublicKey):
        raise ValueError("the public key is not an Ed25519 key")  # noqa: TRY004 - bad input, as a bad PEM
    return public


@dataclass
class SignatureReport:
    """What `check_signatures` found over a run of records."""

    problems: list[str] = field(default_factory=list)
    checkpoints: int = 0
    """Checkpoints whose signature and signed head hold."""
    signed_through: int | None = None
    """The `seq` of the last record a valid checkpoint vouches for."""
    unsigned: int = 0
    """Records (checkpoints aside) after the last valid checkpoint: nothing vouches for them yet."""
    last_seq: int | None = None


def parse_record(line: bytes) -> dict[str, Any] | None:
    """One line as a record (a JSON object); None for a line that is none."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _checkpoint_problem(
    record: dict[str, Any], keys: dict[str, Ed25519PublicKey], digests: dict[int, str]
) -> str | None:
    """What is wrong with the checkpoint record `record`, or None when it holds."""
    checkpoint = record.get("checkpoint")
    if not isinstance(checkpoint, dict) or any(name not in checkpoint for name in SIGNED_FIELDS):
        return "a checkpoint without its signed fields"
    public = keys.get(str(checkpoint.get("key")))
    if public is None:
        return f"a checkpoint signed by a key not given (key id {checkpoint.get('key')!s:.16})"
    try:
        public.verify(bytes.fromhex(str(checkpoint.get("signature"))), checkpoint_payload(checkpoint))
    except (InvalidSignature, ValueError, TypeError):
        return "a forged checkpoint: its signature does not verify"
    seq, digest = checkpoint["seq"], checkpoint["hash"]
    before_it = seq == record.get("seq", 0) - 1 and digest == record.get("prev")
    if not before_it or digests.get(seq, digest) != digest:
        return (
            f"the records up to seq {seq} are not the ones this checkpoint signed "
            "(a record was changed, removed or inserted before it)"
        )
    return None


def check_signatures(lines: Iterable[tuple[str, bytes]], keys: Sequence[Ed25519PublicKey]) -> SignatureReport:
    """Check every checkpoint among `lines` (each with where it is, for messages) against `keys`.

    The chain's own links are not checked here (`verify` does for a bundle; `oct-mcp audit verify`
    for the log): together they show every record up to the last checkpoint as written.
    """
    by_id = {key_id(public): public for public in keys}
    report = SignatureReport()
    digests: dict[int, str] = {}
    for where, line in lines:
        record = parse_record(line)
        seq = record.get("seq") if record is not None else None
        if record is None or not isinstance(seq, int):
            continue
        report.last_seq = seq
        if record.get("event") == CHECKPOINT_EVENT:
            problem = _checkpoint_problem(record, by_id, digests)
            if problem is None:
                report.checkpoints += 1
                report.signed_through = seq - 1
                report.unsigned = 0
            else:
                report.problems.append(f"{where}: {problem}")
        else:
            report.unsigned += 1
        digests[seq] = hashlib.sha256(line).hexdigest()
    return report


def unsigned_problem(report: SignatureReport) -> str | None:
    """The line saying which records no checkpoint covers, or None when all are covered."""
    if report.last_seq is None:
        return "no records"
    if report.signed_through is None:
        return f"unsigned: no valid checkpoint vouches for any record (up to seq {report.last_seq})"
    if report.unsigned:
        return (
            f"unsigned: {report.unsigned} record(s) after the last checkpoint (it signs seq "
            f"{report.signed_through}), up to seq {report.last_seq}"
        )
    return None


def verify(bundle: dict[str, Any]) -> list[str]:
    """Every problem found in `bundle`, in order; empty when it verifies.

    Raises:
        ValueError: `bundle` is not a bundle (its format, key or records are missing or malformed).
    """
    if bundle.get("format") != BUNDLE_FORMAT:
        raise ValueError(f"not an oct-mcp audit bundle (format must be {BUNDLE_FORMAT})")
    public = load_public_key(str(bundle.get("public_key", "")).encode())
    texts = bundle.get("records")
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        raise ValueError("the bundle's records must be a non-empty list of lines")
    lines = [text.encode() for text in texts]
    problems: list[str] = []
    previous: tuple[int, str] | None = None
    for number, line in enumerate(lines, start=1):
        record = parse_record(line)
        seq = record.get("seq") if record is not None else None
        if record is None or not isinstance(seq, int):
            problems.append(f"record {number}: not a JSON audit record")
            previous = None
            continue
        if previous is None and number == 1:
            anchored = (seq == 1 and record.get("prev") == GENESIS) or record.get("event") == CHECKPOINT_EVENT
            if not anchored:
                problems.append(f"seq {seq}: the first record is neither the chain's first nor a checkpoint")
        elif previous is not None and (record.get("prev") != previous[1] or seq != previous[0] + 1):
            problems.append(
                f"seq {seq}: does not follow the record before it (changed, removed or reordered)"
            )
        previous = (seq, hashlib.sha256(line).hexdigest())
    report = check_signatures(((f"record {n}", line) for n, line in enumerate(lines, start=1)), [public])
    problems.extend(report.problems)
    unsigned = unsigned_problem(report)
    if unsigned is not None:
        problems.append(unsigned)
    return problems


def main(argv: list[str]) -> int:
    """Verify the bundle named in `argv`; print what was found."""
    if len(argv) != 1:
        print("usage: python verify_bundle.py BUNDLE", file=sys.stderr)
        return EXIT_USAGE
    try:
        with open(argv[0], "rb") as source:
            bundle = json.load(source)
        if not isinstance(bundle, dict):
            raise ValueError("not a JSON object")  # noqa: TRY004 - reported as the file's other faults
        problems = verify(bundle)
    except (OSError, ValueError) as exc:
        print(f"verify_bundle: cannot check {argv[0]}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for problem in problems:
        print(problem)
    if problems:
        return EXIT_FAILED
    print(f"ok: {len(bundle['records'])} records, every one chained and signed up to the last checkpoint")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
