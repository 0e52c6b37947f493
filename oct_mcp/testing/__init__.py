"""A testing kit for layer authors: a recording `call_next`, a context factory and the layer contract
as a check (`LayerContract`; strategies: `.strategies`).

    from oct_mcp.testing import RecordingNext, make_context

    async def test_my_layer_passes_on() -> None:
        call_next = RecordingNext()
        await MyLayer()(make_context("oct_read_file", path="a.txt"), call_next)
        assert [ctx.tool for ctx in call_next.seen] == ["oct_read_file"]

The Hypothesis strategies in `oct_mcp.testing.strategies` need Hypothesis installed
(`pip install 'oct-mcp[testing]'`); this module does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from oct_mcp.testing.contract import ContractBrokenError, LayerContract
from oct_mcp.types import CallContext, ClientInfo, Outcome, ToolResult

if TYPE_CHECKING:
    from pydantic import BaseModel

    from oct_mcp.spec import ToolSpec
    from oct_mcp.workspace import Workspace

__all__ = [
    "TEST_CLIENT",
    "ContractBrokenError",
    "LayerContract",
    "RecordingNext",
    "make_context",
    "validated",
]

TEST_CLIENT: Final = ClientInfo(client_id="test", transport="memory")


def make_context(
    tool: str = "oct_read_file", workspace: Workspace | None = None, **arguments: object
) -> CallContext:
    """A context as the server builds it for one call of `tool` with `arguments`.

    Args:
        tool: The tool's name.
        workspace: The project root, as the gateway passes it on; None: as the call enters the chain.
        arguments: The call's arguments, as a host would send them.
    """
    return CallContext(
        tool=tool, arguments=arguments, client=TEST_CLIENT, call_id="call-1", workspace=workspace
    )


def validated(ctx: CallContext, spec: ToolSpec, params: BaseModel, *, confirmed: bool = False) -> CallContext:
    """`ctx` as the validator passes it on to the layers after it.

    Args:
        ctx: The call, as `make_context` builds it.
        spec: The tool that will run.
        params: The call's arguments, validated by `spec.params`.
        confirmed: The call carried `confirm=true`.

    Returns:
        `ctx` with `spec`, `params`, `confirmed` and the call's risk (`ToolSpec.risk_of`) written.
    """
    return replace(ctx, spec=spec, params=params, confirmed=confirmed, risk=spec.risk_of(params.model_dump()))


@dataclass
class RecordingNext:
    """The rest of the chain, for a layer under test: records each context it is called with.

    Returns `outcome`, or raises `error` when one is given. `seen` tells whether the layer
    passed the call on (and how many times: the contract allows once), and with what context.
    """

    outcome: Outcome = field(default_factory=lambda: ToolResult(text="next ran"))
    error: BaseException | None = None
    seen: list[CallContext] = field(default_factory=list)

    async def __call__(self, ctx: CallContext, /) -> Outcome:
        self.seen.append(ctx)
        if self.error is not None:
            raise self.error
        return self.outcome
