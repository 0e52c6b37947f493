"""The gateway's rate limit in a real Redis that replicas share: exact, never unlimited when Redis is gone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from redis_server import RedisServer, redis_server

from oct_mcp.errors import RateLimitedError, RateLimitUnavailableError
from oct_mcp.middleware.gateway import SharedWindowLimiter

pytestmark = pytest.mark.anyio
__all__ = ["redis_server"]


@asynccontextmanager
async def limiters(
    count: int, limit: int, url: str, store_seconds: float = 2.0
) -> AsyncIterator[list[SharedWindowLimiter]]:
    made = [SharedWindowLimiter(limit, url, timeout=store_seconds) for _ in range(count)]
    try:
        yield made
    finally:
        for limiter in made:
            await limiter.aclose()


async def outcomes(limiter: SharedWindowLimiter, client_id: str) -> str:
    try:
        await limiter.admit(client_id)
    except RateLimitedError:
        return "limited"
    except RateLimitUnavailableError:
        return "unavailable"
    return "admitted"


async def test_a_burst_of_three_times_the_limit_over_three_replicas_lets_exactly_the_limit_through(
    redis_server: RedisServer,
) -> None:
    seen: list[str] = []
    with anyio.fail_after(30):
        async with limiters(3, 10, redis_server.url) as replicas, anyio.create_task_group() as tasks:

            async def one(index: int) -> None:
                seen.append(await outcomes(replicas[index % 3], "ci"))

            for index in range(30):
                tasks.start_soon(one, index)
        async with limiters(1, 10, redis_server.url) as (replica,):
            other = await outcomes(replica, "review")

    assert sorted(seen) == ["admitted"] * 10 + ["limited"] * 20
    assert other == "admitted"


async def test_with_redis_gone_calls_are_refused_not_let_through_and_served_again_when_it_is_back(
    redis_server: RedisServer,
) -> None:
    with anyio.fail_after(30):
        async with limiters(1, 5, redis_server.url, store_seconds=1.0) as (limiter,):
            before = await outcomes(limiter, "ci")
            redis_server.stop()
            during = [await outcomes(limiter, "ci") for _ in range(3)]
            redis_server.start()
            after = await outcomes(limiter, "ci")

    assert (before, during, after) == ("admitted", ["unavailable"] * 3, "admitted")


async def test_a_refusal_for_the_limit_says_when_to_retry(redis_server: RedisServer) -> None:
    with anyio.fail_after(30):
        async with limiters(1, 1, redis_server.url) as (limiter,):
            await limiter.admit("ci")
            with pytest.raises(RateLimitedError) as refused:
                await limiter.admit("ci")

    assert refused.value.code == "rate_limited"
    assert 1 <= refused.value.retry_after_seconds <= 60
