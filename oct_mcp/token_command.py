"""`oct-mcp token`: the HTTP transport's bearer tokens, kept in the config as hashes.

`create` prints a new token once and writes its hash (and its expiry and scopes, when given);
`list` shows who holds a token, until when and with which scopes, never a hash; `revoke` takes
a token out whole. A running server reads the file again when it changes, so each takes effect
without a restart. The file is written beside itself and renamed over, owner-only: a crash never
leaves half a config, and what the command refuses leaves it as it was.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from oct_mcp.atomic_write import write_atomically
from oct_mcp.config import default_config_path, is_client_name
from oct_mcp.errors import ConfigError
from oct_mcp.exit_codes import EXIT_OK, EXIT_USAGE

__all__ = ["run_token", "token_parser"]

_TOKEN_ENTRIES = ("http_tokens", "http_token_expiry", "http_token_scopes")
"""Every config entry that is kept per token name."""


class _RefusedError(Exception):
    """What the command could not do, said to the person who ran it; nothing was written."""


def token_parser(debug_levels: list[int]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oct-mcp token",
        description="Bearer tokens for the HTTP transport, kept in the config as hashes.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="{create,list,revoke}")
    create = actions.add_parser("create", help="print a new token once and write its hash to the config")
    create.add_argument("name", help="the client's name: its rate limit and audit records go by it")
    create.add_argument(
        "--expires",
        metavar="WHEN",
        help="when the token stops being accepted: 2027-01-31 (00:00 UTC) or 2027-01-31T18:00:00Z; "
        "a running server takes the new token, and its expiry, without a restart",
    )
    create.add_argument(
        "--scopes",
        metavar="SCOPE[,SCOPE]",
        help="what the token may call: scopes that the config's http_scopes defines; a token "
        "created again keeps its scopes unless this is given",
    )
    listing = actions.add_parser("list", help="who holds a token, until when, with which scopes")
    revoke = actions.add_parser("revoke", help="take a token out of the config: refused from then on")
    revoke.add_argument("name", help="the token's name, as `list` shows it")
    for action in (create, listing, revoke):
        action.add_argument(
            "--config", type=Path, metavar="FILE", help="config file (default: ~/.oct-mcp/config.json)"
        )
        action.add_argument("--debug", type=int, choices=debug_levels, metavar="N", help="0 to 4")
    return parser


def run_token(args: argparse.Namespace) -> int:
    path: Path = args.config if args.config is not None else default_config_path()
    try:
        if args.action == "create":
            return _create(path, args.name, args.expires, args.scopes)
        if args.action == "revoke":
            return _revoke(path, args.name)
        return _list(path)
    except _RefusedError as refused:
        print(f"oct-mcp token: {refused}", file=sys.stderr)
        return EXIT_USAGE


def _create(path: Path, name: str, expires: str | None, scopes: str | None) -> int:
    from oct_mcp.transports.auth import hash_token, new_token, token_expiry
    from oct_mcp.transports.scopes import ScopeGrants

    if not is_client_name(name):
        raise _RefusedError("NAME must be letters, digits, - and _, starting with a letter")
    document = _read(path, missing_ok=True)
    tokens, expiry, token_scopes = (_entry(document, path, key) for key in _TOKEN_ENTRIES)
    # A token created again gets a lifetime of its own (the old expiry goes), and keeps its scopes.
    expiry = {key: value for key, value in expiry.items() if key != name}
    if expires is not None:
        try:
            token_expiry({name: expires}, {name})
        except ConfigError as exc:
            raise _RefusedError(f"--expires: {exc.message}") from exc
        expiry[name] = expires
    if scopes is not None:
        named = [scope.strip() for scope in scopes.split(",") if scope.strip()]
        if not named:
            raise _RefusedError("--scopes names no scope; give one or more, separated by commas")
        token_scopes = {**token_scopes, name: named}
        try:
            ScopeGrants.from_config(document.get("http_scopes", {}), token_scopes, {*tokens, name})
        except ConfigError as exc:
            defined = document.get("http_scopes")
            known = ", ".join(sorted(map(str, defined))) if isinstance(defined, dict) and defined else "none"
            raise _RefusedError(
                f"--scopes: {exc.message} (scopes defined in {path}: {known}); define the scope in "
                "http_scopes first"
            ) from exc
    token = new_token()
    document["http_tokens"] = {**tokens, name: hash_token(token)}
    for key, value in (("http_token_expiry", expiry), ("http_token_scopes", token_scopes)):
        if value or key in document:
            document[key] = value
    _write(path, document)
    replaced = " (it replaces the previous one)" if name in tokens else ""
    print(
        f"oct-mcp token: the hash of {name}'s token is in {path}{replaced}; the token, shown once:",
        file=sys.stderr,
    )
    print(token)
    return EXIT_OK


def _revoke(path: Path, name: str) -> int:
    document = _read(path, missing_ok=False)
    tokens = _entry(document, path, "http_tokens")
    if name not in tokens:
        held = ", ".join(sorted(tokens)) or "none"
        raise _RefusedError(f"{path} has no token named {name[:64]!r} (tokens: {held}); nothing was changed")
    for key in _TOKEN_ENTRIES:
        entries = _entry(document, path, key)
        if key in document:
            document[key] = {held: value for held, value in entries.items() if held != name}
    _write(path, document)
    print(f"oct-mcp token: {name}'s token is revoked in {path}; a running server refuses it within a second")
    return EXIT_OK


def _list(path: Path) -> int:
    document = _read(path, missing_ok=True)
    tokens, expiry, token_scopes = (_entry(document, path, key) for key in _TOKEN_ENTRIES)
    if not tokens:
        print(f"no tokens in {path}; `oct-mcp token create NAME` makes one")
        return EXIT_OK
    scoped = bool(document.get("http_scopes"))
    for name in sorted(tokens):
        until = f"until {expiry[name]}" if name in expiry else "no expiry"
        if name in token_scopes:
            granted = "scopes " + ",".join(map(str, token_scopes[name]))
        else:
            granted = "no scope: granted nothing" if scoped else "every tool (no http_scopes)"
        print(f"{name}\t{until}\t{granted}")
    return EXIT_OK


def _read(path: Path, *, missing_ok: bool) -> dict[str, Any]:
    if not path.exists():
        if missing_ok:
            return {}
        raise _RefusedError(f"{path} does not exist; give the server's config with --config")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _RefusedError(f"cannot read {path} ({type(exc).__name__}); fix it first") from exc
    if not isinstance(document, dict):
        raise _RefusedError(f"{path} is not a JSON object; fix it first")
    return document


def _entry(document: dict[str, Any], path: Path, key: str) -> dict[str, Any]:
    value = document.get(key, {})
    if not isinstance(value, dict):
        raise _RefusedError(f"{key} in {path} is not an object; fix it first")
    return value


def _write(path: Path, document: dict[str, Any]) -> None:
    """The config whole, owner-only: it holds the tokens' hashes."""
    write_atomically(path, json.dumps(document, indent=2) + "\n", 0o600)
