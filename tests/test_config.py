"""McpConfig and load_config: the seed's fields and defaults, the file, the clamps and the environment."""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import pytest
import structlog.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from oct_mcp.config import (
    RANGES,
    SANDBOX_BACKENDS,
    FieldRules,
    LoadedConfig,
    McpConfig,
    field_tables,
    load_config,
    load_settings,
    merge_policy,
    tighten_with_repo_config,
)

pytestmark = pytest.mark.e2e

# The seed's fields, in the seed's order, with the seed's defaults (audit_log_path is checked apart:
# it is `~/.oct-mcp/audit.log` expanded when the config is built).
SEED_DEFAULTS: Final[tuple[tuple[str, object], ...]] = (
    ("profile", "default"),
    ("rate_limit_per_minute", 30),
    ("timeout_default_seconds", 60),
    ("timeout_test_seconds", 300),
    ("max_output_bytes", 1_048_576),
    ("max_jobs", 4),
    ("auto_approve_read_tools", True),
    ("dry_run_default_for_writes", True),
    ("redaction_always_on", False),
    ("audit_log_path", None),
    ("audit_log_max_files", 20),
    ("audit_log_max_size_mb", 5.0),
    ("trust_repo_config", False),
    ("safe_mode", False),
    ("sandbox_backend", "auto"),
    ("allow_unconfined_project_code", False),
    ("memory_limit_mb", 512),
    ("metrics_port", None),
    ("policy_source", None),
    # Remote use (issue 23), after the seed's fields.
    ("rate_limit_storage", "memory://"),
    ("http_allowed_origins", ()),
    ("http_tokens", {}),
    ("http_max_request_bytes", 1_048_576),
    ("http_max_sessions_per_client", 16),
    ("http_body_timeout_seconds", 30),
    ("oauth_issuer", None),
    ("oauth_audience", None),
    ("oauth_jwks_url", None),
    ("consent_key_file", None),
    ("replica_id", None),
    # Undo (issue 28); checkpoint_dir is `~/.oct-mcp/checkpoints` expanded, checked apart.
    ("checkpoint_dir", None),
    ("checkpoint_max_count", 200),
    ("checkpoint_max_size_mb", 256.0),
    ("checkpoint_file_max_mb", 8.0),
    # Rules over arguments (issue 34).
    ("rules", ()),
    ("ignore_files", ()),
    # Runs at once (issue 35).
    ("max_concurrent_runs", 4),
    ("max_concurrent_runs_per_client", 2),
    # Signed audit checkpoints (issue 36).
    ("audit_signing_key", None),
    ("audit_checkpoint_records", 1_000),
    ("audit_checkpoint_seconds", 300.0),
    ("audit_syslog_address", None),
    # Scopes over HTTP (issue 35).
    ("http_scopes", {}),
    ("http_token_scopes", {}),
    ("http_token_expiry", {}),
)
SEED_FIELD_NAMES: Final = tuple(name for name, _ in SEED_DEFAULTS)

BOOL_FIELDS: Final = (
    "auto_approve_read_tools",
    "dry_run_default_for_writes",
    "redaction_always_on",
    "trust_repo_config",
    "safe_mode",
    "allow_unconfined_project_code",
)
INT_FIELDS: Final = (
    "rate_limit_per_minute",
    "timeout_default_seconds",
    "timeout_test_seconds",
    "max_output_bytes",
    "max_jobs",
    "audit_log_max_files",
    "memory_limit_mb",
    "metrics_port",
    "http_max_request_bytes",
    "http_max_sessions_per_client",
    "http_body_timeout_seconds",
    "max_concurrent_runs",
    "max_concurrent_runs_per_client",
    "audit_checkpoint_records",
)
FLOAT_FIELDS: Final = (
    "audit_log_max_size_mb",
    "checkpoint_max_size_mb",
    "checkpoint_file_max_mb",
    "audit_checkpoint_seconds",
)
NUMERIC_FIELDS: Final = INT_FIELDS + FLOAT_FIELDS

ENV_VARIABLES: Final = ("OCT_MCP_SAFE_MODE", "OCT_TRUST_REPO_CONFIG", "OCT_MCP_PROFILE", "OCT_MCP_SANDBOX")
ENV_FIELDS: Final = {
    "OCT_MCP_SAFE_MODE": "safe_mode",
    "OCT_TRUST_REPO_CONFIG": "trust_repo_config",
    "OCT_MCP_PROFILE": "profile",
    "OCT_MCP_SANDBOX": "sandbox_backend",
}
PROFILE_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

