"""Used consent nonces in the Redis replicas share: an answer runs its call once, on whichever replica."""

from __future__ import annotations

import time
from typing import Final

import redis

from oct_mcp.consent import UsedConsents
from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import ConfigError

__all__ = ["SharedUsedConsents"]

KEY_PREFIX: Final = "oct-mcp:consent:"
STORE_SECONDS: Final = 1.0
_log = get_logger(__name__)


class SharedUsedConsents(UsedConsents):
    """`UsedConsents` in Redis: `SET NX` with the state's own expiry, atomic across replicas.

    `claim` is synchronous (the transport calls it so) and blocks the event loop for one loopback
    round trip, on consent retries only, `STORE_SECONDS` at most. A store that does not answer
    counts the nonce as used: the answer is refused, never run twice.
    """

    def __init__(self, url: str, *, timeout: float = STORE_SECONDS) -> None:
        super().__init__()
        try:
            self._redis = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        except ValueError as exc:
            raise ConfigError("rate_limit_storage is not a Redis URL the client can use") from exc

    def claim(self, nonce: str, expires_at: float) -> bool:
        if expires_at <= time.time():
            return False
        try:
            return bool(self._redis.set(KEY_PREFIX + nonce, b"1", nx=True, pxat=int(expires_at * 1000)))
        except redis.RedisError as exc:
            _log.error("consent_store_unavailable", problem=type(exc).__name__)
            return False

    def close(self) -> None:
        self._redis.close()
