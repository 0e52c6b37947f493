"""A dry run of oct_format and oct_fix is paged: cut at a file or hunk, the rest by offset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import Accept, oct_server, only_text, own_tools_path
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("oct_format", {"apply": False}), ("oct_fix", {"dry_run": True, "select": ["F401"]})],
)
async def test_a_long_dry_run_diff_pages_to_its_end_and_the_pages_make_the_whole(
    tmp_path: Path, config_file: Path, tool: str, arguments: dict[str, Any]
) -> None:
    project = (tmp_path / "project").resolve()
    project.mkdir()
    for number in range(40):
        # Each file needs formatting and has an unused import to fix.
        (project / f"m{number:02d}.py").write_text(
            "import os\n" + "".join(f"value_{n}=[{n},{n} ,{n}]\n" for n in range(10))
        )
    path = own_tools_path()
    pages: list[types.CallToolResult] = []
    with anyio.fail_after(180):
        async with Client(
            oct_server(project, config_file, env={"PATH": path}), elicitation_callback=Accept()
        ) as client:
            whole = await client.call_tool(tool, arguments)
            offset: int | None = 0
            while offset is not None and len(pages) < 50:
                pages.append(await client.call_tool(tool, {**arguments, "offset": offset, "max_chars": 2000}))
                offset = (pages[-1].structured_content or {})["next_offset"]

    assert whole.is_error is False, only_text(whole)
    assert (whole.structured_content or {})["next_offset"] is None
    assert all(not page.is_error for page in pages), [only_text(page)[:300] for page in pages]
    assert len(pages) > 2
    assert all(len(json.dumps(page.structured_content)) <= 2000 for page in pages)
    # Every page starts at a file's or a hunk's header, and together they are the whole diff.
    diffs = [(page.structured_content or {})["diff"] for page in pages]
    assert all(diff.startswith(("--- ", "@@ ")) for diff in diffs[1:])
    assert "".join(diffs) == (whole.structured_content or {})["diff"]
    assert "the rest with offset=" in only_text(pages[0])
    assert (pages[0].structured_content or {})["changed_files"] == [f"m{n:02d}.py" for n in range(40)]