# A value for every field that differs from its default and lies inside its range.
NON_DEFAULT_VALUES: Final[Mapping[str, object]] = {
    "profile": "strict",
    "rate_limit_per_minute": 120,
    "timeout_default_seconds": 90,
    "timeout_test_seconds": 600,
    "max_output_bytes": 2_048,
    "max_jobs": 8,
    "auto_approve_read_tools": False,
    "dry_run_default_for_writes": False,
    "redaction_always_on": True,
    "audit_log_path": "/var/log/oct-mcp/audit.jsonl",
    "audit_log_max_files": 5,
    "audit_log_max_size_mb": 2.5,
    "trust_repo_config": True,
    "safe_mode": True,
    "sandbox_backend": "bubblewrap",
    "allow_unconfined_project_code": True,
    "memory_limit_mb": 1_024,
    "metrics_port": 9_090,
    "policy_source": "https://example.com/policy.json",
    "rate_limit_storage": "redis://127.0.0.1:6379/0",
    "http_allowed_origins": ("https://oct.example.com",),
    "http_tokens": {"ci": "sha256:" + "ab" * 32},
    "http_max_request_bytes": 65_536,
    "http_max_sessions_per_client": 4,
    "http_body_timeout_seconds": 90,
    "oauth_issuer": "https://login.example.com",
    "oauth_audience": "https://oct.example.com/mcp",
    "oauth_jwks_url": "https://login.example.com/jwks.json",
    "consent_key_file": "/etc/oct-mcp/consent.key",
    "replica_id": "replica-a",
    "checkpoint_dir": "/var/lib/oct-mcp/checkpoints",
    "checkpoint_max_count": 50,
    "checkpoint_max_size_mb": 64.0,
    "checkpoint_file_max_mb": 2.0,
    "rules": ({"effect": "deny", "tools": ["oct_read_file"], "reason": "no reading"},),
    "ignore_files": ("~/.config/oct-mcp/ignore",),
    "max_concurrent_runs": 8,
    "max_concurrent_runs_per_client": 1,
    "audit_signing_key": "/etc/oct-mcp/audit.key",
    "audit_checkpoint_records": 100,
    "audit_checkpoint_seconds": 60.0,
    "audit_syslog_address": "udp://logs.example.com:514",
    "http_scopes": {"read": ["risk:read"]},
    "http_token_scopes": {"ci": ["read"]},
    "http_token_expiry": {"ci": "2027-01-31"},
}


def write_config(directory: Path, document: object) -> Path:
    path = directory / "config.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def errors(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["log_level"] == "error"]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No OCT_* overrides from the outer environment, and a HOME of our own; returns that HOME."""
    for variable in ENV_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


# McpConfig


def test_mcp_config_has_exactly_the_seeds_fields_and_the_unconfined_opt_in_in_order() -> None:
    assert tuple(f.name for f in dataclasses.fields(McpConfig)) == SEED_FIELD_NAMES


@pytest.mark.parametrize(
    ("name", "expected"),
    [pair for pair in SEED_DEFAULTS if pair[0] not in ("audit_log_path", "checkpoint_dir")],
)
def test_mcp_config_field_defaults_to_the_seeds_value(name: str, expected: object, clean_env: Path) -> None:
    actual = getattr(McpConfig(), name)

    assert actual == expected
    assert type(actual) is type(expected)


def test_mcp_config_audit_log_path_defaults_to_oct_mcp_audit_log_under_home(clean_env: Path) -> None:
    assert McpConfig().audit_log_path == str(clean_env / ".oct-mcp" / "audit.log")


def test_mcp_config_audit_log_path_follows_home_when_the_config_is_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "first"))
    first = McpConfig()
    monkeypatch.setenv("HOME", str(tmp_path / "second"))
    second = McpConfig()

    assert (first.audit_log_path, second.audit_log_path) == (
        str(tmp_path / "first" / ".oct-mcp" / "audit.log"),
        str(tmp_path / "second" / ".oct-mcp" / "audit.log"),
    )


# load_config with a file


@pytest.mark.parametrize(("name", "value"), NON_DEFAULT_VALUES.items())
def test_load_config_reads_each_field_from_the_file(name: str, value: object, tmp_path: Path) -> None:
    path = write_config(tmp_path, {name: value})

    loaded = load_settings(path, environ={})

    assert loaded.config == dataclasses.replace(McpConfig(), **{name: value})
    assert loaded.sources[name] == "file"


def test_load_config_reads_every_field_of_a_full_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, dict(NON_DEFAULT_VALUES))

    loaded = load_settings(path, environ={})

    assert dataclasses.asdict(loaded.config) == NON_DEFAULT_VALUES
    assert dict(loaded.sources) == dict.fromkeys(SEED_FIELD_NAMES, "file")


def test_load_config_reads_the_file_given_through_load_config(clean_env: Path, tmp_path: Path) -> None:
    path = write_config(tmp_path, {"max_jobs": 16, "profile": "airgapped"})

    assert load_config(path) == McpConfig(max_jobs=16, profile="airgapped")


def test_load_config_without_a_path_reads_oct_mcp_config_json_under_home(clean_env: Path) -> None:
    (clean_env / ".oct-mcp").mkdir()
    write_config(clean_env / ".oct-mcp", {"rate_limit_per_minute": 7})

    assert load_config() == McpConfig(rate_limit_per_minute=7)


