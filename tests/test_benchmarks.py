"""Each benchmark script runs: a smoke test of one round, never a timed assertion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
SCRIPTS = sorted(
    p for p in BENCHMARKS.glob("*.py") if p.name not in {"run_all.py", "bare_server.py", "_common.py"}
)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_benchmark_script_runs_one_round_and_prints_its_ratio(script: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(script), "--rounds", "1"],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    assert "| ratio |" in completed.stdout
