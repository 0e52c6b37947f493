"""What `serve --transport http` checks before it binds: the address, the authentication, the sealing key."""

from __future__ import annotations

import dataclasses

import pytest

from oct_mcp.config import McpConfig
from oct_mcp.errors import ConfigError
from oct_mcp.transports.auth import hash_token, new_token
from oct_mcp.transports.http import check_bind, consent_sealing, is_loopback, transport_security

TOKENS = {"ci": hash_token(new_token())}


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),  # noqa: S104 - a value under test, nothing is bound
        ("::", False),
        ("10.0.0.5", False),
        ("dev.example.com", False),
    ],
)
def test_only_loopback_addresses_count_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.5", "::"])  # noqa: S104
def test_a_non_loopback_bind_needs_a_token_or_oauth(host: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check_bind(host, McpConfig())

    assert refused.value.code == "config"
    check_bind(host, McpConfig(http_tokens=TOKENS))


@pytest.mark.parametrize(
    "oauth",
    [
        {"oauth_issuer": "https://login.example.com"},
        {"oauth_issuer": "https://login.example.com", "oauth_audience": "https://oct.example.com/mcp"},
        {"oauth_jwks_url": "https://login.example.com/jwks.json"},
    ],
)
def test_half_configured_oauth_refuses_to_start_even_on_loopback(oauth: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        check_bind("127.0.0.1", dataclasses.replace(McpConfig(), **oauth))


def test_the_allowlist_holds_loopback_on_this_port_the_bound_address_and_the_configured_origins() -> None:
    config = McpConfig(http_tokens=TOKENS, http_allowed_origins=("https://oct.example.com",))

    settings = transport_security("10.0.0.5", 8765, config)

    assert settings.enable_dns_rebinding_protection is True
    assert settings.allowed_hosts == [
        "127.0.0.1:8765",
        "localhost:8765",
        "[::1]:8765",
        "10.0.0.5:8765",
        "oct.example.com",
    ]
    assert settings.allowed_origins == [
        "http://127.0.0.1:8765",
        "http://localhost:8765",
        "http://[::1]:8765",
        "https://oct.example.com",
    ]


def test_a_sealing_key_shorter_than_32_bytes_refuses_to_start() -> None:
    with pytest.raises(ConfigError):
        consent_sealing(McpConfig(), {"OCT_MCP_CONSENT_KEY": "short"})


def test_without_a_shared_key_each_process_seals_with_its_own() -> None:
    assert consent_sealing(McpConfig(), {}) is None
    assert consent_sealing(McpConfig(), {"OCT_MCP_CONSENT_KEY": "k" * 32}) is not None
