"""Signed audit checkpoints end to end: a key made by `oct-mcp audit keygen`, a real stdio server
signing the chain's head as calls come in and at shutdown, `oct-mcp audit verify --key` and an
exported bundle checked by the standalone verifier in a process of its own.

The attacker here can rewrite the log and its head together (the threat the plain chain cannot
show): every rewrite below passes `audit verify` without a key, and is reported with one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import oct_server
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcp import Client

from oct_mcp.audit.records import GENESIS, line_digest, render_record
from oct_mcp.audit.verify_bundle import checkpoint_payload, key_id

pytestmark = pytest.mark.e2e

CALLS = 7
EVERY = 3


def oct_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oct_mcp", *argv], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def signed_log(project: Path, config_file: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The audit log of a server that signed with a fresh key: seven calls, then shut down."""
    keys = tmp_path / "keys"
    keys.mkdir()
    made = oct_cli("audit", "keygen", str(keys / "audit.key"), "--config", str(config_file))
    assert made.returncode == 0, made.stderr
    log = tmp_path / "audit" / "audit.log"
    config_file.write_text(
        json.dumps(
            {
                "audit_log_path": str(log),
                "audit_signing_key": str(keys / "audit.key"),
                "audit_checkpoint_records": EVERY,
            }
        )
    )

    async def calls() -> None:
        with anyio.fail_after(60):
            async with Client(oct_server(project, config_file)) as client:
                for _ in range(CALLS):
                    result = await client.call_tool("oct_read_file", {"path": "README.md"})
                    assert result.is_error is not True

    anyio.run(calls)
    return log, keys / "audit.key.pub"


def records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_bytes().splitlines()]


def rewrite(log: Path, changed: list[dict[str, Any]]) -> None:
    """What an attacker with write access does: renumber, re-chain and re-seal every record."""
    prev, lines = GENESIS, []
    for seq, record in enumerate(changed, start=1):
        line = render_record({**record, "seq": seq, "prev": prev})
        lines.append(line)
        prev = line_digest(line)
    log.write_bytes(b"\n".join(lines) + b"\n")
    head = json.dumps({"seq": len(lines), "hash": prev}).ljust(159) + "\n"
    log.with_name(log.name + ".head").write_text(head)


def verify(log: Path, *keys: Path, strict: bool = False) -> subprocess.CompletedProcess[str]:
    argv = ["audit", "verify", str(log)]
    for key in keys:
        argv += ["--key", str(key)]
    return oct_cli(*argv, *(["--strict"] if strict else []))


def test_a_signing_server_checkpoints_every_n_records_and_at_shutdown(signed_log: tuple[Path, Path]) -> None:
    log, public = signed_log
    written = records(log)
    checkpoints = [r for r in written if r.get("event") == "checkpoint"]
    calls = [r for r in written if r.get("tool") == "oct_read_file"]
    assert len(calls) == CALLS
    # After calls 3 and 6, and the seventh signed at shutdown.
    assert len(checkpoints) == CALLS // EVERY + 1
    assert written[-1]["event"] == "checkpoint"
    for checkpoint in checkpoints:
        assert checkpoint["checkpoint"]["seq"] == checkpoint["seq"] - 1
        assert checkpoint["checkpoint"]["hash"] == checkpoint["prev"]

    checked = verify(log, public, strict=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (
        f"signed: {len(checkpoints)} checkpoint(s) vouch for every record up to seq {len(written) - 1}"
        in (checked.stdout)
    )


def test_a_record_changed_before_a_checkpoint_and_rechained_is_reported(
    signed_log: tuple[Path, Path],
) -> None:
    log, public = signed_log
    written = records(log)
    written[1] = {**written[1], "outcome": "refused"}  # a call that ran, now said to be refused
    rewrite(log, written)

    assert verify(log).returncode == 0  # the chain alone cannot tell
    checked = verify(log, public)
    assert checked.returncode == 1
    assert "are not the ones this checkpoint signed" in checked.stdout


def test_a_record_removed_and_the_rest_renumbered_is_reported(signed_log: tuple[Path, Path]) -> None:
    log, public = signed_log
    written = records(log)
    del written[0]
    rewrite(log, written)

    assert verify(log).returncode == 0
    checked = verify(log, public)
    assert checked.returncode == 1
    assert "are not the ones this checkpoint signed" in checked.stdout


def test_a_forged_checkpoint_is_reported_whichever_key_it_claims(signed_log: tuple[Path, Path]) -> None:
    log, public = signed_log
    written = [r for r in records(log) if r.get("event") != "checkpoint"]
    other = Ed25519PrivateKey.generate()
    forged = {"seq": len(written), "hash": "", "time": "2026-12-06T00:00:00Z", "replica": ""}
    claimed = records(log)[-1]["checkpoint"]["key"]
    # Its hash is filled in after the rechaining below: the forger signs the rewritten head.
    rewrite(log, written)
    forged["hash"] = line_digest(log.read_bytes().splitlines()[-1])
    for key_name, signer in ((key_id(other.public_key()), other), (claimed, other)):
        signature = signer.sign(checkpoint_payload(forged)).hex()
        entry = {
            "time": "t",
            "event": "checkpoint",
            "checkpoint": {**forged, "key": key_name, "signature": signature},
        }
        rewrite(log, [*written, entry])
        checked = verify(log, public)
        assert checked.returncode == 1
        assert ("not given" if key_name != claimed else "a forged checkpoint") in checked.stdout


def test_records_forged_after_the_last_checkpoint_are_reported_unsigned(
    signed_log: tuple[Path, Path],
) -> None:
    log, public = signed_log
    written = records(log)
    tail = {"time": "t", "tool": "oct_read_file", "outcome": "success", "client": "someone"}
    rewrite(log, [*written, tail, tail])

    assert verify(log).returncode == 0
    lenient = verify(log, public)
    assert lenient.returncode == 0  # a live server's last records are unsigned too, until its next checkpoint
    assert "unsigned: 2 record(s) after the last checkpoint" in lenient.stdout
    assert verify(log, public, strict=True).returncode == 1


def test_an_exported_bundle_verifies_on_its_own_and_shows_any_change(
    signed_log: tuple[Path, Path], tmp_path: Path
) -> None:
    log, public = signed_log
    bundle = tmp_path / "elsewhere" / "bundle.json"
    bundle.parent.mkdir()
    exported = oct_cli("audit", "export", str(log), "--key", str(public), "-o", str(bundle), "--since", "5")
    assert exported.returncode == 0, exported.stderr
    verifier = oct_cli("audit", "verifier")
    assert verifier.returncode == 0
    (bundle.parent / "verify_bundle.py").write_text(verifier.stdout)
    shutil.copy(bundle, bundle.parent / "original.json")

    def standalone() -> subprocess.CompletedProcess[str]:
        # -I: no user site, no current folder on the path; run from a folder with no oct_mcp in it.
        return subprocess.run(
            [sys.executable, "-I", "verify_bundle.py", "bundle.json"],
            cwd=bundle.parent,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    good = standalone()
    assert good.returncode == 0, good.stdout + good.stderr
    content = json.loads(bundle.read_text())
    first = json.loads(content["records"][0])
    assert first["event"] == "checkpoint"  # anchored at the checkpoint before record 5
    assert first["seq"] <= 5 < first["seq"] + EVERY + 2

    changed = json.loads(content["records"][2])
    changed["outcome"] = "refused"
    content["records"][2] = render_record(changed).decode()
    bundle.write_text(json.dumps(content))
    bad = standalone()
    assert bad.returncode == 1
    assert "does not follow the record before it" in bad.stdout
