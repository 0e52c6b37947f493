"""The admin tier: a rules file only root may write, which no user, profile or repository loosens."""

from __future__ import annotations

import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from oct_mcp.errors import ConfigError
from oct_mcp.rules._model import RuleSource

ADMIN_POLICY_PATH: Final = "/etc/oct-mcp/policy.toml"


ADMIN_POLICY_ENV: Final = "OCT_MCP_ADMIN_POLICY"
"""Names the admin file where it is not at `ADMIN_POLICY_PATH`; it must be as well kept."""


def read_admin_rules(environ: Mapping[str, str]) -> RuleSource | None:
    """The admin tier: `/etc/oct-mcp/policy.toml`, or the file `OCT_MCP_ADMIN_POLICY` names.

    Returns:
        Its rules; None when there is no such file.

    Raises:
        ConfigError: The file is not owned by root, others or its group may write it, or it is
            not a TOML table whose `rules` is a list of tables. The server does not start: an
            admin's rules that cannot be trusted or read must not be silently dropped.
    """
    named = environ.get(ADMIN_POLICY_ENV, "").strip()
    path = Path(named or ADMIN_POLICY_PATH)
    try:
        info = path.stat()
    except FileNotFoundError:
        if named:
            raise ConfigError(
                f"the admin policy {path} ({ADMIN_POLICY_ENV}) does not exist", rule="admin"
            ) from None
        return None
    except OSError as exc:
        raise ConfigError(
            f"the admin policy {path} cannot be read ({type(exc).__name__})", rule="admin"
        ) from exc
    for checked in (path, *path.parents[:1]):
        held = checked.stat()
        if held.st_uid != 0 or held.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ConfigError(
                f"the admin policy {path} is refused: {checked} must be owned by root and writable by "
                "root alone (chown root, chmod go-w)",
                rule="admin",
            )
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"the admin policy {path} is not a regular file", rule="admin")
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"the admin policy {path} is not valid TOML", rule="admin") from exc
    unknown = set(document) - {"rules"}
    rules = document.get("rules", [])
    if unknown or not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ConfigError(f"the admin policy {path} holds only `[[rules]]` tables", rule="admin")
    return RuleSource(tier="admin", file=str(path), rules=tuple(rules))
