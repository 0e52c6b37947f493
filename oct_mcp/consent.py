"""Consent shared by the gate and the transports: the argument digest, a human's answer, the form."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final, Literal

import orjson

from oct_mcp.display import is_hidden_character, quote_name
from oct_mcp.preview import TargetState

__all__ = [
    "CONFIRMATION_PREFIX",
    "CONFIRM_FIELD",
    "CONFIRM_SCHEMA",
    "CONSENT_FORM_SCHEMA",
    "CONSENT_META_KEY",
    "CONSENT_STATE_TTL_SECONDS",
    "DECLINED_PREFIX",
    "OUTPUT_PREFIX",
    "Consent",
    "ConsentFacts",
    "Grant",
    "SessionGrants",
    "UsedConsents",
    "argument_digest",
    "command_grant",
    "consent_form_schema",
    "granted_action",
    "shown_folders",
    "unmistakable_output",
    "with_confirm_argument",
    "without_confirm",
]

CONFIRMATION_PREFIX: Final = "[oct-mcp requires_confirmation]"
"""The seed's sentinel: how the text of a consent request starts, for clients that cannot be asked."""

CONSENT_META_KEY: Final = "oct-mcp/consent"
"""Where a consent request says what it is in the result's `_meta`, which no tool output can write."""

OUTPUT_PREFIX: Final = "[oct-mcp output] "
"""Put before a tool's text that would otherwise start like a consent request."""

CONFIRM_FIELD: Final = "confirm"
"""The seed's stateless protocol: the host re-submits the identical call with `confirm=True`.

The chain's argument, not a tool's: the validator takes it off before the tool's model sees the call."""

CONFIRM_SCHEMA: Final[Mapping[str, Any]] = MappingProxyType({"type": "boolean"})
"""How `confirm` is listed in the input schema of a tool whose call may need consent: the name says
what it is, and the answer that asks for it says how to send it (tools/list is in every turn)."""

DECLINED_PREFIX: Final = "[declined]"

CONSENT_STATE_TTL_SECONDS: Final = 600.0
"""How long a sealed consent round's request state is accepted; its nonce is kept as long."""
USED_CONSENTS_MAX: Final = 10_000
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
SESSION_GRANT_FIELD: Final = "allow_for_session"


COMMAND_GRANT_PREFIX: Final = "/command: "
"""How a grant of one command (`oct_run`'s exact argv, folder and options) is written, beside the
folders a write tool's grants name: with a `/` first, which no project-relative folder has, so a
folder named like a command is never shown as one."""


def command_grant(shown: str) -> str:
    """The grant of the command a person reads as `shown` (the whole command, its folder and its
    options), for as long as the session or the grant lasts."""
    return COMMAND_GRANT_PREFIX + shown


def granted_action(grants: tuple[str, ...]) -> str:
    """What session grants let a tool do, as the question, the form and `oct_grants` say it."""
    folders = tuple(grant for grant in grants if not grant.startswith(COMMAND_GRANT_PREFIX))
    parts = [f"write in {shown_folders(folders)} (not the subfolders)"] if folders else []
    parts += [f"run {grant.removeprefix(COMMAND_GRANT_PREFIX)}" for grant in grants if grant not in folders]
    return " and ".join(parts)


def consent_form_schema(tool: str, grant_folders: tuple[str, ...]) -> dict[str, Any]:
    """The form a human answers: approve this change; and, where offered, the session grant."""
    if not grant_folders:
        return CONSENT_FORM_SCHEMA
    commands = any(grant.startswith(COMMAND_GRANT_PREFIX) for grant in grant_folders)
    where = shown_folders(grant_folders)
    later = (
        f"Later {tool} calls of exactly this command, in the same folder with the same options,"
        if commands
        else f"Later {tool} calls that change files only in {where} (not their subfolders)"
    )
    grant = {
        "type": "boolean",
        "title": f"Also allow {tool} to {granted_action(grant_folders)} for the rest of this session",
        "description": f"{later} run without asking until this client disconnects."
        + ("" if commands else " Never files that configure code."),
        "default": False,
    }
    properties = {**CONSENT_FORM_SCHEMA["properties"], SESSION_GRANT_FIELD: grant}
    return {**CONSENT_FORM_SCHEMA, "properties": properties}


