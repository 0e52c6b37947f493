"""Ed25519 checkpoints over the audit chain's head: signing, checking and the key pair."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from oct_mcp.errors import ConfigError

__all__ = ["Checkpoint", "check_key_location", "generate_key_pair", "sign_head", "verify_checkpoint"]

KEY_MODE: Final = 0o600


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """A signed statement: `replica` had written up to `seq`, whose line hashes to `digest`, at `time`."""

    seq: int
    digest: str
    time: str
    replica: str
    signature: str = ""

    def payload(self) -> bytes:
        """The exact bytes signed: canonical JSON, so any verifier can rebuild them."""
        fields: dict[str, Any] = {
            "seq": self.seq,
            "hash": self.digest,
            "time": self.time,
            "replica": self.replica,
        }
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def sign_head(key: Ed25519PrivateKey, *, seq: int, digest: str, time: str, replica: str) -> Checkpoint:
    """Sign the chain's head.

    Returns:
        The checkpoint with its hex signature.
    """
    unsigned = Checkpoint(seq=seq, digest=digest, time=time, replica=replica)
    signature = key.sign(unsigned.payload()).hex()
    return Checkpoint(seq=seq, digest=digest, time=time, replica=replica, signature=signature)


def verify_checkpoint(public: Ed25519PublicKey, checkpoint: Checkpoint) -> bool:
    """Whether `checkpoint` carries a valid signature by `public`'s private half."""
    try:
        public.verify(bytes.fromhex(checkpoint.signature), checkpoint.payload())
    except (InvalidSignature, ValueError):
        return False
    return True


def check_key_location(key: Path, *, forbidden: tuple[Path, ...]) -> None:
    """Refuse a private key inside the audit folder or the project: whoever rewrites the log must not hold it.

    Raises:
        ConfigError: rule `audit_key_location`.
    """
    resolved = key.resolve()
    for folder in forbidden:
        if resolved.is_relative_to(folder.resolve()):
            raise ConfigError(
                "the audit signing key must live outside the audit folder and the project",
                rule="audit_key_location",
            )


def generate_key_pair(private_path: Path, public_path: Path) -> None:
    """Write a new Ed25519 key pair; the private key owner-only (0600), never over an existing file.

    Raises:
        FileExistsError: a key file is already there.
    """
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, KEY_MODE)
    with os.fdopen(fd, "wb") as out:
        out.write(private)
    fd = os.open(public_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(public)
