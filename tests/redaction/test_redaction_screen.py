"""The screen (Hyperscan over the detectors' supersets, RE2 over the field names) changes no output."""

from __future__ import annotations

import itertools
import random

import pytest
from data.redaction.heldout import dense_output, named_families, other_formats
from secret_corpus import corpus, document

from oct_mcp.redaction import engine, redact, redact_value
from oct_mcp.redaction.checks import is_literal_secret, is_reference
from oct_mcp.redaction.detectors import DETECTORS
from oct_mcp.redaction.engine import PLAIN_PASSES, Passes
from oct_mcp.redaction.prefilter import REFERENCE_FIRST
from oct_mcp.redaction.screen import Screen, engines_installed, screen
from oct_mcp.redaction.superset import superset

needs_engines = pytest.mark.skipif(
    not engines_installed(), reason="the hyperscan or google-re2 wheel is missing"
)


def _every_text() -> list[str]:
    rng = random.Random(25)  # noqa: S311  (fake data, reproducible on purpose)
    texts = [sample.text for sample in named_families() + other_formats()]
    texts += [sample.text for sample in corpus()[0]] + corpus()[1]
    texts += [dense_output(rng, 64 * 1024), document(rng, 256 * 1024).text]
    texts += [redact(document(rng, 64 * 1024).text)[0]]  # masks already in it: redacted again
    # A value at the very end of the text (no character after it), after a stand-in on its line,
    # keys found `back` characters before their keyword, a field across a block's end.
    edges = [
        "password = aBcdeF",
        "token=<redacted> password=Zk3vQ9pL2mX8",
        "x" * 4090 + "\napi_key = 'Zk3vQ9pL2mX8rT5wY7bN'\n",
        "apikey: 0123456789abcdef0123456789abcdef-us12\n",
        "client_secret = abC8Q~Zk3vQ9pL2mX8rT5wY7bN4cD6eF8gH0jK2\n",
        "password=12345678",
        "  db_pass: '40961372'\n",
        "PASSWORD==Zk3vQ9pL2mX8 psql",
        "password=[REDACTED:password] api_key = '[REDACTED:api_key]x9Y8z7W6'",
    ]
    texts += edges
    texts += [dense_output(rng, 8 * 1024) + edge + "\n" + dense_output(rng, 8 * 1024) for edge in edges]
    return texts + [_sprinkled(text, rng) for text in texts[::4]]


# Characters the screen reads as one byte (0x80): letters with a case, ones that lower-case to ASCII
# (the Kelvin sign) or to two characters (dotted capital I), blanks Python's `str.isspace` takes,
# digits of other scripts, a mark, and characters outside the basic plane.
_NON_ASCII = "\u00e9\u00c4\u212a\u0130\u00a0\u2028\u3000\u0663\u2713\u041f\u0440\U0001f511"


