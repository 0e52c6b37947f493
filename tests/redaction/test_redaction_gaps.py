"""Gaps the held-out corpora showed: passwords of digits only, and a password that starts with `=`."""

from __future__ import annotations

import random

import pytest
from data.redaction.heldout import dense_output
from secret_corpus import corpus

from oct_mcp.redaction import redact, redact_value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=12345678", "password=[REDACTED:password]"),
        ("DB_PASSWORD=40961372", "DB_PASSWORD=[REDACTED:password]"),
        ("  password: 7730129\n", "  password: [REDACTED:password]\n"),
        ('"db_pass": "5521904377"', '"db_pass": "[REDACTED:password]"'),
        ("pwd = '884213'", "pwd = '[REDACTED:password]'"),
        ("mysql --password=90817263 app", "mysql --password=[REDACTED:password] app"),
    ],
)
def test_a_password_of_digits_only_is_masked_under_a_password_name(text: str, expected: str) -> None:
    assert redact(text)[0] == expected


@pytest.mark.parametrize(
    "text",
    [
        "port=8080",
        "PORT=54321123",
        "token_ttl=360000",
        "api_key_id=12345678",
        "secret_version=20240501",
        "token=1717171717",
        "password_min_length=12",
        "PASSWORD_RESET_TIMEOUT=259200",
        "password=000000",
        "session_id=88213344",
    ],
)
def test_a_number_under_any_other_name_or_a_stand_in_stays(text: str) -> None:
    assert redact(text) == (text, ())


def test_a_mapping_masks_a_password_of_digits_but_not_a_port() -> None:
    value = {"password": "31415926", "port": "54321123", "token": "27182818"}

    assert redact_value(value) == (
        {"password": "[REDACTED:password]", "port": "54321123", "token": "27182818"},
        1,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PASSWORD==Zk3vQ9pL2mX8", "PASSWORD=[REDACTED:password]"),
        ("db_password===Zk3vQ9pL2mX8", "db_password=[REDACTED:password]"),
        ("run --env PASSWORD==Zk3vQ9pL2mX8 --rm", "run --env PASSWORD=[REDACTED:password] --rm"),
        ("password = =Zk3vQ9pL2mX8", "password = [REDACTED:password]"),
    ],
)
def test_a_password_that_starts_with_an_equals_sign_is_masked_whole(text: str, expected: str) -> None:
    assert redact(text)[0] == expected


def test_a_comparison_with_blanks_keeps_its_operator() -> None:
    assert redact('if password == "Zk3vQ9pL2mX8":')[0] == 'if password == "[REDACTED:password]":'


def test_the_labelled_corpus_and_dense_output_have_no_false_positive_after_the_gaps() -> None:
    negatives = corpus()[1]
    text = dense_output(random.Random(27), 128 * 1024)  # noqa: S311

    assert [n for n in negatives if redact(n)[0] != n] == []
    assert redact(text) == (text, ())
