"""Gateway: safe mode, a rate limit per client, and the binding of each call to the workspace."""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

import anyio
import orjson
from limits import RateLimitItemPerMinute
from limits.aio.storage import RedisStorage
from limits.aio.storage.redis.redispy import RedispyBridge
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import ConfigurationError, StorageError
from pydantic import Field

from oct_mcp.errors import (
    ConfigError,
    RateLimitedError,
    RateLimitUnavailableError,
    SafeModeError,
    WorkspaceError,
)
from oct_mcp.types import CallContext, CallNext, LayerRuntime, LayerSettings, LayerType, Outcome, ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "LAYER",
    "Gateway",
    "GatewaySettings",
    "Limiter",
    "PageContinuations",
    "SharedWindowLimiter",
    "SlidingWindowLimiter",
]

WINDOW_SECONDS: Final = 60.0
SHARED_STORE_SECONDS: Final = 2.0
"""How long a call waits for the shared store before it is refused (never let through)."""
SHARED_KEY_PREFIX: Final = "oct-mcp"
# Clients idle for a whole window hold no calls in it; past this many, they are dropped.
_MAX_IDLE_CLIENTS: Final = 1_024

CONTINUATION_SECONDS: Final = 600.0
"""How long a page's `next_offset` or `next_cursor` stays a free continuation of its operation."""
_CONTINUED_OPERATIONS_MAX: Final = 4_096
# The arguments that say where a page starts; the rest name the operation being paged.
_PAGE_FIELDS: Final = frozenset({"offset", "cursor"})
_NOT_OPERATION: Final = _PAGE_FIELDS | {"confirm"}

SAFE_MODE_MESSAGE: Final = (
    "oct-mcp is in safe mode: every tool call is refused. To leave it, unset OCT_MCP_SAFE_MODE "
    "and set safe_mode to false in the config file, then restart the server."
)


class GatewaySettings(LayerSettings):
    max_rate_limit_per_minute: int | None = Field(default=None, ge=1)
    """A cap this profile puts on the config's rate_limit_per_minute (the smaller one wins)."""


class Limiter(Protocol):
    async def admit(self, client_id: str) -> None:
        """Count one call for `client_id`, or raise a `RefusedError`."""


def _rate_limited(limit: int, retry_after: int) -> RateLimitedError:
    return RateLimitedError(
        f"rate limited: at most {limit} calls per minute; retry in {retry_after} s",
        retry_after_seconds=retry_after,
    )


@dataclass
class SlidingWindowLimiter:
    """At most `limit` calls per client in any rolling window of `window` seconds.

    A log of each client's recent call times, not a token bucket: a bucket of
    size N refilled at N per minute lets 2N calls through in one rolling minute
    (a full bucket, then its refill), and the promise here is N.
    """

    limit: int
    window: float = WINDOW_SECONDS
    clock: Callable[[], float] = time.monotonic
    _calls: dict[str, deque[float]] = field(default_factory=dict)

    async def admit(self, client_id: str) -> None:
        """Count one call for `client_id`, or refuse it.

        Raises:
            RateLimitedError: The client made `limit` calls in the last window;
                it says how many seconds until the oldest of them leaves it.
        """
        # No lock: nothing between reading and appending awaits, so on the one event loop no other
        # call can interleave; a lock would only add its own cost to every call (see chain_alone.py).
        now = self.clock()
        calls = self._calls.get(client_id)
        if calls is None:
            self._forget_idle_clients(now)
            calls = self._calls[client_id] = deque(maxlen=self.limit)
        while calls and calls[0] <= now - self.window:
            calls.popleft()
        if len(calls) >= self.limit:
            raise _rate_limited(self.limit, max(1, math.ceil(calls[0] + self.window - now)))
        calls.append(now)

    @property
    def tracked_clients(self) -> int:
        """How many clients the limiter holds call times for."""
        return len(self._calls)

    def _forget_idle_clients(self, now: float) -> None:
        if len(self._calls) < _MAX_IDLE_CLIENTS:
            return
        for client_id in [
            c for c, calls in self._calls.items() if not calls or calls[-1] <= now - self.window
        ]:
            del self._calls[client_id]


class SharedWindowLimiter:
    """`SlidingWindowLimiter`'s promise, kept in a Redis that every replica shares.

    The `limits` library's moving window: one Lua script per call, run atomically by Redis, so
    calls on any replica at once are counted exactly. A store that does not answer in
    `SHARED_STORE_SECONDS` refuses the call with `rate_limit_unavailable`; never unlimited.
    """

    def __init__(self, limit: int, url: str, *, timeout: float = SHARED_STORE_SECONDS) -> None:
        self.limit = limit
        self.timeout = timeout
        self._item = RateLimitItemPerMinute(limit)
        try:
            storage = RedisStorage(
                "async+" + url,
                wrap_exceptions=True,
                implementation="redispy",
                key_prefix=SHARED_KEY_PREFIX,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
            )
        except ConfigurationError as exc:
            raise ConfigError(
                "rate_limit_storage names Redis, but its client is missing: pip install 'oct-mcp[redis]'"
            ) from exc
        self._storage = storage
        self._window = MovingWindowRateLimiter(storage)

    async def aclose(self) -> None:
        """Close the connections to the store (they belong to the event loop that opened them)."""
        bridge = self._storage.bridge
        if isinstance(bridge, RedispyBridge):
            await bridge.storage.aclose()

    async def admit(self, client_id: str) -> None:
        """Count one call for `client_id` in the shared window, or refuse it.

        Raises:
            RateLimitedError: The client made `limit` calls in the last minute, on any replica.
            RateLimitUnavailableError: The shared store cannot be reached.
        """
        admitted = False
        with anyio.move_on_after(self.timeout) as waited:
            try:
                admitted = await self._window.hit(self._item, client_id)
                if not admitted:
                    stats = await self._window.get_window_stats(self._item, client_id)
            except StorageError as exc:
                raise _unavailable() from exc
        if waited.cancelled_caught:
            raise _unavailable()
        if not admitted:
            raise _rate_limited(self.limit, max(1, math.ceil(stats.reset_time - time.time())))


