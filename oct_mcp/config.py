"""McpConfig and load_config: the runtime configuration, its ranges and where each value came from."""

from __future__ import annotations

import ipaddress
import json
import math
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from oct_mcp.diagnostics import get_logger

__all__ = [
    "PROFILE_NAMES",
    "RANGES",
    "SANDBOX_BACKENDS",
    "FieldRules",
    "FieldTables",
    "LoadedConfig",
    "McpConfig",
    "default_config_path",
    "field_tables",
    "load_config",
    "load_settings",
]

SANDBOX_BACKENDS: Final = ("auto", "native", "bubblewrap", "landlock", "sandbox_exec")
PROFILE_NAMES: Final = ("default", "read-only", "strict", "airgapped")
PROFILE_NAME_MAX_LENGTH: Final = 64

Source = Literal["default", "file", "policy", "env", "cli", "repo"]

_log = get_logger(__name__)


def default_config_path() -> Path:
    """`~/.oct-mcp/config.json`, expanded now (never at import time)."""
    return Path.home() / ".oct-mcp" / "config.json"


def _default_audit_log_path() -> str:
    return str(Path.home() / ".oct-mcp" / "audit.log")


def _default_checkpoint_dir() -> str:
    return str(Path.home() / ".oct-mcp" / "checkpoints")


Tighter = Callable[[Any, Any], bool]
"""Whether `value` from a repository's config is stricter than `current`."""


@dataclass(frozen=True, slots=True)
class FieldRules:
    """What a config field declares beyond its type, in its metadata (see `_rules`)."""

    range: tuple[float, float] | None = None
    """A number's inclusive range."""
    url: bool = False
    tighter: Tighter | None = None
    """Set: a repository's config may set the field, only to a value this finds stricter."""


_RULES_KEY: Final = "oct_mcp"


def _rules(
    *, range: tuple[float, float] | None = None, url: bool = False, tighter: Tighter | None = None
) -> Mapping[str, FieldRules]:
    return {_RULES_KEY: FieldRules(range=range, url=url, tighter=tighter)}


def _lower(value: Any, current: Any) -> bool:
    return bool(value < current)


def _lower_limit(value: Any, current: Any) -> bool:
    """A lower limit, where 0 means none: any limit is stricter than none, and none never is."""
    return bool(0 < value < current or (current == 0 and value > 0))


def _strict_when(strict: bool) -> Tighter:
    def is_strict(value: Any, current: Any) -> bool:
        return bool(value == strict)

    return is_strict


# Shipped profiles from the loosest to the strictest: repo config may only move right. read-only is
# not on this line (fewer tools than strict, lighter checks): repo config may neither pick nor leave it.
_PROFILE_STRICTNESS: Final = {
    name: rank for rank, name in enumerate(name for name in PROFILE_NAMES if name != "read-only")
}


def _stricter_profile(value: Any, current: Any) -> bool:
    rank = _PROFILE_STRICTNESS.get(value)
    return rank is not None and rank > _PROFILE_STRICTNESS.get(current, len(PROFILE_NAMES))


