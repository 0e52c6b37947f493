"""The layer contract as a check a test can run: each layer of a chain calls `call_next` as `Middleware` says.

contract = LayerContract()
app = replace(app, chain=contract.check(app.chain))
...  # calls through the app
assert contract.broken == []
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from oct_mcp.chain import Chain, unreachable_endpoint
from oct_mcp.types import CallContext, CallNext, LayerType, Middleware, Outcome

__all__ = ["ContractBrokenError", "LayerContract"]


class ContractBrokenError(AssertionError):
    """A layer called `call_next` in a way the contract does not allow; the call goes no further."""


@dataclass
class LayerContract:
    """Holds the layers of a chain to the `call_next` rules of `Middleware`, call by call.

    Per call and layer: `call_next` at most once for the call itself; at most one preview step
    before it (`previewing=True` and `dry_run=True`), and only from a layer whose type provides
    `previewing`; never after the layer has returned. A break is recorded in `broken` and raised
    as `ContractBrokenError` where it happens, so nothing runs a second time. `previews` counts the
    preview steps taken, so a test can tell that it exercised one.
    """

    broken: list[str] = field(default_factory=list)
    previews: int = 0

    def check(
        self,
        chain: Chain,
        *,
        endpoint: CallNext | None = None,
        registry: Mapping[str, LayerType[Any]] | None = None,
    ) -> Chain:
        """`chain` with each link checked; `endpoint` where it has no terminal layer.

        Args:
            chain: A built chain (`build_chain`, or an app's `chain`).
            endpoint: What its innermost layer calls, when that layer is not terminal.
            registry: The layer types by name; None: the shipped and installed ones.
        """
        if registry is None:
            from oct_mcp.registry import layer_registry

            registry = layer_registry()
        call = endpoint if endpoint is not None else unreachable_endpoint
        for name, layer in reversed(list(zip(chain.layer_names, chain.layers, strict=True))):
            call = self._checked(name, layer, call, may_preview=registry[name].previews)
        return replace(chain, call=call)

    def _fail(self, message: str) -> ContractBrokenError:
        self.broken.append(message)
        return ContractBrokenError(message)

    def _checked(self, name: str, layer: Middleware, call_next: CallNext, *, may_preview: bool) -> CallNext:
        async def call(ctx: CallContext, /) -> Outcome:
            steps: list[str] = []
            returned = False

            async def checked_next(passed: CallContext, /) -> Outcome:
                if returned:
                    raise self._fail(f"{name} called call_next after it had returned")
                # A preview a layer above started is a call like any other to this one.
                preview = passed.previewing and not ctx.previewing
                if preview:
                    if not may_preview:
                        raise self._fail(f"{name} took a preview step, but it does not provide `previewing`")
                    if not passed.dry_run:
                        raise self._fail(f"{name} took a preview step that is not a dry run")
                    if steps:
                        raise self._fail(f"{name} took a preview step after {' and '.join(steps)}")
                    self.previews += 1
                elif "call" in steps:
                    raise self._fail(f"{name} called call_next twice for the call itself")
                steps.append("preview" if preview else "call")
                return await call_next(passed)

            try:
                return await layer(ctx, checked_next)
            finally:
                returned = True

        return call
