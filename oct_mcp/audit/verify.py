"""Reading the audit log back: the files oldest first, the chain checked end to end, the last records."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oct_mcp.audit.records import CHAIN_BREAK, GENESIS, head_path, line_digest, read_head
from oct_mcp.audit.verify_bundle import parse_record

__all__ = [
    "Break",
    "Verification",
    "audit_files",
    "describe_record",
    "iter_records",
    "lines_of",
    "read_tail",
    "verify_chain",
]


@dataclass(frozen=True, slots=True)
class Break:
    """Where the chain breaks: the file, the 1-based line in it, and what is wrong."""

    file: Path
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.problem}"


@dataclass(frozen=True, slots=True)
class Verification:
    """What `verify_chain` found."""

    files: tuple[Path, ...]
    records: int
    breaks: tuple[Break, ...]
    first_seq: int | None
    """The `seq` the oldest record on disk carries; above 1, older records were rotated away."""

    @property
    def is_intact(self) -> bool:
        return self.records > 0 and not self.breaks


@dataclass(frozen=True, slots=True)
class _Line:
    file: int
    number: int
    digest: str
    prev: str | None
    seq: int | None


def audit_files(path: str | Path) -> list[Path]:
    """The log at `path` and its rotated files that exist, oldest first: `.N`, ..., `.1`, the log."""
    path = Path(path)
    pattern = re.compile(rf"{re.escape(path.name)}\.([1-9][0-9]*)")
    numbered: list[tuple[int, Path]] = []
    if path.parent.is_dir():
        for candidate in path.parent.iterdir():
            match = pattern.fullmatch(candidate.name)
            if match and candidate.is_file():
                numbered.append((int(match.group(1)), candidate))
    files = [p for _, p in sorted(numbered, reverse=True)]
    if path.is_file():
        files.append(path)
    return files


def lines_of(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def verify_chain(path: str | Path) -> Verification:
    """Check every record's `prev` against the line before it, across the rotated files.

    A broken link is explained by what fits: a record whose `prev` is the hash of another line
    was reordered; a jump in `seq` means records were deleted; otherwise the line before it is
    not what was written (changed). The newest record is checked against the head beside the
    log (`audit.log.head`, its `seq` and hash): a log ending before it was cut. Where a writer
    found that, its `chain_break` record is a break too.

    Args:
        path: The current log (`audit.log`); its rotated files are found beside it.

    Returns:
        The files read, the count of records, and each break (empty when the chain is whole).
    """
    files = tuple(audit_files(path))
    lines: list[_Line] = []
    breaks: list[Break] = []
    for index, file in enumerate(files):
        for number, raw in enumerate(lines_of(file.read_bytes()), start=1):
            record = parse_record(raw)
            if record is None:
                breaks.append(Break(file, number, "changed: not a JSON audit record"))
            elif record.get("event") == CHAIN_BREAK:
                found = record.get("problem")
                breaks.append(Break(file, number, f"chain_break: the writer found the log's end {found}"))
            prev = record.get("prev") if record is not None else None
            seq = record.get("seq") if record is not None else None
            lines.append(
                _Line(
                    file=index,
                    number=number,
                    digest=line_digest(raw),
                    prev=prev if isinstance(prev, str) else None,
                    seq=seq if isinstance(seq, int) else None,
                )
            )
    where = {line.digest: position for position, line in enumerate(lines)}
    # An unparsable line or a chain_break record already says what is wrong there.
    unparsable = {(b.file, b.line) for b in breaks}
    for position, line in enumerate(lines):
        if position == 0:
            continue
        before = lines[position - 1]
        if line.prev == before.digest:
            continue
        culprit, text = _explain(line, before, lines, where, files)
        found = Break(files[culprit.file], culprit.number, text)
        if (found.file, found.line) not in unparsable:
            breaks.append(found)
    if lines and lines[0].prev is None and (files[0], 1) not in unparsable:
        breaks.append(Break(files[0], 1, "changed: the record has no `prev`"))
    end = _check_head(Path(path), lines, where, files)
    if end is not None:
        breaks.append(end)
    breaks.sort(key=lambda b: (files.index(b.file), b.line))
    return Verification(
        files=files,
        records=len(lines),
        breaks=tuple(breaks),
        first_seq=lines[0].seq if lines else None,
    )


def _check_head(
    path: Path, lines: list[_Line], where: Mapping[str, int], files: tuple[Path, ...]
) -> Break | None:
    """The log's end against its head: the record the head seals must be in the log."""
    head = read_head(path)
    if not lines:
        if head is None or head.seq == 0:
            return None
        return Break(head_path(path), 1, f"cut: the log is empty or gone, but its head seals seq {head.seq}")
    last = lines[-1]
    at = Break(files[last.file], last.number, "")
    if head is None:
        problem = f"unsealed: no {head_path(path).name} beside the log, so a cut end would not show"
        return Break(at.file, at.line, problem)
    sealed = where.get(head.hash)
    if sealed is not None:
        after = len(lines) - 1 - sealed
        if after == 0:
            return None
        # Whoever can append a correctly chained line can write one the writer never made: only
        # the seal tells them apart. A crash between a record and its seal leaves one such record;
        # either way a person must look, so it is a finding, never forgiven in silence.
        first = lines[sealed + 1]
        return Break(files[first.file], first.number, _unsealed(after, head.seq))
    if last.seq is not None and last.seq < head.seq:
        missing = head.seq - last.seq
        return Break(
            at.file, at.line, f"cut: {missing} record(s) after this one are gone (seq {head.seq} was written)"
        )
    return Break(at.file, at.line, f"changed: the record its head seals (seq {head.seq}) is not in the log")


