"""Strategies of the redaction tests, from the secret corpus; the shared ones are in oct_mcp.testing."""

from __future__ import annotations

from typing import Final

from hypothesis import strategies as st
from secret_corpus import FORMATS, NEUTRAL_CONTEXTS, Chars, Format, Lines, OneOf, Piece, lookalikes

# Redaction: secrets drawn from their formats' grammars (tests/secret_corpus.py), placed in their
# contexts, and text that holds no secret.

_SEQUENCE: Final = "0123456789abcdefghijklmnopqrstuvwxyz"


def _reads_as_generated(value: str) -> bool:
    # What a generator produces, and a placeholder is not: no character three times running, no
    # run of five in sequence (`abcde`, `12345`). Random draws pass; the shrinker's favourites fail.
    lowered = value.lower()
    if any(lowered[i] == lowered[i + 1] == lowered[i + 2] for i in range(len(lowered) - 2)):
        return False
    return not any(_SEQUENCE[i : i + 5] in lowered for i in range(len(_SEQUENCE) - 4))


@st.composite
def _run(draw: st.DrawFn, chars: Chars) -> str:
    # Shuffled alphabets, so the run mixes the alphabet's classes the way a random draw does.
    length = draw(st.integers(chars.low, chars.high))
    text = ""
    while len(text) < length:
        text += "".join(draw(st.permutations(chars.alphabet)))
    return text[:length]


def _piece(piece: Piece) -> st.SearchStrategy[str]:
    if isinstance(piece, str):
        return st.just(piece)
    if isinstance(piece, Chars):
        return _run(piece).filter(_reads_as_generated)
    if isinstance(piece, OneOf):
        return st.sampled_from(piece.options)
    lines: Lines = piece
    return st.lists(_piece(lines.chars), min_size=lines.low, max_size=lines.high).map(lines.sep.join)


def secret_values(fmt: Format) -> st.SearchStrategy[str]:
    """Values of one format, drawn from its grammar."""
    return st.tuples(*(_piece(piece) for piece in fmt.pieces)).map("".join)


def placed_secrets() -> st.SearchStrategy[tuple[Format, str, str]]:
    """(format, value, context): a secret of any format and a template (`{}` for the value) it lives in."""
    return st.sampled_from(FORMATS).flatmap(
        lambda fmt: st.tuples(
            st.just(fmt), secret_values(fmt), st.sampled_from(fmt.contexts or NEUTRAL_CONTEXTS)
        )
    )


def clean_texts() -> st.SearchStrategy[str]:
    """Text with no secret in it: look-alikes (hashes, ids, references, placeholders) and arbitrary lines."""
    return st.lists(st.one_of(st.sampled_from(lookalikes()), st.text(max_size=60)), max_size=8).map("\n".join)


# Pieces that make detectors meet at their edges when glued in any order: field names, operators,
# quotes, masks, token prefixes and whole tokens, URL parts, PEM markers, non-ASCII letters.
_GLUE_PIECES: Final = (
    "password",
    "token",
    "secret",
    "api_key",
    "_KEY=",
    "=",
    ":",
    '"',
    "'",
    " ",
    "\n",
    ",",
    ";",
    "&",
    "+",
    ".",
    "@",
    "://",
    "user",
    "Xk29abQz7",
    "[REDACTED:github_token]",
    "[REDACTED:",
    "]",
    "ghp_",
    "ghp_aB3dE6fG9hJ2kL5mN8pQ1rS4tU7vW0xY3zA6",
    "AKIAQ2W3E4R5T6Y7U2I3",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "eyJhbGciOiJIUzI1NiJ9",
    "Bearer ",
    "Authorization: ",
    "hooks.slack.com/services/",
    "TZY0SHRBSQT/B73QJVBZ9Z/JK1R0R9NdZuBFxnnXinV8eCb",
    "MTE4NDY0ODk3NTYyMTk3MDA2Mw",
    ".Gh7xQe.",
    "q8Wz2rLp5vXk9mN3bT7yXk29abQzLm4P",
    "SK",
    "3f2a9c8e3f2a9c8e3f2a9c8e3f2a9c8e",
    "machine x login y password ",
    "--password ",
    '<add key="ApiKey" value="',
    "sk-",
    "xoxb-",
    "İ",
    "\\n",
    '\\"',
)


def glued_texts() -> st.SearchStrategy[str]:
    """Secrets, their parts, keywords and masks glued in any order: the edges of every detector."""
    return st.lists(st.one_of(st.sampled_from(_GLUE_PIECES), st.text(max_size=5)), max_size=25).map("".join)
