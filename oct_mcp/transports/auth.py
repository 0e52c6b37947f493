"""Who may call over HTTP: bearer tokens kept as hashes, OAuth 2.1 JWTs checked against the issuer's keys."""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import anyio.to_thread
import jwt
from mcp.server.auth.provider import AccessToken, TokenVerifier

from oct_mcp.config import TOKEN_HASH_PREFIX, McpConfig, load_settings
from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import ConfigError

__all__ = [
    "JWT_ALGORITHMS",
    "HashedTokens",
    "JwtVerifier",
    "ReloadingTokens",
    "SigningKeys",
    "Verifiers",
    "hash_token",
    "new_token",
    "token_expiry",
    "token_verifier",
]

TOKEN_BYTES: Final = 32
JWT_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA")
"""Asymmetric only: a server that holds only public keys can never be made to accept an HMAC token."""
_JWKS_CACHE_SECONDS: Final = 300
_JWKS_TIMEOUT_SECONDS: Final = 5
_JWKS_MISS_INTERVAL_SECONDS: Final = 30
_RELOAD_CHECK_SECONDS: Final = 1.0
_log = get_logger(__name__)


def new_token() -> str:
    """A new bearer token: 256 random bits, URL-safe."""
    return "oct_" + secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    """What the config keeps of a token: its SHA-256, which a high-entropy token needs no slow hash for."""
    return TOKEN_HASH_PREFIX + hashlib.sha256(token.encode("utf-8", errors="surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class HashedTokens:
    """Bearer tokens named in the config by hash: the token's name is the client id."""

    names_by_hash: Mapping[str, str]
    scopes_by_name: Mapping[str, Sequence[str]] = field(default_factory=dict)
    expiry_by_name: Mapping[str, float] = field(default_factory=dict)
    """When each token stops being accepted (seconds since the epoch); absent: never."""

    @classmethod
    def from_config(
        cls,
        tokens: Mapping[str, str],
        scopes: Mapping[str, Sequence[str]] | None = None,
        expiry: Mapping[str, Any] | None = None,
    ) -> HashedTokens:
        """Raises:
        ConfigError: rule `http_token_expiry`: an entry for a token the config does not name, or a
            time that is no ISO 8601 date or date and time.
        """
        return cls(
            {digest: name for name, digest in tokens.items()},
            dict(scopes or {}),
            token_expiry(expiry or {}, tokens.keys()),
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hash_token(token)
        # The hash of a 256-bit token is what is looked up: a timing difference tells nothing usable.
        name = self.names_by_hash.get(digest)
        if name is None:
            return None
        expires = self.expiry_by_name.get(name)
        if expires is not None and time.time() >= expires:
            _log.info("token_expired", client=name)
            return None
        scopes = list(self.scopes_by_name.get(name, ()))
        expires_at = int(expires) if expires is not None else None
        return AccessToken(token=digest, client_id=name, scopes=scopes, subject=name, expires_at=expires_at)


def token_expiry(expiry: Mapping[str, Any], names: Collection[str]) -> dict[str, float]:
    """`http_token_expiry` read: token name -> when it expires, in seconds since the epoch. A date
    alone expires at its start, 00:00 UTC; a date and time without a zone is UTC.

    Raises:
        ConfigError: rule `http_token_expiry`.
    """
    if not isinstance(expiry, Mapping):
        raise ConfigError(
            "http_token_expiry must be an object of token names to ISO 8601 times", rule="http_token_expiry"
        )
    found: dict[str, float] = {}
    for name, when in expiry.items():
        if name not in names:
            raise ConfigError(
                f"http_token_expiry names the token {str(name)[:64]!r}, which http_tokens does not have",
                rule="http_token_expiry",
            )
        try:
            moment = datetime.fromisoformat(str(when))
        except ValueError:
            raise ConfigError(
                f"http_token_expiry of {name!r} is {str(when)[:64]!r}, no ISO 8601 date (2027-01-31) or "
                "date and time (2027-01-31T18:00:00Z)",
                rule="http_token_expiry",
            ) from None
        found[name] = (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()
    return found


class ReloadingTokens:
    """The config file's bearer tokens, read again when the file changes: a token added, replaced,
    expired or removed takes effect without a restart.

    The file's identity (inode, size, modification time) is looked at on a call at most once a
    second. A file that no longer yields usable tokens (unreadable, a bad scope or expiry entry)
    accepts no token until it is fixed, and says why in the log: it fails closed.
    """

    def __init__(self, path: Path, current: HashedTokens, build: Callable[[McpConfig], HashedTokens]) -> None:
        self.path = path
        self._current: HashedTokens | None = current
        self._build = build
        self._seen = _file_identity(path)
        self._checked = time.monotonic()

    async def verify_token(self, token: str) -> AccessToken | None:
        now = time.monotonic()
        if now - self._checked >= _RELOAD_CHECK_SECONDS:
            self._checked = now
            identity = _file_identity(self.path)
            if identity != self._seen:
                self._seen = identity
                self._reload()
        current = self._current
        return None if current is None else await current.verify_token(token)

    def _reload(self) -> None:
        loaded = load_settings(self.path)
        try:
            self._current = self._build(loaded.config)
        except ConfigError as exc:
            self._current = None
            _log.error("tokens_unusable", file=str(self.path), problem=exc.message)
            return
        _log.info("tokens_reloaded", file=str(self.path), tokens=len(loaded.config.http_tokens))


def _file_identity(path: Path) -> tuple[int, int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns


@dataclass(slots=True)
class SigningKeys:
    """An issuer's signing keys by id, fetched off the request path.

    A call is verified with the keys in hand: where they are older than `lifespan`, a refresh starts
    in a thread of its own and the call goes on with them, so a slow or failing JWKS endpoint never
    stalls a client whose key is known. Only a key id not in hand waits for a fetch (the first call,
    a rotated key), and such fetches come at most once every `miss_interval` seconds: a token with
    a made-up key id cannot turn every request into one.
    """

    client: jwt.PyJWKClient
    lifespan: float = _JWKS_CACHE_SECONDS
    miss_interval: float = _JWKS_MISS_INTERVAL_SECONDS
    _keys: dict[str | None, Any] = field(default_factory=dict)
    _fetched_at: float = float("-inf")
    _missed_at: float = float("-inf")
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _refreshing: bool = False

    async def key_for(self, kid: str | None) -> Any | None:
        """The key with id `kid` (the only key where the token names none and the set has one)."""
        now = time.monotonic()
        if now - self._fetched_at >= self.lifespan and self._keys:
            self._refresh_behind()
        found = self._pick(kid)
        if found is None and now - self._missed_at >= self.miss_interval:
            self._missed_at = now
            await anyio.to_thread.run_sync(self._fetch)
            found = self._pick(kid)
        return found

    def _pick(self, kid: str | None) -> Any | None:
        keys = self._keys
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def _refresh_behind(self) -> None:
        with self._lock:
            if self._refreshing:
                return
            self._refreshing = True
        threading.Thread(target=self._fetch, name="oct-mcp-jwks", daemon=True).start()

    def _fetch(self) -> None:
        try:
            fetched = self.client.get_jwk_set()
            keys: dict[str | None, Any] = {key.key_id: key.key for key in fetched.keys if key.key_id}
            if len(fetched.keys) == 1 and not fetched.keys[0].key_id:
                keys = {None: fetched.keys[0].key}
            # One assignment: a call reading the keys meanwhile sees the old set or the new, whole.
            self._keys = keys
            self._fetched_at = time.monotonic()
        except jwt.PyJWTError as exc:
            # The keys in hand stay in use; the next call after the lifespan tries again.
            _log.warning("oauth_jwks_unavailable", problem=type(exc).__name__)
            self._fetched_at = time.monotonic() - self.lifespan + self.miss_interval
        finally:
            with self._lock:
                self._refreshing = False


@dataclass(frozen=True, slots=True)
class JwtVerifier:
    """OAuth 2.1 access tokens (JWT) signed by `issuer` with a key from its JWKS, for `audience`.

    Checks the signature, `iss`, `aud`, `exp` (required) and `nbf`. The person is `sub`, the
    server's client for limits, grants and the audit; the application is `client_id` (RFC 9068),
    else `azp`, else `sub` (a token a service got for itself names no one else).
    """

    issuer: str
    audience: str
    keys: SigningKeys

    @classmethod
    def create(cls, issuer: str, audience: str, jwks_url: str) -> JwtVerifier:
        # The set is cached here (SigningKeys), not by the client: its cache refetches on the request path.
        client = jwt.PyJWKClient(jwks_url, cache_jwk_set=False, timeout=_JWKS_TIMEOUT_SECONDS)
        return cls(issuer=issuer, audience=audience, keys=SigningKeys(client))

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = await self.keys.key_for(kid if isinstance(kid, str) else None)
            if key is None:
                _log.info("oauth_token_refused", problem="no signing key with the token's key id")
                return None
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(JWT_ALGORITHMS),
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            _log.info("oauth_token_refused", problem=type(exc).__name__)
            return None
        client_id = next(
            (claims[key] for key in ("client_id", "azp", "sub") if isinstance(claims.get(key), str)), None
        )
        if client_id is None:
            _log.info("oauth_token_refused", problem="no client_id, azp or sub claim")
            return None
        scope = claims.get("scope")
        return AccessToken(
            token="jwt",  # noqa: S106 - a marker: the token itself is kept nowhere
            client_id=client_id,
            scopes=scope.split() if isinstance(scope, str) else [],
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=claims.get("sub") if isinstance(claims.get("sub"), str) else None,
            claims={"iss": self.issuer},
        )


@dataclass(frozen=True, slots=True)
class Verifiers:
    """The first verifier that accepts the token decides; none accepting is a refusal."""

    verifiers: Sequence[TokenVerifier]

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            access = await verifier.verify_token(token)
            if access is not None:
                return access
        return None


def token_verifier(
    config: McpConfig,
    *,
    bearer_tokens: Callable[[McpConfig], HashedTokens] | None = None,
    config_path: Path | None = None,
) -> Verifiers | None:
    """The verifiers the config asks for, or None when HTTP calls are not authenticated.

    `bearer_tokens` builds the named tokens from a config (their scopes and expiry checked); with
    `config_path`, they are read again from that file when it changes (`ReloadingTokens`).

    Raises:
        ConfigError: See `HashedTokens.from_config`.
    """
    build = bearer_tokens or (
        lambda loaded: HashedTokens.from_config(loaded.http_tokens, {}, loaded.http_token_expiry)
    )
    verifiers: list[TokenVerifier] = []
    if config.http_tokens:
        tokens = build(config)
        verifiers.append(tokens if config_path is None else ReloadingTokens(config_path, tokens, build))
    if config.oauth_issuer is not None and config.oauth_audience is not None and config.oauth_jwks_url:
        verifiers.append(
            JwtVerifier.create(config.oauth_issuer, config.oauth_audience, config.oauth_jwks_url)
        )
    return Verifiers(tuple(verifiers)) if verifiers else None
