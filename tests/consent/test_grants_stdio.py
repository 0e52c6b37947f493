"""Session grants through a real stdio client: given by a human's answer, listed by oct_grants,
used by the next write in the folder, revoked, expired, and never offered where a rule asks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from clients import oct_server, only_text, own_tools_path
from mcp import Client

from oct_mcp.consent import SESSION_GRANT_FIELD
from oct_mcp.profiles import shipped_profile

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


class Human:
    """Approves every write, allowing it for the session where the form offers that."""

    def __init__(self) -> None:
        self.questions: list[str] = []
        self.offered: list[bool] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.questions.append(params.message)
        offered = SESSION_GRANT_FIELD in params.requested_schema["properties"]
        self.offered.append(offered)
        content: dict[str, Any] = {"approve": True, **({SESSION_GRANT_FIELD: True} if offered else {})}
        return types.ElicitResult(action="accept", content=content)


def _write(path: str) -> tuple[str, dict[str, Any]]:
    return "oct_write_file", {"path": path, "content": f"# {path}\n", "dry_run": False}


def _config(tmp_path: Path, **settings: Any) -> Path:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log"), **settings}))
    return config


async def _calls(
    project: Path, config: Path, human: Human, calls: list[tuple[str, dict[str, Any]]]
) -> list[types.CallToolResult]:
    results = []
    with anyio.fail_after(120):
        # python as the test's own environment has it: the project has none.
        server = oct_server(project, config, env={"PATH": own_tools_path()})
        async with Client(server, elicitation_callback=human) as client:
            for tool, arguments in calls:
                if tool == "sleep":
                    await anyio.sleep(arguments["seconds"])
                    continue
                results.append(await client.call_tool(tool, arguments))
    return results


def _given_by(tmp_path: Path) -> list[str]:
    records = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    return [record["consent"]["given_by"] for record in records if "consent" in record]


async def test_a_grant_is_listed_used_and_once_revoked_asked_about_again(
    project: Path, tmp_path: Path
) -> None:
    human = Human()
    results = await _calls(
        project,
        _config(tmp_path),
        human,
        [
            _write("src/pkg/a.py"),
            ("oct_grants", {}),
            _write("src/pkg/b.py"),
            ("oct_grants", {"revoke": ["g7"]}),
            ("oct_grants", {"revoke": ["g1"]}),
            _write("src/pkg/c.py"),
        ],
    )
    wrote_a, listed, wrote_b, unknown, revoked, wrote_c = results

    assert [r.is_error for r in (wrote_a, listed, wrote_b, revoked, wrote_c)] == [False] * 5
    assert listed.structured_content is not None
    (grant,) = listed.structured_content["grants"]
    assert (grant["id"], grant["tool"], grant["scope"], grant["expires"]) == (
        "g1",
        "oct_write_file",
        "src/pkg",
        None,
    )
    assert (
        "g1  oct_write_file may write in src/pkg/ (not the subfolders), until the end of the session"
        in only_text(listed)
    )
    # b.py was written under the grant, nobody asked; c.py was asked about once the grant was revoked.
    assert len(human.questions) == 2
    assert "src/pkg/c.py" in human.questions[1]
    assert _given_by(tmp_path) == ["elicitation", "session_grant", "elicitation"]
    assert unknown.is_error is True
    assert only_text(unknown).startswith("[not_found] no grant g7 in force in this session")
    assert (revoked.structured_content or {})["revoked"] == ["g1"]
    # The answer for c.py gave a grant anew, under a new id.
    assert all((project / "src" / "pkg" / name).exists() for name in ("a.py", "b.py", "c.py"))


async def test_a_grant_given_for_a_time_is_asked_about_again_once_it_expires(
    project: Path, tmp_path: Path
) -> None:
    profile = {
        "layers": list(shipped_profile("default").layers),
        "settings": {"safety": {"session_grant": True, "session_grant_seconds": 2}},
    }
    config = _config(tmp_path, profile="short_grants", profiles={"short_grants": profile})
    human = Human()
    results = await _calls(
        project,
        config,
        human,
        [
            _write("src/pkg/a.py"),
            ("oct_grants", {}),
            _write("src/pkg/b.py"),
            ("sleep", {"seconds": 2.5}),
            ("oct_grants", {}),
            _write("src/pkg/c.py"),
        ],
    )
    _a, listed, _b, after, _c = results

    assert [r.is_error for r in results] == [False] * 5
    (grant,) = (listed.structured_content or {})["grants"]
    assert grant["expires"] is not None
    assert (after.structured_content or {})["grants"] == []
    assert "no grant in force: every call that needs consent is asked about" in only_text(after)
    assert _given_by(tmp_path) == ["elicitation", "session_grant", "elicitation"]


async def test_a_rule_that_asks_is_never_covered_by_a_grant_nor_offers_one(
    project: Path, tmp_path: Path
) -> None:
    rule = {
        "effect": "ask",
        "tools": ["oct_write_file"],
        "when": {"paths": ["src/pkg/locked_*.py"]},
        "reason": "locked modules are asked about every time",
    }
    human = Human()
    results = await _calls(
        project,
        _config(tmp_path, rules=[rule]),
        human,
        [
            _write("src/pkg/a.py"),
            _write("src/pkg/locked_1.py"),
            _write("src/pkg/locked_2.py"),
            ("oct_grants", {}),
        ],
    )

    assert [r.is_error for r in results] == [False] * 4
    # The first write gave a grant for src/pkg; the locked files were asked about each time, and
    # neither question offered a grant.
    assert human.offered == [True, False, False]
    assert _given_by(tmp_path) == ["elicitation", "elicitation", "elicitation"]
    assert [grant["id"] for grant in (results[3].structured_content or {})["grants"]] == ["g1"]


_APPEND = "open('out/log.txt', 'a').write('run\\n')"


async def test_a_command_run_with_writes_is_granted_as_that_exact_command(
    project: Path, tmp_path: Path
) -> None:
    (project / "out").mkdir()
    run = ("oct_run", {"argv": ["python", "-c", _APPEND], "writes": True})
    other = ("oct_run", {"argv": ["python", "-c", _APPEND + " # another"], "writes": True})
    human = Human()
    results = await _calls(project, _config(tmp_path), human, [run, ("oct_grants", {}), run, other])
    _first, listed, _again, _different = results

    assert [r.is_error for r in results] == [False] * 4, [only_text(r) for r in results]
    assert "You may also allow oct_run to run `python -c" in human.questions[0]
    (grant,) = (listed.structured_content or {})["grants"][:1]
    assert grant["scope"].startswith("/command: `python -c ")
    assert grant["scope"].endswith("` in the project root, writable")
    # The same command ran again without a question; one word more is another command, asked about.
    assert len(human.questions) == 2
    assert _given_by(tmp_path) == ["elicitation", "session_grant", "elicitation"]
    assert (project / "out" / "log.txt").read_text() == "run\n" * 3