def test_load_config_accepts_a_user_defined_profile_name_from_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"profile": "team-ci_2"})

    assert load_settings(path, environ={}).config.profile == "team-ci_2"


@pytest.mark.parametrize("name", ["metrics_port", "policy_source"])
def test_load_config_reads_null_for_an_optional_field_as_none(name: str, tmp_path: Path) -> None:
    path = write_config(tmp_path, {name: None})

    loaded = load_settings(path, environ={})

    assert (getattr(loaded.config, name), loaded.sources[name]) == (None, "file")


@pytest.mark.parametrize("name", sorted(RANGES))
def test_load_config_clamps_a_number_below_its_range_to_the_low_end(name: str, tmp_path: Path) -> None:
    low = RANGES[name][0]
    below = low / 2 if name in FLOAT_FIELDS else int(low) - 1
    path = write_config(tmp_path, {name: below})

    with structlog.testing.capture_logs() as logs:
        actual = getattr(load_settings(path, environ={}).config, name)

    assert actual == low
    assert type(actual) is (float if name in FLOAT_FIELDS else int)
    assert [(e["event"], e["file"], e["field"]) for e in logs] == [("config_clamped", str(path), name)]


@pytest.mark.parametrize("name", sorted(RANGES))
def test_load_config_clamps_a_number_above_its_range_to_the_high_end(name: str, tmp_path: Path) -> None:
    high = RANGES[name][1]
    above = high * 2 if name in FLOAT_FIELDS else int(high) + 1
    path = write_config(tmp_path, {name: above})

    with structlog.testing.capture_logs() as logs:
        actual = getattr(load_settings(path, environ={}).config, name)

    assert actual == high
    assert type(actual) is (float if name in FLOAT_FIELDS else int)
    assert [(e["event"], e["file"], e["field"]) for e in logs] == [("config_clamped", str(path), name)]


@pytest.mark.parametrize("name", sorted(RANGES))
@pytest.mark.parametrize("end", [0, 1])
def test_load_config_keeps_a_number_at_either_end_of_its_range(name: str, end: int, tmp_path: Path) -> None:
    value = RANGES[name][end]
    path = write_config(tmp_path, {name: value})

    with structlog.testing.capture_logs() as logs:
        actual = getattr(load_settings(path, environ={}).config, name)

    assert actual == value
    assert logs == []


@pytest.mark.parametrize("name", sorted(RANGES))
@pytest.mark.parametrize("sign", [1, -1])
def test_load_config_clamps_a_whole_number_too_large_for_a_float_without_raising(
    name: str, sign: int, tmp_path: Path
) -> None:
    # 10**400 is valid JSON and a whole number: it is out of range, so the spec clamps it.
    path = write_config(tmp_path, {name: sign * 10**400})

    actual = getattr(load_settings(path, environ={}).config, name)

    assert actual == RANGES[name][1 if sign > 0 else 0]


def test_load_config_reads_an_integral_float_for_an_int_field_as_an_int(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"max_jobs": 8.0})

    actual = load_settings(path, environ={}).config.max_jobs

    assert (actual, type(actual)) == (8, int)


def test_load_config_reads_an_int_for_the_float_field_as_a_float(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"audit_log_max_size_mb": 7})

    actual = load_settings(path, environ={}).config.audit_log_max_size_mb

    assert (actual, type(actual)) == (7.0, float)


