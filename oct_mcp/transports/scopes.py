"""Authorization per identity over HTTP: which tools a token's scopes grant.

`http_scopes` in the config maps each scope to the tools it grants: tool names, a risk class
(`risk:read`, `risk:execute`, `risk:write`) or `*`. An OAuth token carries its scopes in its `scope`
claim; a named bearer token gets them from `http_token_scopes`. Once scopes are configured, a call
over HTTP needs a scope granting its tool, or it is refused `[forbidden]` before the chain runs or
anyone is asked, and `tools/list` shows a client only the tools its scopes grant. A token with no
configured scope is granted nothing: the map fails closed.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from oct_mcp.errors import ConfigError, ForbiddenError
from oct_mcp.spec import Risk, ToolSpec

__all__ = ["LiveScopes", "ScopeGrants"]

_SCOPE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}")
_TOOL_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_RISKS: Final = {f"risk:{risk.value}": risk for risk in Risk}
_ALL: Final = "*"
_MAX_ENTRIES: Final = 256
_FIX: Final = (
    "give http_scopes as an object of scope names to lists of tool names, risk:read, risk:execute, "
    "risk:write or *, and http_token_scopes as an object of token names to lists of those scopes"
)


@dataclass(frozen=True, slots=True)
class _Grant:
    everything: bool
    tools: frozenset[str]
    risks: frozenset[Risk]

    def covers(self, spec: ToolSpec) -> bool:
        return self.everything or spec.name in self.tools or spec.risk in self.risks


@dataclass(frozen=True, slots=True)
class ScopeGrants:
    """The config's scopes, checked once; `allows` answers for a token's scopes and a tool."""

    grants: Mapping[str, _Grant]
    token_scopes: Mapping[str, tuple[str, ...]]

    @classmethod
    def from_config(
        cls, scopes: Mapping[str, Any], token_scopes: Mapping[str, Any], token_names: Collection[str]
    ) -> ScopeGrants | None:
        """The grants, or None when no scope is configured (every authenticated client may call).

        Raises:
            ConfigError: rule `http_scopes`: a malformed map, an unknown risk, a token scope that no
                scope defines, or scopes for a token the config does not name. A map the server
                cannot read stops it: dropping it would let every token call every tool.
        """
        if not isinstance(scopes, Mapping) or not isinstance(token_scopes, Mapping):
            raise ConfigError(
                f"http_scopes or http_token_scopes is not an object; {_FIX}", rule="http_scopes"
            )
        if not scopes:
            if token_scopes:
                raise ConfigError(
                    "http_token_scopes names scopes, but http_scopes defines none; " + _FIX,
                    rule="http_scopes",
                )
            return None
        if len(scopes) > _MAX_ENTRIES or len(token_scopes) > _MAX_ENTRIES:
            raise ConfigError(f"at most {_MAX_ENTRIES} scopes and token entries; {_FIX}", rule="http_scopes")
        grants = {}
        for name, granted in scopes.items():
            if not _SCOPE_NAME.fullmatch(str(name)) or not _is_list_of_str(granted):
                raise ConfigError(
                    f"http_scopes entry {str(name)[:64]!r} is malformed; {_FIX}", rule="http_scopes"
                )
            unknown = [g for g in granted if g != _ALL and g not in _RISKS and not (
                not g.startswith("risk:") and _TOOL_NAME.fullmatch(g)
            )]  # fmt: skip
            if unknown:
                raise ConfigError(
                    f"http_scopes entry {name!r} grants {unknown[0][:64]!r}, which is no tool name, risk "
                    f"class ({', '.join(sorted(_RISKS))}) or *",
                    rule="http_scopes",
                )
            grants[str(name)] = _Grant(
                everything=_ALL in granted,
                tools=frozenset(g for g in granted if g != _ALL and g not in _RISKS),
                risks=frozenset(_RISKS[g] for g in granted if g in _RISKS),
            )
        per_token = {}
        for token, named in token_scopes.items():
            if token not in token_names:
                raise ConfigError(
                    f"http_token_scopes names the token {str(token)[:64]!r}, which http_tokens does not have",
                    rule="http_scopes",
                )
            if not _is_list_of_str(named) or any(scope not in grants for scope in named):
                raise ConfigError(
                    f"http_token_scopes entry {token!r} must list scopes that http_scopes defines",
                    rule="http_scopes",
                )
            per_token[str(token)] = tuple(named)
        return cls(grants=grants, token_scopes=per_token)

    def allows(self, scopes: Sequence[str], spec: ToolSpec | None) -> bool:
        """Whether any of `scopes` grants `spec`; a tool the catalog does not have is granted by none."""
        if spec is None:
            return False
        return any(grant.covers(spec) for scope in scopes if (grant := self.grants.get(scope)) is not None)

    def refusal(self, tool: str, scopes: Sequence[str]) -> ForbiddenError:
        held = ", ".join(s for s in scopes if s in self.grants) or "none the server knows"
        return ForbiddenError(
            f"this client's token does not grant {tool[:64]!r} (its scopes: {held}); ask whoever runs the "
            "server for a token with a scope that grants it"
        )


class LiveScopes:
    """The scope map in force: the one the server started with, replaced whole each time the config
    file is read again with its bearer tokens (`auth.ReloadingTokens`), so a scope granted or taken
    away takes effect without a restart. None in force: no scope is configured, every authenticated
    client may call every tool."""

    def __init__(self, grants: ScopeGrants | None) -> None:
        self.grants = grants

    def allows(self, scopes: Sequence[str], spec: ToolSpec | None) -> bool:
        grants = self.grants
        return grants is None or grants.allows(scopes, spec)

    def refusal(self, tool: str, scopes: Sequence[str]) -> ForbiddenError:
        grants = self.grants
        if grants is None:
            raise RuntimeError("a call is refused by scopes while none are configured")
        return grants.refusal(tool, scopes)


def _is_list_of_str(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)
