"""Redaction of structured values (a tool's structured content, a call's arguments): every string
and every mapping key, the walk skipping what is surely clean."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from oct_mcp.redaction.checks import is_literal_secret, mask
from oct_mcp.redaction.detectors import DETECTORS, SECRET_NAME, secret_field_kind
from oct_mcp.redaction.engine import PLAIN_KEYS, keyword_hits, keyword_scanner, redact
from oct_mcp.redaction.prefilter import one_byte_a_character
from oct_mcp.redaction.screen import screen

__all__ = ["ValueStrings", "redact_value", "secret_field_name", "value_strings"]

# Mapping keys redact() found clean: the structured content of every call repeats its field
# names, and redacting each again cost 2 us a key (10 us of a read_file call's 15 us, measured).
_CLEAN_KEYS: dict[str, bool] = {}
"""Clean key -> whether it names a secret field (`password`, `api_key`)."""


_CLEAN_KEYS_MAX: Final = 4_096


_CLEAN_KEY_MAX_LENGTH: Final = 64


def secret_field_name(name: str) -> bool:
    """Whether a field named `name` holds a secret (`password`, `db_password`, `apiKey`, `auth_token`).

    Args:
        name: A mapping key or argument name.

    Returns:
        True when a literal value under that name is to be masked whatever it looks like.
    """
    return SECRET_NAME.fullmatch(name) is not None


def redact_value(
    value: Any, strings: ValueStrings | None = None, known_clean: frozenset[str] = frozenset()
) -> tuple[Any, int]:
    """Redact every string in a JSON-like value (dicts, lists, tuples, strings; other scalars kept).

    Under a secret-named key (`{"password": "hunter2x"}`) a literal string is masked whole, though
    no pattern would find it alone; keys are redacted too.

    Args:
        value: Structured tool output or tool-call arguments.
        strings: `value_strings(value)`, where the caller has gathered them already.
        known_clean: Strings the caller has just had redact() return unchanged (a result's text,
            which its structured content repeats): not looked at again.

    Returns:
        A value of the same shape, and the number of secrets masked. A value in which nothing is to
        be masked and no key names a secret comes back as it was, not copied.
    """
    if isinstance(value, str):
        redacted, findings = redact(value)
        return redacted, len(findings)
    gathered = value_strings(value) if strings is None else strings
    if known_clean:
        rest = [text for text in gathered.texts if text not in known_clean]
        if len(rest) < len(gathered.texts):
            gathered = ValueStrings(rest, "\n".join(rest), gathered.plain_keys)
    clean = _surely_clean(gathered)
    if clean is None:
        if gathered.plain_keys:
            return value, 0  # a listing's page, as most are: no second walk over it
        clean = frozenset(gathered.texts)
    return _redact_nested(value, clean | known_clean)


def _redact_nested(value: Any, clean: frozenset[str]) -> tuple[Any, int]:
    if isinstance(value, str):
        if value in clean:
            return value, 0
        redacted, findings = redact(value)
        return redacted, len(findings)
    if isinstance(value, Mapping):
        return _redact_mapping(value, clean)
    if isinstance(value, list | tuple):
        return _redact_items(value, clean)
    return value, 0


@dataclass(frozen=True, slots=True)
class ValueStrings:
    """The strings of a JSON-like value, gathered in one walk for the passes that look at all at once."""

    texts: list[str]
    """Every string the value holds but its keys, in no particular order."""
    joined: str
    """The texts joined by line breaks: a literal in one of them is a literal in this."""
    plain_keys: bool
    """Every mapping key is a string that redact() leaves as it is and that names no secret field."""


_ONLY_DICTS: Final = frozenset({dict})


_FLAT: Final = frozenset({str, int, float, bool, type(None)})


def value_strings(value: Any) -> ValueStrings:
    """The strings of `value` but its keys, and whether its keys need a look.

    A structured result is mostly a table (a listing's 756 entries of two strings each): its rows'
    types, keys and values are taken in C (`map`, `set`, `chain`, `join`) rather than one item at a
    time: 80 us for a page, where a walk item by item cost 120 us (measured).

    Args:
        value: A JSON-like value.
    """
    texts: list[str] = []
    pieces: list[str] = []  # the texts joined a level at a time: joined again, the texts joined
    plain_keys = True
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            texts.append(item)
            pieces.append(item)
            continue
        if isinstance(item, Mapping):
            plain_keys = plain_keys and _plain(item.keys())
            values: Any = list(item.values())
        elif isinstance(item, list | tuple):
            values = item
            if values and set(map(type, values)) == _ONLY_DICTS:
                plain_keys = plain_keys and _plain(set().union(*values))
                values = list(itertools.chain.from_iterable(map(dict.values, values)))
        else:
            continue
        if not values:
            continue
        try:
            piece = "\n".join(values)  # also the test that every value is a string
        except TypeError:
            if set(map(type, values)) <= _FLAT:
                values = [entry for entry in values if type(entry) is str]
                if values:
                    texts.extend(values)
                    pieces.append("\n".join(values))
            else:
                stack.extend(values)
            continue
        texts.extend(values)
        pieces.append(piece)
    return ValueStrings(texts, "\n".join(pieces), plain_keys)


def _plain(keys: Any) -> bool:
    """Whether every key is a string redact() keeps as it is and no secret field's name; learns them."""
    if keys <= PLAIN_KEYS:
        return True
    plain = True
    for key in keys - PLAIN_KEYS:
        if not isinstance(key, str):
            return False
        redacted, _count, secret_named = _redact_key(key)
        plain = plain and redacted == key and not secret_named
    return plain


# Below this many characters a few keyword passes over the strings joined cost less than the
# screen's two passes (about 4 us whatever the length, measured).
_SCREENED_STRINGS: Final = 256


# A value of this few strings is looked at one by one for those this long, which redact() alone.
_FEW_STRINGS: Final = 64


_SCREENED_ALONE: Final = 4096


def _surely_clean(strings: ValueStrings) -> frozenset[str] | None:
    """The texts that redact() returns unchanged, found in a pass or two over them joined; None:
    every one of them.

    A structured result holds many strings (a listing's 10,000 paths), each a redact() call of 2 to
    4 us that finds nothing. The screen (`screen.py`) runs each detector's line-local superset over
    the texts joined by line breaks: a detector that matches in one text matches its superset on a
    line of that text in the joined one too, so a text that no flagged line or block touches is
    clean, whatever its length, unless a `scan` detector's superset matched somewhere. Without the
    wheels, or where the screen gives up, only the short texts are decided, by the keywords: short
    of every scanning detector's length and holding no keyword, redact() looks no further.
    """
    texts = strings.texts
    if not texts:
        return None
    joined = strings.joined
    if len(joined) < _SCREENED_STRINGS:
        return _keyword_clean(texts)
    if len(texts) <= _FEW_STRINGS and len(joined) >= _SCREENED_ALONE:
        # A file's text among a few fields (a read): redacted alone, it is screened once; screened
        # with the rest first, it would be screened twice wherever the screen flags a line of it.
        rest = [text for text in texts if len(text) < _SCREENED_ALONE]
        if len(rest) < len(texts):
            clean = _surely_clean(ValueStrings(rest, "\n".join(rest), strings.plain_keys))
            return frozenset(rest) if clean is None else clean
    decided, clean = _screened_clean(texts, joined)
    return clean if decided else _keyword_clean(texts)


def _screened_clean(texts: list[str], joined: str) -> tuple[bool, frozenset[str] | None]:
    """`_surely_clean` of `texts` by the screen, and whether it could decide."""
    screened = screen(joined) if texts else None
    if screened is None:
        return False, frozenset()
    ranges = screened.lines + screened.field_blocks
    if not ranges and not screened.scanning:
        return True, None
    starts = list(itertools.accumulate(map((1).__add__, map(len, texts)), initial=0))
    touched: set[int] = set()
    for start, end in ranges:
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, max(start, end - 1)) - 1
        touched.update(range(first, last + 1))
    if screened.scanning:
        shortest = min(DETECTORS[index].min_length for index in screened.scanning)
        touched.update(index for index, text in enumerate(texts) if len(text) >= shortest)
    return True, frozenset(text for index, text in enumerate(texts) if index not in touched)


