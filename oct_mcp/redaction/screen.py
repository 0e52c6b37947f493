"""Where in a text a secret can be: two multi-pattern passes that rule out the lines none can be on.

Tool output is full of the detectors' keywords (`token`, `secret`, `password`, `key-`), and running
Python at each keyword is what made keyword-dense text slow. Two passes in C decide, line by line,
where the detectors are to run at all:

- one Hyperscan pass (the `hyperscan` wheel) over a superset of each detector's pattern
  (`superset.py`): a detector's keyword hit on a line where no superset matched cannot start a
  match. Hyperscan runs the two hundred supersets at hundreds of MB/s, as it does for Nosey Parker;
- one RE2 `Set` pass (the `google-re2` wheel) over blocks of whole lines, with the expressions of
  `prefilter.py` for the field names. Hyperscan runs those at 40-60 MB/s on keyword-dense text (their
  names are short literals met every few characters, each starting an automaton); RE2's DFA does not
  care how dense the names are (200-400 MB/s), but says only whether a block matched, not where.

Each pass only rules out: what it keeps goes through the same detectors as every line does without
the wheels, so the output is the same either way (the parity test of
`tests/redaction/test_redaction_screen.py`).

Text that is not ASCII is screened too: one character in a megabyte of output (an author's name in
a git log, a check mark in a test run) used to send all of it down the slow path (5 to 25 MB/s
instead of hundreds). The passes read it as one byte a character, each non-ASCII character as the
byte 0x80 (`prefilter.one_byte_a_character`), so their offsets are the text's. That loses nothing
the detectors see: they are compiled with `re.ASCII`, where a non-ASCII character is in no class
but the negated ones (`\\S`, `[^"]`, `.`), as 0x80 is in the supersets; the field checks count it
as a symbol (`checks.char_classes`), as the field expressions count 0x80; and the keywords are met
in text lower-cased the same way (`engine._hits`), only ASCII letters folded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Final

from oct_mcp.redaction.checks import MASK_PREFIX
from oct_mcp.redaction.detectors import DETECTORS
from oct_mcp.redaction.prefilter import EXPRESSIONS, one_byte_a_character
from oct_mcp.redaction.superset import superset

__all__ = ["Screen", "engines_installed", "screen"]

Ranges = list[tuple[int, int]]

# The blocks the RE2 pass decides on: whole lines, about this many bytes. Smaller blocks are ruled
# out more finely but each costs a call (about 1 us); so a coarse block is looked at first, and its
# blocks only where it matched. Measured on both bulks of benchmarks/redaction.py.
_COARSE_BLOCK: Final = 65536
_BLOCK: Final = 4096
# More superset matches than one in this many bytes (and a few): the pass gives up (see on_match).
_DENSE_CANDIDATES: Final = 256
_CANDIDATES_ALLOWED: Final = 64
# RE2's Set answers "no match" when its DFA runs out of memory: a budget far above what the five
# field expressions need keeps that from happening (they run in a few hundred KiB).
_RE2_MEMORY: Final = 64 << 20


@dataclass(frozen=True, slots=True)
class Screen:
    """The parts of a text the detectors are to run on. Ranges are sorted, disjoint, line-aligned."""

    lines: Ranges
    """Where a keyword-anchored or windowed detector may match."""
    field_blocks: Ranges
    """Where a secret-named field may hold a literal secret."""
    scanning: frozenset[int]
    """The indexes in DETECTORS of the `scan` detectors that may match anywhere in the text."""
    masked: bool
    """Whether the text holds a mask (`[REDACTED:`) already."""
    data: bytes
    """The text as the passes read it (`one_byte_a_character`): offsets are the text's."""


@dataclass(frozen=True, slots=True)
class _Engines:
    scan_supersets: Callable[[bytes], list[tuple[int, int]] | None]
    """(expression id, end offset) of every match of a superset; None where they are dense."""
    match_fields: Callable[[bytes], bool]
    scanning_ids: dict[int, int]
    """Expression id -> index in DETECTORS of a `scan` detector."""
    scanning_always: frozenset[int]
    """The `scan` detectors the pass cannot rule out: those whose superset matches everywhere."""
    mask_id: int
    """The expression id of a mask (`[REDACTED:`), which the engine must know of: no line."""


def _keywords_expression(keywords: tuple[str, ...]) -> str:
    # Keywords are met in lower-cased text: caseless here, as the automaton's hits are.
    return "(?i:" + "|".join(re.escape(keyword) for keyword in keywords) + ")"


def _expression(index: int) -> str:
    """What the Hyperscan pass runs for DETECTORS[index]: its superset, else its keywords.

    A keyword hit starts the detector's match `back` characters before it; the superset's part
    that is never cut must reach past the hit, so that the hit is on the line the superset matched.
    """
    detector = DETECTORS[index]
    if detector.window:
        # A windowed detector searches around its keyword: only the keyword says where.
        return _keywords_expression(detector.keywords)
    found = superset(detector.pattern)
    if found.min_width <= detector.back or not found.expression:
        return _keywords_expression(detector.keywords)
    return found.expression


