"""Where a secret-named field may hold a literal secret: the lines a multi-pattern scanner points at.

Tool output is full of `token`, `secret` and `password` (test names, log fields, code), and the field
detectors ran Python at each of them: 5 MB/s on such text. One Hyperscan pass (the `hyperscan`
package, where its wheel is installed) finds the lines where such a name is followed by an operator
and a value that mixes two character classes, the least `is_literal_secret` asks of a value; only
those lines are searched for field names. Without the wheel every line is searched, as before.

The expressions are a superset of what the field detectors accept, never a subset: a value they
mask has six characters or more and two classes among lower case, upper case, digits and other
symbols (or blanks, for a pass phrase), or six digits under a password's name; and it does not
start as a reference (`$`, `{`, `<`, `#`). The parity tests of `tests/redaction/test_redaction_heldout.py`
and `tests/redaction/test_redaction_screen.py` hold every path to the same output. With google-re2 too, the
screen (`screen.py`) runs these expressions in an RE2 Set instead.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from functools import cache
from typing import Final

__all__ = ["field_lines", "one_byte_a_character", "prefilter_engine"]

_ONE_BYTE_EACH: Final = "oct_mcp.redaction.one_byte_a_character"


def _one_byte_each(error: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return b"\x80" * (error.end - error.start), error.end


codecs.register_error(_ONE_BYTE_EACH, _one_byte_each)


def one_byte_a_character(text: str) -> bytes:
    """`text` as the multi-pattern passes read it: ASCII as it is, each other character as 0x80.

    The offsets stay the text's. The detectors are compiled with `re.ASCII`, so a non-ASCII
    character is in none of their classes but the negated ones, as 0x80 is in the passes' byte
    classes; and `checks.char_classes` counts it as a symbol, as the field expressions count 0x80.
    """
    if text.isascii():
        return text.encode("ascii")
    return text.encode("ascii", _ONE_BYTE_EACH)


# What a reference starts with (`$VAR`, `${VAR}`, `{{ var }}`, `<token>`, `#comment`): see
# `checks.is_reference`, which turns down every value whose first character is one of these.
REFERENCE_FIRST: Final = r"$<{#"
# A field's name: any word that a field detector's keyword starts with, then what may end a name.
_NAME: Final = r"(?i:passw|passphrase|pass|pwd|pw|secret|token|credential|cred|auth|key)[A-Za-z0-9_.-]*"
# The names `secret_field_kind` calls a password: `pass...`, `pw...`, and any with `passw` or `pwd`.
_PASSWORD_NAME: Final = r"(?i:pass|pw)[A-Za-z0-9_.-]*"  # noqa: S105  (a name pattern, no password)
_HEAD: Final = (
    r"(?:\\?[\"'`])?\]?"
    # A type annotation (`password: str | None = ...`), as `_ANNOTATION` has it: no blank but by `|`.
    r"(?:[ \t]*:[ \t]*[A-Za-z_][A-Za-z0-9_.]*(?:\[[^\]\n]*\])?(?:[ \t]*\|[ \t]*[A-Za-z_][A-Za-z0-9_.]*)*)?"
    r"[ \t]*"
)
_OP: Final = r"(?::=|=>|={1,3}|:|\?=|\|\|=|>)[ \t]*"
# Before an unquoted value a bare `:` must be followed by a blank: `tests/test_secrets.py::test_x`
# is a pytest node id. A value glued to its `:` (`secret:Ab12cd`) is the glued alternative.
_SPACED_OP: Final = r"(?::=|=>|={1,3}|:[ \t]|\?=|\|\|=|>)[ \t]*"
# `auth: Bearer <token>`: the value after the scheme is what is measured (`_AUTH_SCHEME`).
_SCHEME: Final = r"(?:(?i:bearer|basic|token|bot|digest|ssws)[ \t]+)?"
_GLUED_COLON: Final = r":[^:=\s\"'`;(){}\[\]" + REFERENCE_FIRST + r"][^\s\"'`;(){}\[\]]{4}"
# Two classes in the first 40 characters of a value of six or more, as `is_literal_secret` asks:
# lower and upper case only where the letters are no camel-case word (`None`, `PasswordInput`).


def _classes_value(token: str, end: str) -> str:
    """A value of `token` characters that holds two classes (see `is_literal_secret`).

    `token` is a negated class (`[^...]`). The value's first character is none of
    `REFERENCE_FIRST`: a value starting so is a reference, never a literal secret; in tool output
    such stand-ins (`token=<redacted>`, `password=${DB_PASSWORD}`) are as common as the names.
    """
    first = token[:-1] + REFERENCE_FIRST + "]"
    symbol = token[:-1] + r"a-zA-Z0-9_.\-]"  # a token character that is none of the three classes
    first_symbol = token[:-1] + REFERENCE_FIRST + r"a-zA-Z0-9_.\-]"
    lower, upper, digit = "[a-z]", "[A-Z]", "[0-9]"
    run = f"{token}*"
    classes = ((lower, lower), (upper, upper), (digit, digit), (symbol, first_symbol))
    mixes = (
        (lower, digit),
        (digit, lower),
        (upper, digit),
        (digit, upper),
        (lower, symbol),
        (symbol, lower),
        (upper, symbol),
        (symbol, upper),
        (digit, symbol),
        (symbol, digit),
    )

    def pairs(at_start: bool) -> str:
        def opening(cls: str) -> str:
            return next(start for plain, start in classes if plain == cls) if at_start else cls

        found = [f"{opening(a)}{run}{b}" for a, b in mixes]
        # Letters of both cases that no camel-case word spells: two capitals, a capital and one
        # small letter before the next capital or the value's end.
        found += [
            f"{lower}{run}{upper}{upper}",
            f"{upper}{upper}{run}{lower}",
            f"{upper}{lower}{upper}",
            f"{lower}{run}{upper}{lower}?{end}",
        ]
        return "(?:" + "|".join(found) + ")"

    inner, leading = pairs(at_start=False), pairs(at_start=True)
    # Six characters at least: a pair is two, and four more are on either side of it.
    return (
        f"(?:{first}{token}{{3,}}{inner}|{leading}{token}{{4}}|{first}{inner}{token}{{3}}"
        f"|{first}{token}{inner}{token}{{2}}|{first}{token}{{2}}{inner}{token})"
    )


# Inside quotes, any character to the line's end: the other quotes and escapes are in values too.
_QUOTED_CHAR: Final = r"[^\n]"
# A value without blanks is whole up to a quote, a `;` or a bracket (`_WHOLE_VALUE`).
_UNQUOTED_CHAR: Final = r"[^\s\"'`;(){}\[\]]"
# A field that starts its line may hold a pass phrase: words and blanks, unquoted.
_LINE_START: Final = r"^[ \t+-]*(?:(?i:export|set|declare -x|env|arg|setenv)[ \t]+)?[\"']?[A-Za-z0-9_.-]*"
EXPRESSIONS: Final = (
    _NAME + _HEAD + _OP + r"[bBrRuUfF]{0,2}\\?[\"'`]" + _classes_value(_QUOTED_CHAR, r"[\"'`\\]"),
    _NAME + _HEAD + _SPACED_OP + _SCHEME + _classes_value(_UNQUOTED_CHAR, r"[\s\"'`;(){}\[\]]"),
    _NAME + _HEAD + _GLUED_COLON,
    # A password name may hold digits only (`is_literal_secret`'s `digits`), six at least.
    _PASSWORD_NAME + _HEAD + _OP + r"[bBrRuUfF]{0,2}\\?[\"'`]?[0-9]{6}",
    # A bracket or a `;` ends a whole value (`_WHOLE_VALUE`).
    _LINE_START
    + _NAME
    + _HEAD
    + _OP
    + r"[^\s\"'`(){}\[\];"
    + REFERENCE_FIRST
    + r"][^\s\"'`(){}\[\];]*[ \t]+[^\s(){}\[\];]",
)

Lines = list[tuple[int, int]]


@cache
def prefilter_engine() -> Callable[[bytes], list[int]] | None:
    """The compiled scan (offsets just past each candidate value's start), or None without the wheel."""
    try:
        import hyperscan  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    # Caseless only where the expressions say so (the names): a value's case is what is measured.
    database.compile(
        expressions=[expression.encode("ascii") for expression in EXPRESSIONS],
        ids=list(range(len(EXPRESSIONS))),
        elements=len(EXPRESSIONS),
        flags=[hyperscan.HS_FLAG_MULTILINE] * len(EXPRESSIONS),
    )
    scratch = hyperscan.Scratch(database)

    def scan(data: bytes) -> list[int]:
        ends: list[int] = []
        database.scan(
            data,
            match_event_handler=lambda _id, _start, end, _flags, _context: ends.append(end),
            scratch=scratch,
        )
        return ends

    return scan


def field_lines(data: bytes) -> Lines | None:
    """The (start, end) of each line of a text where a secret field may be; None: search it all.

    Args:
        data: The text being redacted, as `one_byte_a_character` gives it.

    Returns:
        Sorted, disjoint line spans; None when no multi-pattern scanner is installed.
    """
    scan = prefilter_engine()
    if scan is None:
        return None
    lines: Lines = []
    last_end = -1
    for end in scan(data):
        if end <= last_end:
            continue
        start = data.rfind(b"\n", 0, end) + 1
        stop = data.find(b"\n", end)
        last_end = len(data) if stop == -1 else stop
        lines.append((start, last_end))
    return lines
