"""How names from the project are shown in text: quoted where they hold characters a reader cannot see."""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["has_format_characters", "has_hidden_characters", "is_hidden_character", "quote_name"]

# Cc: controls (a newline starts a line of its own); Cf: format characters (bidi overrides that
# reorder what is shown, zero-width ones); Zl, Zp: line and paragraph separators; Cs: lone
# surrogates; Co, Cn: private use and unassigned, which no font shows the same way.
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
# What reorders or breaks text without showing itself: U+202A-U+202E, U+2066-U+2069, zero-width
# characters and the like (Cf), U+2028 (Zl) and U+2029 (Zp).
_FORMAT_CATEGORIES: Final = frozenset({"Cf", "Zl", "Zp"})
# Letters and marks that fonts draw blank (Hangul fillers, the braille blank, Khmer inherent vowels,
# the combining grapheme joiner) and variation selectors: none shows itself, and each has hidden
# code in plain sight ("invisible" identifiers).
_BLANK_LOOKING: Final = frozenset(
    {"\u034f", "\u115f", "\u1160", "\u17b4", "\u17b5", "\u2800", "\u3164", "\uffa0"}
)
_SHORT_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}


def is_hidden_character(char: str) -> bool:
    """A character that changes how text around it is shown, or is not shown at all."""
    if char == " ":
        return False
    if char in _BLANK_LOOKING or "\ufe00" <= char <= "\ufe0f" or "\U000e0100" <= char <= "\U000e01ef":
        return True
    category = unicodedata.category(char)
    return category in _HIDDEN_CATEGORIES or (category == "Zs" and char != " ")


def has_hidden_characters(text: str) -> bool:
    """`text` holds a character `is_hidden_character` names (printable ASCII is checked in one step)."""
    if text.isascii() and text.isprintable():
        return False
    return any(is_hidden_character(char) for char in text)


def has_format_characters(text: str) -> bool:
    """`text` holds a format character or a line or paragraph separator (ASCII holds none)."""
    return not text.isascii() and any(unicodedata.category(char) in _FORMAT_CATEGORIES for char in text)


def quote_name(name: str) -> str:
    """`name` as it is when every character shows as itself, else double-quoted with escapes.

    A name that starts with a double quote is quoted too, so a quoted name is never ambiguous:
    `a\\nb` shows as `"a\\nb"`, U+202E as `\\u202e`.
    """
    if not name.startswith('"') and not has_hidden_characters(name):
        return name
    escaped = []
    for char in name:
        if char in _SHORT_ESCAPES:
            escaped.append(_SHORT_ESCAPES[char])
        elif is_hidden_character(char):
            point = ord(char)
            escaped.append(f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'
