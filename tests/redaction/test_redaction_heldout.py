"""Redaction on text it was not tuned on: the held-out families, other documented formats, dense output."""

from __future__ import annotations

import random
import sys

import pytest
from data.redaction.heldout import NAMED_FAMILIES, OTHER_FORMATS, dense_output, named_families, other_formats
from secret_corpus import NEUTRAL_CONTEXTS, Format, Sample, corpus, document, fully_masked

from oct_mcp.redaction import Finding, mask, redact
from oct_mcp.redaction.engine import PASSES, PLAIN_PASSES, Passes
from oct_mcp.redaction.prefilter import prefilter_engine


def _cases(formats: tuple[Format, ...]) -> list[tuple[Format, str, str]]:
    rng = random.Random(21)  # noqa: S311  (fake data, reproducible on purpose)
    return [
        (fmt, context, fmt.generate(rng)) for fmt in formats for context in fmt.contexts or NEUTRAL_CONTEXTS
    ]


def _recall(samples: list[Sample], passes: Passes = PASSES) -> float:
    covered = [
        hit
        for sample in samples
        for hit in fully_masked(sample.secrets, [(f.start, f.end) for f in redact(sample.text, passes)[1]])
    ]
    return sum(covered) / len(covered)


@pytest.mark.parametrize(
    ("fmt", "context", "value"),
    _cases(NAMED_FAMILIES + OTHER_FORMATS),
    ids=lambda x: x.name if isinstance(x, Format) else "",
)
def test_a_held_out_secret_is_masked_whole_under_its_kind_and_its_context_word_stays(
    fmt: Format, context: str, value: str
) -> None:
    before, after = (part.format() for part in context.split("{}", 1))

    redacted, findings = redact(before + value + after)

    assert redacted == before + mask(fmt.kind) + after
    assert findings == (Finding(fmt.kind, len(before), len(before) + len(value)),)


def test_the_named_families_meet_the_recall_goal() -> None:
    assert _recall(named_families()) >= 0.99


def test_the_other_documented_formats_meet_their_recall_goal() -> None:
    assert _recall(other_formats()) >= 0.95


def test_keyword_dense_output_is_left_byte_for_byte() -> None:
    text = dense_output(random.Random(21), 256 * 1024)  # noqa: S311

    assert redact(text) == (text, ())


@pytest.mark.parametrize(
    "text",
    [
        "STRIPE_PUBLISHABLE_KEY=pk_live_51HqLyjWDarjtT1zdp7dcXYZabc12345",
        "NEXT_PUBLIC_STRIPE_KEY = 'pk_test_51HqLyjWDarjtT1zdp7dcXYZabc12345'",
        "MAPBOX_ACCESS_TOKEN=pk.eyJ1IjoiZGV2IiwiYSI6ImNrMTIzNDU2In0",
        "FLUTTERWAVE_PUBLIC_KEY=FLWPUBK_TEST-3f2a9c8e5b1d7f60a4c2e8b6d0f1a3c5-X",
    ],
)
def test_a_documented_public_identifier_stays_visible(text: str) -> None:
    assert redact(text) == (text, ())


@pytest.mark.parametrize(
    "text",
    [
        "password: *default_password",
        "db_password: !vault |",
        "PASSWORD=%DB_PASSWORD%",
        "2024-05-01 INFO auth: refreshed token=None user=3",
        "+ mysql --user=app --password=$MYSQL_PWD app",
    ],
)
def test_a_reference_or_a_stand_in_is_left_alone(text: str) -> None:
    assert redact(text) == (text, ())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PGPASSWORD=%r@zOs6wK psql -h db", "PGPASSWORD=[REDACTED:password] psql -h db"),
        ("password: *fo_0X78FlWB5%FuJ!vI", "password: [REDACTED:password]"),
        ("amqp://guest:!CCVRY6ZaUdx@rabbit:5672/", "amqp://guest:[REDACTED:url_password]@rabbit:5672/"),
        ("kubectl --token=Zk3vQ9pL2mX8rT5wY7bN4cD6 get pods", "kubectl --token=[REDACTED:token] get pods"),
    ],
)
def test_a_password_that_starts_like_a_reference_is_masked_and_the_command_after_it_is_kept(
    text: str, expected: str
) -> None:
    assert redact(text)[0] == expected


def _every_text() -> list[str]:
    rng = random.Random(23)  # noqa: S311
    texts = [sample.text for sample in named_families() + other_formats()]
    texts += [sample.text for sample in corpus()[0]] + corpus()[1]
    texts += [dense_output(rng, 64 * 1024), document(rng, 256 * 1024).text]
    # Values the prefilter's classes must not lose: a scheme before, quotes and `&` inside, glued.
    edges = [
        "headers auth: Bearer abc123XYZdef",
        'password = "ab\'cd12x" z',
        "db_password: M3&rgj10nThcxpy@E60",
        "secret:Ab12cdEF",
        "<password>aB3dEf9</password>",
        "token: str | None = 'x9Y8z7W6'",
        "password=12345678",
        "  db_pass: '40961372'",
        "PASSWORD==Zk3vQ9pL2mX8 psql",
    ]
    # Dense enough that the prefilter runs: among the keyword-dense output, not alone.
    texts += [dense_output(rng, 8 * 1024) + edge + "\n" + dense_output(rng, 8 * 1024) for edge in edges]
    return texts


@pytest.mark.skipif(prefilter_engine() is None, reason="the multi-pattern scanner's wheel is not installed")
def test_the_prefiltered_scan_masks_what_the_scan_of_every_line_masks() -> None:
    texts = _every_text()
    # The path without google-re2: no text is screened, the prefilter finds the field lines.
    prefiltered = [redact(text, Passes(screened_from=sys.maxsize)) for text in texts]

    # The path a machine without the wheel takes: every line is searched for field names.
    assert [redact(text, PLAIN_PASSES) for text in texts] == prefiltered


def test_without_the_scanner_every_line_is_searched_and_the_goals_hold() -> None:
    assert _recall(named_families(), PLAIN_PASSES) >= 0.99
    assert redact(dense_output(random.Random(24), 64 * 1024), PLAIN_PASSES)[1] == ()  # noqa: S311
