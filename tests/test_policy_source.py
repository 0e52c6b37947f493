"""policy_source (a local file or https, bounded, never http) and tighten-only repo config, at start-up."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import json
import os
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import anyio
import pytest
from clients import oct_server, only_text
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp import Client

from oct_mcp.app import build_app
from oct_mcp.middleware.policy import PolicyEngine
from oct_mcp.policy_source import MAX_POLICY_BYTES, PolicySourceError, fetch_policy
from oct_mcp.protected import SERVER_FILES_RULE

pytestmark = pytest.mark.e2e


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


class _PolicyHandler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, dict[str, str], bytes]]] = {}

    def do_GET(self) -> None:
        status, headers, body = self.routes.get(self.path, (404, {}, b"no such policy"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test output is not the place for access logs."""


@pytest.fixture
def https_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A loopback https server with a self-signed certificate that the process trusts."""
    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PolicyHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    _PolicyHandler.routes = {
        "/policy.json": (200, {"Content-Type": "application/json"}, json.dumps({"max_jobs": 2}).encode()),
        "/downgrade": (302, {"Location": f"http://127.0.0.1:{port}/policy.json"}, b""),
        "/upgrade": (302, {"Location": f"https://127.0.0.1:{port}/policy.json"}, b""),
        "/huge": (200, {}, b" " * (MAX_POLICY_BYTES + 10)),
    }
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_local_policy_file_is_read(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"safe_mode": True}))

    assert fetch_policy(str(policy), network_allowed=False) == {"safe_mode": True}


def test_an_https_policy_is_fetched(https_server: str) -> None:
    assert fetch_policy(f"{https_server}/policy.json", network_allowed=True) == {"max_jobs": 2}


def test_a_redirect_to_another_https_url_is_followed(https_server: str) -> None:
    assert fetch_policy(f"{https_server}/upgrade", network_allowed=True) == {"max_jobs": 2}


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("http://127.0.0.1:1/policy.json", id="plain http"),
        pytest.param("file:///etc/passwd", id="file url"),
        pytest.param("ftp://example.invalid/policy.json", id="ftp"),
    ],
)
def test_a_source_that_is_neither_a_path_nor_https_is_refused(source: str) -> None:
    with pytest.raises(PolicySourceError):
        fetch_policy(source, network_allowed=True)


def test_a_redirect_to_http_is_refused(https_server: str) -> None:
    with pytest.raises(PolicySourceError) as caught:
        fetch_policy(f"{https_server}/downgrade", network_allowed=True)

    assert "not https" in caught.value.message


def test_an_https_policy_is_refused_where_the_network_is_not_allowed(https_server: str) -> None:
    with pytest.raises(PolicySourceError) as caught:
        fetch_policy(f"{https_server}/policy.json", network_allowed=False)

    assert "forbids the network" in caught.value.message


def test_an_untrusted_certificate_is_refused(https_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE")

    with pytest.raises(PolicySourceError):
        fetch_policy(f"{https_server}/policy.json", network_allowed=True)


def test_a_policy_over_the_size_limit_is_refused(https_server: str, tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_POLICY_BYTES + 1))

    with pytest.raises(PolicySourceError):
        fetch_policy(f"{https_server}/huge", network_allowed=True)
    with pytest.raises(PolicySourceError):
        fetch_policy(str(big), network_allowed=False)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", ""])
def test_a_malformed_policy_is_refused(tmp_path: Path, content: str) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(content)

    with pytest.raises(PolicySourceError):
        fetch_policy(str(policy), network_allowed=False)


# -- at start-up ------------------------------------------------------------------------------


def test_the_policy_is_merged_over_the_config_file_and_the_environment_still_wins(
    project: Path, config_file: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"max_jobs": 2, "timeout_default_seconds": 9000, "safe_mode": False}))
    config_file.write_text(json.dumps({"policy_source": str(policy), "max_jobs": 8}))

    app = build_app(project, config_path=config_file, environ={"OCT_MCP_SAFE_MODE": "1"})

    assert app.loaded.config.max_jobs == 2
    assert app.loaded.config.timeout_default_seconds == 3600
    assert app.loaded.config.safe_mode is True
    assert app.loaded.sources["max_jobs"] == "policy"
    assert app.loaded.sources["safe_mode"] == "env"
    assert app.loaded.policy_status == "loaded (3 fields)"


def test_an_https_policy_is_merged_at_start_up(project: Path, config_file: Path, https_server: str) -> None:
    config_file.write_text(json.dumps({"policy_source": f"{https_server}/policy.json"}))

    app = build_app(project, config_path=config_file, environ={})

    assert app.loaded.config.max_jobs == 2


def test_airgapped_keeps_the_defaults_instead_of_fetching_an_https_policy(
    project: Path, config_file: Path, https_server: str
) -> None:
    config_file.write_text(
        json.dumps({"policy_source": f"{https_server}/policy.json", "profile": "airgapped"})
    )

    app = build_app(project, config_path=config_file, environ={})

    assert app.loaded.config.max_jobs == 4
    assert app.loaded.policy_status.startswith(
        "failed, built-in defaults kept: this profile forbids the network"
    )


def test_a_policy_that_cannot_be_loaded_keeps_the_config_and_says_so(
    project: Path, config_file: Path
) -> None:
    config_file.write_text(json.dumps({"policy_source": str(project / "missing.json"), "max_jobs": 8}))

    app = build_app(project, config_path=config_file, environ={})

    assert app.loaded.config.max_jobs == 8
    assert app.loaded.policy_status.startswith("failed, built-in defaults kept")


def test_a_local_policy_file_inside_the_project_is_protected_from_writes(
    project: Path, config_file: Path
) -> None:
    (project / "policy.json").write_text("{}")
    config_file.write_text(json.dumps({"policy_source": str(project / "policy.json")}))

    app = build_app(project, config_path=config_file, environ={})

    (policy,) = (layer for layer in app.chain.layers if isinstance(layer, PolicyEngine))
    assert policy.protected.rule_for(project / "policy.json") is SERVER_FILES_RULE


def test_repo_config_is_ignored_unless_trusted(project: Path, config_file: Path) -> None:
    (project / ".octrc.json").write_text(json.dumps({"safe_mode": True}))

    app = build_app(project, config_path=config_file, environ={})

    assert app.loaded.config.safe_mode is False
    assert app.loaded.repo_status == "not read (trust_repo_config is off)"


def test_trusted_repo_config_can_only_tighten(project: Path, config_file: Path) -> None:
    (project / ".octrc.json").write_text(
        json.dumps(
            {
                "safe_mode": True,
                "rate_limit_per_minute": 10,
                "max_output_bytes": 99_999_999,
                "profile": "strict",
                "audit_log_path": "/tmp/elsewhere.log",
                "trust_repo_config": False,
            }
        )
    )
    (project / "debug_config.json").write_text(json.dumps({"auto_approve_read_tools": False, "max_jobs": 64}))

    app = build_app(project, config_path=config_file, environ={"OCT_TRUST_REPO_CONFIG": "1"})

    config = app.loaded.config
    assert (config.safe_mode, config.rate_limit_per_minute, config.profile) == (True, 10, "strict")
    assert config.auto_approve_read_tools is False
    assert config.max_output_bytes == 1_048_576
    assert config.max_jobs == 4
    assert config.audit_log_path != "/tmp/elsewhere.log"
    assert config.trust_repo_config is True
    assert app.profile.name == "strict"
    assert app.loaded.sources["safe_mode"] == "repo"
    assert app.loaded.repo_status == "read: .octrc.json, debug_config.json"


def test_repo_config_cannot_turn_safe_mode_off_or_pick_a_looser_profile(
    project: Path, config_file: Path
) -> None:
    config_file.write_text(json.dumps({"safe_mode": True, "profile": "airgapped", "trust_repo_config": True}))
    (project / ".octrc.json").write_text(json.dumps({"safe_mode": False, "profile": "default"}))

    app = build_app(project, config_path=config_file, environ={})

    assert (app.loaded.config.safe_mode, app.loaded.config.profile) == (True, "airgapped")


def test_a_trusted_repo_config_cannot_allow_unconfined_project_code(project: Path, config_file: Path) -> None:
    (project / ".octrc.json").write_text(json.dumps({"allow_unconfined_project_code": True}))

    app = build_app(project, config_path=config_file, environ={"OCT_TRUST_REPO_CONFIG": "1"})

    assert app.loaded.config.allow_unconfined_project_code is False


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["/dev/stdin", "settings.json"])
async def test_a_repo_config_that_is_a_link_is_ignored_and_the_server_answers_over_stdio(
    project: Path, config_file: Path, target: str
) -> None:
    # A link to /dev/stdin made the server read its own protocol stream as config, and never answer.
    (project / "settings.json").write_text(json.dumps({"safe_mode": True}))
    (project / ".octrc.json").symlink_to(target)
    config_file.write_text(json.dumps({"trust_repo_config": True}))

    with anyio.fail_after(30):
        async with Client(oct_server(project, config_file, cwd=project)) as client:
            read = await client.call_tool("oct_read_file", {"path": "README.md"})

    assert read.is_error is False
    assert only_text(read) == "# Demo\n\nline 3\nline 4\n"


def test_a_repo_config_that_is_a_fifo_is_ignored_and_says_why(project: Path, config_file: Path) -> None:
    os.mkfifo(project / ".octrc.json")

    app = build_app(project, config_path=config_file, environ={"OCT_TRUST_REPO_CONFIG": "1"})

    assert app.loaded.config.safe_mode is False
    assert app.loaded.repo_status == "read: .octrc.json (ignored: the path is not a regular file)"


def test_a_repo_config_over_the_size_cap_is_ignored(project: Path, config_file: Path) -> None:
    (project / ".octrc.json").write_text(json.dumps({"safe_mode": True, "pad": "x" * MAX_POLICY_BYTES}))

    app = build_app(project, config_path=config_file, environ={"OCT_TRUST_REPO_CONFIG": "1"})

    assert app.loaded.config.safe_mode is False
    assert app.loaded.repo_status.startswith("read: .octrc.json (ignored: the file is larger than")


def test_a_policy_source_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "policy.json")

    with pytest.raises(PolicySourceError) as caught:
        fetch_policy(str(tmp_path / "policy.json"), network_allowed=False)

    assert caught.value.code == "policy_source"
