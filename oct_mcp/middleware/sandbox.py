"""ExecutionSandbox (Layer 4): the terminal layer, which runs a tool's plan within time and output limits."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Final

import anyio
from pydantic import BaseModel, ConfigDict

from oct_mcp.chain import CallNext, LayerRuntime, LayerType
from oct_mcp.context import CallContext, Outcome, ToolResult
from oct_mcp.errors import ToolTimeoutError
from oct_mcp.spec import InProcessPlan, ToolEnv

__all__ = ["LAYER", "ExecutionSandbox", "SandboxSettings", "cap_output"]

TRUNCATION_NOTE: Final = "\n[oct-mcp: output truncated at {limit} bytes (max_output_bytes)]"


class SandboxSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def cap_output(result: ToolResult, limit: int) -> ToolResult:
    """Cut the result's text to at most `limit` UTF-8 bytes, on a character boundary.

    Args:
        result: What the tool answered.
        limit: `max_output_bytes`.

    Returns:
        The result unchanged when it fits; else cut, marked `truncated`, with a note saying so.
    """
    encoded = result.text.encode("utf-8")
    if len(encoded) <= limit:
        return result
    note = TRUNCATION_NOTE.format(limit=limit)
    room = max(limit - len(note.encode("utf-8")), 0)
    # errors="ignore" drops the partial character a byte cut can leave at the end.
    text = encoded[:room].decode("utf-8", errors="ignore") + note
    return replace(result, text=text, truncated=True)


@dataclass(frozen=True, slots=True)
class ExecutionSandbox:
    """Run the validated tool's plan.

    Reads `ctx.workspace`, `ctx.spec`, `ctx.params`. Never calls `call_next`: it always answers.
    Raises `ToolTimeoutError` past `timeout_default_seconds`, and what the tool raises.
    """

    max_output_bytes: int
    timeout_seconds: float

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        if ctx.spec is None or ctx.params is None or ctx.workspace is None:
            # build_chain refuses a profile without the gateway and validator before this layer.
            raise RuntimeError("the sandbox layer was reached without validated params")
        env = ToolEnv(workspace=ctx.workspace, max_output_bytes=self.max_output_bytes, dry_run=ctx.dry_run)
        plan = ctx.spec.plan(ctx.params, env)
        started = time.perf_counter()
        result = await self._run(plan)
        return replace(
            cap_output(result, self.max_output_bytes),
            duration_seconds=time.perf_counter() - started,
        )

    async def _run(self, plan: InProcessPlan) -> ToolResult:
        with anyio.move_on_after(self.timeout_seconds):
            # abandon_on_cancel: a timed-out read cannot be interrupted, but the call must
            # still return; the worker thread ends by itself when its read completes.
            return await anyio.to_thread.run_sync(plan.function, abandon_on_cancel=True)
        raise ToolTimeoutError(
            f"the tool ran past its limit of {self.timeout_seconds:g} s (timeout_default_seconds)"
        )


def _build(settings: SandboxSettings, runtime: LayerRuntime) -> ExecutionSandbox:
    return ExecutionSandbox(
        max_output_bytes=runtime.config.max_output_bytes,
        timeout_seconds=runtime.config.timeout_default_seconds,
    )


LAYER: Final = LayerType(
    name="sandbox",
    settings=SandboxSettings,
    build=_build,
    requires=frozenset({"workspace", "spec", "params"}),
    terminal=True,
)
