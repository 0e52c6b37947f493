"""The redaction engine: one keyword pass over the text, detectors only where their keywords are.

On a long ASCII text with both wheels installed, the screen (`screen.py`) first rules out the lines
no secret can be on, and the keyword passes run on the rest only.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from ahocorasick_rs import BytesAhoCorasick, Implementation

from oct_mcp.redaction.checks import MASK_PREFIX, is_literal_secret, mask
from oct_mcp.redaction.detectors import DETECTORS, PROVIDER, SECRET_NAME, Detector, Span, secret_field_kind
from oct_mcp.redaction.prefilter import field_lines, one_byte_a_character, prefilter_engine
from oct_mcp.redaction.screen import Screen, engines_installed, screen

__all__ = [
    "Finding",
    "LineMasks",
    "ValueStrings",
    "mask_line",
    "redact",
    "redact_excerpts",
    "redact_lines",
    "redact_value",
    "secret_field_name",
    "value_strings",
]


@dataclass(frozen=True, slots=True)
class Finding:
    """One masked secret: its kind and where it was in the input. Never the secret itself."""

    kind: str
    start: int
    end: int


Anchored = tuple[int, "Callable[[str, int], re.Match[str] | None]", Detector]


@dataclass(frozen=True, slots=True)
class _Keywords:
    """Detectors indexed by keyword in an automaton."""

    # anchored[i]: for keyword i of the automaton, (back, pattern.match, detector) of each detector
    # anchored at it; windowed[i]: the indexes in DETECTORS of those that search around it.
    anchored: tuple[tuple[Anchored, ...], ...]
    windowed: tuple[tuple[int, ...], ...]
    bytes_automaton: BytesAhoCorasick


@dataclass(frozen=True, slots=True)
class _Scanner:
    """The detectors by keyword: everywhere, or on the prefilter's lines; and those that scan it all."""

    everywhere: _Keywords
    on_field_lines: _Keywords
    scanning: tuple[tuple[int, Detector], ...]
    """The `scan` detectors, with their indexes in DETECTORS."""
    shortest_scanned: int
    """A text shorter than this, with no keyword in it, holds nothing to find (field names, paths)."""


def _own_keywords(detector: Detector) -> list[str]:
    """The detector's keywords less those that extend another of its own keywords.

    Both would hit at the same start, so the pattern would run twice at one anchor.
    """
    keywords = set(detector.keywords)
    return [k for k in detector.keywords if not any(k[:n] in keywords for n in range(1, len(k)))]


def _keywords(prefiltered: bool) -> _Keywords:
    anchored: dict[str, list[Anchored]] = {}
    windowed: dict[str, list[int]] = {}
    for index, detector in enumerate(DETECTORS):
        if detector.prefiltered != prefiltered:
            continue
        for keyword in _own_keywords(detector):
            anchored.setdefault(keyword, [])
            windowed.setdefault(keyword, [])
            if detector.window:
                windowed[keyword].append(index)
            else:
                anchored[keyword].append((detector.back, detector.pattern.match, detector))
    keywords = list(anchored)
    return _Keywords(
        anchored=tuple(tuple(anchored[keyword]) for keyword in keywords),
        windowed=tuple(tuple(windowed[keyword]) for keyword in keywords),
        # A DFA: more memory than the NFAs (a few MB for these keywords), twice their speed.
        bytes_automaton=BytesAhoCorasick(
            [keyword.encode("ascii") for keyword in keywords], implementation=Implementation.DFA
        ),
    )


@cache
def _scanner() -> _Scanner:
    # Built on first use, not at import: the server imports this module before it needs it.
    return _Scanner(
        everywhere=_keywords(prefiltered=False),
        on_field_lines=_keywords(prefiltered=True),
        scanning=tuple((index, detector) for index, detector in enumerate(DETECTORS) if detector.scan),
        shortest_scanned=min((detector.min_length for detector in DETECTORS if detector.scan), default=0),
    )


def warm_up() -> None:
    """Build now what the first redaction would: the keyword automata, the screen's engines, the
    prefilter (100 to 200 ms). A server calls this on a thread of its own once it serves, so that
    neither `initialize` nor the host's first call waits for it; a redaction that comes first
    builds what it needs itself, as before."""
    _scanner()
    engines_installed()
    prefilter_engine()


_TOKEN_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=.~:")
_SNAP_LIMIT: Final = 512
# Mapping keys redact() found clean: the structured content of every call repeats its field
# names, and redacting each again cost 2 us a key (10 us of a read_file call's 15 us, measured).
_CLEAN_KEYS: dict[str, bool] = {}
"""Clean key -> whether it names a secret field (`password`, `api_key`)."""
_CLEAN_KEYS_MAX: Final = 4_096
_PLAIN_KEYS: set[str] = set()
"""The clean keys that name no secret field: a mapping whose keys are all here needs no key looked at."""
_CLEAN_KEY_MAX_LENGTH: Final = 64
_EXISTING_MASK: Final = re.compile(r"\[REDACTED:[a-z0-9_]{1,64}\]", re.ASCII)