WRONG_VALUES: Final = [
    ("max_jobs", "8"),
    ("max_jobs", True),
    ("max_jobs", False),
    ("max_jobs", 5.5),
    ("max_jobs", [4]),
    ("max_jobs", {"value": 4}),
    ("max_jobs", float("inf")),
    ("max_jobs", float("-inf")),
    ("max_jobs", float("nan")),
    ("max_jobs", None),
    ("rate_limit_per_minute", "30"),
    ("memory_limit_mb", 0.5),
    ("metrics_port", "9090"),
    ("metrics_port", True),
    ("metrics_port", 8080.5),
    ("audit_log_max_size_mb", "5"),
    ("audit_log_max_size_mb", True),
    ("audit_log_max_size_mb", float("nan")),
    ("audit_log_max_size_mb", None),
    ("safe_mode", 1),
    ("safe_mode", "true"),
    ("safe_mode", None),
    ("auto_approve_read_tools", 0),
    ("trust_repo_config", 1.0),
    ("redaction_always_on", []),
    ("sandbox_backend", "docker"),
    ("sandbox_backend", "Native"),
    ("sandbox_backend", 1),
    ("sandbox_backend", None),
    ("profile", "../etc/passwd"),
    ("profile", ""),
    ("profile", "a" * 65),
    ("profile", "1strict"),
    ("profile", "strict profile"),
    ("profile", "stríct"),
    ("profile", 1),
    ("profile", None),
    ("audit_log_path", ""),
    ("audit_log_path", "audit\x00.log"),
    ("audit_log_path", "a" * 4_097),
    ("audit_log_path", 3),
    ("audit_log_path", None),
    ("policy_source", ""),
    ("policy_source", 3),
    ("policy_source", ["https://example.com"]),
    ("http_allowed_origins", "https://app.example"),
    ("http_allowed_origins", ["https://app.example/path"]),
    ("http_allowed_origins", ["https://user@app.example"]),
    ("http_allowed_origins", ["ftp://app.example"]),
    ("http_allowed_origins", [3]),
    ("http_allowed_origins", ["https://a.example"] * 257),
    ("http_tokens", ["sha256:" + "0" * 64]),
    ("http_tokens", {"ci": "not-a-hash"}),
    ("http_tokens", {"ci": "sha256:" + "0" * 63}),
    ("http_tokens", {"ci": "sha256:" + "A" * 64}),
    ("http_tokens", {"bad name": "sha256:" + "0" * 64}),
    ("replica_id", "replica one"),
    ("replica_id", "../r1"),
    ("rate_limit_storage", "memcached://localhost"),
    ("rate_limit_storage", "redis://local host"),
    ("oauth_issuer", "ftp://issuer.example"),
    ("oauth_issuer", "https://issuer.example/ x"),
    ("oauth_jwks_url", "https://" + "a" * 4_096),
    # Keys fetched over plain HTTP from anywhere but loopback: whoever is on the way signs tokens.
    ("oauth_jwks_url", "http://login.example.com/jwks.json"),
    ("oauth_jwks_url", "http://10.0.0.5/jwks.json"),
    ("oauth_jwks_url", "http://localhost.example.com/jwks.json"),
]


@pytest.mark.parametrize(("name", "raw"), WRONG_VALUES)
def test_load_config_keeps_the_default_for_a_value_of_the_wrong_type(
    name: str, raw: object, tmp_path: Path
) -> None:
    path = write_config(tmp_path, {name: raw})

    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(path, environ={})

    assert loaded.config == McpConfig()
    assert loaded.sources[name] == "default"
    assert [(e["event"], e["file"], e["field"]) for e in errors(logs)] == [
        ("config_invalid", str(path), name)
    ]


def test_load_config_keeps_the_other_fields_of_a_file_with_one_wrong_value(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"max_jobs": "eight", "timeout_default_seconds": 120})

    assert load_settings(path, environ={}).config == McpConfig(timeout_default_seconds=120)


def test_load_config_ignores_unknown_keys_with_a_warning(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"max_jobz": 9, "": 1, "nested": {"max_jobs": 9}})

    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(path, environ={})

    assert loaded.config == McpConfig()
    assert dict(loaded.sources) == dict.fromkeys(SEED_FIELD_NAMES, "default")
    assert sorted((e["event"], e["log_level"], e["file"], e["field"]) for e in logs) == [
        ("config_unknown_field", "warning", str(path), ""),
        ("config_unknown_field", "warning", str(path), "max_jobz"),
        ("config_unknown_field", "warning", str(path), "nested"),
    ]


def test_load_settings_keeps_the_profiles_key_as_user_profiles(tmp_path: Path) -> None:
    profiles = {"team": {"tools": ["oct_lint"]}, "ci": {}}
    path = write_config(tmp_path, {"profiles": profiles, "profile": "team"})

    loaded = load_settings(path, environ={})

    assert dict(loaded.user_profiles) == profiles
    assert loaded.config == McpConfig(profile="team")


def test_load_settings_has_no_user_profiles_without_a_profiles_key(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"max_jobs": 2})

    assert dict(load_settings(path, environ={}).user_profiles) == {}


@pytest.mark.parametrize("raw", [[], "team", 1, None])
def test_load_settings_ignores_a_profiles_key_that_is_not_an_object(raw: object, tmp_path: Path) -> None:
    path = write_config(tmp_path, {"profiles": raw})

    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(path, environ={})

    assert dict(loaded.user_profiles) == {}
    assert loaded.config == McpConfig()
    assert [(e["event"], e["file"], e["field"]) for e in errors(logs)] == [
        ("config_invalid", str(path), "profiles")
    ]


def test_load_config_expands_a_tilde_in_audit_log_path(clean_env: Path, tmp_path: Path) -> None:
    path = write_config(tmp_path, {"audit_log_path": "~/logs/audit.log"})

    assert load_config(path).audit_log_path == str(clean_env / "logs" / "audit.log")


def test_load_settings_reports_the_path_it_read(tmp_path: Path) -> None:
    path = write_config(tmp_path, {})

    assert load_settings(path, environ={}).path == path


# Files that cannot be used


