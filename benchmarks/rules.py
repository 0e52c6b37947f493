"""Rules over arguments: microseconds a call spends in the policy layer with 50 rules, beside none.

Goal: 50 rules add <= 5 us a call. The subject is the policy layer of the default profile built with
50 rules (30 over paths for every tool, 10 over a run's argv, 10 over git refs) judging an
`oct_read_file` call that no rule matches, so every rule that can apply is tried: the call's facts
(its path as named and as the validator resolved it), then each rule. The reference is the same
layer built with no rules, on the same call. Both call a no-op next layer.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import anyio
from _common import PerCall, arguments, interleave_async, print_table

from oct_mcp.app import build_app
from oct_mcp.diagnostics import configure_diagnostics
from oct_mcp.middleware.policy import PolicyEngine
from oct_mcp.middleware.validator import validate_and_resolve
from oct_mcp.types import CallContext, ClientInfo, Outcome, ToolResult

CALLS_PER_ROUND: Final = 2_000
GOAL_US: Final = 5.0
TOOL: Final = "oct_read_file"
ARGUMENTS: Final = {"path": "src/app/models.py"}
_ANSWER: Final = ToolResult(text="ok")


def fifty_rules() -> list[dict[str, Any]]:
    paths = [
        {"effect": "deny", "when": {"paths": [f"secrets{i}/", f"*.key{i}"]}, "reason": f"path rule {i}"}
        for i in range(30)
    ]
    runs = [
        {"effect": "ask", "tools": ["oct_run"], "when": {"argv": {"prefix": [f"tool{i}"]}}, "reason": "run"}
        for i in range(10)
    ]
    refs = [
        {"effect": "deny", "tools": ["oct_git_switch"], "when": {"ref": [f"release-{i}/*"]}, "reason": "ref"}
        for i in range(10)
    ]
    return paths + runs + refs


async def _next(ctx: CallContext, /) -> Outcome:
    return _ANSWER


def _engine(project: Path, rules: list[dict[str, Any]], name: str) -> tuple[PolicyEngine, CallContext]:
    config = project / f"{name}.json"
    config.write_text(json.dumps({"audit_log_path": str(project / f"{name}.log"), "rules": rules}))
    app = build_app(project, config_path=config, environ={})
    engine = next(layer for layer in app.chain.layers if isinstance(layer, PolicyEngine))
    app.close()
    spec = app.catalog[TOOL]
    params, resolved = validate_and_resolve(spec, ARGUMENTS, app.workspace)
    ctx = CallContext(
        tool=TOOL,
        arguments=ARGUMENTS,
        client=ClientInfo(client_id="bench", transport="memory"),
        call_id="bench",
        workspace=app.workspace,
        spec=spec,
        params=params,
        resolved_paths=resolved,
    )
    return engine, ctx


async def _round(engine: PolicyEngine, ctx: CallContext) -> float:
    started = time.perf_counter()
    for _ in range(CALLS_PER_ROUND):
        await engine(ctx, _next)
    return (time.perf_counter() - started) / CALLS_PER_ROUND


async def _measure(rounds: int, project: Path) -> tuple[list[float], list[float]]:
    (project / "src" / "app").mkdir(parents=True)
    (project / "src" / "app" / "models.py").write_text("x = 1\n")
    ruled, ctx = _engine(project, fifty_rules(), "ruled")
    bare, _ = _engine(project, [], "bare")
    if len(ruled.rules.rules) != 50 or bare.rules:
        raise RuntimeError("the layers were not built with 50 rules and none")
    await _round(ruled, ctx)
    await _round(bare, ctx)
    subject, reference = await interleave_async(
        rounds, [lambda: _round(ruled, ctx), lambda: _round(bare, ctx)]
    )
    return subject, reference


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    configure_diagnostics(1)
    with tempfile.TemporaryDirectory() as temp:
        subject, reference = anyio.run(_measure, args.rounds, Path(temp).resolve())
    extra = statistics.median(s - r for s, r in zip(subject, reference, strict=True)) * 1e6
    # The goal is on what the rules add: the reference plus the goal is the subject's bound.
    bound = statistics.median(reference) * 1e6 + GOAL_US
    print_table([PerCall("policy layer per call, 50 rules vs none", subject, reference, bound)], args.rounds)
    verdict = "met" if extra <= GOAL_US else "MISSED"
    print(f"50 rules add {extra:.2f} us per call (goal <= {GOAL_US:g} us): {verdict}")


if __name__ == "__main__":
    main()