def _unavailable() -> RateLimitUnavailableError:
    return RateLimitUnavailableError(
        "the rate limit's shared store (rate_limit_storage) cannot be reached, so no call is let "
        "through; retry when it is back, or ask the operator to check Redis"
    )


class PageContinuations:
    """The next pages each client was offered: a call that goes on exactly where a result of the same
    operation ended (its `next_offset` or `next_cursor`) is part of that operation's first call.

    Paging a listing or a search to its end cost a call a page, so the seed's 30 a minute ran out
    within one search of a mid-size project. Only a continuation the server offered is free, once,
    and each page must move on: no argument a caller makes up is a free call, and an operation's
    free pages are bounded by its own result. In memory, per server (each replica keeps its own).
    """

    def __init__(
        self, *, seconds: float = CONTINUATION_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._seconds = seconds
        self._clock = clock
        self._offered: OrderedDict[tuple[str, str], tuple[float, Any, Any]] = OrderedDict()
        self._lock = threading.Lock()  # held for a dict operation only, never across an await

    def claim(self, client_id: str, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether this call is an offered continuation (each offer is used once)."""
        operation = _operation(tool, arguments)
        if operation is None:
            return False
        offset, cursor = arguments.get("offset"), arguments.get("cursor")
        with self._lock:
            offered = self._offered.pop((client_id, operation), None)
        if offered is None:
            return False
        at, next_offset, next_cursor = offered
        if self._clock() - at > self._seconds:
            return False
        if cursor is not None:
            return isinstance(cursor, str) and cursor == next_cursor
        return type(offset) is int and offset > 0 and offset == next_offset

    def offer(self, client_id: str, tool: str, arguments: Mapping[str, Any], outcome: Outcome) -> None:
        """Remember where `outcome` says its next page starts, if it says so."""
        if not isinstance(outcome, ToolResult) or outcome.is_error or not outcome.structured:
            return
        next_offset, next_cursor = (
            outcome.structured.get("next_offset"),
            outcome.structured.get("next_cursor"),
        )
        if next_offset is None and next_cursor is None:
            return
        operation = _operation(tool, arguments)
        if operation is None:
            return
        with self._lock:
            self._offered[(client_id, operation)] = (self._clock(), next_offset, next_cursor)
            self._offered.move_to_end((client_id, operation))
            while len(self._offered) > _CONTINUED_OPERATIONS_MAX:
                self._offered.popitem(last=False)


def _operation(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """What a paged call asks for, without where its page starts; None for arguments no JSON holds."""
    rest = {name: value for name, value in arguments.items() if name not in _NOT_OPERATION}
    try:
        encoded = orjson.dumps([tool, rest], option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    return hashlib.sha256(encoded).hexdigest()


@dataclass(frozen=True, slots=True)
class Gateway:
    """Refuse everything in safe mode, limit each client's rate, bind the call to the workspace.

    Reads `ctx.client`. Writes `ctx.workspace`. Raises `SafeModeError`,
    `RateLimitedError`, `WorkspaceError`. Never answers. A page that goes on where the last
    page of the same operation ended is not counted again (`PageContinuations`).
    """

    workspace: Workspace
    safe_mode: bool
    limiter: Limiter
    pages: PageContinuations = field(default_factory=PageContinuations)

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        if self.safe_mode:
            raise SafeModeError(SAFE_MODE_MESSAGE)
        client = ctx.client.client_id
        if not self.pages.claim(client, ctx.tool, ctx.arguments):
            await self.limiter.admit(client)
        # One stat per call: a project root deleted or replaced while serving must not be used.
        if not self.workspace.root_is_present():
            raise WorkspaceError("the project root is no longer an existing directory; restart the server")
        outcome = await call_next(replace(ctx, workspace=self.workspace))
        self.pages.offer(client, ctx.tool, ctx.arguments, outcome)
        return outcome


def _build(settings: GatewaySettings, runtime: LayerRuntime) -> Gateway:
    limit = runtime.config.rate_limit_per_minute
    if settings.max_rate_limit_per_minute is not None:
        limit = min(limit, settings.max_rate_limit_per_minute)
    storage = runtime.config.rate_limit_storage
    limiter: Limiter = (
        SlidingWindowLimiter(limit=limit)
        if storage.startswith("memory://")
        else SharedWindowLimiter(limit, storage)
    )
    return Gateway(workspace=runtime.workspace, safe_mode=runtime.config.safe_mode, limiter=limiter)


LAYER: Final = LayerType(
    name="gateway",
    settings=GatewaySettings,
    build=_build,
    provides=frozenset({"workspace"}),
)