@dataclass(frozen=True, slots=True, kw_only=True)
class McpConfig:
    """Runtime configuration for the oct-mcp server.

    Every field has a safe, conservative default that works with no config file.
    Values read from JSON are clamped to the range each number field declares (`_rules`); the
    loader's tables are derived from these fields (`field_tables`).
    `trust_repo_config` defaults to False: repo-level config is untrusted.
    """

    profile: str = field(default="default", metadata=_rules(tighter=_stricter_profile))
    rate_limit_per_minute: int = field(default=30, metadata=_rules(range=(1, 10_000), tighter=_lower))
    timeout_default_seconds: int = field(default=60, metadata=_rules(range=(1, 3_600), tighter=_lower))
    timeout_test_seconds: int = field(default=300, metadata=_rules(range=(1, 7_200), tighter=_lower))
    max_output_bytes: int = field(
        default=1_048_576, metadata=_rules(range=(1_024, 64 * 1_048_576), tighter=_lower)
    )
    max_jobs: int = field(default=4, metadata=_rules(range=(1, 64), tighter=_lower))
    auto_approve_read_tools: bool = field(default=True, metadata=_rules(tighter=_strict_when(False)))
    dry_run_default_for_writes: bool = field(default=True, metadata=_rules(tighter=_strict_when(True)))
    redaction_always_on: bool = field(default=False, metadata=_rules(tighter=_strict_when(True)))
    audit_log_path: str = field(default_factory=_default_audit_log_path)
    audit_log_max_files: int = field(default=20, metadata=_rules(range=(1, 1_000)))
    audit_log_max_size_mb: float = field(default=5.0, metadata=_rules(range=(0.01, 1_024.0)))
    trust_repo_config: bool = False
    safe_mode: bool = field(default=False, metadata=_rules(tighter=_strict_when(True)))
    sandbox_backend: str = "auto"
    allow_unconfined_project_code: bool = field(default=False, metadata=_rules(tighter=_strict_when(False)))
    """Run command tools (tests, linters, formatters) on a backend that confines nothing (native)."""
    memory_limit_mb: int = field(default=512, metadata=_rules(range=(0, 8_192), tighter=_lower_limit))
    metrics_port: int | None = field(default=None, metadata=_rules(range=(1, 65_535)))
    policy_source: str | None = None
    # Remote use (`serve --transport http`): see oct_mcp/transports/.
    rate_limit_storage: str = field(default="memory://", metadata=_rules(url=True))
    """Where the rate limit's window lives: `memory://` (this process) or a `redis://` URL replicas share."""
    http_allowed_origins: tuple[str, ...] = ()
    """Origins (and hosts, from them) a browser may call the HTTP transport from, besides loopback."""
    http_tokens: Mapping[str, str] = field(default_factory=dict)
    """Bearer tokens by client name, each only as its `sha256:` hash (`oct-mcp token create NAME`)."""
    http_max_request_bytes: int = field(default=1_048_576, metadata=_rules(range=(1_024, 64 * 1_048_576)))
    http_max_sessions_per_client: int = field(default=16, metadata=_rules(range=(1, 10_000)))
    """Handshake-era HTTP sessions one identity (a token, an OAuth subject) may hold open at once;
    past it, opening another gets 503 (`oct_mcp.transports.sessions`)."""
    http_body_timeout_seconds: int = field(default=30, metadata=_rules(range=(1, 600)))
    """How long an HTTP request's body may take to arrive whole; past it the request gets 408 and
    nothing runs. The answer may take as long as the call does (a consent, a test run)."""
    oauth_issuer: str | None = field(default=None, metadata=_rules(url=True))
    """The OAuth 2.1 authorization server whose JWTs the HTTP transport accepts (its `iss`)."""
    oauth_audience: str | None = field(default=None, metadata=_rules(url=True))
    """This server's URL as the tokens name it (`aud`), also the resource of its RFC 9728 metadata."""
    oauth_jwks_url: str | None = field(default=None, metadata=_rules(url=True))
    """Where the issuer publishes its signing keys (JWKS)."""
    consent_key_file: str | None = None
    """A file holding the key that seals consent state, shared by replicas (or OCT_MCP_CONSENT_KEY)."""
    replica_id: str | None = None
    """This replica's name in its audit records (or OCT_MCP_REPLICA_ID)."""
    # Undo (issue 28), after the seed's fields.
    checkpoint_dir: str = field(default_factory=_default_checkpoint_dir)
    """Where each project's checkpoints are kept (a folder per project, owner-only), for oct_undo."""
    checkpoint_max_count: int = field(default=200, metadata=_rules(range=(0, 10_000)))
    """Checkpoints kept per project, the oldest dropped first; 0: no checkpoints, and no undo."""
    checkpoint_max_size_mb: float = field(default=256.0, metadata=_rules(range=(1.0, 65_536.0)))
    """The contents kept per project, compressed; past it the oldest checkpoints are dropped."""
    checkpoint_file_max_mb: float = field(default=8.0, metadata=_rules(range=(0.01, 1_024.0)))
    """A file larger than this is recorded as not undoable rather than copied."""
    # Rules over arguments (issue 34).
    rules: tuple[Mapping[str, Any], ...] = ()
    """Allow, ask or deny calls by what they touch (`oct_mcp.rules.Rule`), first match wins; the
    user tier, below the admin file's and above a trusted repository's (`oct-mcp policy check`)."""
    ignore_files: tuple[str, ...] = ()
    """Files of gitignore-style globs (`.aiignore`, `~/.config/oct-mcp/ignore`) whose paths every
    tool is denied and no listing shows (`oct_mcp.ignore_files`); one in the project is read only
    where trust_repo_config is on."""
    # Runs at once (issue 35).
    max_concurrent_runs: int = field(default=4, metadata=_rules(range=(1, 256), tighter=_lower))
    """Command runs going at once in the whole server; past it a run waits for a slot."""
    max_concurrent_runs_per_client: int = field(default=2, metadata=_rules(range=(1, 256), tighter=_lower))
    """Command runs going at once for one client (an HTTP token or OAuth user, the stdio host)."""
    # Signed audit checkpoints (issue 36).
    audit_signing_key: str | None = None
    """An Ed25519 private key (`oct-mcp audit keygen PATH`) outside the audit folder and the
    project: the server signs the chain's head with it, so a rewritten log shows."""
    audit_checkpoint_records: int = field(default=1_000, metadata=_rules(range=(1, 1_000_000)))
    """A checkpoint after this many records, at the latest."""
    audit_checkpoint_seconds: float = field(default=300.0, metadata=_rules(range=(1.0, 86_400.0)))
    """A checkpoint this long after the last one when records came since (and one at shutdown)."""
    audit_syslog_address: str | None = None
    """Each audit line also sent, as written, to this syslog receiver: `udp://HOST:PORT`,
    `tcp://HOST:PORT` or `unix:///dev/log` (a copy off the machine shows a rewritten or cut log)."""
    # Scopes over HTTP (issue 35).
    http_scopes: Mapping[str, Any] = field(default_factory=dict)
    """Scope name -> the tools it grants (names, `risk:read`, `risk:execute`, `risk:write`, `*`): set,
    every HTTP call needs a token scope that grants its tool (`oct_mcp.transports.scopes`)."""
    http_token_scopes: Mapping[str, Any] = field(default_factory=dict)
    """Bearer token name -> its scopes (an OAuth token carries its own in its `scope` claim)."""
    http_token_expiry: Mapping[str, Any] = field(default_factory=dict)
    """Bearer token name -> when it stops being accepted (ISO 8601: `2027-01-31` or a date and time)."""


