"""What git shows of a committed secret, redacted with the whole file as context, over stdio, on each backend.

A hunk or a blame range alone may hold the body of a private key without its BEGIN line, and git's
hunk header names a line above the hunk (its function context): each is masked as a read of the
whole file masks it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import oct_server
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from git_repos import git, new_repo
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BACKENDS = ("bubblewrap", "landlock", "native")


@pytest.fixture(scope="module")
def key_lines() -> list[str]:
    """A real RSA private key in PEM, line by line."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode().splitlines()


def _shown(result: types.CallToolResult) -> str:
    texts = [item.text for item in result.content if isinstance(item, types.TextContent)]
    return "\n".join(texts) + json.dumps(result.structured_content)


def _leaked(result: types.CallToolResult, secret_lines: list[str]) -> list[str]:
    shown = _shown(result)
    return [line for line in secret_lines if line[:16] in shown or line[-16:] in shown]


@pytest.fixture
def keyed_repo(tmp_path: Path, key_lines: list[str]) -> tuple[Path, list[str]]:
    """A repository whose `deploy/keys.txt` holds a private key (lines 3 to 3 + len), committed twice:
    the second commit changes a line of its body and the line after its END; the work tree and
    the index change another body line each."""
    root = new_repo(tmp_path)
    (root / "deploy").mkdir()
    keys = root / "deploy" / "keys.txt"
    lines = ["# deploy key", "", *key_lines, "trailer", "more", "end"]
    keys.write_text("\n".join(lines) + "\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Add the deploy key")
    rotated = list(lines)
    rotated[12] = rotated[12][::-1]
    rotated[2 + len(key_lines)] = "trailer, changed"
    keys.write_text("\n".join(rotated) + "\n")
    git(root, "commit", "-q", "-am", "Rotate part of the key")
    staged = list(rotated)
    staged[8] = staged[8][::-1]
    keys.write_text("\n".join(staged) + "\n")
    git(root, "add", "-A")
    unstaged = list(staged)
    unstaged[20] = unstaged[20][::-1]
    keys.write_text("\n".join(unstaged) + "\n")
    body = [
        line for version in (lines, rotated, staged, unstaged) for line in version[3 : 1 + len(key_lines)]
    ]
    return root, sorted(set(body))


CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("oct_git_blame", {"path": "deploy/keys.txt", "start_line": 6, "end_line": 12}),
    ("oct_git_blame", {"path": "deploy/keys.txt", "start_line": 4}),
    ("oct_git_blame", {"path": "deploy/keys.txt", "start_line": 9, "commit": "HEAD~1"}),
    ("oct_git_show", {"context_lines": 0}),
    ("oct_git_show", {}),
    ("oct_git_show", {"commit": "HEAD~1", "context_lines": 0}),
    ("oct_git_diff", {"context_lines": 0}),
    ("oct_git_diff", {}),
    ("oct_git_diff", {"staged": True, "context_lines": 0}),
    ("oct_git_diff", {"staged": True}),
    ("oct_git_diff", {"base": "HEAD~1", "target": "HEAD", "context_lines": 0}),
    ("oct_git_diff", {"base": "HEAD~1", "context_lines": 1}),
    ("oct_git_diff", {"base": "HEAD~1", "stat": True}),
    # Changes git would make, asked about (never confirmed here): a dry run asks nobody.
    ("oct_git_add", {"paths": ["deploy/keys.txt"], "dry_run": False}),
    ("oct_git_commit", {"message": "Rotate more", "dry_run": False}),
    ("oct_git_restore", {"paths": ["deploy/keys.txt"], "dry_run": False}),
)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_no_git_read_shows_a_line_of_a_committed_private_key(
    keyed_repo: tuple[Path, list[str]], config_file: Path, backend: str
) -> None:
    root, body = keyed_repo
    config_file.write_text(json.dumps({"sandbox_backend": backend, "allow_unconfined_project_code": True}))
    # A home whose git config names someone: a commit's preview asks for a name.
    home = root.parent / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.invalid\n")
    results = []
    with anyio.fail_after(120):
        async with Client(oct_server(root, config_file, env={"HOME": str(home)})) as client:
            for name, arguments in CALLS:
                results.append((name, arguments, await client.call_tool(name, arguments)))

    # The changes git would make ask first: their question shows the diff, and nothing runs.
    answered = [(name, arguments) for name, arguments, result in results if not result.is_error]
    assert answered == [(name, arguments) for name, arguments in CALLS if "dry_run" not in arguments]
    assert [(name, arguments) for name, arguments, result in results if _leaked(result, body)] == []
    blame = results[0][2].structured_content
    assert blame is not None
    assert [line["text"] for line in blame["lines"]] == ["[REDACTED:private_key]"] * 7
    show = results[3][2].structured_content
    assert show is not None
    assert "[REDACTED:private_key]" in show["diff"]
    assert all("[REDACTED:private_key]" in _shown(result) for _, _, result in results[-3:])
