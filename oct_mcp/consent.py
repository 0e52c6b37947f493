"""Consent shared by the gate and the transports: the argument digest, a human's answer, the form."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["CONFIRM_FIELD", "CONSENT_FORM_SCHEMA", "DECLINED_PREFIX", "Consent", "argument_digest"]

CONFIRM_FIELD: Final = "confirm"
"""The seed's stateless protocol: the host re-submits the identical call with `confirm=True`."""

DECLINED_PREFIX: Final = "[declined]"
"""How the text of a call the human declined starts: nothing ran."""

CONSENT_FORM_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Allow this call",
            "description": "Run the tool call described above, exactly as shown.",
        }
    },
    "required": ["approve"],
}


def argument_digest(arguments: Mapping[str, Any]) -> str:
    """A digest of the call's arguments, `confirm` left out, that a consent is bound to.

    Canonical JSON (sorted keys, no whitespace) under SHA-256. Total: a value JSON
    cannot hold is digested by its repr, so the function never raises.
    """
    payload = {str(key): value for key, value in arguments.items() if key != CONFIRM_FIELD}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", errors="surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Consent:
    """A human's answer, through the client, about one exact call."""

    tool: str
    digest: str
    approved: bool

    def covers(self, tool: str, digest: str) -> bool:
        """True only for the exact tool and arguments the human was shown."""
        return self.tool == tool and self.digest == digest
