"""oct_search and oct_list_files give what ripgrep gives on a tree with nested .gitignore files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from trees import write

from oct_mcp.tools.files import ListFilesParams, list_files
from oct_mcp.tools.search import SearchParams, search
from oct_mcp.workspace import Workspace

RG = shutil.which("rg", path=str(Path(sys.executable).parent)) or shutil.which("rg")
pytestmark = [
    pytest.mark.skipif(RG is None, reason="ripgrep is not installed (the dev extra has it)"),
    pytest.mark.e2e,
]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = (tmp_path / "tree").resolve()
    files: dict[str, str | bytes] = {
        ".gitignore": "*.log\nbuild/\n!keep.log\n",
        "keep.log": "needle kept\n",
        "drop.log": "needle dropped\n",
        "build/out.py": "needle built\n",
        "src/.gitignore": "generated/\n*.tmp\n",
        "src/a.py": "needle = 1\nother\n",
        "src/b.tmp": "needle tmp\n",
        "src/generated/g.py": "needle generated\n",
        "src/deep/.gitignore": "!b.tmp\nsecret/\n",
        "src/deep/b.tmp": "needle re-included\n",
        "src/deep/secret/s.py": "needle secret\n",
        "src/deep/c.py": "no match\n",
        "docs/readme.md": "a needle in docs\n",
    }
    for n in range(40):
        files[f"pkg{n % 4}/m{n:02}.py"] = "needle\n" if n % 3 == 0 else "nothing\n"
    write(root, files)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def rg(root: Path, *arguments: str) -> list[str]:
    assert RG is not None
    completed = subprocess.run(
        [RG, "--hidden", "--glob", "!.git", *arguments], cwd=root, capture_output=True, check=False
    )
    return sorted(completed.stdout.decode().splitlines())


def test_list_files_lists_what_rg_files_lists(tree: Path) -> None:
    result = list_files(Workspace(tree), ListFilesParams(max_results=10_000))

    assert result.structured is not None
    assert sorted(result.structured["files"]) == rg(tree, "--files")


def test_search_finds_the_lines_rg_finds(tree: Path) -> None:
    result = search(Workspace(tree), SearchParams(pattern="needle", max_results=2_000))

    assert result.structured is not None
    found = sorted(f"{m['path']}:{m['line']}:{m['text']}" for m in result.structured["matches"])
    assert found == rg(tree, "--no-heading", "--line-number", "needle")
