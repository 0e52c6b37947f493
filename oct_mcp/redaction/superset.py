"""A Python pattern's line-local superset, in the syntax Hyperscan and RE2 share: what a screen may run.

A detector's `re` pattern uses what Hyperscan lacks (lookaround, possessive and atomic groups, back
references). For a screen, any pattern that matches wherever the detector's pattern matches will
do: lookaround and anchors are dropped (matching without them matches more), possessive and atomic
groups become plain ones, a repeat of more than 64 counts keeps 64 and becomes open-ended, and
the pattern is cut (keeping what comes before) at anything a translation could get wrong and at the
first item that can match a line break. A cut pattern matches a prefix of every match, so it is
still a superset; and since no translated item matches a line break, each match of the superset
lies on one line, which is what lets the screen decide line by line.

Written here rather than taken from a library: Hyperscan's own prefilter mode approximates a
pattern too, but gives no line-local guarantee and ran at 3.7 MB/s on keyword-dense text (it keeps
every item it can); RE2's FilteredRE2 reduces patterns to literal atoms, which are the very
keywords that are dense in such text. The translation is checked against every detector on the
labelled and held-out corpora (`tests/redaction/test_redaction_screen.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, Final

__all__ = ["Superset", "superset"]

# The most counts a repeat keeps: `EAA[A-Za-z0-9]{90,}` becomes `EAA[A-Za-z0-9]{64,}`. Hyperscan runs
# bounded repeats in engines of their own; more counts made its compile slow, not its scan.
_KEPT_COUNTS: Final = 64
_CATEGORIES: Final = {
    sre.CATEGORY_DIGIT: r"0-9",
    sre.CATEGORY_WORD: r"A-Za-z0-9_",
    sre.CATEGORY_SPACE: r" \t\n\r\f\v",
}
_NEGATED_CATEGORIES: Final = {
    sre.CATEGORY_NOT_DIGIT: sre.CATEGORY_DIGIT,
    sre.CATEGORY_NOT_WORD: sre.CATEGORY_WORD,
    sre.CATEGORY_NOT_SPACE: sre.CATEGORY_SPACE,
}
_NEWLINE: Final = ord("\n")
_REPEATS: Final = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)


@dataclass(frozen=True, slots=True)
class Superset:
    """The RE2 expression, and the fewest characters each of its matches spans before any cut."""

    expression: str
    min_width: int
    whole: bool
    """False when the pattern was cut: the expression matches a prefix of each match."""


class _CutError(Exception):
    """An item the translation stops before; `width` counts what was kept before it."""

    def __init__(self) -> None:
        super().__init__()
        self.width = 0


def _char(code: int) -> str:
    return f"\\x{{{code:x}}}"


def _class(items: list[tuple[Any, Any]], ignore_case: bool) -> str:
    """An `IN` item as an RE2 class, in ASCII terms (the patterns are compiled with `re.ASCII`)."""
    negated = False
    members: list[str] = []
    newline = False
    for op, value in items:
        if op is sre.NEGATE:
            negated = True
        elif op is sre.LITERAL:
            members.append(_char(value))
            newline |= value == _NEWLINE
        elif op is sre.RANGE:
            members.append(f"{_char(value[0])}-{_char(value[1])}")
            newline |= value[0] <= _NEWLINE <= value[1]
        elif op is sre.CATEGORY and value in _CATEGORIES:
            members.append(_CATEGORIES[value])
            newline |= value is sre.CATEGORY_SPACE
        elif op is sre.CATEGORY and value in _NEGATED_CATEGORIES and len(items) == 1:
            # `\S`, `\D`, `\W` alone: the complement of the category.
            members.append(_CATEGORIES[_NEGATED_CATEGORIES[value]])
            negated = True
            newline = value is sre.CATEGORY_NOT_SPACE
        else:
            raise _CutError
    if newline != negated:
        raise _CutError  # the class can match a line break: the superset would cross lines
    expression = "[" + ("^" if negated else "") + "".join(members) + "]"
    return f"(?i:{expression})" if ignore_case else expression


def _sequence(items: list[tuple[Any, Any]], flags: int, out: list[str]) -> int:
    """Append the translation of `items` to `out`; the fewest characters it spans. Raises `_CutError`."""
    width = 0
    try:
        for op, value in items:
            width += _item(op, value, flags, out)
    except _CutError as cut:
        cut.width += width
        raise
    return width


def _item(op: Any, value: Any, flags: int, out: list[str]) -> int:
    """Append the translation of one item; the fewest characters it spans. Raises `_CutError`."""
    ignore_case = bool(flags & re.IGNORECASE)
    if op is sre.LITERAL:
        if value == _NEWLINE:
            raise _CutError
        out.append(f"(?i:{_char(value)})" if ignore_case else _char(value))
        return 1
    if op is sre.NOT_LITERAL:
        if value != _NEWLINE:
            raise _CutError  # `[^x]` matches a line break
        out.append("[^\\n]")
        return 1
    if op is sre.ANY:
        if flags & re.DOTALL:
            raise _CutError
        out.append("[^\\n]")
        return 1
    if op is sre.IN:
        out.append(_class(value, ignore_case))
        return 1
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return 0  # an anchor or a lookaround only narrows: matching without it is a superset
    if op is sre.SUBPATTERN:
        _group_number, added, removed, sub = value
        return _group(list(sub), (flags | added) & ~removed, out)
    if op is sre.ATOMIC_GROUP:
        return _group(list(value), flags, out)
    if op is sre.BRANCH:
        return _branch(value[1], flags, out)
    if op in _REPEATS:
        return _repeat(value, flags, out)
    raise _CutError  # back references, conditionals: where the translation stops


def _group(items: list[tuple[Any, Any]], flags: int, out: list[str]) -> int:
    inner: list[str] = []
    try:
        width = _sequence(items, flags, inner)
    except _CutError:
        out.append("(?:" + "".join(inner) + ")")
        raise
    out.append("(?:" + "".join(inner) + ")")
    return width


def _branch(alternatives: list[Any], flags: int, out: list[str]) -> int:
    # An alternative cut short makes the whole alternation end there: each is kept up to its cut.
    translated: list[str] = []
    widths: list[int] = []
    cut = False
    for alternative in alternatives:
        inner: list[str] = []
        try:
            widths.append(_sequence(list(alternative), flags, inner))
        except _CutError as alternative_cut:
            cut = True
            widths.append(alternative_cut.width)
        translated.append("".join(inner))
    out.append("(?:" + "|".join(translated) + ")")
    if cut:
        stop = _CutError()
        stop.width = min(widths)
        raise stop
    return min(widths)


def _repeat(value: tuple[int, int, Any], flags: int, out: list[str]) -> int:
    least, most, sub = value
    inner: list[str] = []
    try:
        width = _sequence(list(sub), flags, inner)
    except _CutError as cut:
        if least:
            out.append("(?:" + "".join(inner) + ")")
        else:
            cut.width = 0
        raise
    body = "(?:" + "".join(inner) + ")"
    if most <= _KEPT_COUNTS:
        out.append(f"{body}{{{least},{most}}}")
        return least * width
    kept = min(least, _KEPT_COUNTS)
    out.append(f"{body}{{{kept},}}")
    return kept * width


def superset(pattern: re.Pattern[str]) -> Superset:
    """The RE2 expression that matches, on one line, at least wherever `pattern` matches.

    Args:
        pattern: A detector's compiled pattern (`re.ASCII`).

    Returns:
        The expression (empty when the very first item is cut: it matches everywhere), and its
        width before any cut.
    """
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    out: list[str] = []
    try:
        width = _sequence(list(parsed), parsed.state.flags, out)
    except _CutError as cut:
        return Superset("".join(out), cut.width, whole=False)
    return Superset("".join(out), width, whole=True)