def _keyword_clean(texts: list[str]) -> frozenset[str] | None:
    """`_surely_clean` by the keywords: the short `texts` no keyword touches; None: every one."""
    scanner = keyword_scanner()
    distinct = dict.fromkeys(texts)
    short = [text for text in distinct if len(text) < scanner.shortest_scanned]
    if not short:
        return frozenset() if distinct else None
    data = one_byte_a_character("\n".join(short))
    starts = list(itertools.accumulate((len(text) + 1 for text in short), initial=0))
    touched: set[int] = set()
    for keywords in (scanner.everywhere, scanner.on_field_lines):
        for _keyword, start, end in keyword_hits(data, keywords):
            first = bisect.bisect_right(starts, start) - 1
            last = bisect.bisect_right(starts, max(start, end - 1)) - 1
            touched.update(range(first, last + 1))
    if not touched and len(short) == len(distinct):
        return None
    return frozenset(text for index, text in enumerate(short) if index not in touched)


def _redact_items(items: Sequence[Any], clean: frozenset[str]) -> tuple[Any, int]:
    if _unchanged(items, clean):
        return items, 0
    total = 0
    result: list[Any] = []
    for item in items:
        redacted, count = _redact_nested(item, clean)
        result.append(redacted)
        total += count
    return (tuple(result) if isinstance(items, tuple) else result), total


