"""Handshake-era HTTP sessions capped per identity, beside the SDK's cap for the whole server.

One token that opens session after session (the SDK keeps each until its client ends it or it sits
idle for 30 minutes) fills the SDK's global cap of 10,000 in about two minutes, and every other
client then gets 503 until they expire. Here an identity (a bearer token's name, an OAuth
subject) may hold `http_max_sessions_per_client` open at once; past that its next opening request
gets 503, which the request guard audits, and everyone else is still served.
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from oct_mcp.diagnostics import get_logger

__all__ = ["SessionsPerIdentity"]

_log = get_logger(__name__)


class SessionsPerIdentity(StreamableHTTPSessionManager):
    """The SDK's session manager, whose admission of a new session also counts the sessions the
    same credential holds (the SDK records each session's owner to refuse it to anyone else)."""

    def __init__(self, *args: Any, per_identity: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.per_identity = per_identity

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # Called under the SDK's session-creation lock: the count and the admission are one step.
        if requestor is not None:
            held = sum(1 for owner in self._session_owners.values() if owner == requestor)
            if held >= self.per_identity:
                _log.warning("sessions_per_identity_full", client=requestor["client_id"], sessions=held)
                return None
        return super()._admit_session(requestor)