FIELD_NAMES: Final = tuple(f.name for f in fields(McpConfig))


@dataclass(frozen=True, slots=True)
class FieldTables:
    """How each field of a config dataclass is read from JSON, derived from its types and metadata."""

    ranges: Mapping[str, tuple[float, float]]
    """Inclusive: a number read from JSON outside its range is clamped to the nearest end."""
    ints: frozenset[str]
    floats: frozenset[str]
    bools: frozenset[str]
    optional: frozenset[str]
    """Fields that may be null."""
    urls: frozenset[str]
    tighter: Mapping[str, Tighter]
    """The fields a repository's config may set, each with its test of a stricter value."""


def field_tables(config_type: type[Any]) -> FieldTables:
    """The tables `_coerce_field` and `tighten_with_repo_config` read, from the dataclass's fields.

    Raises:
        TypeError: A number field declares no range, or a field's type is not one the loader reads.
    """
    hints = typing.get_type_hints(config_type)
    kinds: dict[str, set[str]] = {"int": set(), "float": set(), "bool": set(), "optional": set()}
    ranges: dict[str, tuple[float, float]] = {}
    urls: set[str] = set()
    tighter: dict[str, Tighter] = {}
    for item in fields(config_type):
        hint = hints[item.name]
        members = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if type(None) in members:
            kinds["optional"].add(item.name)
        base = [member for member in members if member is not type(None)]
        if len(base) != 1:
            raise TypeError(f"config field {item.name}: a union the loader does not read")
        rules: FieldRules = item.metadata.get(_RULES_KEY, FieldRules())
        if base[0] in (int, float, bool):
            kinds[base[0].__name__].add(item.name)
        if base[0] in (int, float):
            if rules.range is None:
                raise TypeError(
                    f"config field {item.name}: a number needs a range (metadata=_rules(range=...))"
                )
            ranges[item.name] = rules.range
        if rules.url:
            urls.add(item.name)
        if rules.tighter is not None:
            tighter[item.name] = rules.tighter
    return FieldTables(
        ranges=MappingProxyType(ranges),
        ints=frozenset(kinds["int"]),
        floats=frozenset(kinds["float"]),
        bools=frozenset(kinds["bool"]),
        optional=frozenset(kinds["optional"]),
        urls=frozenset(urls),
        tighter=MappingProxyType(tighter),
    )