def test_load_config_gives_the_defaults_without_an_error_when_the_file_is_missing(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(tmp_path / "absent.json", environ={})

    assert loaded.config == McpConfig()
    assert dict(loaded.sources) == dict.fromkeys(SEED_FIELD_NAMES, "default")
    assert errors(logs) == []


def test_load_config_gives_the_defaults_when_home_has_no_config(clean_env: Path) -> None:
    assert load_config() == McpConfig()


def test_load_config_gives_the_defaults_and_logs_when_the_path_is_a_directory(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(tmp_path, environ={})

    assert loaded.config == McpConfig()
    assert [(e["event"], e["file"]) for e in errors(logs)] == [("config_unreadable", str(tmp_path))]


def test_load_config_gives_the_defaults_and_logs_when_the_file_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"max_jobs": 8, "profile": "\xff\xfe"}')

    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(path, environ={})

    assert loaded.config == McpConfig()
    assert [(e["event"], e["file"]) for e in errors(logs)] == [("config_unreadable", str(path))]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"max_jobs": 8,}',
        "{'max_jobs': 8}",
        '{"max_jobs": 8} trailing',
        "[]",
        '[{"max_jobs": 8}]',
        "null",
        "3",
        '"max_jobs"',
        "true",
        "[" * 100_000,
        '{"a":' * 100_000,
        '{"max_jobs": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=[
        "empty",
        "unclosed",
        "trailing-comma",
        "single-quotes",
        "trailing-text",
        "empty-array",
        "array-of-object",
        "null",
        "number",
        "string",
        "true",
        "deep-array",
        "deep-object",
        "deep-balanced-value",
    ],
)
def test_load_config_gives_the_defaults_and_logs_when_the_file_is_not_a_json_object(
    text: str, tmp_path: Path
) -> None:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")

    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(path, environ={})

    assert loaded.config == McpConfig()
    assert dict(loaded.sources) == dict.fromkeys(SEED_FIELD_NAMES, "default")
    assert [(e["event"], e["file"]) for e in errors(logs)] == [("config_malformed", str(path))]


def test_load_config_never_raises_for_a_directory_even_through_load_config(
    clean_env: Path, tmp_path: Path
) -> None:
    assert load_config(tmp_path) == McpConfig()


# The environment


@pytest.mark.parametrize("value", ["1", " 1 ", "true", "TRUE", "yes", "on"])
def test_safe_mode_env_turns_safe_mode_on_even_when_the_file_says_false(value: str, tmp_path: Path) -> None:
    path = write_config(tmp_path, {"safe_mode": False})

    loaded = load_settings(path, environ={"OCT_MCP_SAFE_MODE": value})

    assert (loaded.config.safe_mode, loaded.sources["safe_mode"]) == (True, "env")


@pytest.mark.parametrize("value", ["0", "false", "no", "off"])
def test_safe_mode_env_zero_turns_safe_mode_off_even_when_the_file_says_true(
    value: str, tmp_path: Path
) -> None:
    path = write_config(tmp_path, {"safe_mode": True})

    loaded = load_settings(path, environ={"OCT_MCP_SAFE_MODE": value})

    assert (loaded.config.safe_mode, loaded.sources["safe_mode"]) == (False, "env")


def test_trust_repo_config_env_turns_trust_on_even_when_the_file_says_false(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"trust_repo_config": False})

    loaded = load_settings(path, environ={"OCT_TRUST_REPO_CONFIG": "1"})

    assert (loaded.config.trust_repo_config, loaded.sources["trust_repo_config"]) == (True, "env")


def test_trust_repo_config_env_zero_turns_trust_off_even_when_the_file_says_true(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"trust_repo_config": True})

    loaded = load_settings(path, environ={"OCT_TRUST_REPO_CONFIG": "0"})

    assert (loaded.config.trust_repo_config, loaded.sources["trust_repo_config"]) == (False, "env")


def test_profile_env_overrides_the_files_profile(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"profile": "airgapped"})

    loaded = load_settings(path, environ={"OCT_MCP_PROFILE": "strict"})

    assert (loaded.config.profile, loaded.sources["profile"]) == ("strict", "env")


def test_sandbox_env_overrides_the_files_backend(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"sandbox_backend": "bubblewrap"})

    loaded = load_settings(path, environ={"OCT_MCP_SANDBOX": "native"})

    assert (loaded.config.sandbox_backend, loaded.sources["sandbox_backend"]) == ("native", "env")


def test_landlock_is_a_backend_the_file_and_the_environment_can_name(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"sandbox_backend": "landlock"})

    from_file = load_settings(path, environ={})
    from_env = load_settings(path, environ={"OCT_MCP_SANDBOX": "landlock"})

    assert (from_file.config.sandbox_backend, from_file.sources["sandbox_backend"]) == ("landlock", "file")
    assert (from_env.config.sandbox_backend, from_env.sources["sandbox_backend"]) == ("landlock", "env")


