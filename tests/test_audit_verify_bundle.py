"""The standalone bundle verifier, run as its own process with only the standard library and cryptography."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import oct_mcp.audit.verify_bundle as verifier
from oct_mcp.audit.checkpoint import sign_head
from oct_mcp.audit.writer import GENESIS, line_digest, render_record


def _bundle(count: int = 5) -> dict[str, object]:
    key = Ed25519PrivateKey.generate()
    lines, prev = [], GENESIS
    for seq in range(1, count + 1):
        line = render_record({"event": "call", "tool": "read", "seq": seq, "prev": prev, "time": "t"})
        lines.append(line.decode())
        prev = line_digest(line)
    head = sign_head(key, seq=count, digest=prev, time="t", replica="r1")
    checkpoint = {"seq": head.seq, "hash": head.digest, "time": head.time, "replica": head.replica}
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return {
        "public_key": public.decode(),
        "checkpoints": [{**checkpoint, "signature": head.signature}],
        "records": lines,
    }


def _run(tmp_path: Path, bundle: dict[str, object]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(bundle))
    return subprocess.run(
        [sys.executable, "-I", verifier.__file__, str(path)], capture_output=True, text=True, check=False
    )


def test_a_bundle_verifies_in_an_isolated_interpreter(tmp_path: Path) -> None:
    done = _run(tmp_path, _bundle())
    assert (done.returncode, done.stdout) == (0, "ok: 5 records, 1 checkpoints\n")


def test_a_changed_record_is_reported(tmp_path: Path) -> None:
    bundle = _bundle()
    records = bundle["records"]
    assert isinstance(records, list)
    records[1] = records[1].replace('"read"', '"edit"')
    done = _run(tmp_path, bundle)
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "record 3: does not follow the record before it\n",
        "",
    )


def test_a_removed_record_is_reported(tmp_path: Path) -> None:
    bundle = _bundle()
    records = bundle["records"]
    assert isinstance(records, list)
    del records[2]
    done = _run(tmp_path, bundle)
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "record 4: does not follow the record before it\n",
        "",
    )


def test_a_forged_checkpoint_is_reported(tmp_path: Path) -> None:
    bundle = _bundle()
    checkpoints = bundle["checkpoints"]
    assert isinstance(checkpoints, list)
    checkpoints[0]["seq"] = 4
    done = _run(tmp_path, bundle)
    assert (done.returncode, done.stderr) == (1, "")
    assert "checkpoint at 4: bad signature" in done.stdout


def test_a_tail_after_the_checkpoint_is_reported_unsigned(tmp_path: Path) -> None:
    bundle = _bundle()
    records = bundle["records"]
    assert isinstance(records, list)
    last = records[-1].encode()
    records.append(
        render_record({"event": "call", "seq": 6, "prev": line_digest(last), "time": "t"}).decode()
    )
    done = _run(tmp_path, bundle)
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "records after the last checkpoint up to 6 are unsigned\n",
        "",
    )