_TABLES: Final = field_tables(McpConfig)
RANGES: Final = _TABLES.ranges
RATE_LIMIT_STORAGE_SCHEMES: Final = ("memory://", "redis://", "rediss://")
TOKEN_HASH_PREFIX: Final = "sha256:"  # noqa: S105 - the prefix of a hash, not a secret
_NAME_MAX_LENGTH: Final = 64
_LIST_MAX_ITEMS: Final = 256
_PATH_MAX_LENGTH: Final = 4_096
# The key of the config file that holds user-defined profiles; not an McpConfig field.
PROFILES_KEY: Final = "profiles"

_TRUE_WORDS: Final = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS: Final = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """What `load_settings` found: the config, each field's source, and the user's profiles."""

    config: McpConfig
    sources: Mapping[str, Source]
    path: Path
    file_status: str
    user_profiles: Mapping[str, Any]
    policy_status: str = "none (policy_source not set)"
    repo_status: str = "not read (trust_repo_config is off)"
    ignore_status: tuple[str, ...] = ()
    """What became of each of `ignore_files` (`oct_mcp.ignore_files.IgnoreFiles.status`)."""

    def with_values(self, values: Mapping[str, Any], source: Source) -> LoadedConfig:
        """A copy with `values` set, each recorded as coming from `source`."""
        return replace(
            self,
            config=replace(self.config, **values),
            sources={**self.sources, **dict.fromkeys(values, source)},
        )


def load_config(path: Path | None = None) -> McpConfig:
    """Load and return a McpConfig.

    Resolution order: read `~/.oct-mcp/config.json` (or `path`), validate and
    clamp each field, apply the environment overrides (`OCT_MCP_SAFE_MODE=1`,
    `OCT_TRUST_REPO_CONFIG=1`, `OCT_MCP_PROFILE`, `OCT_MCP_SANDBOX`), return a
    fully populated McpConfig.

    Never raises: a missing, unreadable or malformed file gives the defaults,
    and the problem is logged to the diagnostics log with the file's name.
    """
    return load_settings(path).config


def load_settings(path: Path | None = None, environ: Mapping[str, str] | None = None) -> LoadedConfig:
    """`load_config` with its provenance: the source of every field and the user's profiles.

    Args:
        path: The config file; `~/.oct-mcp/config.json` when None.
        environ: The environment to read overrides from; `os.environ` when None.

    Returns:
        The loaded config, never raising (see `load_config`).
    """
    config_path = path if path is not None else default_config_path()
    env = os.environ if environ is None else environ
    document, file_status = _read_document(config_path)
    values: dict[str, Any] = {}
    sources: dict[str, Source] = dict.fromkeys(FIELD_NAMES, "default")
    user_profiles: Mapping[str, Any] = {}
    for key, raw in document.items():
        if key == PROFILES_KEY:
            if isinstance(raw, dict):
                user_profiles = raw
            else:
                _log.error("config_invalid", file=str(config_path), field=key, problem="must be an object")
            continue
        if key not in sources:
            _log.warning("config_unknown_field", file=str(config_path), field=key)
            continue
        accepted, value = _coerce_field(key, raw, config_path)
        if accepted:
            values[key] = value
            sources[key] = "file"
    for key, value in _environment_overrides(env).items():
        values[key] = value
        sources[key] = "env"
    config = replace(McpConfig(), **values)
    return LoadedConfig(
        config=config, sources=sources, path=config_path, file_status=file_status, user_profiles=user_profiles
    )


def merge_policy(loaded: LoadedConfig, document: Mapping[str, Any], origin: str) -> LoadedConfig:
    """Merge a policy document (JSON object of config fields) over the file's values.

    Each field is validated and clamped as in the config file. A field the
    environment set keeps the environment's value; a policy cannot name
    another policy_source.
    """
    values: dict[str, Any] = {}
    for key, raw in document.items():
        if key not in FIELD_NAMES or key == "policy_source":
            _log.warning("policy_field_ignored", source=origin, field=key)
            continue
        if loaded.sources[key] in ("env", "cli"):
            continue
        accepted, value = _coerce_field(key, raw, Path(origin))
        if accepted:
            values[key] = value
    return loaded.with_values(values, "policy")


