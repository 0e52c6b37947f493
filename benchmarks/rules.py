"""Rules over arguments: microseconds a call spends in the policy layer with 50 rules, beside none,
and what the deny rules over paths cost a 1,000-entry listing page, which leaves out what they cover.

Goal: 50 rules add <= 5 us a call. The subject is the policy layer of the default profile built with
50 rules (30 over paths for every tool, 10 over a run's argv, 10 over git refs) judging an
`oct_read_file` call that no rule matches, so every rule that can apply is tried: the call's facts
(its path as named and as the validator resolved it), then each rule. The reference is the same
layer built with no rules, on the same call. Both call a no-op next layer.

Goal: <= 1.1x a listing page. The subject is `oct_list_files`' first page (1,000 entries at most,
within the largest budget, 40,000 characters: the count is printed) of Django 5.1.4's sdist (the
tree `client_paging.py` downloads and checks; a generated stand-in where it is not in the cache),
leaving out the paths the same 50 rules withhold from the call, each entry screened against their
60 globs; the reference is the same page with no rules. In the server's process, the tool alone:
the client's hop is the same for both.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import anyio
from _common import Comparison, PerCall, arguments, interleave, interleave_async, print_table
from client_paging import generated, sdist, unpacked

from oct_mcp.app import build_app
from oct_mcp.diagnostics import configure_diagnostics
from oct_mcp.middleware.policy import PolicyEngine
from oct_mcp.middleware.validator import validate_and_resolve
from oct_mcp.rules import CallFacts
from oct_mcp.tools.files import ListFilesParams, list_files
from oct_mcp.types import CallContext, ClientInfo, Outcome, ToolResult, WithheldPaths
from oct_mcp.workspace import Workspace

CALLS_PER_ROUND: Final = 2_000
GOAL_US: Final = 5.0
PAGE_GOAL: Final = 1.1
PAGE: Final = ListFilesParams(path=".", max_results=1_000, max_chars=40_000)
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
        risk=spec.risk_of(params.model_dump()),
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


def _page(workspace: Workspace, withheld: WithheldPaths | None) -> float:
    started = time.perf_counter()
    result = list_files(workspace, PAGE, withheld)
    elapsed = time.perf_counter() - started
    if result.is_error or not result.truncated:
        raise RuntimeError("the listing did not fill a page")
    return elapsed


def _pages(rounds: int, project: Path, tree: Path) -> tuple[list[float], list[float]]:
    ruled, _ = _engine(project, fifty_rules(), "listing")
    workspace = Workspace(root=tree)
    withheld = ruled.rules.withheld_from(CallFacts(tool="oct_list_files", risk="read", paths=(".",)))
    if withheld is None:
        raise RuntimeError("the 50 rules withhold nothing from a listing")
    _page(workspace, withheld)
    shown = list_files(workspace, PAGE, None).structured or {}
    print(f"page: {len(shown.get('files', ()))} entries")
    subject, reference = interleave(
        rounds, [lambda: _page(workspace, withheld), lambda: _page(workspace, None)]
    )
    return subject, reference


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    configure_diagnostics(1)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "oct-mcp-bench" / "sdists"
    archive = sdist(cache, download=args.rounds > 1)
    with tempfile.TemporaryDirectory() as temp:
        subject, reference = anyio.run(_measure, args.rounds, Path(temp).resolve())
        tree = unpacked(archive, Path(temp) / "tree") if archive else generated(Path(temp) / "tree")
        print(
            f"tree: {tree.name if archive else 'generated stand-in (the Django sdist is not in the cache)'}"
        )
        page_subject, page_reference = _pages(args.rounds, Path(temp).resolve(), tree.resolve())
    extra = statistics.median(s - r for s, r in zip(subject, reference, strict=True)) * 1e6
    # The goal is on what the rules add: the reference plus the goal is the subject's bound.
    bound = statistics.median(reference) * 1e6 + GOAL_US
    print_table(
        [
            PerCall("policy layer per call, 50 rules vs none", subject, reference, bound),
            Comparison(
                "listing page, 50 rules withholding vs none",
                page_subject,
                page_reference,
                PAGE_GOAL,
            ),
        ],
        args.rounds,
    )
    verdict = "met" if extra <= GOAL_US else "MISSED"
    print(f"50 rules add {extra:.2f} us per call (goal <= {GOAL_US:g} us): {verdict}")


if __name__ == "__main__":
    main()
