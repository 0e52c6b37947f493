"""Fakes at the boundaries STYLE.md names: RecordingNext stands in for the rest of the chain."""

from __future__ import annotations

from dataclasses import dataclass, field

from oct_mcp.context import CallContext, ClientInfo, Outcome, ToolResult
from oct_mcp.workspace import Workspace

TEST_CLIENT = ClientInfo(client_id="test", transport="memory")


def make_context(
    tool: str = "oct_read_file", workspace: Workspace | None = None, **arguments: object
) -> CallContext:
    """A context as the server builds it, before any layer has run (or after the gateway, with `workspace`)."""
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