def _hits(data: bytes, keywords: _Keywords) -> list[tuple[int, int, int]]:
    """(keyword index, start, end) for every keyword occurrence, overlapping ones included.

    `data` is the text as `one_byte_a_character` gives it. Bytes: three times the speed of a str
    automaton. Only ASCII letters are folded, as in the detectors (`re.ASCII`): `K`, the Kelvin
    sign, is no `k` to them, and would only open a window.
    """
    return keywords.bytes_automaton.find_matches_as_indexes(data.lower(), overlapping=True)


# Below one field-name hit in this many characters, running the detector at each hit costs less
# than the prefilter's pass (about 30 ms a MiB; a hit costs 2 to 10 us): measured on both bulks
# of benchmarks/redaction.py.
_SPARSE_HITS: Final = 256


def _field_hits(data: bytes, keywords: _Keywords) -> list[tuple[int, int, int]]:
    """The hits of the field names; where they are dense, only those on the prefilter's lines."""
    hits = _hits(data, keywords)
    if len(hits) * _SPARSE_HITS < len(data):
        return hits
    lines = field_lines(data)
    if lines is None:
        return hits
    starts = [start for start, _end in lines]
    kept = []
    for hit in hits:
        index = bisect.bisect_right(starts, hit[1]) - 1
        if index >= 0 and hit[1] < lines[index][1]:
            kept.append(hit)
    return kept


# Below this many characters the screen's two passes cost more than the keyword passes they spare.
# Measured on tool output, code, keyword-dense output and a secret corpus's documents: screened,
# 512 to 2,048 characters took 7 to 13 us against 8 to 53 us (a 1 KiB output 7 against 11).
_SCREENED_LENGTH: Final = 512


def _hits_in(
    screened: Screen, keywords: _Keywords, ranges: list[tuple[int, int]]
) -> list[tuple[int, int, int]]:
    """The hits in `ranges` of the screened text: each range holds whole lines, no keyword a line break."""
    automaton = keywords.bytes_automaton
    data = screened.data
    hits: list[tuple[int, int, int]] = []
    for start, end in ranges:
        found = automaton.find_matches_as_indexes(data[start:end].lower(), overlapping=True)
        hits.extend((keyword, start + low, start + high) for keyword, low, high in found)
    return hits


def _screened(text: str, data: bytes) -> Screen | None:
    return screen(text, data) if len(text) >= _SCREENED_LENGTH else None


