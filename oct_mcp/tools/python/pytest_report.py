"""Reading pytest's terminal report: counts, failures, skip reasons, even from a run cut short."""

from __future__ import annotations

import bisect
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, Literal

from pydantic import BaseModel

__all__ = ["PytestReport", "SkipReason", "TestFailure", "read_report", "report_chars"]

_TAIL_CHARS: Final = 4_000
_MESSAGE_CHARS: Final = 4_000
_SKIP_REASONS_MAX: Final = 50
_SUMMARY_COUNT: Final = re.compile(
    r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)"
)
_SUMMARY_TIME: Final = re.compile(r" in ([0-9.]+)s")
_SHORT_SUMMARY: Final = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")
_SKIPPED: Final = re.compile(r"^SKIPPED \[(\d+)\] (.+?)(?::\d+)?: (.*)$")
_BANNER: Final = re.compile(r"^=+ (.+?) =+$")
_SECTION: Final = re.compile(r"^_+ (.+?) _+$")
_CAPTURED: Final = re.compile(r"^-+ Captured .+ -+$")
# `-q` progress: one character per test, a percentage at the end of a full line.
_PROGRESS_LINE: Final = re.compile(r"^([.FEsxX]+)\s*(?:\[\s*\d{1,3}%\])?$")
_PROGRESS_KEYS: Final = {".": "passed", "F": "failed", "E": "errors", "s": "skipped"}
_ERROR_HEADS: Final = (
    "ERROR at setup of ",
    "ERROR at teardown of ",
    "ERROR at call of ",
    "ERROR collecting ",
)
# The report's own parts, after the failure sections; inside a nested run's output they are not ours.
_OUTER_PARTS: Final = ("ERRORS", "FAILURES", "warnings summary", "PASSES", "XFAILURES", "XPASSES")
# pytest's -r characters: one per kind of report in the short summary.
_REPORT_CHARS: Final = re.compile(r"(?:^|[\s\"'\[])-r[\s\"',]*([fEsxXpPaAwN]+)(?![\w.])")


class TestFailure(BaseModel):
    node_id: str
    kind: Literal["failed", "error"]
    message: str
    """The whole assertion or exception message (pytest's `E` lines), up to 4,000 characters."""
    traceback: str = ""
    """The rest of the failure's report (--tb=short: frames, captured output), its last 4,000 characters."""


class SkipReason(BaseModel):
    reason: str
    """Why the tests were skipped, as pytest reported it (`-rs`)."""
    count: int
    where: str
    """The file that skipped them."""


@dataclass
class PytestReport:
    """What one pytest run printed, read from its terminal output."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_PROGRESS_KEYS.values(), 0))
    duration: float | None = None
    summarised: bool = False
    """pytest printed its final counts line; otherwise the counts come from its progress characters."""
    failures: list[TestFailure] = field(default_factory=list)
    skips: list[SkipReason] = field(default_factory=list)
    internal_error: str | None = None
    """The last line of an INTERNALERROR pytest printed: it stopped there."""


def report_chars(config_text: str) -> str:
    """The -r characters a project's pytest config asks for, which oct's own `-r` would replace.

    Args:
        config_text: The text of the project's pytest configuration files.

    Returns:
        The characters, in the order first seen, without duplicates.
    """
    chars: dict[str, None] = {}
    for found in _REPORT_CHARS.finditer(config_text):
        chars.update(dict.fromkeys(found.group(1)))
    return "".join(chars)


def read_report(text: str) -> PytestReport:
    """Read pytest's `-q --tb=short` report, its own parts only: a test's captured output may hold a
    whole nested pytest run (pytester), with banners, sections and a short summary of its own.

    Args:
        text: pytest's stdout.

    Returns:
        The counts, the failures matched to their sections, the skip reasons, an internal error.
    """
    lines = text.splitlines()
    report = PytestReport()
    stats = _stats_line(lines)
    if stats is not None:
        report.summarised = True
        for number, word in _SUMMARY_COUNT.findall(lines[stats]):
            key = "errors" if word.startswith("error") else word
            if key in report.counts:
                report.counts[key] = int(number)
        found = _SUMMARY_TIME.search(lines[stats])
        report.duration = float(found.group(1)) if found else None
    else:
        _count_progress(lines, report.counts)
    crashed = [line for line in lines if line.startswith("INTERNALERROR>")]
    if crashed:
        report.internal_error = crashed[-1].removeprefix("INTERNALERROR>").strip()[:_MESSAGE_CHARS]
    summary = _last_banner(lines, "short test summary info", stats)
    if summary is None:
        return report
    entries = []
    for line in lines[summary + 1 : stats]:
        short = _SHORT_SUMMARY.match(line)
        if short is not None:
            entries.append(short)
            continue
        skipped = _SKIPPED.match(line)
        if skipped is not None and len(report.skips) < _SKIP_REASONS_MAX:
            count, where, reason = skipped.groups()
            report.skips.append(SkipReason(reason=reason[:500], count=int(count), where=where[:500]))
    report.failures = list(_failures(lines[:summary], entries))
    return report


def _stats_line(lines: list[str]) -> int | None:
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if _SUMMARY_TIME.search(line) and (_SUMMARY_COUNT.search(line) or "no tests ran" in line):
            return index
    return None


def _count_progress(lines: list[str], counts: dict[str, int]) -> None:
    """The counts from the progress characters, for a run stopped before its counts line."""
    for line in lines:
        found = _PROGRESS_LINE.match(line.rstrip())
        if found is None:
            continue
        for char in found.group(1):
            key = _PROGRESS_KEYS.get(char)
            if key is not None:
                counts[key] += 1


def _last_banner(lines: list[str], title: str, before: int | None) -> int | None:
    end = len(lines) if before is None else before
    for index in range(end - 1, -1, -1):
        banner = _BANNER.match(lines[index])
        if banner is not None and banner.group(1).strip() == title:
            return index
    return None


def _domain(node_id: str) -> str:
    """The headline pytest gives a test's section: its name after the file, `::` read as `.`."""
    _, _, rest = node_id.partition("::")
    return rest.replace("::", ".") if rest else node_id