def _unchanged(items: Sequence[Any], clean: frozenset[str]) -> bool:
    """Whether redacting `items` would change nothing: each a clean string, or a flat mapping of
    keys known clean and not secret-named to clean strings and other scalars (a listing's entries)."""
    for item in items:
        if isinstance(item, str):
            if item not in clean:
                return False
        elif isinstance(item, dict):
            for key, entry in item.items():
                if _CLEAN_KEYS.get(key) is not False:
                    return False
                if isinstance(entry, str):
                    if entry not in clean:
                        return False
                elif not (entry is None or isinstance(entry, bool | int | float)):
                    return False
        else:
            return False
    return True


def _redact_key(key: str) -> tuple[str, int, bool]:
    """`redact(key)`, and whether the key names a secret field; clean keys are remembered.

    Field names repeat on every call. Only keys found clean are kept, so the memo never holds a
    secret.
    """
    secret_named = _CLEAN_KEYS.get(key)
    if secret_named is not None:
        return key, 0, secret_named
    redacted, findings = redact(key)
    secret_named = secret_field_name(key)
    if not findings and len(key) <= _CLEAN_KEY_MAX_LENGTH and len(_CLEAN_KEYS) < _CLEAN_KEYS_MAX:
        _CLEAN_KEYS[key] = secret_named
        if not secret_named:
            PLAIN_KEYS.add(key)
    return redacted, len(findings), secret_named


def _redact_mapping(mapping: Mapping[Any, Any], clean: frozenset[str]) -> tuple[dict[Any, Any], int]:
    total = 0
    result: dict[Any, Any] = {}
    for key, item in mapping.items():
        if isinstance(key, str):
            new_key, count, secret_named = _redact_key(key)
            total += count
        else:
            new_key, secret_named = key, False
        if new_key in result:
            new_key = _unique(result, new_key)
        if isinstance(item, str):
            kind = secret_field_kind(key) if secret_named else ""
            if secret_named and is_literal_secret(item, quoted=True, digits=kind == "password"):
                # The key is the context a bare value lacks.
                result[new_key] = mask(kind)
                total += 1
                continue
            if item in clean:
                result[new_key] = item
                continue
            redacted, findings = redact(item)
            result[new_key] = redacted
            total += len(findings)
        elif item is None or isinstance(item, bool | int | float):
            result[new_key] = item  # no scalar but a string holds a secret
        else:
            result[new_key], count = _redact_nested(item, clean)
            total += count
    return result, total


def _unique(result: Mapping[Any, Any], key: Any) -> Any:
    # Two keys that were different secrets may mask to the same text; keep both entries.
    if key not in result or not isinstance(key, str):
        return key
    suffix = 2
    while f"{key}#{suffix}" in result:
        suffix += 1
    return f"{key}#{suffix}"
