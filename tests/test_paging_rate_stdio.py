"""Paging to the end through a real client under the default rate limit: pages are not calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import oct_server, only_text
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _project(root: Path) -> Path:
    """7,000 files in 70 folders, 1,300 of them with a line the search finds."""
    for folder in range(70):
        (root / f"pkg{folder:02d}").mkdir(parents=True)
        for index in range(100):
            number = folder * 100 + index
            text = f"value = {number}\n" + ("# marker here\n" if number < 1_300 else "")
            (root / f"pkg{folder:02d}" / f"module_{index:03d}.py").write_text(text)
    return root


async def _to_the_end(client: Client, tool: str, arguments: dict[str, Any], key: str) -> tuple[int, int]:
    """Pages of `tool` followed by next_cursor to the end: (pages, entries)."""
    pages = entries = 0
    cursor = None
    while True:
        result = await client.call_tool(tool, {**arguments, **({"cursor": cursor} if cursor else {})})
        assert result.is_error is False, only_text(result)
        assert result.structured_content is not None
        pages += 1
        entries += len(result.structured_content[key])
        cursor = result.structured_content.get("next_cursor")
        if cursor is None:
            return pages, entries


async def test_a_listing_and_a_search_paged_to_their_ends_are_never_rate_limited(
    tmp_path: Path, config_file: Path
) -> None:
    project = _project(tmp_path / "project")
    config_file.write_text(
        json.dumps({"audit_log_path": str(tmp_path / "audit.jsonl")})
    )  # default: 30 a minute

    with anyio.fail_after(600):
        async with Client(oct_server(project, config_file), mode="auto") as client:
            listing = await _to_the_end(client, "oct_list_files", {"max_chars": 4_000}, "files")
            search = await _to_the_end(
                client, "oct_search", {"pattern": "marker", "max_chars": 4_000}, "matches"
            )
            made_up = [
                await client.call_tool("oct_list_files", {"max_chars": 4_000, "offset": offset})
                for offset in range(1, 40)
            ]

    assert listing[1] == 7_000
    assert search[1] == 1_300
    assert listing[0] + search[0] > 60
    # Offsets nobody was offered are calls like any other: the limit holds.
    assert [only_text(r).split("]")[0] for r in made_up if r.is_error] != []
    assert all(only_text(r).startswith("[rate_limited]") for r in made_up if r.is_error)
