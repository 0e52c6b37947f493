"""Signed audit checkpoints: the key that signs the chain's head, and where it may live.

The chain alone is tamper-evident only against someone who cannot rewrite the log and its head
together. A checkpoint signs the head with an Ed25519 key kept outside the log's folder and the
project, so whoever rewrites the log cannot sign the rewrite. Checking is in `verify_bundle`
(a file with no oct_mcp imports, to be copied to another machine); this module signs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oct_mcp.audit.verify_bundle import CHECKPOINT_EVENT, checkpoint_payload, key_id
from oct_mcp.errors import ConfigError

__all__ = ["HeadSigner", "generate_key_pair", "load_signer", "public_key_path"]

KEY_MODE: Final = 0o600
_KEY_MAX_BYTES: Final = 4_096
_FIX = "make one with `oct-mcp audit keygen PATH` and set audit_signing_key to PATH"


@dataclass(frozen=True, slots=True)
class HeadSigner:
    """Signs the chain's head as a checkpoint record, for one replica."""

    key: Ed25519PrivateKey
    replica: str
    key_id: str

    def checkpoint_record(self, *, seq: int, digest: str, time: str) -> dict[str, Any]:
        """The fields of the checkpoint record for the head `seq`/`digest` (the chain adds its own)."""
        signed = {"seq": seq, "hash": digest, "time": time, "replica": self.replica}
        signature = self.key.sign(checkpoint_payload(signed)).hex()
        return {
            "event": CHECKPOINT_EVENT,
            "checkpoint": {**signed, "key": self.key_id, "signature": signature},
        }


def public_key_path(private: Path) -> Path:
    """Where `keygen` writes the public half of the key at `private`: `PRIVATE.pub`."""
    return private.with_name(private.name + ".pub")


def load_signer(path: str | Path, *, replica: str, forbidden: Sequence[Path]) -> HeadSigner:
    """The signer for the private key at `path`, checked as `ssh` checks its keys.

    Raises:
        ConfigError: rule `audit_key_location` (inside the audit folder or the project: whoever can
            rewrite the log must not hold it), `audit_key_permissions` (others may read it, or it is
            not a regular file owned by this user), `audit_key_unreadable`, `audit_key_invalid`
            (not an unencrypted PEM Ed25519 private key).
    """
    key_path = Path(path).expanduser()
    resolved = key_path.resolve()
    for folder in forbidden:
        if resolved.is_relative_to(folder.resolve()):
            raise ConfigError(
                f"audit_signing_key {key_path} is inside {folder}: keep the signing key outside the "
                "audit log's folder and the project, where whoever can rewrite the log cannot read it",
                rule="audit_key_location",
            )
    try:
        fd = os.open(key_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"audit_signing_key {key_path} cannot be read ({reason}); {_FIX}", rule="audit_key_unreadable"
        ) from None
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o077:
            raise ConfigError(
                f"audit_signing_key {key_path} must be a regular file of this user that only this user "
                f"may read (chmod 600 {key_path})",
                rule="audit_key_permissions",
            )
        data = file.read(_KEY_MAX_BYTES + 1)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PrivateKey) or len(data) > _KEY_MAX_BYTES:
        raise ConfigError(
            f"audit_signing_key {key_path} is not an unencrypted PEM Ed25519 private key; {_FIX}",
            rule="audit_key_invalid",
        )
    return HeadSigner(key=key, replica=replica, key_id=key_id(key.public_key()))


def generate_key_pair(private_path: Path) -> Path:
    """Write a new Ed25519 key pair: the private key owner-only (0600), the public one beside it.

    Returns:
        The public key's path (`PRIVATE.pub`).

    Raises:
        FileExistsError: A key file is already there (a key is never overwritten).
    """
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    public_path = public_key_path(private_path)
    if public_path.exists():
        raise FileExistsError(f"{public_path} already exists")
    _write_new(private_path, private, KEY_MODE)
    _write_new(public_path, public, 0o644)
    return public_path


def _write_new(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
