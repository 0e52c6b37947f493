"""Streamable HTTP: the SDK's ASGI app under uvicorn, behind Host/Origin checks, a body bound and auth."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import anyio
import uvicorn
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.request_state import RequestStateSecurity
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, BaseUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oct_mcp.app import App
from oct_mcp.config import McpConfig
from oct_mcp.consent import CONSENT_STATE_TTL_SECONDS
from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import ConfigError
from oct_mcp.transports.abandoned import CARRIED_AUTH, cancel_abandoned, in_session, request_id_of
from oct_mcp.transports.auth import HashedTokens, token_verifier
from oct_mcp.transports.binding import SERVER_NAME
from oct_mcp.transports.consent_adapter import client_id_of
from oct_mcp.transports.endpoint import build_server
from oct_mcp.transports.http_masking import MaskedErrorBodies
from oct_mcp.transports.refusals import RefusalSampler
from oct_mcp.transports.scopes import LiveScopes, ScopeGrants
from oct_mcp.transports.sessions import SessionsPerIdentity
from oct_mcp.transports.slow_headers import HeaderDeadlineProtocol

__all__ = [
    "CONSENT_KEY_VARIABLE",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MCP_PATH",
    "RequestGuard",
    "build_http_app",
    "check_bind",
    "consent_sealing",
    "is_loopback",
    "serve_http",
    "transport_security",
]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
MCP_PATH: Final = "/mcp"
CONSENT_KEY_VARIABLE: Final = "OCT_MCP_CONSENT_KEY"
CONSENT_KEY_MIN_BYTES: Final = 32
_KEEP_ALIVE_SECONDS: Final = 5
_BACKLOG: Final = 2048
_CANCEL_SECONDS: Final = 10
"""How long the cancellation of an abandoned request may take; the session's answer is 202 at once."""
_LOOPBACK_NAMES: Final = frozenset({"localhost"})
# An issuer is compared as an exact string (RFC 8414): a path-less URL must not gain a slash.
_URL: Final = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))
_log = get_logger(__name__)


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, config: McpConfig) -> None:
    """Refuse a bind that would serve the network without authentication, or half-configured OAuth.

    Raises:
        ConfigError: The bind or the authentication settings are unsafe or incomplete.
    """
    oauth = (config.oauth_issuer, config.oauth_audience, config.oauth_jwks_url)
    if any(value is not None for value in oauth) and not all(value is not None for value in oauth):
        raise ConfigError(
            "OAuth needs all of oauth_issuer, oauth_audience and oauth_jwks_url in the config; set the "
            "missing ones or remove them all"
        )
    if not is_loopback(host) and not config.http_tokens and config.oauth_issuer is None:
        raise ConfigError(
            "refusing to serve HTTP on a non-loopback address without authentication: create a token "
            "with `oct-mcp token create NAME` or configure oauth_issuer, oauth_audience and oauth_jwks_url"
        )


def transport_security(host: str, port: int, config: McpConfig) -> TransportSecuritySettings:
    """The Host and Origin allowlist: loopback on this port, the bound address, and the config's origins."""
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    origins = [f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"]
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):  # noqa: S104 - names the wildcard, binds nothing
        named = f"[{host}]" if ":" in host else host
        hosts.append(f"{named}:{port}")
    for origin in config.http_allowed_origins:
        origins.append(origin)
        # Behind a reverse proxy the Host header is the public name the origin names.
        hosts.append(urlsplit(origin).netloc)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def consent_sealing(config: McpConfig, environ: Mapping[str, str]) -> RequestStateSecurity | None:
    """The key that seals consent state, shared by every replica; None: one made for this process.

    Raises:
        ConfigError: The key file cannot be read, or the key is shorter than 32 bytes.
    """
    key: bytes | None = None
    variable = environ.get(CONSENT_KEY_VARIABLE, "")
    if variable:
        key = variable.encode("utf-8")
    elif config.consent_key_file is not None:
        try:
            key = Path(config.consent_key_file).expanduser().read_bytes().strip()
        except OSError as exc:
            raise ConfigError(
                f"consent_key_file cannot be read ({type(exc).__name__}); make it readable by the server"
            ) from exc
    if key is None:
        return None
    if len(key) < CONSENT_KEY_MIN_BYTES:
        raise ConfigError(
            f"the consent sealing key must be at least {CONSENT_KEY_MIN_BYTES} bytes; make one with "
            "`head -c 48 /dev/urandom | base64`"
        )
    return RequestStateSecurity(keys=[key], ttl=CONSENT_STATE_TTL_SECONDS)