def _snap(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen a window so that it does not cut a token: a regex would take the cut piece as whole."""
    limit = max(0, start - _SNAP_LIMIT)
    while start > limit and text[start - 1] in _TOKEN_CHARS:
        start -= 1
    limit = min(len(text), end + _SNAP_LIMIT)
    while end < limit and text[end] in _TOKEN_CHARS:
        end += 1
    return start, end


def _masks(text: str) -> list[tuple[int, int]]:
    return [match.span() for match in _EXISTING_MASK.finditer(text)]


def _outside_masks(hits: list[tuple[int, int, int]], text: str) -> list[tuple[int, int, int]]:
    masks = _masks(text)
    starts = [start for start, _end in masks]
    kept = []
    for hit in hits:
        index = bisect.bisect_right(starts, hit[1]) - 1
        if index < 0 or masks[index][1] <= hit[1]:
            kept.append(hit)
    return kept


def _spans(text: str) -> list[Span]:
    scanner = _scanner()
    spans: list[Span] = []
    windows: dict[int, list[int]] = {}
    data = one_byte_a_character(text)  # what every multi-pattern pass reads, made once
    screened = _screened(text, data)
    if screened is None:
        hits = _hits(data, scanner.everywhere)
        field_hits = _field_hits(data, scanner.on_field_lines)
        if not hits and not field_hits and len(text) < scanner.shortest_scanned:
            return spans  # a short text without a keyword: 1.8 -> 0.7 us for a path or a name (measured)
        scanning = [detector for _index, detector in scanner.scanning]
    else:
        hits = _hits_in(screened, scanner.everywhere, screened.lines)
        field_hits = _hits_in(screened, scanner.on_field_lines, screened.field_blocks)
        scanning = [detector for index, detector in scanner.scanning if index in screened.scanning]
    masked = MASK_PREFIX in text if screened is None else screened.masked  # 1 ms a MiB: looked for once
    for keywords, found in ((scanner.everywhere, hits), (scanner.on_field_lines, field_hits)):
        if masked:
            # A mask names a kind (`[REDACTED:password]`): its words are no field name to act on.
            found = _outside_masks(found, text)
        anchored = keywords.anchored
        windowed = keywords.windowed
        # The hot loop: most hits are keywords in ordinary text, whose pattern fails at once.
        for keyword, start, _end in found:
            for back, match_at, detector in anchored[keyword]:
                if start >= back:
                    match = match_at(text, start - back)
                    if match is not None:
                        spans.extend(detector.spans(match))
            for index in windowed[keyword]:
                windows.setdefault(index, []).append(start)
    for detector in scanning:
        matches = detector.pattern.finditer(text) if detector.find is None else detector.find(text)
        spans.extend(span for match in matches for span in detector.spans(match))
    length = len(text)
    for index, starts in windows.items():
        detector = DETECTORS[index]
        reach = 0
        for start in starts:
            low, high = _snap(text, max(0, start - detector.window), min(length, start + detector.window))
            low = max(low, reach)
            if low >= high:
                continue
            reach = high
            spans.extend(s for m in detector.pattern.finditer(text, low, high) for s in detector.spans(m))
    return spans


_WORD: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _unglue(text: str, span: Span) -> Span:
    """Widen a span over the word it is glued to (`AKIA...hooks.slack.com/...` with no blank).

    The mask's brackets would give that word the boundary it lacked, and a second pass would
    find it: redaction would not be idempotent. Text such as `key=secret` is not glued.
    """
    start, end, kind, priority = span
    if priority != PROVIDER:
        # A span found by its context (`-pSECRET`, `key=secret`) has the boundary its context gave.
        return span
    if 0 < start < end and text[start - 1] in _WORD and text[start] in _WORD:
        while start > 0 and text[start - 1] in _WORD:
            start -= 1
    if start < end < len(text) and text[end] in _WORD and text[end - 1] in _WORD:
        while end < len(text) and text[end] in _WORD:
            end += 1
    return start, end, kind, priority


def _merge(spans: list[Span], text: str) -> list[Span]:
    """Overlapping spans become one, masked as the kind of the highest priority among them.

    Between spans of one priority the longest names the union: a vendor's token shape that random
    base64 happens to hold inside a private key's body is part of that key, not a token of its own.
    """
    if MASK_PREFIX in text:
        # Redacting redacted text must change nothing: a span that touches a mask is a mask's echo.
        masks = _masks(text)
        spans = [s for s in spans if not any(s[0] < m_end and m_start < s[1] for m_start, m_end in masks)]
    spans = [_unglue(text, span) for span in spans]
    spans.sort()
    merged: list[Span] = []
    winner_length = 0
    for start, end, kind, priority in spans:
        if merged and start < merged[-1][1]:
            last_start, last_end, last_kind, last_priority = merged[-1]
            if priority > last_priority or (priority == last_priority and end - start > winner_length):
                last_kind, last_priority, winner_length = kind, priority, end - start
            merged[-1] = (last_start, max(last_end, end), last_kind, last_priority)
        else:
            merged.append((start, end, kind, priority))
            winner_length = end - start
    return merged


def redact(text: str) -> tuple[str, tuple[Finding, ...]]:
    """Mask every secret in `text` as `[REDACTED:<kind>]`.

    Idempotent: redacting the result changes nothing and finds nothing. Text outside the masked
    spans is returned byte for byte.

    Args:
        text: Any text: tool output, a file, a log, an argument.

    Returns:
        The redacted text, and one finding per mask (kind and offsets in `text`).
    """
    if not text:
        return text, ()
    found = _spans(text)
    if not found:
        return text, ()  # most text: no second look for masks in it
    spans = _merge(found, text)
    if not spans:
        return text, ()
    pieces: list[str] = []
    position = 0
    for start, end, kind, _priority in spans:
        pieces.append(text[position:start])
        pieces.append(mask(kind))
        position = end
    pieces.append(text[position:])
    return "".join(pieces), tuple(Finding(kind, start, end) for start, end, kind, _priority in spans)


def redact_excerpts(text: str, excerpts: Sequence[tuple[int, int]]) -> tuple[list[str], int]:
    """Cut pieces out of `text`, each with the secrets in it masked as the whole text shows them.

    A piece alone may not show that it holds a secret: a private key's body without its BEGIN
    line, the end of a value whose field name is before the cut. The detectors run on the whole
    text; each piece keeps the part of every mask that falls in it.

    Args:
        text: The whole text (a file).
        excerpts: (start, end) offsets in `text` of the pieces to return (lines, a range).

    Returns:
        The pieces, redacted, in the order given; and the number of masks placed in them.
    """
    found = _spans(text) if text and excerpts else []
    spans = _merge(found, text) if found else []
    ends = [end for _start, end, _kind, _priority in spans]
    pieces: list[str] = []
    masked = 0
    for start, end in excerpts:
        index = bisect.bisect_right(ends, start)
        parts: list[str] = []
        position = start
        while index < len(spans) and spans[index][0] < end:
            span_start, span_end, kind, _priority = spans[index]
            parts.append(text[position : max(position, span_start)])
            parts.append(mask(kind))
            masked += 1
            position = min(end, span_end)
            index += 1
        parts.append(text[position:end])
        pieces.append("".join(parts))
    return pieces, masked


LineMasks = tuple[tuple[int, int, str], ...]
"""The masked spans of one line, in the line's own offsets: (start, end, kind), sorted, disjoint."""


def redact_lines(text: str) -> list[LineMasks]:
    """Where the secrets of `text` are, line by line, found with the whole text as context.

    A line alone may not show that it holds a secret (a private key's body without its BEGIN
    line); each line keeps the part of every mask that falls in it, as `redact_excerpts` does.

    Args:
        text: The whole text (a file); lines end at "\n", which is no part of a line.

    Returns:
        For each line of `text.split("\n")`, its masked spans (empty for most).
    """
    found = _spans(text) if text else []
    spans = _merge(found, text) if found else []
    starts = list(itertools.accumulate((len(line) + 1 for line in text.split("\n")), initial=0))
    lines: list[list[tuple[int, int, str]]] = [[] for _ in range(len(starts) - 1)]
    for start, end, kind, _priority in spans:
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, max(start, end - 1)) - 1
        for number in range(first, min(last, len(lines) - 1) + 1):
            line_start, line_end = starts[number], starts[number + 1] - 1
            low, high = max(start, line_start) - line_start, min(end, line_end) - line_start
            if low < high:
                lines[number].append((low, high, kind))
    return [tuple(spans_of_line) for spans_of_line in lines]


