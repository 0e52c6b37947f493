"""The output schemas a client checks every page against: no reference to resolve, pages that pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client

from oct_mcp.app import build_app
from oct_mcp.server import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

PAGED = ("oct_list_files", "oct_search")


@pytest.fixture
def many_files(project: Path) -> Path:
    """The small project, with 1,500 more files that each hold a match."""
    for n in range(1500):
        folder = project / "many" / f"d{n % 30:02}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n:04}.txt").write_text(f"needle {n}\n")
    return project


async def test_paged_results_validate_against_output_schemas_that_name_no_reference(
    many_files: Path, config_file: Path
) -> None:
    app = build_app(many_files, config_path=config_file, environ={})
    pages: dict[str, list[Any]] = {}
    with anyio.fail_after(60):
        async with Client(build_server(app, transport="memory")) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            for tool, arguments in (("oct_list_files", {}), ("oct_search", {"pattern": "needle"})):
                pages[tool] = []
                call = dict(arguments)
                while True:
                    # The client checks each page against the listed schema, as Python hosts do.
                    result = await client.call_tool(tool, call)
                    assert result.is_error is False
                    pages[tool].append(result.structured_content)
                    assert result.structured_content is not None
                    cursor = result.structured_content.get("next_cursor")
                    if cursor is None:
                        break
                    call = {**arguments, "cursor": cursor}

    for tool in PAGED:
        schema = listed[tool].output_schema
        assert schema is not None
        # A `$ref` per entry is resolved again for every entry of every page by jsonschema's validators.
        assert "$ref" not in json.dumps(schema)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert len(pages[tool]) > 1
        for page in pages[tool]:
            jsonschema.Draft202012Validator(schema).validate(page)
    assert sum(len(page["files"]) for page in pages["oct_list_files"]) == 1500 + 4
    assert sum(len(page["matches"]) for page in pages["oct_search"]) == 1500