def tighten_with_repo_config(loaded: LoadedConfig, document: Mapping[str, Any], origin: str) -> LoadedConfig:
    """Apply a repository's own config, which may only make the server stricter.

    The repository is not the user: it may turn safe mode on but never off,
    lower limits but never raise them, pick a stricter shipped profile but
    never a looser one, and set nothing else (paths, backends, policy, trust).
    """
    config = loaded.config
    values: dict[str, Any] = {}
    for key, raw in document.items():
        if key not in FIELD_NAMES:
            _log.warning("repo_config_unknown_field", file=origin, field=key)
            continue
        accepted, value = _coerce_field(key, raw, Path(origin))
        if not accepted:
            continue
        current = getattr(config, key)
        is_stricter = _TABLES.tighter.get(key)
        if is_stricter is None:
            _log.warning(
                "repo_config_field_refused", file=origin, field=key, problem="repo config may not set it"
            )
            continue
        if is_stricter(value, current):
            values[key] = value
        elif value != current:
            _log.warning(
                "repo_config_field_refused", file=origin, field=key, problem="it would loosen the config"
            )
    return loaded.with_values(values, "repo")


def _read_document(path: Path) -> tuple[dict[str, Any], str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, "not found (defaults used)"
    except (OSError, UnicodeDecodeError) as exc:
        _log.error("config_unreadable", file=str(path), problem=type(exc).__name__)
        return {}, f"unreadable ({type(exc).__name__}); defaults used"
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        # RecursionError: deeply nested JSON exhausts the parser's stack.
        problem = f"not valid JSON: {exc}" if isinstance(exc, ValueError) else "nested too deeply"
        _log.error("config_malformed", file=str(path), problem=problem)
        return {}, f"malformed ({problem}); defaults used"
    if not isinstance(document, dict):
        _log.error("config_malformed", file=str(path), problem="the top level must be a JSON object")
        return {}, "malformed (the top level must be a JSON object); defaults used"
    return document, "loaded"


def _coerce_field(name: str, raw: Any, path: Path) -> tuple[bool, Any]:
    """Validate and clamp one field read from JSON; (False, None) means keep the default."""

    def refuse(problem: str) -> tuple[bool, Any]:
        _log.error("config_invalid", file=str(path), field=name, problem=problem)
        return False, None

    if raw is None:
        return (True, None) if name in _TABLES.optional else refuse("must not be null")
    if name in _TABLES.bools:
        return (True, raw) if isinstance(raw, bool) else refuse("must be true or false")
    if name in _TABLES.ranges:
        # bool is an int in Python, but `true` is not a number in a config file.
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            return refuse("must be a number")
        # Only a float can be infinite or fractional; a huge int must not be turned into one (overflow).
        if isinstance(raw, float) and not math.isfinite(raw):
            return refuse("must be a finite number")
        if name in _TABLES.ints and isinstance(raw, float) and not raw.is_integer():
            return refuse("must be a whole number")
        low, high = RANGES[name]
        clamped = min(max(raw, low), high)
        if clamped != raw:
            _log.warning("config_clamped", file=str(path), field=name, low=low, high=high, used=clamped)
        return True, int(clamped) if name in _TABLES.ints else float(clamped)
    if name == "http_allowed_origins":
        if not isinstance(raw, list) or len(raw) > _LIST_MAX_ITEMS:
            return refuse(f"must be a list of at most {_LIST_MAX_ITEMS} origins")
        if not all(isinstance(item, str) and _is_origin(item) for item in raw):
            return refuse("each origin must look like https://host or https://host:port")
        return True, tuple(raw)
    if name == "http_tokens":
        if not isinstance(raw, dict) or len(raw) > _LIST_MAX_ITEMS:
            return refuse(f"must be an object of at most {_LIST_MAX_ITEMS} client names to token hashes")
        if not all(is_client_name(key) and is_token_hash(value) for key, value in raw.items()):
            return refuse("each entry must map a client name to a sha256: hash (oct-mcp token create NAME)")
        return True, dict(raw)
    if name in ("http_scopes", "http_token_scopes", "http_token_expiry"):
        # Kept whatever its shape, checked when the HTTP transport is built: a scope map dropped here
        # would let every token call every tool, so a malformed one stops the server there instead.
        return True, raw
    if name == "ignore_files":
        # Checked when the rules are built (`oct_mcp.ignore_files`), for the same reason as rules.
        return True, tuple(raw) if isinstance(raw, list) else (raw,)
    if name == "rules":
        # Kept whatever its shape, checked rule by rule when the chain is built: a rule dropped
        # here would be a deny silently lost, so a malformed one stops the start-up there instead.
        return True, tuple(raw) if isinstance(raw, list) else (raw,)
    if not isinstance(raw, str):
        return refuse("must be a string")
    if name == "replica_id":
        return (True, raw) if is_client_name(raw) else refuse("must be a name (letters, digits, - and _)")
    if name in _TABLES.urls:
        if name == "rate_limit_storage" and not raw.startswith(RATE_LIMIT_STORAGE_SCHEMES):
            return refuse(f"must start with one of {', '.join(RATE_LIMIT_STORAGE_SCHEMES)}")
        if name != "rate_limit_storage" and not raw.startswith(("https://", "http://")):
            return refuse("must be an http:// or https:// URL")
        if name == "oauth_jwks_url" and raw.startswith("http://") and not _is_loopback_url(raw):
            # Whoever can answer for the keys can sign any token: over plain HTTP, anyone on the way.
            return refuse(
                "must be an https:// URL (plain http:// only to a loopback host, 127.0.0.1, ::1 or "
                "localhost): the keys it serves decide who may call"
            )
        if len(raw) > _PATH_MAX_LENGTH or any(c.isspace() or c == "\x00" for c in raw):
            return refuse(f"must be a URL of at most {_PATH_MAX_LENGTH} characters, without spaces")
        return True, raw
    if name == "sandbox_backend":
        return (
            (True, raw)
            if raw in SANDBOX_BACKENDS
            else refuse(f"must be one of {', '.join(SANDBOX_BACKENDS)}")
        )
    if name == "profile":
        return (
            (True, raw)
            if is_profile_name(raw)
            else refuse("must be a profile name (letters, digits, - and _)")
        )
    if not raw or len(raw) > _PATH_MAX_LENGTH or "\x00" in raw:
        return refuse(f"must be a non-empty path of at most {_PATH_MAX_LENGTH} characters")
    return True, os.path.expanduser(raw) if name in (
        "audit_log_path",
        "checkpoint_dir",
        "audit_signing_key",
    ) else raw


def is_profile_name(name: str) -> bool:
    """Profile names are short identifiers: they name files and appear in logs."""
    return (
        0 < len(name) <= PROFILE_NAME_MAX_LENGTH
        and name[0].isascii()
        and name[0].isalpha()
        and all(c.isascii() and (c.isalnum() or c in "-_") for c in name)
    )


def is_client_name(name: object) -> bool:
    """Client and replica names are short identifiers: they key the rate limit and appear in the audit."""
    return isinstance(name, str) and is_profile_name(name) and len(name) <= _NAME_MAX_LENGTH


def is_token_hash(value: object) -> bool:
    """A stored bearer token: `sha256:` and 64 lowercase hex digits, never the token itself."""
    if not isinstance(value, str) or not value.startswith(TOKEN_HASH_PREFIX):
        return False
    digest = value[len(TOKEN_HASH_PREFIX) :]
    return len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)


