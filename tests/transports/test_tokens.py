"""`oct-mcp token create NAME`: the token printed once, only its hash kept, the config kept whole."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from oct_mcp.cli import main
from oct_mcp.transports.auth import hash_token


def test_a_created_token_is_printed_once_and_only_its_hash_is_written_owner_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"rate_limit_per_minute": 60}), encoding="utf-8")

    code = main(["token", "create", "ci", "--config", str(config)])

    token = capsys.readouterr().out.strip()
    document = json.loads(config.read_text(encoding="utf-8"))
    assert code == 0
    assert document == {"rate_limit_per_minute": 60, "http_tokens": {"ci": hash_token(token)}}
    assert token not in config.read_text(encoding="utf-8")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


@pytest.mark.parametrize("name", ["", "a b", "x" * 65, "../up", "9lives"])
def test_a_name_that_is_not_an_identifier_is_refused_and_nothing_is_written(
    tmp_path: Path, name: str
) -> None:
    config = tmp_path / "config.json"

    assert main(["token", "create", name, "--config", str(config)]) == 2
    assert not config.exists()


def test_a_config_that_is_not_json_is_left_as_it_is(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text("{not json", encoding="utf-8")

    assert main(["token", "create", "ci", "--config", str(config)]) == 2
    assert config.read_text(encoding="utf-8") == "{not json"