def _sprinkled(text: str, rng: random.Random) -> str:
    """`text` with non-ASCII characters put in at random places: inside secrets, names and values too."""
    pieces = list(text)
    for _ in range(max(1, len(pieces) // 200)):
        pieces.insert(rng.randrange(len(pieces) + 1), rng.choice(_NON_ASCII))
    return "".join(pieces)


@needs_engines
def test_the_screened_scan_masks_what_the_scan_of_every_line_masks() -> None:
    texts = _every_text()
    screened = [redact(text, Passes(screened_from=0)) for text in texts]  # short texts screened too

    # The path of a machine without the wheels: every line searched, at every keyword.
    assert [redact(text, PLAIN_PASSES) for text in texts] == screened


@needs_engines
def test_the_screen_rules_out_nearly_all_of_keyword_dense_output() -> None:
    text = dense_output(random.Random(26), 256 * 1024)  # noqa: S311

    screened = screen(text)

    assert screened is not None
    kept = sum(end - start for start, end in screened.lines + screened.field_blocks)
    assert kept * 20 < len(text)


@needs_engines
def test_text_that_is_not_ascii_is_screened_line_by_line() -> None:
    # One character of another script used to send a whole output down the slow path.
    rng = random.Random(27)  # noqa: S311
    flagged = "Gr\u00fc\u00dfe \u2713 password = 'Zk3v\u00e9Q9pL2mX8'"
    text = "\n".join(
        [dense_output(rng, 128 * 1024), "author: Jos\u00e9 \u2713", flagged, dense_output(rng, 128 * 1024)]
    )

    screened = screen(text)

    assert screened is not None
    kept = sum(end - start for start, end in screened.lines + screened.field_blocks)
    assert kept * 20 < len(text)
    author = text.index("author: Jos")
    assert not any(start <= author < end for start, end in screened.lines)
    line = text.index(flagged)
    assert any(start <= line < end for start, end in screened.field_blocks)


@needs_engines
def test_a_secret_beside_non_ascii_characters_is_masked_as_in_ascii_text() -> None:
    token = "ghp_" + "aB3dE6fG9hJ2kL5mN8pQ1rS4tU7vW0xY3zA6"
    filler = dense_output(random.Random(28), 4096)  # noqa: S311
    for line in (
        f"\u00fcber token {token} \u2713",
        f"Gr\u00fc\u00dfe: password = 'Zk3vQ9pL2mX8' \u2014 {token}",
        f"\u041f\u0430\u0440\u043e\u043b\u044c: {token}",
        "password = '\u041f\u0430\u0440\u043e\u043b\u044c\u0421\u0435\u043a\u0440\u0435\u0442-17'",
    ):
        redacted, findings = redact(filler + "\n" + line + "\n" + filler)

        assert token not in redacted
        assert "Zk3vQ9pL2mX8" not in redacted
        assert "\u0421\u0435\u043a\u0440\u0435\u0442" not in redacted
        assert findings


@needs_engines
def test_the_screen_gives_up_where_candidates_are_dense() -> None:
    text = "\n".join(f"sk-{index:04d}abcdefghijklmnopqrstuvwx" for index in range(2000))

    assert screen(text) is None


@needs_engines
def test_a_superset_matches_on_its_line_wherever_its_detector_matches() -> None:
    import re2  # type: ignore[import-untyped,unused-ignore]

    texts = [sample.text for sample in named_families() + other_formats() + corpus()[0]]
    checked = 0
    for detector in DETECTORS:
        found = superset(detector.pattern)
        if not found.expression:
            continue
        compiled = re2.compile(found.expression)
        for text in texts:
            for match in detector.pattern.finditer(text):
                line_start = text.rfind("\n", 0, match.start()) + 1
                line_end = text.find("\n", match.start())
                line = text[line_start : len(text) if line_end == -1 else line_end]
                assert compiled.match(line[match.start() - line_start :]) is not None, detector.kind
                checked += 1
    assert checked > 1000


def test_a_value_starting_with_a_reference_character_is_never_a_literal_secret() -> None:
    # The field expressions skip such values; `is_literal_secret` must turn them all down.
    for char in REFERENCE_FIRST:
        assert is_reference(char + "Zk3vQ9pL2mX8")
        assert not is_literal_secret(char + "Zk3vQ9pL2mX8", quoted=True)


def test_no_keyword_spans_a_line_break() -> None:
    # The screen keeps whole lines: a keyword across a line break would be cut.
    assert [k for detector in DETECTORS for k in detector.keywords if "\n" in k] == []


def _batches(texts: list[str], rng: random.Random) -> list[list[str]]:
    """The texts cut into the strings of structured results: lines, and pieces across lines."""
    pieces: list[str] = []
    for text in texts:
        pieces += text.split("\n")[:400]
        cuts = sorted(rng.sample(range(len(text)), min(len(text) - 1, 12))) if len(text) > 1 else []
        pieces += [text[start:end] for start, end in itertools.pairwise([0, *cuts, len(text)])]
        pieces.append(text[:3000])
    rng.shuffle(pieces)
    batches = [pieces[start : start + 150] for start in range(0, len(pieces), 150)]
    # Non-ASCII strings among ASCII ones: screened with them, each character one byte.
    for batch in batches[::3]:
        batch += [f"caf\u00e9 {piece}" for piece in batch[:20]]
    return batches


@needs_engines
@pytest.mark.parametrize("screening", [True, False], ids=["screened", "by-keywords"])
def test_redacting_many_strings_at_once_masks_what_redacting_each_alone_masks(
    monkeypatch: pytest.MonkeyPatch, screening: bool
) -> None:
    rng = random.Random(16)  # noqa: S311  (fake data, reproducible on purpose)
    screened: list[bool] = []

    def recording(text: str, data: bytes | None = None) -> Screen | None:
        # Without the screen (no wheels, or candidates too dense), only the keywords decide.
        found = screen(text, data) if screening else None
        screened.append(found is not None and bool(found.lines or found.field_blocks or found.scanning))
        return found

    monkeypatch.setattr(engine, "screen", recording)
    for batch in _batches(_every_text(), rng):
        value = {"entries": [{"text": text} for text in batch], "lines": batch}

        redacted, count = redact_value(value)

        alone = [redact(text) for text in batch]
        assert redacted == {
            "entries": [{"text": text} for text, _findings in alone],
            "lines": [text for text, _findings in alone],
        }
        assert count == 2 * sum(len(findings) for _text, findings in alone)
    # Screened, both kinds were met: batches the screen flagged somewhere, and batches it found clean.
    assert any(screened) is screening
    assert not all(screened)


@needs_engines
def test_a_listing_of_long_paths_with_nothing_to_mask_comes_back_as_it_came() -> None:
    # Paths past the scanning detectors' shortest length, under keys not seen before: no copy.
    value = {
        "entries": [
            {"relative_path": f"packages/component_{n:03}/src/implementation_{n:03}.py", "entry_kind": "file"}
            for n in range(300)
        ],
        "next_cursor": "NzU2OjA6cGtnMDEvc3ViMy9tb2R1bGVfMDUyODEucHk=",
    }

    redacted, count = redact_value(value)

    assert (redacted, count) == (value, 0)
    assert redacted is value


@needs_engines
def test_a_secret_in_one_long_path_among_many_is_masked_and_the_rest_kept() -> None:
    paths = [f"packages/component_{n:03}/src/implementation_{n:03}.py" for n in range(300)]
    paths[123] = "packages/AC3f9a1c7e5b2d8046a9c3e1f7b5d20c84/src/x.py"  # a Twilio account SID: a scan
    paths[201] = "deploy/keys/" + "ghp_" + "aB3dE6fG9hJ2kL5mN8pQ1rS4tU7vW0xY3zA6" + ".txt"

    redacted, count = redact_value({"files": [{"path": path} for path in paths]})

    assert redacted == {"files": [{"path": redact(path)[0]} for path in paths]}
    assert redacted["files"][123]["path"] == "packages/[REDACTED:twilio_account_sid]/src/x.py"
    assert "ghp_" not in redacted["files"][201]["path"]
    assert count == 2


@needs_engines
def test_a_read_of_a_whole_text_among_a_few_fields_masks_what_redacting_each_masks() -> None:
    # A few strings, one of them a whole file: that one is redacted alone, the others screened.
    for text in _every_text():
        head = text[:300]
        value = {"path": "src/app.py", "text": text, "head": head, "first": text.split("\n")[0]}

        redacted, count = redact_value(value)

        alone = {key: redact(item) for key, item in value.items()}
        assert redacted == {key: masked for key, (masked, _findings) in alone.items()}
        assert count == sum(len(findings) for _masked, findings in alone.values())
