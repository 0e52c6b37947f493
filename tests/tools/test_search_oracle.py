"""No answer of oct_search depends on a masked value: two projects that differ only in a secret's value
get the same answers, in every mode, for patterns written to tell them apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import oct_server
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client

from oct_mcp.tools.search import SearchParams, search
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.e2e

# Two values of the same secret, with as little in common as can be: first and last characters,
# character classes, length kept.
PASSWORDS = ("aQ3vL7pR4wZk9mQ2", "Zx8#Tn1_Yb6-Hc5j")


def _key() -> list[str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode().splitlines()


KEYS = (_key(), _key())


def _project(root: Path, which: int) -> Path:
    root.mkdir(parents=True)
    (root / ".env").write_text(
        f"DEBUG=1\nDB_USER=app\nDB_PASSWORD={PASSWORDS[which]}\nDB_HOST=localhost\nneedle here\n"
    )
    (root / "deploy.txt").write_text("# key\n" + "\n".join(KEYS[which]) + "\nneedle after the key\n")
    (root / "plain.txt").write_text("nothing secret here\nneedle\nDB_PASSWORD is read from .env\n")
    return root


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Workspace, Workspace]:
    return Workspace(_project(tmp_path / "a", 0)), Workspace(_project(tmp_path / "b", 1))


def _probes() -> list[dict[str, Any]]:
    first, other = PASSWORDS
    body_a = KEYS[0][5]
    patterns: list[dict[str, Any]] = [
        {"pattern": r"DB_PASSWORD=[a-m]", "regex": True},
        {"pattern": r"DB_PASSWORD=[A-Za-z]", "regex": True},
        {"pattern": r"DB_PASSWORD=.{16}$", "regex": True},
        {"pattern": r"PASSWORD=\w+#", "regex": True},
        {"pattern": r"REDACTED|^DB_PASSWORD=a", "regex": True},
        {"pattern": r"REDACTED|DB_PASSWORD=Z", "regex": True},
        {"pattern": r"=[a-z]\w*$", "regex": True},
        {"pattern": r"\b[a-z]", "regex": True, "case_sensitive": False},
        {"pattern": r"[#_-]", "regex": True},
        {"pattern": first[:4]},
        {"pattern": other[:4]},
        {"pattern": first[-3:], "case_sensitive": False},
        {"pattern": body_a[10:30]},
        {"pattern": r"^[A-Za-z0-9+/]{64}$", "regex": True},
        {"pattern": "DB_PASSWORD"},
        {"pattern": "needle", "before": 2, "after": 2},
        {"pattern": "needle", "max_results": 1},
        {"pattern": r"^", "regex": True, "max_results": 7},
        {"pattern": r".", "regex": True},
    ]
    return [
        {**probe, "mode": mode}
        for probe in patterns
        for mode in ("lines", "files", "count")
        if mode == "lines" or not ({"before", "after"} & set(probe))
    ]


@pytest.mark.parametrize("probe", _probes(), ids=[str(n) for n in range(len(_probes()))])
def test_search_answers_the_same_whatever_the_masked_value(
    twins: tuple[Workspace, Workspace], probe: dict[str, Any]
) -> None:
    one, other = (search(workspace, SearchParams(**probe)) for workspace in twins)

    assert (one.structured, one.text) == (other.structured, other.text)


def test_search_still_finds_the_text_around_a_masked_value(twins: tuple[Workspace, Workspace]) -> None:
    result = search(twins[0], SearchParams(pattern="DB_PASSWORD", mode="lines"))

    assert result.structured is not None
    assert [(m["path"], m["line"], m["text"]) for m in result.structured["matches"]] == [
        (".env", 3, "DB_PASSWORD=[REDACTED:password]"),
        ("plain.txt", 3, "DB_PASSWORD is read from .env"),
    ]


@pytest.mark.anyio
async def test_halving_a_character_class_over_stdio_learns_nothing_of_a_password(
    tmp_path: Path, config_file: Path
) -> None:
    answers: list[list[Any]] = []
    for which in (0, 1):
        root = _project(tmp_path / f"p{which}", which)
        seen: list[Any] = []
        with anyio.fail_after(60):
            async with Client(oct_server(root, config_file)) as client:
                for half in ("[0-9A-Za-z]", "[0-9A-M]", "[N-Za-z]", "[a-m]", "[n-z]"):
                    for mode in ("count", "files", "lines"):
                        result = await client.call_tool(
                            "oct_search", {"pattern": f"DB_PASSWORD={half}", "regex": True, "mode": mode}
                        )
                        seen.append(result.structured_content)
        answers.append(seen)

    assert answers[0] == answers[1]
    assert all(answer is not None and answer["files_with_matches"] == 0 for answer in answers[0])