@pytest.mark.parametrize(
    ("variable", "value", "name", "expected"),
    [
        ("OCT_MCP_SAFE_MODE", "1", "safe_mode", True),
        ("OCT_TRUST_REPO_CONFIG", "1", "trust_repo_config", True),
        ("OCT_MCP_PROFILE", "strict", "profile", "strict"),
        ("OCT_MCP_SANDBOX", "native", "sandbox_backend", "native"),
    ],
)
def test_load_config_reads_each_override_from_the_process_environment(
    variable: str,
    value: str,
    name: str,
    expected: object,
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, {"safe_mode": False, "profile": "airgapped", "sandbox_backend": "auto"})
    monkeypatch.setenv(variable, value)

    assert getattr(load_config(path), name) == expected


def test_load_config_turns_safe_mode_off_from_the_process_environment(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = write_config(tmp_path, {"safe_mode": True})
    monkeypatch.setenv("OCT_MCP_SAFE_MODE", "0")

    assert load_config(path).safe_mode is False


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OCT_MCP_SAFE_MODE", "maybe"),
        ("OCT_MCP_SAFE_MODE", "2"),
        ("OCT_TRUST_REPO_CONFIG", "enabled"),
        ("OCT_MCP_PROFILE", "../../etc"),
        ("OCT_MCP_PROFILE", "a" * 65),
        ("OCT_MCP_PROFILE", "9lives"),
        ("OCT_MCP_SANDBOX", "docker"),
        ("OCT_MCP_SANDBOX", "NATIVE"),
    ],
)
def test_an_invalid_env_value_is_ignored_with_an_error(variable: str, value: str, tmp_path: Path) -> None:
    name = ENV_FIELDS[variable]
    file_value = {"safe_mode": True, "trust_repo_config": True, "profile": "airgapped"}.get(name, "native")
    path = write_config(tmp_path, {name: file_value})

    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(path, environ={variable: value})

    assert (getattr(loaded.config, name), loaded.sources[name]) == (file_value, "file")
    assert [(e["event"], e["variable"]) for e in errors(logs)] == [("env_invalid", variable)]


@pytest.mark.parametrize("variable", ENV_VARIABLES)
@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_env_value_is_ignored_without_an_error(variable: str, value: str, tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(tmp_path / "absent.json", environ={variable: value})

    assert (loaded.config, loaded.sources[ENV_FIELDS[variable]]) == (McpConfig(), "default")
    assert errors(logs) == []


def test_load_config_with_an_invalid_process_env_value_keeps_the_file_value(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = write_config(tmp_path, {"profile": "strict"})
    monkeypatch.setenv("OCT_MCP_PROFILE", "no such/profile")

    with structlog.testing.capture_logs() as logs:
        config = load_config(path)

    assert config.profile == "strict"
    assert [(e["event"], e["variable"]) for e in errors(logs)] == [("env_invalid", "OCT_MCP_PROFILE")]


def test_load_settings_reports_default_file_or_env_as_the_source_of_each_field(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, {"max_jobs": 8, "safe_mode": False, "profile": "airgapped", "timeout_test_seconds": "x"}
    )

    loaded = load_settings(path, environ={"OCT_MCP_SAFE_MODE": "1", "OCT_MCP_SANDBOX": "native"})

    assert dict(loaded.sources) == {
        **dict.fromkeys(SEED_FIELD_NAMES, "default"),
        "max_jobs": "file",
        "profile": "file",
        "safe_mode": "env",
        "sandbox_backend": "env",
    }
    assert loaded.config == McpConfig(
        max_jobs=8, profile="airgapped", safe_mode=True, sandbox_backend="native"
    )


def test_load_settings_reads_the_process_environment_when_environ_is_none(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OCT_TRUST_REPO_CONFIG", "1")

    loaded = load_settings(clean_env / "absent.json")

    assert (loaded.config.trust_repo_config, loaded.sources["trust_repo_config"]) == (True, "env")


# Properties

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    # Whole numbers past the largest float (about 1.8e308) are valid JSON too.
    st.integers(min_value=2**1024, max_value=10**1000),
    st.integers(min_value=-(10**1000), max_value=-(2**1024)),
    st.floats(),  # nan and the infinities included: json writes NaN and Infinity, which it reads back
    st.text(),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(), children, max_size=5),
    ),
    max_leaves=20,
)
plausible_values = st.one_of(
    json_values,
    st.sampled_from((*SANDBOX_BACKENDS, "strict", "airgapped", "~/audit.log", "team-1")),
    st.integers(min_value=-100_000, max_value=100_000_000),
    st.floats(min_value=-10.0, max_value=10_000.0),
)
config_documents = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from((*SEED_FIELD_NAMES, "profiles")), plausible_values),
    st.dictionaries(st.one_of(st.sampled_from(SEED_FIELD_NAMES), st.text()), json_values, max_size=8),
)
env_values = st.one_of(
    st.text(),
    st.sampled_from(["1", "0", " 1\n", "true", "off", "strict", " airgapped ", "native", "auto", "team-ci"]),
)
environments = st.dictionaries(st.sampled_from(ENV_VARIABLES), env_values)