def _is_origin(value: str) -> bool:
    scheme, _, rest = value.partition("://")
    return (
        scheme in ("http", "https")
        and 0 < len(rest) <= 253
        and not any(c in "/?#@ \\" or c.isspace() for c in rest)
    )


def _environment_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for variable, name in (
        ("OCT_MCP_SAFE_MODE", "safe_mode"),
        ("OCT_TRUST_REPO_CONFIG", "trust_repo_config"),
    ):
        word = env.get(variable, "").strip().lower()
        if word in _TRUE_WORDS:
            overrides[name] = True
        elif word in _FALSE_WORDS:
            overrides[name] = False
        elif word:
            _log.error("env_invalid", variable=variable, problem="must be 1 or 0")
    profile = env.get("OCT_MCP_PROFILE", "").strip()
    if profile:
        if is_profile_name(profile):
            overrides["profile"] = profile
        else:
            _log.error("env_invalid", variable="OCT_MCP_PROFILE", problem="must be a profile name")
    replica = env.get("OCT_MCP_REPLICA_ID", "").strip()
    if replica:
        if is_client_name(replica):
            overrides["replica_id"] = replica
        else:
            _log.error("env_invalid", variable="OCT_MCP_REPLICA_ID", problem="must be a name")
    backend = env.get("OCT_MCP_SANDBOX", "").strip()
    if backend:
        if backend in SANDBOX_BACKENDS:
            overrides["sandbox_backend"] = backend
        else:
            _log.error(
                "env_invalid", variable="OCT_MCP_SANDBOX", problem=f"must be one of {SANDBOX_BACKENDS}"
            )
    return overrides


def _is_loopback_url(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
