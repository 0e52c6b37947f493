"""Reads of part of a file and search hits, redacted with the whole file as context, over stdio."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import anyio
import pytest
from clients import oct_server, only_text
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture(scope="module")
def key_lines() -> list[str]:
    """A real RSA private key in PEM, line by line."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode().splitlines()


def _leaked(result_text: str, structured: object, body: list[str]) -> list[str]:
    shown = result_text + json.dumps(structured)
    return [line for line in body if line[:16] in shown]


async def test_a_line_range_inside_a_private_key_comes_back_masked(
    project: Path, config_file: Path, key_lines: list[str]
) -> None:
    (project / "deploy").mkdir()
    (project / "deploy" / "id_rsa").write_text("# deploy key\n" + "\n".join(key_lines) + "\n")
    body = key_lines[1:-1]

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            middle = await client.call_tool(
                "oct_read_file", {"path": "deploy/id_rsa", "start_line": 6, "end_line": 9}
            )
            tail = await client.call_tool("oct_read_file", {"path": "deploy/id_rsa", "start_line": 4})

    assert middle.is_error is False
    assert _leaked(only_text(middle), middle.structured_content, body) == []
    assert only_text(middle) == "[REDACTED:private_key]"
    assert _leaked(only_text(tail), tail.structured_content, body) == []
    assert only_text(tail) == "[REDACTED:private_key]\n"


async def test_a_search_for_a_piece_of_a_private_key_finds_nothing(
    project: Path, config_file: Path, key_lines: list[str]
) -> None:
    # The pattern is matched against the file as the model is shown it: the piece is in no line of it.
    (project / "key.pem").write_text("\n".join(key_lines) + "\n")
    body = key_lines[1:-1]
    needle = body[5][10:30]

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            found = await client.call_tool("oct_search", {"pattern": needle})

    assert found.is_error is False
    assert found.structured_content is not None
    assert found.structured_content["matches"] == []
    assert found.structured_content["files_with_matches"] == 0
    assert _leaked(only_text(found), found.structured_content, body) == []


async def test_a_search_hit_keeps_a_secret_masked_whose_field_name_is_cut_off_the_window(
    project: Path, config_file: Path
) -> None:
    # A long line is cut to a window around the match. In the real line the window would start
    # inside the value, where the line's text alone no longer shows the `"client_secret": "` before
    # it; the window is cut from the line as the model is shown it, the value masked.
    secret = secrets.token_urlsafe(150) + "&" + secrets.token_urlsafe(12)
    rest = ", ".join(f'"k{number}": {number}' for number in range(60))
    (project / "settings.json").write_text(f'{{"client_secret": "{secret}", "name": "needle", {rest}}}\n')

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            found = await client.call_tool("oct_search", {"pattern": "needle"})

    assert found.is_error is False
    assert found.structured_content is not None
    (match,) = found.structured_content["matches"]
    assert match["line_cut"] is True
    assert match["text"].startswith('{"client_secret": "[REDACTED:secret]", "name": "needle", "k0": 0,')
    shown = only_text(found) + json.dumps(found.structured_content)
    assert [secret[i : i + 12] for i in range(0, len(secret) - 12, 12) if secret[i : i + 12] in shown] == []


async def test_a_certificate_read_by_range_is_left_alone(project: Path, config_file: Path) -> None:
    cert_body = [
        "MIIBszCCAVmgAwIBAgIUZ2N0cXl0ZXN0Y2VydGlmaWNhdGUwCgYIKoZIzj0EAwIw",
        "EjEQMA4GA1UEAwwHdGVzdC1jYTAeFw0yNDAxMDEwMDAwMDBaFw0zNDAxMDEwMDAw",
        "MDBaMBIxEDAOBgNVBAMMB3Rlc3QtY2EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC",
    ]
    text = "-----BEGIN CERTIFICATE-----\n" + "\n".join(cert_body) + "\n-----END CERTIFICATE-----\n"
    (project / "ca.pem").write_text(text)

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            read = await client.call_tool("oct_read_file", {"path": "ca.pem", "start_line": 2, "end_line": 4})

    assert only_text(read) == "\n".join(cert_body) + "\n"


async def test_a_file_that_is_not_ascii_is_masked_as_an_ascii_one_through_a_read_and_a_search(
    project: Path, config_file: Path
) -> None:
    # Accented names and symbols around secrets: the screen reads each such character as one byte.
    hook = "https://contoso.webhook.office.com/webhookb2/" + "/".join(
        [
            "9c2f41d7-3b8e-4a61-b5d0-7e14c9a2f3b6@1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c8d",
            "IncomingWebhook",
            secrets.token_hex(16),
            "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
        ]
    )
    maps_key = secrets.token_urlsafe(30)
    password = secrets.token_urlsafe(12) + "9Q"
    lines = [f"# Überprüfung ✓ für José Núñez, Zoë and Kelvin \u212a ({n})" for n in range(20)]
    lines += [
        f"TEAMS_HOOK = '{hook}'",
        f"geocode = 'https://maps.example.net/api/geocode/json?address=München&key={maps_key}'",
        f"Grüße password = '{password}' — ✓",
    ]
    (project / "settings_de.py").write_text("\n".join(lines) + "\n", encoding="utf-8")

    with anyio.fail_after(60):
        async with Client(oct_server(project, config_file)) as client:
            read = await client.call_tool("oct_read_file", {"path": "settings_de.py"})
            found = await client.call_tool("oct_search", {"pattern": "Grüße|geocode|TEAMS_HOOK"})

    for result in (read, found):
        assert result.is_error is False
        shown = only_text(result) + json.dumps(result.structured_content, ensure_ascii=False)
        for secret in (hook.rsplit("/", 2)[-2], maps_key, password):
            assert secret not in shown
    text = only_text(read)
    assert "[REDACTED:teams_webhook_url]" in text
    assert "&key=[REDACTED:url_key]" in text
    assert "Grüße password = '[REDACTED:password]' — ✓" in text
    assert "# Überprüfung ✓ für José Núñez, Zoë and Kelvin \u212a (19)" in text