@dataclass(frozen=True, slots=True)
class RequestGuard:
    """The outermost ASGI layer: Host/Origin first, then a deadline on the body, then refusals audited.

    Host and Origin are checked before authentication, so a page on another origin learns nothing,
    not even whether a token would be needed. Every refusal (403, 421, 401, 413, 408) is counted,
    and recorded in the audit as `refusals` samples them (one record per address and code a window,
    with the count): never a header's value. An address refused too often is answered 429 before
    authentication while its requests carry no credentials. A handshake-era request whose client
    leaves before its answer is cancelled in its session (`abandoned.py`).
    """

    app: ASGIApp
    security: TransportSecurityMiddleware
    audit: App
    body_seconds: float
    max_body_bytes: int = 1_048_576
    """The largest body kept to find an abandoned request's id (the config's http_max_request_bytes)."""
    refusals: RefusalSampler = field(default_factory=RefusalSampler)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        source = str(client[0]) if client else "unknown"
        if self.refusals.blocked(source) and not _has_credentials(scope):
            await self._record_refusal(429, source)
            await Response(
                "Too many refused requests from this address; retry later",
                status_code=429,
                headers={"Retry-After": str(int(self.refusals.window_seconds))},
            )(scope, receive, send)
            return
        refused = await self.security.validate_request(Request(scope), is_post=False)
        if refused is not None:
            await self._record_refusal(refused.status_code, source)
            await refused(scope, receive, send)
            return
        status: list[int] = []
        deadline = anyio.current_time() + self.body_seconds
        cut = False
        # A session's request is cancelled if its client leaves before the answer (abandoned.py):
        # its body is kept until it is whole, for the request's id, then let go.
        body: bytearray | None = bytearray() if in_session(scope) else None
        request_id: str | int | None = None
        body_whole = False
        client_left = False
        answered = False

        async def bounded_receive() -> Message:
            nonlocal cut, body, body_whole, client_left, request_id
            if body_whole:
                # The body is in: what the app waits for now is the client leaving (an SSE answer
                # listens for it), which may come long after, a human reading a diff for a minute.
                message = await receive()
                client_left = client_left or message["type"] == "http.disconnect"
                return message
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                message = await receive()
                chunk = message.get("body", b"") if message["type"] == "http.request" else b""
                if body is not None and len(body) + len(chunk) <= self.max_body_bytes:
                    body.extend(chunk)
                else:
                    body = None  # larger than the SDK takes: it refuses the request
                body_whole = message["type"] != "http.request" or not message.get("more_body", False)
                client_left = message["type"] == "http.disconnect"
                if body_whole and body is not None and not client_left:
                    request_id = request_id_of(bytes(body))
                    body = None
                return message
            cut = True
            return {"type": "http.disconnect"}

        async def watched_send(message: Message) -> None:
            nonlocal answered
            if cut:
                # What the app answers a body it never had whole (the SDK's is a 500) is not sent:
                # the 408 below is.
                return
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        try:
            await self.app(scope, bounded_receive if scope["method"] == "POST" else receive, watched_send)
        except Exception:
            if not cut:
                raise
            # The app read the disconnect the cut body stands for as an error (Starlette's
            # ClientDisconnect, which the SDK does not catch): answered 408 below, not 500 with a traceback.
        if cut and not status:
            status.append(408)
            await Response("Request body too slow", status_code=408)(scope, receive, send)
        if client_left and not answered and request_id is not None:
            await self._cancel(scope, request_id)
        if status and status[0] in _REFUSAL_CODES:
            await self._record_refusal(status[0], source, _authenticated_client(scope))

    async def _cancel(self, scope: Scope, request_id: str | int) -> None:
        """Cancel an abandoned request in its session: bounded in time, and never the guard's failure."""
        try:
            with anyio.move_on_after(_CANCEL_SECONDS):
                await cancel_abandoned(self.app, scope, request_id)
        except Exception:  # noqa: BLE001 - the departed client is owed nothing; the log says why
            _log.exception("abandoned_request_not_cancelled")

    async def _record_refusal(self, status: int, source: str, client: str | None = None) -> None:
        code = _REFUSAL_CODES.get(status, "http_refused")
        carried = self.refusals.note(source, code)
        sink = self.audit.audit
        if sink is None or carried is None:
            return
        await sink.record(
            {
                "call_id": os.urandom(16).hex(),
                "profile": self.audit.profile.name,
                "client": {"id": client, "transport": "http", "remote": source},
                "tool": None,
                "outcome": "refused",
                "code": code,
                "message": None,
                "http_status": status,
                **carried,
                "window_seconds": self.refusals.window_seconds,
            }
        )


