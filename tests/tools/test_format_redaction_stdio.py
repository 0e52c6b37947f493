"""ruff's diffs (oct_format and oct_fix as dry runs) masked with the whole file as context, over stdio."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from clients import oct_server, own_tools_path
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _key_lines() -> list[str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode().splitlines()


def _shown(result: types.CallToolResult) -> str:
    texts = [item.text for item in result.content if isinstance(item, types.TextContent)]
    return "\n".join(texts) + json.dumps(result.structured_content)


async def test_a_format_or_fix_diff_next_to_a_private_key_shows_no_line_of_it(
    tmp_path: Path, config_file: Path
) -> None:
    key = _key_lines()
    body = key[1:-1]
    project = (tmp_path / "project").resolve()
    project.mkdir()
    # ruff would reformat the line after the key, and (a fix) drop the unused import after it.
    (project / "settings.py").write_text('KEY = """' + "\n".join(key) + '"""\nx=1\nimport os\n')
    # ruff as the test's own environment has it.
    path = own_tools_path()
    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file, env={"PATH": path})) as client:
            formatted = await client.call_tool("oct_format", {"apply": False})
            fixed = await client.call_tool("oct_fix", {"dry_run": True, "select": ["F401"]})

    # Each asks first (a write tool's dry run under the default profile): the question shows the diff.
    for result in (formatted, fixed):
        shown = _shown(result)
        assert "+x = 1" in shown or "-import os" in shown, shown
        assert [line for line in body if line[:16] in shown or line[-16:] in shown] == []
        assert "[REDACTED:private_key]" in shown
