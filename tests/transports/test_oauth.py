"""OAuth 2.1 resource-server mode against a local issuer whose keys the test makes (never the network)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from clients import only_text
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from mcp import Client
from replicas import LIST_TOOLS, authorised, replica, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

AUDIENCE = "https://oct.example.com/mcp"
KID = "test-key-1"
HEADERS = {
    "MCP-Protocol-Version": "2026-07-28",
    "Accept": "application/json, text/event-stream",
    "Mcp-Method": "tools/list",
}


class Issuer:
    """An authorization server's signing key, its JWKS served on loopback, and tokens it signs."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = json.dumps({"keys": [{**jwk, "kid": KID, "use": "sig", "alg": "RS256"}]}).encode()
        self.url = ""
        self.jwks_url = ""

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "sub": "user-1", "client_id": "agent-7", "exp": now + 300}
        body.update(claims)
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": KID})


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    made = Issuer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(made.jwks)))
            self.end_headers()
            self.wfile.write(made.jwks)

        def log_message(self, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    made.url = f"http://127.0.0.1:{server.server_address[1]}"
    made.jwks_url = f"{made.url}/jwks.json"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def oauth_config(tmp_path: Path, issuer: Issuer, **values: Any) -> tuple[Path, Path]:
    audit = tmp_path / "audit.log"
    config = write_config(
        tmp_path / "config.json",
        audit,
        oauth_issuer=issuer.url,
        oauth_audience=AUDIENCE,
        oauth_jwks_url=issuer.jwks_url,
        **values,
    )
    return config, audit


async def test_a_token_the_issuer_signed_for_this_audience_calls_as_its_person_through_its_application(
    project: Path, tmp_path: Path, issuer: Issuer
) -> None:
    config, audit = oauth_config(tmp_path, issuer)
    with anyio.fail_after(60):
        async with replica(project, config) as url, Client(authorised(url, issuer.token())) as client:
            read = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert only_text(read).startswith("# Demo")
    (record,) = [json.loads(line) for line in audit.read_text().splitlines() if '"oct_read_file"' in line]
    assert (record["client"]["id"], record["client"]["application"], record["outcome"]) == (
        "http:oauth:user-1",
        "agent-7",
        "ok",
    )


async def test_two_people_signed_in_to_one_application_are_two_clients_in_limits_and_audit(
    project: Path, tmp_path: Path, issuer: Issuer
) -> None:
    config, audit = oauth_config(tmp_path, issuer, rate_limit_per_minute=2)
    alice, bob = issuer.token(sub="user-alice"), issuer.token(sub="user-bob")
    read = {"path": "README.md"}
    with anyio.fail_after(60):
        async with replica(project, config) as url:
            async with Client(authorised(url, alice)) as client:
                alice_calls = [await client.call_tool("oct_read_file", read) for _ in range(3)]
            async with Client(authorised(url, bob)) as client:
                bob_calls = [await client.call_tool("oct_read_file", read) for _ in range(2)]

    # Alice's third call is over her limit; Bob, on the same application, has his own.
    assert [call.is_error for call in alice_calls] == [False, False, True]
    assert only_text(alice_calls[2]).startswith("[rate_limited]")
    assert [call.is_error for call in bob_calls] == [False, False]
    records = [json.loads(line) for line in audit.read_text().splitlines() if '"oct_read_file"' in line]
    assert [(r["client"]["id"], r["client"]["application"], r["outcome"]) for r in records] == [
        ("http:oauth:user-alice", "agent-7", "ok"),
        ("http:oauth:user-alice", "agent-7", "ok"),
        ("http:oauth:user-alice", "agent-7", "refused"),
        ("http:oauth:user-bob", "agent-7", "ok"),
        ("http:oauth:user-bob", "agent-7", "ok"),
    ]


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "https://other.example.com/mcp"},
        {"exp": 1_000_000},
        {"iss": "https://not-the-issuer.example"},
        {"exp": None},
    ],
    ids=["audience", "expired", "issuer", "no-expiry"],
)
async def test_a_token_for_another_audience_expired_or_from_another_issuer_gets_401(
    project: Path, tmp_path: Path, issuer: Issuer, claims: dict[str, Any]
) -> None:
    config, audit = oauth_config(tmp_path, issuer)
    token = issuer.token(**claims)
    if claims.get("exp", 0) is None:
        decoded = jwt.decode(token, options={"verify_signature": False})
        decoded.pop("exp")
        token = jwt.encode(decoded, issuer.key, algorithm="RS256", headers={"kid": KID})
    with anyio.fail_after(60):
        async with replica(project, config) as url, httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(
                url, json=LIST_TOOLS, headers={**HEADERS, "Authorization": f"Bearer {token}"}
            )

    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert 'resource_metadata="https://oct.example.com/.well-known/oauth-protected-resource/mcp"' in challenge
    assert [json.loads(line)["code"] for line in audit.read_text().splitlines()] == ["unauthenticated"]


async def test_the_protected_resource_metadata_names_the_resource_and_its_issuer(
    project: Path, tmp_path: Path, issuer: Issuer
) -> None:
    config, _ = oauth_config(tmp_path, issuer)
    with anyio.fail_after(60):
        async with replica(project, config) as url, httpx2.AsyncClient(timeout=30) as http:
            base = url.removesuffix("/mcp")
            response = await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")

    assert response.status_code == 200
    metadata = response.json()
    assert (metadata["resource"], metadata["authorization_servers"]) == (AUDIENCE, [issuer.url])


async def test_an_oauth_tokens_scope_claim_grants_what_http_scopes_says(
    project: Path, tmp_path: Path, issuer: Issuer
) -> None:
    config, audit = oauth_config(tmp_path, issuer, http_scopes={"mcp:read": ["risk:read"], "mcp:all": ["*"]})
    write = {"path": "notes.txt", "content": "hello\n"}
    with anyio.fail_after(60):
        async with replica(project, config) as url:
            async with Client(authorised(url, issuer.token(scope="mcp:read openid"))) as reader:
                read = await reader.call_tool("oct_read_file", {"path": "README.md"})
                refused = await reader.call_tool("oct_write_file", write)
            async with Client(authorised(url, issuer.token(sub="user-2", scope="mcp:all"))) as admin:
                asked = await admin.call_tool("oct_write_file", write)

    assert only_text(read).startswith("# Demo")
    assert only_text(refused).startswith("[forbidden] this client's token does not grant 'oct_write_file'")
    assert "(its scopes: mcp:read)" in only_text(refused)
    assert "[forbidden]" not in only_text(asked)
    (record,) = [json.loads(line) for line in audit.read_text().splitlines() if '"code":"forbidden"' in line]
    assert record["client"]["id"] == "http:oauth:user-1"