class _CancelKeepsItsAuth(BearerAuthBackend):
    """The SDK's bearer check, except for the guard's cancel of an abandoned request
    (`abandoned.py`), which keeps the authentication of the request it cancels."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        carried = conn.scope.get(CARRIED_AUTH)
        if carried is not None:
            auth, user = carried
            return auth, user
        verified: tuple[AuthCredentials, BaseUser] | None = await super().authenticate(conn)
        return verified


def _authenticated_client(scope: Scope) -> str | None:
    """The client a request authenticated as (a 503 at its session cap), as the audit names clients;
    None before authentication or without it."""
    user = scope.get("user")
    return client_id_of(user.access_token, "http") if isinstance(user, AuthenticatedUser) else None


def _has_credentials(scope: Scope) -> bool:
    return any(name == b"authorization" for name, _value in scope.get("headers", ()))


_REFUSAL_CODES: Final = {
    401: "unauthenticated",
    403: "forbidden",
    408: "body_too_slow",
    413: "body_too_large",
    421: "host_refused",
    429: "too_many_refusals",
    503: "too_many_sessions",
}


def build_http_app(
    app: App,
    *,
    host: str,
    port: int,
    environ: Mapping[str, str] | None = None,
) -> ASGIApp:
    """The ASGI app: `/mcp` (both protocol eras), and RFC 9728 metadata when OAuth is configured.

    Sessions serve the handshake era (a client stays on the replica that opened its session);
    2026-07-28 requests are self-contained and go to any replica.

    Raises:
        ConfigError: An unsafe bind or incomplete authentication settings (see `check_bind`).
    """
    config = app.loaded.config
    check_bind(host, config)
    security = transport_security(host, port, config)
    sealing = consent_sealing(config, os.environ if environ is None else environ)
    if not config.rate_limit_storage.startswith("memory://"):
        # Imported only here: the Redis client is an optional dependency.
        from oct_mcp.transports.consents import SharedUsedConsents

        app = replace(app, used_consents=SharedUsedConsents(config.rate_limit_storage))
    scopes = LiveScopes(
        ScopeGrants.from_config(config.http_scopes, config.http_token_scopes, config.http_tokens.keys())
    )
    server = build_server(app, transport="http", sealing=sealing, scopes=scopes)
    manager = SessionsPerIdentity(
        app=server,
        security_settings=security,
        max_request_body_size=config.http_max_request_bytes,
        per_identity=config.http_max_sessions_per_client,
    )
    endpoint: ASGIApp = StreamableHTTPASGIApp(manager)

    def bearer_tokens(loaded: McpConfig) -> HashedTokens:
        # The scope map, each token's scopes and its expiry, as the file says now: put in force
        # only once the whole file is usable (else no token is, `ReloadingTokens`).
        grants = ScopeGrants.from_config(
            loaded.http_scopes, loaded.http_token_scopes, loaded.http_tokens.keys()
        )
        tokens = HashedTokens.from_config(
            loaded.http_tokens, grants.token_scopes if grants is not None else {}, loaded.http_token_expiry
        )
        scopes.grants = grants
        return tokens

    verifier = token_verifier(config, bearer_tokens=bearer_tokens, config_path=app.loaded.path)
    if scopes.grants is not None and verifier is None:
        raise ConfigError(
            "http_scopes is set, but no client is authenticated (no http_tokens, no OAuth issuer): "
            "scopes need identities",
            rule="http_scopes",
        )
    routes: list[Route] = []
    middleware: list[Middleware] = []
    if verifier is not None:
        metadata_url = None
        if config.oauth_audience is not None and config.oauth_issuer is not None:
            resource = _URL.validate_python(config.oauth_audience)
            metadata_url = build_resource_metadata_url(resource)
            routes.extend(
                create_protected_resource_routes(
                    resource_url=resource,
                    authorization_servers=[_URL.validate_python(config.oauth_issuer)],
                    resource_name=SERVER_NAME,
                )
            )
        endpoint = RequireAuthMiddleware(endpoint, [], metadata_url)
        middleware = [
            Middleware(AuthenticationMiddleware, backend=_CancelKeepsItsAuth(verifier)),
            Middleware(AuthContextMiddleware),
        ]
    routes.insert(0, Route(MCP_PATH, endpoint=endpoint))
    starlette = Starlette(routes=routes, middleware=middleware, lifespan=lambda _: manager.run())
    # Outermost: the SDK's own errors, and the guard's refusals, leave masked.
    return MaskedErrorBodies(
        # A body not whole by then is cut: a slow client holds no worker for long.
        RequestGuard(
            starlette,
            TransportSecurityMiddleware(security),
            app,
            config.http_body_timeout_seconds,
            max_body_bytes=config.http_max_request_bytes,
        )
    )


def _listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` and listening, whose accepted connections send at once.

    Raises:
        OSError: The address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # The protocol is named: asyncio sets TCP_NODELAY on an accepted connection only when its
    # socket says IPPROTO_TCP, and with Nagle left on each SSE event waits ~40 ms behind its headers
    # for the client's delayed ACK. The listener carries the option too, which Linux copies to
    # every accepted connection whatever the event loop does.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        listener.bind((host, port))
        # Listening before the address is announced: a client that connects at once waits in the backlog.
        listener.listen(_BACKLOG)
    except BaseException:
        listener.close()
        raise
    return listener


async def serve_http(app: App, host: str, port: int) -> None:
    """Serve MCP over streamable HTTP on `host:port` until SIGTERM or SIGINT.

    Port 0 takes a free port; the address served is printed on stderr either way.

    Raises:
        ConfigError: See `build_http_app`.
        OSError: The address cannot be bound.
    """
    # Refused before anything is bound.
    check_bind(host, app.loaded.config)
    # Closed here too: a cancelled serve leaves its listener open.
    with _listening_socket(host, port) as listener:
        bound = listener.getsockname()[1]
        asgi = build_http_app(app, host=host, port=bound)
        config = uvicorn.Config(
            asgi,
            log_level="warning",
            lifespan="on",
            timeout_keep_alive=_KEEP_ALIVE_SECONDS,
            http=HeaderDeadlineProtocol,
            access_log=False,
            server_header=False,
        )
        shown = f"[{host}]" if ":" in host else host
        print(f"oct-mcp: serving http://{shown}:{bound}{MCP_PATH}", file=sys.stderr, flush=True)
        _log.info("serving", transport="http", host=host, port=bound, profile=app.profile.name)
        await uvicorn.Server(config).serve(sockets=[listener])
