"""The issuer's signing keys, fetched from a real JWKS endpoint on loopback: a stale set is refreshed
behind the calls, which go on with the keys in hand; only an unknown key id waits, and that rarely."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from oct_mcp.transports.auth import SigningKeys

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def public_jwk(kid: str) -> dict[str, Any]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {**json.loads(RSAAlgorithm.to_jwk(key.public_key())), "kid": kid, "use": "sig", "alg": "RS256"}


class Endpoint:
    """A JWKS endpoint whose keys the test sets, which counts its requests and can be held."""

    def __init__(self) -> None:
        self.keys = [public_jwk("k1")]
        self.requests = 0
        self.released = threading.Event()
        self.released.set()
        self.answering = threading.Event()
        self.url = ""


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    made = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            made.requests += 1
            made.answering.set()
            made.released.wait(30)
            body = json.dumps({"keys": made.keys}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    made.url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        made.released.set()
        server.shutdown()
        server.server_close()
        thread.join()


def signing_keys(endpoint: Endpoint, **settings: float) -> SigningKeys:
    return SigningKeys(jwt.PyJWKClient(endpoint.url, cache_jwk_set=False, timeout=30), **settings)


async def test_a_stale_set_is_refreshed_behind_a_call_that_goes_on_with_the_keys_in_hand(
    endpoint: Endpoint,
) -> None:
    keys = signing_keys(endpoint, lifespan=0)
    first = await keys.key_for("k1")
    endpoint.keys.append(public_jwk("k2"))
    endpoint.released.clear()
    endpoint.answering.clear()

    with anyio.fail_after(20):
        # The endpoint holds every answer now: the call is served from the set in hand.
        again = await keys.key_for("k1")
        await anyio.to_thread.run_sync(endpoint.answering.wait)
    endpoint.released.set()
    with anyio.fail_after(20):
        while keys._pick("k2") is None:
            await anyio.sleep(0.01)

    assert first is not None
    assert again is first
    assert endpoint.requests == 2


async def test_an_unknown_key_id_waits_for_one_fetch_at_most_once_an_interval(endpoint: Endpoint) -> None:
    keys = signing_keys(endpoint, miss_interval=3_600)

    known = await keys.key_for("k1")
    unknown = [await keys.key_for(f"made-up-{n}") for n in range(20)]

    assert known is not None
    assert unknown == [None] * 20
    # The first call's fetch was this interval's one: the made-up ids cost none.
    assert endpoint.requests == 1


async def test_a_set_that_cannot_be_fetched_leaves_the_keys_in_hand_in_use(endpoint: Endpoint) -> None:
    keys = signing_keys(endpoint, lifespan=0)
    first = await keys.key_for("k1")
    keys.client = jwt.PyJWKClient("http://127.0.0.1:9/jwks.json", cache_jwk_set=False, timeout=5)

    with anyio.fail_after(30):
        again = await keys.key_for("k1")
        while keys._refreshing:
            await anyio.sleep(0.01)
    after = await keys.key_for("k1")

    assert again is first
    assert after is first
