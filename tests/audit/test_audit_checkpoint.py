"""Signed audit checkpoints in the writer, and the signing key's checks: where it may live, who may
read it, what it must be. A key the server cannot use stops it from starting (fails closed)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key

from oct_mcp.app import build_app
from oct_mcp.audit.checkpoint import generate_key_pair, load_signer
from oct_mcp.audit.verify import lines_of
from oct_mcp.audit.verify_bundle import check_signatures, load_public_key, unsigned_problem
from oct_mcp.audit.writer import AuditWriter
from oct_mcp.errors import ConfigError


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "audit.key"
    path.parent.mkdir()
    generate_key_pair(path)
    return path


def _writer(tmp_path: Path, key: Path, **options: float) -> AuditWriter:
    signer = load_signer(key, replica="r1", forbidden=(tmp_path / "audit",))
    return AuditWriter(
        tmp_path / "audit" / "audit.log", max_bytes=1 << 20, max_files=3, signer=signer, **options
    )  # type: ignore[arg-type]


def _events(log: Path) -> list[str]:
    return [json.loads(line).get("event", "call") for line in lines_of(log.read_bytes())]


def test_keygen_writes_an_owner_only_private_key_and_never_overwrites_one(key: Path) -> None:
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.with_name("audit.key.pub").is_file()
    with pytest.raises(FileExistsError):
        generate_key_pair(key)


def test_the_writer_signs_every_n_records_and_on_close(tmp_path: Path, key: Path) -> None:
    writer = _writer(tmp_path, key, checkpoint_every=2)
    for _ in range(5):
        assert writer.write({"event": "call"})
    writer.close()
    assert _events(writer.path) == ["call", "call", "checkpoint"] * 2 + ["call", "checkpoint"]
    public = load_public_key(key.with_name("audit.key.pub").read_bytes())
    lines = [(str(n), line) for n, line in enumerate(lines_of(writer.path.read_bytes()))]
    report = check_signatures(lines, [public])
    assert report.problems == []
    assert report.checkpoints == 3
    assert unsigned_problem(report) is None
    # Closed again with nothing new: no second checkpoint for the same head.
    writer.close()
    assert _events(writer.path).count("checkpoint") == 3


def test_a_quiet_server_still_signs_after_checkpoint_seconds(tmp_path: Path, key: Path) -> None:
    writer = _writer(tmp_path, key, checkpoint_every=1_000, checkpoint_seconds=0.2)
    writer.write({"event": "call"})
    deadline = time.monotonic() + 30
    while "checkpoint" not in _events(writer.path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _events(writer.path) == ["call", "checkpoint"]
    writer.close()
    assert _events(writer.path) == ["call", "checkpoint"]


def test_a_key_inside_the_audit_folder_or_the_project_stops_the_server(
    tmp_path: Path, project: Path, config_file: Path
) -> None:
    audit = tmp_path / "audit"
    audit.mkdir()
    for inside in (audit / "audit.key", project / "audit.key"):
        generate_key_pair(inside)
        config_file.write_text(
            json.dumps({"audit_log_path": str(audit / "audit.log"), "audit_signing_key": str(inside)})
        )
        with pytest.raises(ConfigError) as refused:
            build_app(project, config_path=config_file)
        assert refused.value.rule == "audit_key_location"


@pytest.mark.parametrize(
    ("problem", "rule"),
    [
        ("missing", "audit_key_unreadable"),
        ("readable by others", "audit_key_permissions"),
        ("a link", "audit_key_unreadable"),
        ("not ed25519", "audit_key_invalid"),
        ("the public half", "audit_key_invalid"),
    ],
)
def test_a_key_the_server_cannot_trust_is_refused_with_its_rule(
    tmp_path: Path, key: Path, problem: str, rule: str
) -> None:
    target = tmp_path / "keys" / "bad.key"
    if problem == "readable by others":
        target.write_bytes(key.read_bytes())
        target.chmod(0o644)
    elif problem == "a link":
        target.symlink_to(key)
    elif problem == "not ed25519":
        ec = generate_private_key(SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, ec)
        os.close(fd)
    elif problem == "the public half":
        fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, key.with_name("audit.key.pub").read_bytes())
        os.close(fd)
    with pytest.raises(ConfigError) as refused:
        load_signer(target, replica="", forbidden=(tmp_path / "audit",))
    assert refused.value.rule == rule


def test_doctor_says_the_log_is_signed_and_by_which_key(
    tmp_path: Path, project: Path, config_file: Path, key: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from oct_mcp.audit.verify_bundle import key_id
    from oct_mcp.cli import main

    config_file.write_text(
        json.dumps({"audit_log_path": str(tmp_path / "audit" / "audit.log"), "audit_signing_key": str(key)})
    )
    assert main(["doctor", "--project-root", str(project), "--config", str(config_file)]) == 0
    public = load_public_key(key.with_name("audit.key.pub").read_bytes())
    assert (
        f"checkpoints signed by key {key_id(public)} every 1000 records or 300 s" in capsys.readouterr().out
    )