def mask_line(line: str, *masks: LineMasks) -> tuple[str, tuple[tuple[int, int], ...]]:
    """`line` with each span of `masks` (one set or several, joined) masked, and where each mask is in it.

    Args:
        line: One line, as `redact_lines` cut it.
        masks: Its masked spans: several sets (the same line as two texts show it) are joined,
            overlapping spans masked once.

    Returns:
        The masked line, and the (start, end) of each mask in it.
    """
    spans = sorted(span for spans in masks for span in spans)
    if not spans:
        return line, ()
    joined: list[list[Any]] = []
    for start, end, kind in spans:
        if joined and start <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], end)
        else:
            joined.append([start, end, kind])
    pieces: list[str] = []
    places: list[tuple[int, int]] = []
    position = length = 0
    for start, end, kind in joined:
        pieces.append(line[position:start])
        length += start - position
        text = mask(kind)
        pieces.append(text)
        places.append((length, length + len(text)))
        length += len(text)
        position = end
    pieces.append(line[position:])
    return "".join(pieces), tuple(places)


def secret_field_name(name: str) -> bool:
    """Whether a field named `name` holds a secret (`password`, `db_password`, `apiKey`, `auth_token`).

    Args:
        name: A mapping key or argument name.

    Returns:
        True when a literal value under that name is to be masked whatever it looks like.
    """
    return SECRET_NAME.fullmatch(name) is not None


def redact_value(value: Any, strings: ValueStrings | None = None) -> tuple[Any, int]:
    """Redact every string in a JSON-like value (dicts, lists, tuples, strings; other scalars kept).

    Under a secret-named key (`{"password": "hunter2x"}`) a literal string is masked whole, though
    no pattern would find it alone; keys are redacted too.

    Args:
        value: Structured tool output or tool-call arguments.
        strings: `value_strings(value)`, where the caller has gathered them already.

    Returns:
        A value of the same shape, and the number of secrets masked. A value in which nothing is to
        be masked and no key names a secret comes back as it was, not copied.
    """
    if isinstance(value, str):
        redacted, findings = redact(value)
        return redacted, len(findings)
    gathered = value_strings(value) if strings is None else strings
    clean = _surely_clean(gathered)
    if clean is None:
        if gathered.plain_keys:
            return value, 0  # a listing's page, as most are: no second walk over it
        clean = frozenset(gathered.texts)
    return _redact_nested(value, clean)


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
    if keys <= _PLAIN_KEYS:
        return True
    plain = True
    for key in keys - _PLAIN_KEYS:
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
    scanner = _scanner()
    distinct = dict.fromkeys(texts)
    short = [text for text in distinct if len(text) < scanner.shortest_scanned]
    if not short:
        return frozenset() if distinct else None
    data = one_byte_a_character("\n".join(short))
    starts = list(itertools.accumulate((len(text) + 1 for text in short), initial=0))
    touched: set[int] = set()
    for keywords in (scanner.everywhere, scanner.on_field_lines):
        for _keyword, start, end in _hits(data, keywords):
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
            _PLAIN_KEYS.add(key)
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
