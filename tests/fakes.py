"""Fakes at the chain's boundary only: RecordingNext stands in for the rest of the chain."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from oct_mcp.context import CallContext, ClientInfo, Outcome, ToolResult
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.tools import default_catalog
from oct_mcp.workspace import Workspace

TEST_CLIENT = ClientInfo(client_id="test", transport="memory")


def make_context(
    tool: str = "oct_read_file", workspace: Workspace | None = None, **arguments: object
) -> CallContext:
    """A context as the server builds it; with `workspace`, as the gateway passes it on."""
    return CallContext(
        tool=tool, arguments=arguments, client=TEST_CLIENT, call_id="call-1", workspace=workspace
    )


@dataclass
class RecordingNext:
    """Records each context it is called with; returns `outcome` or raises `error`."""

    outcome: Outcome = field(default_factory=lambda: ToolResult(text="next ran"))
    error: BaseException | None = None
    seen: list[CallContext] = field(default_factory=list)

    async def __call__(self, ctx: CallContext, /) -> Outcome:
        self.seen.append(ctx)
        if self.error is not None:
            raise self.error
        return self.outcome


class WriteFileParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    path: ProjectPath
    content: Annotated[str, StringConstraints(max_length=65_536)] = ""
    dry_run: bool | None = None
    confirm: bool = False


def _write_file(params: WriteFileParams, env: ToolEnv) -> InProcessPlan:
    def write() -> ToolResult:
        target = env.workspace.contain(params.path)
        # Its own dry_run field when given, else the gate's decision.
        if params.dry_run if params.dry_run is not None else env.dry_run:
            return ToolResult(text=f"would write {env.workspace.relative(target)}")
        target.write_text(params.content)
        return ToolResult(text=f"wrote {env.workspace.relative(target)}")

    return InProcessPlan(write)


WRITE_TOOL = ToolSpec(
    name="test_write_file",
    title="Write a file (tests only)",
    description="A write tool for tests, until the catalog has its own.",
    params=WriteFileParams,
    output=None,
    risk=Risk.WRITE,
    plan=_write_file,
    idempotent=False,
)


def catalog_with_write_tool() -> dict[str, ToolSpec]:
    return {**default_catalog(), WRITE_TOOL.name: WRITE_TOOL}
