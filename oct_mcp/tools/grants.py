"""oct_grants: the session grants a human gave (a tool's writes in a folder, for the rest of the
session or a set time), listed, and revoked one by one or all at once.

Revoking only takes a right away, so it needs no consent: a model that revokes a grant makes the
next write in that folder ask the human again.
"""

from __future__ import annotations

import time
from typing import Annotated, Final

from pydantic import BaseModel, Field, StringConstraints

from oct_mcp.consent import Grant, SessionGrants, granted_action
from oct_mcp.errors import NotFoundError
from oct_mcp.spec import InProcessPlan, Risk, StrictParams, ToolEnv, ToolSpec
from oct_mcp.types import ToolResult

__all__ = ["GRANTS", "GrantsOutput", "GrantsParams"]

ALL: Final = "all"
GrantId = Annotated[str, StringConstraints(pattern=r"^(g[0-9]{1,9}|all)$")]
_NONE_KEPT: Final = (
    "this session keeps no grants: they are offered in a stdio session whose profile sets "
    "session_grant (the default profile does), never over HTTP"
)


class GrantsParams(StrictParams):
    revoke: list[GrantId] = Field(default_factory=list, max_length=100, description="Grant ids, or 'all'.")


class GrantInfo(BaseModel):
    id: str
    tool: str
    scope: str
    """A folder, project-relative (`.` the root; the folder itself, not its subfolders), or
    `/command: ...`, one exact command."""
    given: str
    expires: str | None
    """UTC; None: at the end of the session."""


class GrantsOutput(BaseModel):
    grants: list[GrantInfo]
    """The grants in force after the call."""
    revoked: list[str] = Field(default_factory=list)


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _info(grant: Grant) -> GrantInfo:
    expires = None if grant.expires_at is None else _when(grant.expires_at)
    return GrantInfo(
        id=grant.id, tool=grant.tool, scope=grant.scope, given=_when(grant.given_at), expires=expires
    )


def _line(info: GrantInfo) -> str:
    until = "the end of the session" if info.expires is None else info.expires
    return f"  {info.id}  {info.tool} may {granted_action((info.scope,))}, until {until}"


def grants_result(grants: SessionGrants | None, revoke: list[str]) -> ToolResult:
    """This session's grants in force, after revoking those named.

    Raises:
        NotFoundError: A grant named is not in force (or the session keeps none); nothing was revoked.
    """
    if grants is None:
        if revoke:
            raise NotFoundError(f"nothing to revoke: {_NONE_KEPT}")
        return ToolResult(text=_NONE_KEPT, structured=GrantsOutput(grants=[]).model_dump())
    revoked: list[Grant] = []
    if revoke:
        try:
            revoked = grants.revoke(None if ALL in revoke else revoke)
        except KeyError as unknown:
            raise NotFoundError(
                f"no grant {unknown.args[0]} in force in this session (revoked, expired or never given); "
                "nothing was revoked: oct_grants lists the ones in force"
            ) from None
    infos = [_info(grant) for grant in grants.listed()]
    output = GrantsOutput(grants=infos, revoked=[grant.id for grant in revoked])
    lines = []
    if revoked:
        lines.append(f"revoked {', '.join(output.revoked)}: what they allowed is asked about again")
    if infos:
        lines.append(f"{len(infos)} grant(s) in force, oldest first:")
        lines += [_line(info) for info in infos]
    else:
        lines.append("no grant in force: every call that needs consent is asked about")
    return ToolResult(text="\n".join(lines), structured=output.model_dump())


def _plan(params: GrantsParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(lambda: grants_result(env.session_grants, params.revoke), inline=True)


GRANTS: Final = ToolSpec(
    name="oct_grants",
    title="List or revoke grants",
    description="List what a human allowed for this session; revoke=[ids] or ['all'] takes it back.",
    params=GrantsParams,
    output=GrantsOutput,
    risk=Risk.READ,
    plan=_plan,
)
