"""The redaction engine: one keyword pass over the text, detectors only where their keywords are.

On a long ASCII text with both wheels installed, the screen (`screen.py`) first rules out the lines
no secret can be on, and the keyword passes run on the rest only.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from ahocorasick_rs import BytesAhoCorasick, Implementation

from oct_mcp.redaction.checks import MASK_PREFIX, PUBLISHED_EXAMPLES, mask
from oct_mcp.redaction.detectors import DETECTORS, PROVIDER, Detector, Span
from oct_mcp.redaction.prefilter import field_lines, one_byte_a_character, prefilter_engine
from oct_mcp.redaction.screen import Screen, engines_installed, screen

__all__ = [
    "PASSES",
    "PLAIN_KEYS",
    "PLAIN_PASSES",
    "Anchored",
    "Finding",
    "LineMasks",
    "Passes",
    "keyword_hits",
    "keyword_scanner",
    "mask_line",
    "redact",
    "redact_excerpts",
    "redact_lines",
    "warm_up",
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

    Both would hit at the same start, so the pattern would run twice at one anchor. In sorted order
    a keyword extends another exactly when it extends the last one kept before it (what lies
    between a keyword and its extension extends it too, or something shorter that it extends):
    one comparison a keyword, where trying every prefix of every keyword took 15 ms of each
    process's first redaction (the password detector has 13,446 keywords).
    """
    extending: set[str] = set()
    kept = ""
    for keyword in sorted(set(detector.keywords)):
        if kept and keyword.startswith(kept):
            extending.add(keyword)
        else:
            kept = keyword
    return [k for k in detector.keywords if k not in extending]


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
def keyword_scanner() -> _Scanner:
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
    keyword_scanner()
    engines_installed()
    prefilter_engine()


_TOKEN_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=.~:")


_SNAP_LIMIT: Final = 512


PLAIN_KEYS: set[str] = set()
"""The clean keys that name no secret field: a mapping whose keys are all here needs no key looked at."""


_EXISTING_MASK: Final = re.compile(r"\[REDACTED:[a-z0-9_]{1,64}\]", re.ASCII)


def keyword_hits(data: bytes, keywords: _Keywords) -> list[tuple[int, int, int]]:
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


def _field_hits(data: bytes, keywords: _Keywords, passes: Passes) -> list[tuple[int, int, int]]:
    """The hits of the field names; where they are dense, only those on the prefilter's lines."""
    hits = keyword_hits(data, keywords)
    if len(hits) * _SPARSE_HITS < len(data):
        return hits
    lines = field_lines(data) if passes.compiled else None
    if lines is None:
        return hits
    starts = [start for start, _end in lines]
    kept = []
    for hit in hits:
        index = bisect.bisect_right(starts, hit[1]) - 1
        if index >= 0 and hit[1] < lines[index][1]:
            kept.append(hit)
    return kept


@dataclass(frozen=True, slots=True, kw_only=True)
class Passes:
    """Which passes a redaction may take over a text: every choice masks the same (a property test
    holds the fastest to the plainest), so this is a matter of speed only."""

    screened_from: int = 512
    """Texts this long and longer are screened first. Shorter, the screen's two passes cost more
    than the keyword passes they spare. Measured on tool output, code, keyword-dense output and a
    secret corpus's documents: screened, 512 to 2,048 characters took 7 to 13 us against 8 to 53 us
    (a 1 KiB output 7 against 11)."""
    compiled: bool = True
    """The compiled multi-pattern passes (the screen, the prefilter), where their wheels are
    installed; without, every line is searched at every keyword."""


PASSES: Final = Passes()
PLAIN_PASSES: Final = Passes(compiled=False)
"""The path of a machine without the compiled passes' wheels."""


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


def _screened(text: str, data: bytes, passes: Passes) -> Screen | None:
    return screen(text, data) if passes.compiled and len(text) >= passes.screened_from else None


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


def _spans(text: str, passes: Passes = PASSES) -> list[Span]:
    scanner = keyword_scanner()
    spans: list[Span] = []
    windows: dict[int, list[int]] = {}
    data = one_byte_a_character(text)  # what every multi-pattern pass reads, made once
    screened = _screened(text, data, passes)
    if screened is None:
        hits = keyword_hits(data, scanner.everywhere)
        field_hits = _field_hits(data, scanner.on_field_lines, passes)
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
    # A standard's printed example, found by a header or a query's name (`Bearer mF_9.B5f-4.1JqM`,
    # `?code=SplxlOBeZQQYbYS6WxSbIA`) as by a field's: public, whatever found it.
    return [span for span in spans if text[span[0] : span[1]] not in PUBLISHED_EXAMPLES] if spans else spans


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


def redact(text: str, passes: Passes = PASSES) -> tuple[str, tuple[Finding, ...]]:
    """Mask every secret in `text` as `[REDACTED:<kind>]`.

    Idempotent: redacting the result changes nothing and finds nothing. Text outside the masked
    spans is returned byte for byte.

    Args:
        text: Any text: tool output, a file, a log, an argument.
        passes: The passes it may take (the same masks, by other ways: see `Passes`).

    Returns:
        The redacted text, and one finding per mask (kind and offsets in `text`).
    """
    if not text:
        return text, ()
    found = _spans(text, passes)
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
    # One shared empty tuple a line: most files hold no secret, and a list a line cost more than
    # finding that out (a tenth of a search's time, on Django's sources).
    lines: list[LineMasks] = [()] * (text.count("\n") + 1)
    if not spans:
        return lines
    starts = list(itertools.accumulate((len(line) + 1 for line in text.split("\n")), initial=0))
    for start, end, kind, _priority in spans:
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, max(start, end - 1)) - 1
        for number in range(first, min(last, len(lines) - 1) + 1):
            line_start, line_end = starts[number], starts[number + 1] - 1
            low, high = max(start, line_start) - line_start, min(end, line_end) - line_start
            if low < high:
                lines[number] = (*lines[number], (low, high, kind))
    return lines


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