def expected_from_env(variable: str, value: str) -> tuple[bool, object]:
    """Whether `value` is a documented valid value for `variable`, and the config value it sets."""
    word = value.strip()
    if variable in ("OCT_MCP_SAFE_MODE", "OCT_TRUST_REPO_CONFIG"):
        return word in ("1", "0"), word == "1"
    if variable == "OCT_MCP_PROFILE":
        return PROFILE_NAME.fullmatch(word) is not None, word
    return word in SANDBOX_BACKENDS, word


def assert_config_is_well_formed(config: McpConfig) -> None:
    for name in BOOL_FIELDS:
        assert type(getattr(config, name)) is bool, name
    for name in INT_FIELDS:
        value = getattr(config, name)
        if name == "metrics_port" and value is None:
            continue
        assert type(value) is int, name
    assert type(config.audit_log_max_size_mb) is float
    for name, (low, high) in RANGES.items():
        value = getattr(config, name)
        if name == "metrics_port" and value is None:
            continue
        assert low <= value <= high, name
    assert config.sandbox_backend in SANDBOX_BACKENDS
    assert type(config.profile) is str
    assert PROFILE_NAME.fullmatch(config.profile) is not None
    assert type(config.audit_log_path) is str
    assert config.policy_source is None or type(config.policy_source) is str


def load_written(
    contents: bytes, environ: Mapping[str, str]
) -> tuple[LoadedConfig, list[dict[str, Any]], Path]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "config.json"
        path.write_bytes(contents)
        with structlog.testing.capture_logs() as logs:
            loaded = load_settings(path, environ=environ)
    return loaded, logs, path


@settings(max_examples=200, deadline=None)
@given(document=config_documents, environ=environments)
def test_load_settings_never_raises_and_keeps_every_field_well_formed_for_any_json_and_env(
    document: object, environ: dict[str, str]
) -> None:
    loaded, _, _ = load_written(json.dumps(document).encode("utf-8"), environ)

    assert_config_is_well_formed(loaded.config)
    assert set(loaded.sources) == set(SEED_FIELD_NAMES)
    for variable, value in environ.items():
        is_valid, expected = expected_from_env(variable, value)
        name = ENV_FIELDS[variable]
        if is_valid:
            assert (getattr(loaded.config, name), loaded.sources[name]) == (expected, "env")


@settings(max_examples=200, deadline=None)
@given(contents=st.binary())
def test_load_settings_never_raises_and_gives_the_defaults_for_arbitrary_bytes(contents: bytes) -> None:
    loaded, logs, path = load_written(contents, {})

    assert_config_is_well_formed(loaded.config)
    try:
        document = json.loads(contents.decode("utf-8"))
    except (ValueError, RecursionError):
        document = None
    if not isinstance(document, dict):
        assert loaded.config == McpConfig()
        assert [(e["event"], e["file"]) for e in errors(logs)] in (
            [("config_unreadable", str(path))],
            [("config_malformed", str(path))],
        )


def test_every_field_default_is_read_back_from_json_as_itself(tmp_path: Path) -> None:
    defaults = McpConfig()
    document = {
        item.name: list(value) if isinstance(value, tuple) else value
        for item in dataclasses.fields(McpConfig)
        for value in [getattr(defaults, item.name)]
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))

    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(path, environ={})

    assert (loaded.config, logs) == (defaults, [])
    assert set(loaded.sources.values()) == {"file"}


def test_the_loader_tables_follow_the_dataclass_a_field_added_lands_in_each() -> None:
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Extended(McpConfig):
        retries: int = dataclasses.field(default=3, metadata={"oct_mcp": FieldRules(range=(0, 9))})
        webhook_url: str | None = dataclasses.field(default=None, metadata={"oct_mcp": FieldRules(url=True)})
        quiet: bool = False

    tables, base = field_tables(Extended), field_tables(McpConfig)

    assert (
        tables.ints - base.ints,
        dict(tables.ranges.items() - base.ranges.items()),
        tables.urls - base.urls,
        tables.optional - base.optional,
        tables.bools - base.bools,
        set(tables.tighter) - set(base.tighter),
    ) == ({"retries"}, {"retries": (0, 9)}, {"webhook_url"}, {"webhook_url"}, {"quiet"}, set())


def test_a_number_field_without_a_range_is_refused_when_the_tables_are_built() -> None:
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Unbounded(McpConfig):
        retries: int = 3

    with pytest.raises(TypeError, match="retries"):
        field_tables(Unbounded)


def test_a_repository_may_set_only_the_fields_that_declare_a_stricter_test() -> None:
    assert sorted(field_tables(McpConfig).tighter) == [
        "allow_unconfined_project_code",
        "auto_approve_read_tools",
        "dry_run_default_for_writes",
        "max_concurrent_runs",
        "max_concurrent_runs_per_client",
        "max_jobs",
        "max_output_bytes",
        "memory_limit_mb",
        "profile",
        "rate_limit_per_minute",
        "redaction_always_on",
        "safe_mode",
        "timeout_default_seconds",
        "timeout_test_seconds",
    ]