def _section_keys(title: str) -> tuple[str, str]:
    """The kind of report a section headline starts and the test it names, as `_domain` gives it."""
    for head in _ERROR_HEADS:
        if title.startswith(head):
            return "error", title.removeprefix(head).removeprefix("[doctest] ")
    return "failed", title.removeprefix("[doctest] ")


def _failures(lines: list[str], entries: list[re.Match[str]]) -> Iterator[TestFailure]:
    """Each short-summary entry with its section: the next section, past the one before it of the same
    kind, whose headline names the entry's test; a nested run's sections name other tests."""
    headers = [
        (index, found.group(1).strip()) for index, line in enumerate(lines) if (found := _SECTION.match(line))
    ]
    by_name: dict[tuple[str, str], list[int]] = {}
    for position, (_, title) in enumerate(headers):
        by_name.setdefault(_section_keys(title), []).append(position)
    matched: list[tuple[int, int]] = []  # (entry, header position in `headers`)
    after = {"failed": 0, "error": 0}
    for number, entry in enumerate(entries):
        kind = "failed" if entry.group(1) == "FAILED" else "error"
        section = _next_section(by_name, kind, entry.group(2), after[kind])
        if section is not None:
            matched.append((number, section))
            after[kind] = section + 1
    starts = sorted(headers[position][0] for _, position in matched)
    bodies: dict[int, list[str]] = {}
    for number, position in matched:
        start = headers[position][0]
        after_it = bisect.bisect_right(starts, start)
        stop = starts[after_it] if after_it < len(starts) else len(lines)
        bodies[number] = lines[start + 1 : _body_end(lines, start + 1, stop)]
    for number, entry in enumerate(entries):
        body = bodies.get(number, [])
        yield TestFailure(
            node_id=entry.group(2),
            kind="failed" if entry.group(1) == "FAILED" else "error",
            message=_message(body, entry.group(3) or ""),
            traceback=_traceback(body),
        )


def _next_section(
    by_name: dict[tuple[str, str], list[int]], kind: str, node_id: str, start: int
) -> int | None:
    """The first section at or after `start` whose headline names `node_id`; None if none does."""
    found = None
    for name in (_domain(node_id), node_id):
        positions = by_name.get((kind, name), [])
        index = bisect.bisect_left(positions, start)
        if index < len(positions) and (found is None or positions[index] < found):
            found = positions[index]
    return found


def _body_end(lines: list[str], start: int, stop: int) -> int:
    """Where a section ends: at the report's next part (warnings, passes). A nested run's banners come
    before its own counts line, which it always prints last: the report's parts come after that."""
    nested_end = max(
        (i for i in range(start, stop) if _SUMMARY_TIME.search(lines[i]) and _SUMMARY_COUNT.search(lines[i])),
        default=start,
    )
    for index in range(nested_end, stop):
        banner = _BANNER.match(lines[index])
        if banner is not None and banner.group(1).strip() in _OUTER_PARTS:
            return index
    return stop


def _is_raised(line: str) -> bool:
    return line.startswith("E ") or line == "E"


def _message(section: list[str], fallback: str) -> str:
    """The `E` lines of the report itself: those in its captured output belong to whatever printed them."""
    own = next((i for i, line in enumerate(section) if _CAPTURED.match(line)), len(section))
    raised = [line[1:] for line in section[:own] if _is_raised(line)]
    text = textwrap.dedent("\n".join(raised)).strip() if raised else fallback
    return text[:_MESSAGE_CHARS]


def _traceback(section: list[str]) -> str:
    """The report without its `E` lines, which the message already carries; the end, where the failing
    line is, kept."""
    own = next((i for i, line in enumerate(section) if _CAPTURED.match(line)), len(section))
    kept = [line for line in section[:own] if not _is_raised(line)] + section[own:]
    return "\n".join(kept).strip()[-_TAIL_CHARS:]
