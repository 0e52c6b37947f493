"""Check an exported audit bundle on any machine: standard library and `cryptography` only.

Run as `python verify_bundle.py BUNDLE`; exit 0 when every record is chained and signed, 1 otherwise.
This file imports nothing from oct_mcp on purpose, so it can be copied alone.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

GENESIS = "0" * 64


def _payload(checkpoint: dict[str, Any]) -> bytes:
    fields = {key: checkpoint[key] for key in ("seq", "hash", "time", "replica")}
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def verify(bundle: dict[str, Any]) -> list[str]:
    """Every problem found in `bundle`, in order; empty when it verifies."""
    problems: list[str] = []
    public = serialization.load_pem_public_key(bundle["public_key"].encode())
    if not isinstance(public, Ed25519PublicKey):
        return ["the public key is not an Ed25519 key"]
    digests: dict[int, str] = {}
    first: dict[str, Any] | None = None
    previous: str | None = None
    for text in bundle["records"]:
        line = text.encode()
        record = json.loads(line)
        seq = record["seq"]
        if first is None:
            first = record
        elif record["prev"] != previous or seq != max(digests) + 1:
            problems.append(f"record {seq}: does not follow the record before it")
        previous = hashlib.sha256(line).hexdigest()
        digests[seq] = previous
    signed = {}
    for checkpoint in bundle["checkpoints"]:
        seq = checkpoint["seq"]
        try:
            public.verify(bytes.fromhex(checkpoint["signature"]), _payload(checkpoint))
        except (InvalidSignature, ValueError):
            problems.append(f"checkpoint at {seq}: bad signature")
            continue
        signed[seq] = checkpoint["hash"]
        if seq in digests and digests[seq] != checkpoint["hash"]:
            problems.append(f"checkpoint at {seq}: the record there is not the one signed")
    if first is not None:
        anchor = GENESIS if first["seq"] == 1 else signed.get(first["seq"] - 1)
        if first["prev"] != anchor:
            problems.append(f"record {first['seq']}: not anchored to a signed checkpoint before it")
        last = max(digests)
        if last not in signed:
            problems.append(f"records after the last checkpoint up to {last} are unsigned")
    return problems


def main(argv: list[str]) -> int:
    """Verify the bundle named in `argv`; print what was found."""
    if len(argv) != 1:
        print("usage: python verify_bundle.py BUNDLE", file=sys.stderr)
        return 2
    with open(argv[0], "rb") as source:
        bundle = json.load(source)
    problems = verify(bundle)
    for problem in problems:
        print(problem)
    if not problems:
        print(f"ok: {len(bundle['records'])} records, {len(bundle['checkpoints'])} checkpoints")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
