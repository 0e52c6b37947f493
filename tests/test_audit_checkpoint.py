"""Signed audit checkpoints: the signature, the key pair, where the key may live."""

from __future__ import annotations

import dataclasses
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from oct_mcp.audit.checkpoint import check_key_location, generate_key_pair, sign_head, verify_checkpoint
from oct_mcp.errors import ConfigError


def _keys(tmp_path: Path) -> tuple[Ed25519PrivateKey, Ed25519PublicKey]:
    generate_key_pair(tmp_path / "k", tmp_path / "k.pub")
    private = serialization.load_pem_private_key((tmp_path / "k").read_bytes(), password=None)
    public = serialization.load_pem_public_key((tmp_path / "k.pub").read_bytes())
    assert isinstance(private, Ed25519PrivateKey)
    assert isinstance(public, Ed25519PublicKey)
    return private, public


def test_keygen_writes_an_owner_only_private_key(tmp_path: Path) -> None:
    _keys(tmp_path)
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600


def test_keygen_never_overwrites_a_key(tmp_path: Path) -> None:
    _keys(tmp_path)
    with pytest.raises(FileExistsError):
        generate_key_pair(tmp_path / "k", tmp_path / "other.pub")


def test_a_signed_head_verifies_and_any_changed_field_does_not(tmp_path: Path) -> None:
    private, public = _keys(tmp_path)
    checkpoint = sign_head(private, seq=7, digest="ab" * 32, time="2026-01-01T00:00:00Z", replica="r1")
    assert verify_checkpoint(public, checkpoint)
    for change in (
        {"seq": 8},
        {"digest": "cd" * 32},
        {"time": "2027"},
        {"replica": "r2"},
        {"signature": "00"},
    ):
        assert not verify_checkpoint(public, dataclasses.replace(checkpoint, **change))  # type: ignore[arg-type]


def test_a_checkpoint_signed_by_another_key_does_not_verify(tmp_path: Path) -> None:
    _, public = _keys(tmp_path)
    forged = sign_head(Ed25519PrivateKey.generate(), seq=1, digest="0" * 64, time="t", replica="r")
    assert not verify_checkpoint(public, forged)


def test_a_key_inside_the_audit_folder_or_project_is_refused(tmp_path: Path) -> None:
    audit, project = tmp_path / "audit", tmp_path / "project"
    audit.mkdir()
    project.mkdir()
    for inside in (audit / "k", project / "sub" / "k"):
        with pytest.raises(ConfigError) as caught:
            check_key_location(inside, forbidden=(audit, project))
        assert caught.value.rule == "audit_key_location"
    check_key_location(tmp_path / "keys" / "k", forbidden=(audit, project))
