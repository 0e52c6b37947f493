"""The consent question's diff: read by its hunks and escaped, against making the diff, and the table.

Subject 1: `shown_diff` over a large preview's diff (every line of an 8,000-line file
rewritten, some with a hidden character: about 760 KiB), as every question renders it.
Reference, in the same run on the same text: `unified_diff`, which made that diff. Goal: ratio
<= 1.5: showing a change costs about what computing it costs.

Subject 2: `configures_code` over 10,000 project paths (the table of every ecosystem and the
protected rules). Reference: the Python-only check it replaces (a set of nine names, `.pth`,
the venv folders), on the same paths. Goal: ratio <= 6: microseconds a file, a few files a
question.
"""

from __future__ import annotations

import time

from _common import Comparison, arguments, interleave, print_table

from oct_mcp.code_config import configures_code
from oct_mcp.diff_view import shown_diff
from oct_mcp.tools._text.diffs import unified_diff

LINES = 8_000
_PYTHON_ONLY = frozenset(
    {
        "conftest.py",
        "pyproject.toml",
        "setup.cfg",
        "setup.py",
        "tox.ini",
        "noxfile.py",
        "pytest.ini",
        "sitecustomize.py",
        "usercustomize.py",
    }
)
_VENVS = frozenset({".venv", "venv"})


def _python_only(relative: str) -> bool:
    parts = relative.split("/")
    name = parts[-1].casefold()
    return name in _PYTHON_ONLY or name.endswith(".pth") or any(p.casefold() in _VENVS for p in parts[:-1])


def _texts() -> tuple[str, str]:
    old = "".join(f"value_{n} = compute({n}, 'text of line {n}')\n" for n in range(LINES))
    new = "".join(
        f"value_{n} = compute({n + 1}, 'text of line {n}{chr(0x202E) if n % 500 == 0 else ''}')\n"
        for n in range(LINES)
    )
    return old, new


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=15)
    old, new = _texts()
    diff = unified_diff(old, new, "a/values.py", "b/values.py").text
    paths = [f"src/pkg{n % 50}/module_{n}.py" for n in range(9_000)]
    paths += [f"packages/app{n}/package.json" for n in range(1_000)]

    def time_shown() -> float:
        started = time.perf_counter()
        shown_diff(diff)
        return time.perf_counter() - started

    def time_made() -> float:
        started = time.perf_counter()
        unified_diff(old, new, "a/values.py", "b/values.py")
        return time.perf_counter() - started

    def time_table() -> float:
        started = time.perf_counter()
        for path in paths:
            configures_code(path)
        return time.perf_counter() - started

    def time_python_only() -> float:
        started = time.perf_counter()
        for path in paths:
            _python_only(path)
        return time.perf_counter() - started

    measures = [time_shown, time_made, time_table, time_python_only]
    shown, made, table, python_only = interleave(args.rounds, measures)
    print_table(
        [
            Comparison(
                f"question diff: shown_diff / unified_diff ({len(diff) // 1024} KiB)", shown, made, 1.5
            ),
            Comparison(
                f"configures_code, every ecosystem / Python only, {len(paths)} paths", table, python_only, 6.0
            ),
        ],
        args.rounds,
    )


if __name__ == "__main__":
    main()
