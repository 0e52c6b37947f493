"""Run every benchmark script in this folder, one after another, each printing its own table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
NOT_BENCHMARKS = {"run_all.py", "bare_server.py", "_common.py"}


def main() -> int:
    extra = sys.argv[1:]
    failed = 0
    for script in sorted(HERE.glob("*.py")):
        if script.name in NOT_BENCHMARKS:
            continue
        print(f"\n## {script.stem}\n", flush=True)
        failed += subprocess.run([sys.executable, str(script), *extra], cwd=HERE, check=False).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