def shown_folders(folders: tuple[str, ...]) -> str:
    """The folders a session grant opens, as the question and the form both name them, quoted if need be."""
    return ", ".join("the project root" if folder == "." else quote_name(f"{folder}/") for folder in folders)


def argument_digest(arguments: Mapping[str, Any]) -> str:
    """A digest of the call's arguments, `confirm` left out, that a consent is bound to.

    Canonical JSON (sorted keys, no whitespace, UTF-8) under SHA-256, written by orjson: every
    audited call digests its arguments, and orjson takes a third of json.dumps's time (0.9 against
    2.6 us, measured). What orjson refuses (a lone surrogate, an integer over 64 bits, a value JSON
    cannot hold) goes through json.dumps, with repr for the last, so it never raises; so does any
    output with a `null`, since orjson writes NaN and the infinities as null too, and a consent for
    one must not cover the other.
    """
    payload = {str(key): value for key, value in arguments.items() if key != CONFIRM_FIELD}
    try:
        canonical = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError
        canonical = b"null"
    if b"null" in canonical:
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
        canonical = text.encode("utf-8", errors="surrogatepass")
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def without_confirm(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments as its tool takes them: the chain's `confirm` left out."""
    return {key: value for key, value in arguments.items() if key != CONFIRM_FIELD}


def with_confirm_argument(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's input schema with the chain's `confirm` listed: a client that cannot ask a human sends it.

    A schema that already has a `confirm` property keeps its own (a host's tool may name one; the
    chain takes it off the call all the same).
    """
    properties = dict(schema.get("properties") or {})
    properties.setdefault(CONFIRM_FIELD, dict(CONFIRM_SCHEMA))
    return {**schema, "type": schema.get("type", "object"), "properties": properties}


def unmistakable_output(text: str) -> str:
    """A tool's text as it may go to the host: never starting like a consent request.

    A file's first line, a name with a newline, or git output can begin with the sentinel; a
    host that reads the start of a result's text must not take such output for a question.
    Leading blanks and characters no one sees are skipped, and case ignored, as a reader would.
    """
    start = 0
    while start < len(text) and (text[start].isspace() or is_hidden_character(text[start])):
        start += 1
    head = text[start : start + len(CONFIRMATION_PREFIX)]
    if head.casefold() == CONFIRMATION_PREFIX.casefold():
        return OUTPUT_PREFIX + text
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class Consent:
    """A human's answer, through the client, about one exact call."""

    tool: str
    digest: str
    approved: bool
    replayed: bool = False
    """The answer came with a sealed state already answered once: it counts for nothing."""
    targets: tuple[TargetState, ...] | None = None
    """The contents the preview the human saw was made from; None when no preview was shown."""
    preview_digest: str | None = None
    grant_folders: tuple[str, ...] = ()
    """The human also allowed this tool's writes in these folders for the rest of the session."""

    def covers(self, tool: str, digest: str) -> bool:
        """True only for the exact tool and arguments the human was shown."""
        return self.tool == tool and self.digest == digest


class UsedConsents:
    """The nonces of sealed consent states already answered, each kept until its state expires.

    A sealed state stays valid for its whole lifetime, so without this an approved write could be
    run again by sending the same answer twice. In memory, for this process: replicas that share
    the sealing key would need one shared store of used nonces.
    """

    def __init__(self, capacity: int = USED_CONSENTS_MAX, clock: Callable[[], float] = time.time) -> None:
        self._capacity = capacity
        self._clock = clock
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()

    def claim(self, nonce: str, expires_at: float) -> bool:
        """Mark `nonce` used; True only the first time, for a state that has not expired.

        When the store is full of live nonces, nothing more is accepted until some expire: an
        answer is refused rather than a used nonce forgotten.
        """
        now = self._clock()
        if expires_at <= now:
            return False
        with self._lock:
            if nonce in self._used:
                return False
            if len(self._used) >= self._capacity:
                self._used = {key: until for key, until in self._used.items() if until > now}
                if len(self._used) >= self._capacity:
                    return False
            self._used[nonce] = expires_at
        return True


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsentFacts:
    """How a call that needed consent got it, for the audit record."""

    given_by: Literal["elicitation", "session_grant", "confirm", "rule"]
    """A human through the client; a grant a human gave earlier in this session; the model's confirm=true."""
    preview_digest: str | None = None
    """The preview the consent was given for; None where none was shown (confirm=true)."""
    granted_folders: tuple[str, ...] = ()
    """Folders the human opened to this tool for the rest of the session with this answer: the
    transport records them in the session's `SessionGrants` when the call comes back."""
    grant_seconds: int | None = None
    """How long those folders stay open; None: as long as the session."""
    reason: str = ""
    """The safety gate's reason: why the call needed consent, and whether it ran as a dry run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """One folder a human opened to one tool's writes, or one command they let it run again, for
    the rest of a client session."""

    id: str
    """`g1`, `g2`, ... in the order given: what `oct_grants` revokes by."""
    tool: str
    scope: str
    """A folder, project-relative (`.` the root; the folder itself, not its subfolders), or a
    command (`command_grant`)."""
    given_at: float
    """Seconds since the epoch."""
    expires_at: float | None
    """Seconds since the epoch; None: it lasts as long as the session."""


class SessionGrants:
    """What a human allowed for the rest of one client session: a tool's writes in some folders,
    each until the session ends or the lifetime it was given with passes, or until it is revoked.

    One store per client session, owned by the transport that serves it, and gone with it.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._grants: dict[str, Grant] = {}
        self._given = 0
        self._clock = clock
        self._lock = threading.Lock()

    def grant(self, tool: str, scopes: tuple[str, ...], lifetime_seconds: float | None = None) -> None:
        """Open `scopes` (folders, or a command) to `tool`; one already open to it gets the new lifetime."""
        now = self._clock()
        expires_at = None if lifetime_seconds is None else now + lifetime_seconds
        with self._lock:
            for scope in scopes:
                kept = next((g for g in self._grants.values() if (g.tool, g.scope) == (tool, scope)), None)
                if kept is not None:
                    self._grants[kept.id] = replace(kept, given_at=now, expires_at=expires_at)
                    continue
                self._given += 1
                given = Grant(
                    id=f"g{self._given}", tool=tool, scope=scope, given_at=now, expires_at=expires_at
                )
                self._grants[given.id] = given

    def covers(self, tool: str, folders: tuple[str, ...]) -> bool:
        """True when every folder is one the human opened to `tool` (a folder, not its subfolders),
        and the grant has not expired."""
        if not folders:
            return False
        open_now = {(grant.tool, grant.scope) for grant in self.listed()}
        return all((tool, folder) in open_now for folder in folders)

    def listed(self) -> list[Grant]:
        """The grants in force, oldest first; the expired ones are dropped."""
        now = self._clock()
        with self._lock:
            for grant in [
                g for g in self._grants.values() if g.expires_at is not None and g.expires_at <= now
            ]:
                del self._grants[grant.id]
            return list(self._grants.values())

    def revoke(self, ids: Collection[str] | None = None) -> list[Grant]:
        """Take back the grants named (None: every one); returns those taken back.

        Raises:
            KeyError: An id is no grant in force; nothing was taken back.
        """
        in_force = {grant.id: grant for grant in self.listed()}
        with self._lock:
            if ids is None:
                chosen = list(in_force.values())
            else:
                unknown = [grant_id for grant_id in ids if grant_id not in in_force]
                if unknown:
                    raise KeyError(unknown[0])
                chosen = [in_force[grant_id] for grant_id in dict.fromkeys(ids)]
            for grant in chosen:
                self._grants.pop(grant.id, None)
            return chosen