def test_the_ranges_are_the_documented_ones() -> None:
    assert dict(RANGES) == {
        "rate_limit_per_minute": (1, 10_000),
        "timeout_default_seconds": (1, 3_600),
        "timeout_test_seconds": (1, 7_200),
        "max_output_bytes": (1_024, 64 * 1_048_576),
        "max_jobs": (1, 64),
        "audit_log_max_files": (1, 1_000),
        "audit_log_max_size_mb": (0.01, 1_024.0),
        "memory_limit_mb": (0, 8_192),
        "metrics_port": (1, 65_535),
        "http_max_request_bytes": (1_024, 64 * 1_048_576),
        "http_max_sessions_per_client": (1, 10_000),
        "http_body_timeout_seconds": (1, 600),
        "checkpoint_max_count": (0, 10_000),
        "checkpoint_max_size_mb": (1.0, 65_536.0),
        "checkpoint_file_max_mb": (0.01, 1_024.0),
        "max_concurrent_runs": (1, 256),
        "max_concurrent_runs_per_client": (1, 256),
        "audit_checkpoint_records": (1, 1_000_000),
        "audit_checkpoint_seconds": (1.0, 86_400.0),
    }


def test_a_replica_name_from_the_environment_must_be_a_name() -> None:
    with structlog.testing.capture_logs() as logs:
        loaded = load_settings(Path("/nonexistent/config.json"), environ={"OCT_MCP_REPLICA_ID": "r 1"})

    assert loaded.config.replica_id is None
    assert [(e["event"], e["variable"]) for e in errors(logs)] == [("env_invalid", "OCT_MCP_REPLICA_ID")]


def _loaded(**values: Any) -> LoadedConfig:
    return load_settings(Path("/nonexistent/config.json"), environ={}).with_values(values, "file")


def test_a_policy_sets_fields_but_never_another_policy_source() -> None:
    merged = merge_policy(
        _loaded(), {"max_jobs": 2, "policy_source": "https://elsewhere.example/p.json"}, "policy.json"
    )

    assert (merged.config.max_jobs, merged.config.policy_source) == (2, None)
    assert (merged.sources["max_jobs"], merged.sources["policy_source"]) == ("policy", "default")


def test_a_policy_does_not_override_what_the_environment_set() -> None:
    loaded = load_settings(Path("/nonexistent/config.json"), environ={"OCT_MCP_SAFE_MODE": "0"})

    merged = merge_policy(loaded, {"safe_mode": True, "max_jobs": 2}, "policy.json")

    assert (merged.config.safe_mode, merged.config.max_jobs) == (False, 2)


@pytest.mark.parametrize(
    ("field", "current", "value", "taken"),
    [
        ("safe_mode", False, True, True),
        ("safe_mode", True, False, False),
        ("auto_approve_read_tools", True, False, True),
        ("auto_approve_read_tools", False, True, False),
        ("dry_run_default_for_writes", False, True, True),
        ("dry_run_default_for_writes", True, False, False),
        ("redaction_always_on", False, True, True),
        ("allow_unconfined_project_code", True, False, True),
        ("allow_unconfined_project_code", False, True, False),
        ("max_jobs", 4, 2, True),
        ("max_jobs", 4, 4, False),
        ("max_jobs", 4, 5, False),
        ("timeout_default_seconds", 60, 30, True),
        ("timeout_test_seconds", 300, 600, False),
        ("rate_limit_per_minute", 30, 10, True),
        ("max_output_bytes", 1_048_576, 2_097_152, False),
        ("memory_limit_mb", 512, 256, True),
        ("memory_limit_mb", 512, 0, False),
        ("memory_limit_mb", 0, 256, True),
        ("memory_limit_mb", 512, 1_024, False),
        ("profile", "default", "strict", True),
        ("profile", "strict", "airgapped", True),
        ("profile", "strict", "default", False),
        ("profile", "default", "default", False),
        ("profile", "default", "mine", False),
        ("profile", "default", "read-only", False),
        ("profile", "read-only", "strict", False),
        ("profile", "read-only", "airgapped", False),
        ("trust_repo_config", False, True, False),
        ("sandbox_backend", "auto", "native", False),
        ("audit_log_path", "/tmp/a.log", "/tmp/b.log", False),
        ("policy_source", None, "https://p.example/p.json", False),
    ],
)
def test_a_repository_config_may_only_tighten(
    field: str, current: object, value: object, taken: bool
) -> None:
    loaded = _loaded(**{field: current})

    with structlog.testing.capture_logs() as logs:
        tightened = tighten_with_repo_config(loaded, {field: value}, ".octrc.json")

    assert (getattr(tightened.config, field), tightened.sources[field]) == (
        (value, "repo") if taken else (current, "file")
    )
    refused = [e for e in logs if e["event"] == "repo_config_field_refused"]
    assert len(refused) == (0 if taken or value == current else 1)
