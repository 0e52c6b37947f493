"""Chain alone: microseconds per call through every layer of the default profile, no transport.

Goal: <= 25 us per call. The subject is `run_call` on the default chain built by `build_app`: an
audit line to a file, the real rate limiter, validation (a path argument contained in the
project), policy, the safety gate, redaction of 1 KiB of output, and the sandbox running the
tool's in-process plan inline, as it runs oct_read_file on a small file. The reference is the
same loop calling `run_call` on a chain of as many no-op layers (linked by `compose`) around an
endpoint that calls the same function.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import anyio
from _common import PerCall, arguments, interleave_async, print_table
from pydantic import BaseModel, ConfigDict

from oct_mcp.app import App, build_app, run_call
from oct_mcp.chain import Chain, compose
from oct_mcp.diagnostics import configure_diagnostics
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.types import CallContext, CallNext, ClientInfo, Outcome, ToolResult

CALLS_PER_ROUND: Final = 2_000
RATE_LIMIT: Final = 10_000
TOOL: Final = "bench_answer"
ARGUMENTS: Final = {"path": "src/app.py"}
_LINES: Final = (
    "tests/test_models.py::test_load_reads_the_whole_file PASSED                 [ 12%]\n"
    "src/app/models.py:42:5: E501 line too long (121 > 110 characters)\n"
    "2024-05-01T12:00:03Z INFO worker started pid=4242 queue=default retries=3\n"
    "    def load(self, path: str) -> dict[str, Any]:  # reads the settings file\n"
    "commit 3f2a9c1 Author: Dev Example <dev@example.org> Date: Mon May 6 10:12\n"
)
OUTPUT: Final = (_LINES * (1024 // len(_LINES) + 1))[:1024]
"""1 KiB of ordinary tool output (test results, lint, logs, code, git), no secret in it."""


class AnswerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    path: ProjectPath


def answer() -> ToolResult:
    """The endpoint's work, the same in both chains: 1 KiB of text."""
    return ToolResult(text=OUTPUT)


def _plan(params: AnswerParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(answer, inline=True)


SPEC: Final = ToolSpec(
    name=TOOL,
    title="Answer 1 KiB",
    description="Answers 1 KiB of text; a benchmark's tool.",
    params=AnswerParams,
    output=None,
    risk=Risk.READ,
    plan=_plan,
)


@dataclass(frozen=True, slots=True)
class NoOp:
    """A layer that passes every call on unchanged."""

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        return await call_next(ctx)


async def _endpoint(ctx: CallContext, /) -> Outcome:
    return answer()


def no_op_app(app: App) -> App:
    """`app` with its chain replaced by as many no-op layers around `answer`."""
    layers = tuple(NoOp() for _ in app.chain.layers)
    chain = Chain(
        profile="no-op",
        layer_names=tuple(f"no-op-{index}" for index in range(len(layers))),
        layers=layers,
        call=compose(layers, _endpoint),
    )
    return replace(app, chain=chain)


async def _round(app: App, clients: tuple[ClientInfo, ...]) -> float:
    started = time.perf_counter()
    for index in range(CALLS_PER_ROUND):
        outcome = await run_call(app, TOOL, ARGUMENTS, clients[index % len(clients)])
        if not isinstance(outcome, ToolResult) or outcome.is_error:
            raise RuntimeError(f"the call did not answer: {outcome}")
    return (time.perf_counter() - started) / CALLS_PER_ROUND


def _clients(rounds: int) -> tuple[ClientInfo, ...]:
    """Enough client ids that none reaches the rate limit during the run (each stays under half)."""
    calls = (rounds + 1) * CALLS_PER_ROUND
    count = calls // (RATE_LIMIT // 2) + 1
    return tuple(ClientInfo(client_id=f"bench-{index}", transport="memory") for index in range(count))


def build(project: Path) -> App:
    """The default chain over `project`, auditing to a file there, serving the benchmark's tool."""
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("print('hello')\n")
    config = project / "config.json"
    config.write_text(
        json.dumps({"audit_log_path": str(project / "audit.log"), "rate_limit_per_minute": RATE_LIMIT})
    )
    return build_app(project, config_path=config, environ={}, catalog={TOOL: SPEC})


async def _measure(rounds: int, project: Path) -> tuple[list[float], list[float], int]:
    app = build(project)
    reference_app = no_op_app(app)
    clients = _clients(rounds)
    try:
        await _round(app, clients)  # warm-up: the redaction automaton, the thread pool, the log file
        await _round(reference_app, clients)
        chain, reference = await interleave_async(
            rounds, [lambda: _round(app, clients), lambda: _round(reference_app, clients)]
        )
        if app.audit is not None and app.audit.writer.failure is not None:
            raise RuntimeError(f"the audit log failed: {app.audit.writer.failure}")
    finally:
        app.close()
    return chain, reference, len(app.chain.layers)


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    # As `oct-mcp serve` does at its default level: diagnostics on the path cost what they cost there.
    configure_diagnostics(1)
    with tempfile.TemporaryDirectory() as temp:
        chain, reference, layers = anyio.run(_measure, args.rounds, Path(temp).resolve())
    print_table(
        [PerCall(f"chain alone: per call, all {layers} layers vs {layers} no-op", chain, reference, 25)],
        args.rounds,
    )
    extra = (statistics.median(chain) - statistics.median(reference)) * 1e6
    print(f"the layers add {extra:.1f} us per call over {layers} no-op layers")


if __name__ == "__main__":
    main()
