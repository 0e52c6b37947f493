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


def _config(tmp_path: Path, **fields: object) -> Path:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(fields), encoding="utf-8")
    return config


def test_scopes_given_at_creation_are_written_and_kept_when_the_token_is_created_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, http_scopes={"read": ["risk:read"], "tests": ["oct_test"]})

    assert main(["token", "create", "bob", "--scopes", "read, tests", "--config", str(config)]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["token", "create", "bob", "--config", str(config)]) == 0
    second = capsys.readouterr().out.strip()

    document = json.loads(config.read_text(encoding="utf-8"))
    assert document["http_token_scopes"] == {"bob": ["read", "tests"]}
    assert document["http_tokens"] == {"bob": hash_token(second)}
    assert first != second


@pytest.mark.parametrize(
    ("scopes", "said"),
    [("admin", "must list scopes that http_scopes defines"), (" , ", "names no scope")],
)
def test_a_scope_the_config_does_not_define_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scopes: str, said: str
) -> None:
    config = _config(tmp_path, http_scopes={"read": ["risk:read"]})
    before = config.read_text(encoding="utf-8")

    code = main(["token", "create", "bob", "--scopes", scopes, "--config", str(config)])

    captured = capsys.readouterr()
    assert code == 2
    assert said in captured.err
    assert captured.out == ""
    assert config.read_text(encoding="utf-8") == before


def test_scopes_without_any_scope_defined_say_to_define_one_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)

    assert main(["token", "create", "bob", "--scopes", "read", "--config", str(config)]) == 2
    assert "define the scope in http_scopes first" in capsys.readouterr().err
    assert json.loads(config.read_text(encoding="utf-8")) == {}


def test_revoke_takes_the_token_its_expiry_and_its_scopes_out_and_leaves_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, http_scopes={"read": ["risk:read"]}, rate_limit_per_minute=60)
    for name in ("alice", "erin"):
        argv = [
            "token",
            "create",
            name,
            "--scopes",
            "read",
            "--expires",
            "2099-01-01",
            "--config",
            str(config),
        ]
        assert main(argv) == 0
    alice = capsys.readouterr().out.split()[0]

    assert main(["token", "revoke", "erin", "--config", str(config)]) == 0

    document = json.loads(config.read_text(encoding="utf-8"))
    assert document == {
        "http_scopes": {"read": ["risk:read"]},
        "rate_limit_per_minute": 60,
        "http_tokens": {"alice": hash_token(alice)},
        "http_token_expiry": {"alice": "2099-01-01"},
        "http_token_scopes": {"alice": ["read"]},
    }
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


def test_revoking_a_name_that_holds_no_token_says_which_do_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    assert main(["token", "create", "alice", "--config", str(config)]) == 0
    before = config.read_text(encoding="utf-8")
    capsys.readouterr()

    assert main(["token", "revoke", "erin", "--config", str(config)]) == 2
    assert "no token named 'erin' (tokens: alice)" in capsys.readouterr().err
    assert config.read_text(encoding="utf-8") == before
    assert main(["token", "revoke", "erin", "--config", str(tmp_path / "none.json")]) == 2


def test_list_shows_names_expiry_and_scopes_and_never_a_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, http_scopes={"read": ["risk:read"], "all": ["*"]})
    assert main(["token", "create", "lead", "--scopes", "all", "--config", str(config)]) == 0
    assert main(["token", "create", "ci", "--expires", "2099-01-01", "--config", str(config)]) == 0
    capsys.readouterr()

    assert main(["token", "list", "--config", str(config)]) == 0

    shown = capsys.readouterr().out
    assert shown.splitlines() == [
        "ci\tuntil 2099-01-01\tno scope: granted nothing",
        "lead\tno expiry\tscopes all",
    ]
    assert "sha256" not in shown
