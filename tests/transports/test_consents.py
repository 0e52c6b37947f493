"""Used consent nonces in a real Redis: claimed once across replicas, refused while Redis is gone."""

from __future__ import annotations

import time

from redis_server import RedisServer, redis_server

from oct_mcp.transports.consents import SharedUsedConsents

__all__ = ["redis_server"]


def test_a_nonce_is_claimed_once_whichever_replica_claims_it(redis_server: RedisServer) -> None:
    first, second = SharedUsedConsents(redis_server.url), SharedUsedConsents(redis_server.url)
    later = time.time() + 60
    try:
        claims = [first.claim("n1", later), second.claim("n1", later), second.claim("n2", later)]
        expired = first.claim("n3", time.time() - 1)
    finally:
        first.close()
        second.close()

    assert (claims, expired) == ([True, False, True], False)


def test_with_redis_gone_no_nonce_is_claimed(redis_server: RedisServer) -> None:
    used = SharedUsedConsents(redis_server.url, timeout=0.5)
    try:
        redis_server.stop()
        during = used.claim("n1", time.time() + 60)
        redis_server.start()
        after = used.claim("n1", time.time() + 60)
    finally:
        used.close()

    assert (during, after) == (False, True)