def _unsealed(count: int, seq: int) -> str:
    return (
        f"unsealed: {count} record(s) from here on were appended after the one its head seals "
        f"(seq {seq}): by a crash between a record and its seal (one record at most), or by "
        "someone other than oct-mcp"
    )


def _explain(
    line: _Line, before: _Line, lines: list[_Line], where: Mapping[str, int], files: tuple[Path, ...]
) -> tuple[_Line, str]:
    """Why `line` does not link to `before`: the line to blame, and what happened to it."""
    if line.prev is None:
        return line, "changed: the record has no `prev`"
    if line.prev == GENESIS and line.seq == 1:
        # A writer that found no log started a new chain here (the old files were removed).
        return line, "a new chain starts here: the records before it are not where it expects them"
    linked = where.get(line.prev)
    if linked is not None:
        other = lines[linked]
        return line, f"reordered: this record was written after {files[other.file].name}:{other.number}"
    if line.seq is not None and before.seq is not None:
        if line.seq > before.seq + 1:
            missing = line.seq - before.seq - 1
            return line, f"deleted: {missing} record(s) missing before this line (seq {before.seq + 1}..)"
        if line.seq <= before.seq:
            return line, f"reordered: seq {line.seq} follows seq {before.seq}"
    return before, "changed: the line differs from what was written (the next record's hash disagrees)"


def read_tail(path: str | Path, count: int) -> list[bytes]:
    """The last `count` lines of the log, oldest first, reaching into rotated files as needed."""
    if count <= 0:
        return []
    kept: deque[bytes] = deque()
    for file in reversed(audit_files(path)):
        for raw in reversed(lines_of(file.read_bytes())):
            kept.appendleft(raw)
            if len(kept) == count:
                return list(kept)
    return list(kept)


def describe_record(raw: bytes) -> str:
    """One readable line: time, tool, outcome, reason, duration."""
    record = parse_record(raw)
    if record is None:
        return f"(not a JSON audit record: {raw[:80]!r})"
    reason = record.get("code") or ""
    if not reason and record.get("exit_code") not in (None, 0):
        reason = f"exit {record['exit_code']}"
    duration = record.get("duration_ms")
    shown = f"{duration:.1f} ms" if isinstance(duration, int | float) else "-"
    return "  ".join(
        [
            str(record.get("time", "?")),
            f"{record.get('tool') or record.get('event', '?')!s:<18}",
            f"{record.get('outcome', '?')!s:<17}",
            f"{reason or '-'!s:<20}",
            shown,
        ]
    )


def iter_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every record that parses, oldest first (a tool for tests and scripts, not for verification)."""
    for file in audit_files(path):
        for raw in lines_of(file.read_bytes()):
            record = parse_record(raw)
            if record is not None:
                yield record