@cache
def _engines() -> _Engines | None:
    try:
        import hyperscan  # type: ignore[import-untyped,unused-ignore]
        import re2  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    expressions: list[str] = []
    scanning_ids: dict[int, int] = {}
    scanning_always: set[int] = set()
    for index, detector in enumerate(DETECTORS):
        if detector.prefiltered:
            continue
        if detector.scan:
            found = superset(detector.pattern)
            if found.min_width == 0:
                scanning_always.add(index)
                continue
            scanning_ids[len(expressions)] = index
            expressions.append(found.expression)
            continue
        expressions.append(_expression(index))
    mask_id = len(expressions)
    expressions.append(re.escape(MASK_PREFIX))
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    ids = list(range(len(expressions)))
    single = {*scanning_ids, mask_id}
    database.compile(
        expressions=[expression.encode("ascii") for expression in expressions],
        ids=ids,
        elements=len(expressions),
        # A `scan` detector's pass runs on the whole text or not at all, and a mask is there or not:
        # their first match says enough.
        flags=[hyperscan.HS_FLAG_SINGLEMATCH if id_ in single else 0 for id_ in ids],
    )
    scratch = hyperscan.Scratch(database)

    def scan_supersets(data: bytes) -> list[tuple[int, int]] | None:
        found: list[tuple[int, int]] = []

        def on_match(id_: int, _start: int, end: int, _flags: int, _context: object) -> bool:
            found.append((id_, end))
            # Returning True stops the scan: where candidates are this dense, ruling lines out
            # saves less than the pass costs (text full of secrets), and every line is searched.
            return len(found) > end // _DENSE_CANDIDATES + _CANDIDATES_ALLOWED

        try:
            database.scan(data, match_event_handler=on_match, scratch=scratch)
        except hyperscan.ScanTerminated:
            return None
        return found

    options = re2.Options()
    options.max_mem = _RE2_MEMORY
    # One character a byte, as the text is read (0x80 for any non-ASCII one): never a UTF-8 decode.
    options.encoding = re2.Options.Encoding.LATIN1
    fields = re2.Set.SearchSet(options)
    for expression in EXPRESSIONS:
        fields.Add("(?m)" + expression)
    fields.Compile()

    matches = fields._set.Match  # the wrapper's `Match` only adds a type test and `or None`

    def match_fields(data: bytes) -> bool:
        return bool(matches(data))

    return _Engines(scan_supersets, match_fields, scanning_ids, frozenset(scanning_always), mask_id)


def engines_installed() -> bool:
    """Whether both wheels are installed, so that `screen` rules lines out."""
    return _engines() is not None


def _line_of(text: str, end: int) -> tuple[int, int]:
    """The line (without its break) that holds the character before offset `end`."""
    start = text.rfind("\n", 0, end - 1) + 1
    stop = text.find("\n", end - 1)
    return start, len(text) if stop == -1 else stop


def _superset_lines(text: str, found: list[tuple[int, int]], engines: _Engines) -> Ranges:
    lines: Ranges = []
    last_end = -1
    skipped = engines.scanning_ids.keys() | {engines.mask_id}
    for end in sorted(end for id_, end in found if id_ not in skipped):
        if end <= last_end:
            continue
        line = _line_of(text, end)
        last_end = line[1]
        lines.append(line)
    return lines


def _blocks(data: bytes, start: int, end: int, size: int) -> Iterator[tuple[int, int]]:
    """Blocks of whole lines of about `size` bytes that tile data[start:end] (`end` ends a line)."""
    while start < end:
        stop = data.find(b"\n", min(start + size, end) - 1, end)
        stop = end if stop == -1 else stop + 1
        yield start, stop
        start = stop


def _field_blocks(data: bytes, match_fields: Callable[[bytes], bool]) -> Ranges:
    kept: Ranges = []
    length = len(data)
    for coarse_start, coarse_end in _blocks(data, 0, length, _COARSE_BLOCK):
        if not match_fields(_block(data, coarse_start, coarse_end)):
            continue
        for start, stop in _blocks(data, coarse_start, coarse_end, _BLOCK):
            if match_fields(_block(data, start, stop)):
                if kept and kept[-1][1] == start:
                    kept[-1] = (kept[-1][0], stop)
                else:
                    kept.append((start, stop))
    return kept


def _block(data: bytes, start: int, stop: int) -> bytes:
    block = data[start:stop]
    if stop == len(data) and not block.endswith(b"\n"):
        # A value's end may be matched on the character after it; at the text's end there is none.
        block += b"\n"
    return block


def screen(text: str, data: bytes | None = None) -> Screen | None:
    """The lines of `text` the detectors are to run on; None: run them everywhere.

    Args:
        text: The text being redacted.
        data: `one_byte_a_character(text)`, where the caller has it already.

    Returns:
        The screen; None when a wheel is missing, or candidates are so dense that ruling lines
        out would save nothing.
    """
    engines = _engines()
    if engines is None:
        return None
    if data is None:
        data = one_byte_a_character(text)
    found = engines.scan_supersets(data)
    if found is None:
        return None
    scanning = engines.scanning_always | {
        engines.scanning_ids[id_] for id_, _end in found if id_ in engines.scanning_ids
    }
    return Screen(
        lines=_superset_lines(text, found, engines),
        field_blocks=_field_blocks(data, engines.match_fields),
        scanning=scanning,
        masked=any(id_ == engines.mask_id for id_, _end in found),
        data=data,
    )
