"""Protected-path check around a writable run: the walk before and the comparison after, against os.walk.

The subject: `snapshot_protected` before and `settle_protected_paths` after, as the sandbox runs
them around every writable run, over a project of 10,000 Python files in 500 folders with a git
repository (its objects included), CI workflows and an IDE folder. The reference, in the same run
on the same tree: two `os.walk`s listing it. Goal: ratio <= 3: the check costs about what listing
the tree twice costs, one readdir per folder and a stat only for protected entries.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from _common import Comparison, arguments, interleave, print_table

from oct_mcp.execution.protected_walk import settle_protected_paths, snapshot_protected

FOLDERS = 500
FILES_PER_FOLDER = 20


def _tree(root: Path) -> int:
    for number in range(FOLDERS):
        folder = root / f"pkg{number // 50}" / f"mod{number}"
        folder.mkdir(parents=True)
        for index in range(FILES_PER_FOLDER):
            (folder / f"f{index}.py").write_text("x = 1\n")
    git = [
        shutil.which("git") or "git",
        "-C",
        str(root),
        "-c",
        "user.name=Bench",
        "-c",
        "user.email=bench@example.invalid",
    ]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tree"], check=True)
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (root / ".vscode").mkdir()
    (root / ".vscode" / "settings.json").write_text("{}\n")
    return sum(len(files) for _, _, files in os.walk(root))


def time_check(root: Path) -> float:
    started = time.perf_counter()
    changes = settle_protected_paths(root, snapshot_protected(root))
    elapsed = time.perf_counter() - started
    if changes:
        raise RuntimeError("the benchmark's own tree reported protected changes")
    return elapsed


def time_listing(root: Path) -> float:
    started = time.perf_counter()
    for _ in range(2):
        for _folder, _subfolders, _files in os.walk(root):
            pass
    return time.perf_counter() - started


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=21)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch).resolve() / "project"
        files = _tree(root)
        time_check(root)
        time_listing(root)
        subject, reference = interleave(args.rounds, [lambda: time_check(root), lambda: time_listing(root)])
    comparison = Comparison(
        f"protected paths: walk before + compare after, {files} files / two os.walk",
        subject,
        reference,
        goal=3.0,
    )
    print_table([comparison], args.rounds)


if __name__ == "__main__":
    main()
