"""oct_search: text or regex search over the project's files, in-process, bounded, .gitignore respected.

Regex safety: patterns run on RE2 (google-re2), whose matching time is linear in the
text, so no pattern can backtrack catastrophically. Python's `re` could not be made
safe with a deadline: a match holds the GIL, so one pathological line would freeze
the whole server, event loop included, for as long as it ran. On top of that the
pattern length, RE2's memory, each file's size, the number of entries walked and
the time of the whole call are bounded.

In the server (and its screening helper process, tools/screen_helper.py, which reads files on the
other core), not ripgrep run in the sandbox. In the same runs of benchmarks/search.py on a quiet
2-core machine, ripgrep under bubblewrap, before a byte of its output is read, took 1.14x to 1.21x
ripgrep alone, and this search 1.05x to 1.28x (2.0x to 2.3x in one process). It is not faster, and
its results are not these. Its regex engine is not RE2 (its digit, word and word-boundary classes
are Unicode, RE2's ASCII); it follows a symlinked or oversized .gitignore this walk refuses, reads
`.ignore` files and the ignore files above the project, looks for the global excludes file in the
sandbox's home, not the user's, decodes UTF-16 by its byte-order mark, and stops at a NUL where this
skips a file by its first 8 KiB. Each is a flag or a filter and a parity test; until then the walk
is the one set of rules that listing and search share.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any, Final, Literal

import pathspec
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from oct_mcp.deadline import Deadline
from oct_mcp.display import quote_name
from oct_mcp.errors import NotFoundError, OctError, PathRefusedError
from oct_mcp.file_screen import MATCH, SKIPPED, ScreenQuery, compile_pattern, screen_descriptor
from oct_mcp.redaction import mask_line, redact_lines
from oct_mcp.redaction.checks import MASK_PREFIX
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.tools._paging.cursors import PAGE_MARKS, CursorField, WalkCursor
from oct_mcp.tools._paging.results import ENVELOPE_RESERVE, BudgetField, OffsetField, json_size, take_within
from oct_mcp.tools._project.walk import FolderRun, Glob, ProjectWalk, folder_prefix, glob_matcher
from oct_mcp.tools.screen_helper import SCREEN_HELPER, ScreenHelper
from oct_mcp.tools.screen_order import FileRun, ScreenCounts, Screened, screen_in_order
from oct_mcp.types import ToolResult, WithheldPaths
from oct_mcp.workspace import Workspace

__all__ = ["SEARCH", "SEARCH_LIMITS", "SearchLimits", "SearchMatch", "SearchOutput", "SearchParams", "search"]

PATTERN_MAX_LENGTH: Final = 1_000
SEARCH_DEFAULT: Final = 200
CONTEXT_MAX: Final = 20
SEARCH_MAX: Final = 2_000
# Characters of a matching line returned; a longer line is cut to a window around the match.
LINE_TEXT_MAX: Final = 400
_NOT_THE_QUERY: Final = {"offset", "cursor", "max_results", "max_chars"}

SearchPattern = Annotated[
    str, StringConstraints(min_length=1, max_length=PATTERN_MAX_LENGTH, pattern=r"^[^\x00\n\r]*$")
]


class SearchParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    pattern: SearchPattern = Field(description="Matched within one line; regex=true: RE2, no look-around.")
    regex: bool = Field(default=False)
    case_sensitive: bool = Field(default=True)
    path: ProjectPath = Field(default=".")
    glob: Glob | None = Field(
        default=None,
        description=".gitignore syntax: 'src/**/*.py'.",
    )
    max_results: int = Field(default=SEARCH_DEFAULT, ge=1, le=SEARCH_MAX)
    mode: Literal["lines", "files", "count"] = Field(
        default="lines",
    )
    before: int = Field(default=0, ge=0, le=CONTEXT_MAX)
    after: int = Field(default=0, ge=0, le=CONTEXT_MAX)
    offset: int = OffsetField()
    cursor: str | None = CursorField()
    max_chars: int = BudgetField()

    @model_validator(mode="after")
    def _pattern_compiles(self) -> SearchParams:
        compile_pattern(self.pattern, regex=self.regex, case_sensitive=self.case_sensitive)
        if self.cursor is not None:
            if self.offset:
                raise ValueError("pass offset or cursor, not both")
            WalkCursor.decode(self.cursor)
        return self


class SearchMatch(BaseModel):
    path: str
    line: int
    """1-based line number."""
    column: int
    """1-based character column where the first match on the line starts."""
    text: str
    """The line, without its line break; a window around the match when the line is long."""
    line_cut: bool = False
    """The line was longer than the text returned."""
    before: list[str] = Field(default_factory=list)
    """Lines above, nearest last (with the before option)."""
    after: list[str] = Field(default_factory=list)
    """Lines below, nearest first (with the after option)."""


class FileCount(BaseModel):
    path: str
    count: int | None = None
    """Matching lines in the file; in count mode only (files mode gives the paths alone)."""


class SearchOutput(BaseModel):
    matches: list[SearchMatch] = Field(default_factory=list)
    """In lines mode."""
    files: list[FileCount] = Field(default_factory=list)
    """In files and count modes (count left out in files mode)."""
    files_searched: int
    files_with_matches: int
    files_skipped: int
    """Binary files, files over the size limit, and files that could not be opened."""
    truncated: bool
    """Stopped at max_results: more lines may match."""
    stopped_early: bool
    """The walk stopped at its entry or time limit: files were left unsearched."""
    next_offset: int | None = None
    """Set when more follow: the offset that returns the next matching lines (files, in those modes)."""
    next_cursor: str | None = None
    """The same place as a cursor, which goes on without searching these files again."""


@dataclass
class _Search:
    workspace: Workspace
    pattern: Any
    params: SearchParams
    resume: WalkCursor | None
    matches: list[SearchMatch] = field(default_factory=list)
    files: list[FileCount] = field(default_factory=list)
    counts: ScreenCounts = field(default_factory=ScreenCounts)
    """Files searched and skipped."""
    files_with_matches: int = 0
    passed: int = 0
    """Entries (matching lines, or files in files and count modes) skipped for the offset."""
    truncated: bool = False
    """More entries follow this page."""
    redactions: int = 0
    room: int = 0

    to_skip: int = 0
    """The offset's entries, walked past; 0 when the page resumes from a cursor or a mark."""

    def __post_init__(self) -> None:
        self.room = self.params.max_chars - ENVELOPE_RESERVE
        self.to_skip = 0 if self.resume is not None else self.params.offset

    def _full(self, entries: int) -> bool:
        if entries == self.params.max_results or self.room < 0:
            self.truncated = True
        return self.truncated

    def file(self, screened: Screened) -> None:
        """Take the matches of a file the pattern matches in (counted already).

        In a file that holds a secret, the pattern is matched against the file as the model is
        shown it (each secret masked, line by line), and a match that overlaps or touches a mask
        is no match: no answer, in any mode, depends on a masked value. Matching the real bytes
        and masking only what is shown made every mode an oracle (a count that halves a character
        class rebuilds a password). Only a match clear of every mask counts, because only such a
        match is in the real bytes too, which the screen found (a match on a mask's own text
        would need every file read to be found).
        """
        relative, data = screened.path, screened.data
        view = _masked_view(data)
        masks: dict[int, list[tuple[int, int]]] | None = None
        if view is not None:
            data, masks = view
        resumed_in = self.resume is not None and relative == self.resume.path
        if self.params.mode != "lines":
            lines = _matching_lines(self.pattern, data, first_only=self.params.mode == "files", masks=masks)
            count = sum(1 for _ in lines)
            if not count:
                return
            self.files_with_matches += 1
            if self.passed < self.to_skip:
                self.passed += 1
            elif not self._full(len(self.files)):
                entry = FileCount(path=relative, count=count)
                self.room -= json_size(_dump(entry, self.params.mode)) + 1
                self.files.append(entry)
            return
        seen = self.passed + len(self.matches)
        excerpts = self._scan(relative, data, self.resume.line if resumed_in and self.resume else 0, masks)
        if self.passed + len(self.matches) > seen or self.truncated:
            self.files_with_matches += 1
        if view is not None:
            self._count_masks(excerpts)

    def _count_masks(self, excerpts: list[_Excerpt]) -> None:
        """Count the masks in this file's matches and context: they were placed in the file's view,
        as the whole file shows them (a line of a private key's body alone shows none)."""
        for excerpt in excerpts:
            match = self.matches[excerpt.match]
            piece = match.text if excerpt.slot is None else getattr(match, excerpt.slot[0])[excerpt.slot[1]]
            self.redactions += piece.count(MASK_PREFIX)

    def _scan(
        self, relative: str, data: bytes, shown_to: int, masks: dict[int, list[tuple[int, int]]] | None
    ) -> list[_Excerpt]:
        """Append the file's matching lines after line `shown_to` on this page; returns where each
        piece of text came from."""
        excerpts: list[_Excerpt] = []
        for line, line_start, line_end, start in _matching_lines(self.pattern, data, masks=masks):
            if line <= shown_to:
                continue
            if self.passed < self.to_skip:
                self.passed += 1
                continue
            if self._full(len(self.matches)):
                return excerpts
            match, cut_at = _match(relative, line, data[line_start:line_end], data[line_start:start])
            index = len(self.matches)
            excerpts.append(_Excerpt(line, cut_at, cut_at + len(match.text), index, None))
            above, below = _context(data, line_start, line_end, self.params.before, self.params.after)
            for slot, (offset, raw) in enumerate(above):
                match.before.append(_context_text(raw))
                excerpts.append(_Excerpt(line - offset, 0, len(match.before[-1]), index, ("before", slot)))
            for slot, (offset, raw) in enumerate(below):
                match.after.append(_context_text(raw))
                excerpts.append(_Excerpt(line + offset, 0, len(match.after[-1]), index, ("after", slot)))
            self.room -= json_size(match.model_dump(exclude_defaults=True)) + 1
            self.matches.append(match)
        return excerpts


@dataclass(frozen=True, slots=True)
class _Excerpt:
    """A piece of a result's text: its line, its span in the line, and where it sits in the result."""

    line: int
    start: int
    end: int
    match: int
    slot: tuple[str, int] | None
    """None for the matching line; ("before" or "after", index) for a line of context."""


def _masked_view(data: bytes) -> tuple[bytes, dict[int, list[tuple[int, int]]]] | None:
    """The file as the model is shown it, and where the masks are: None when it holds no secret.

    The lines stay where they are (a key's body is a mask a line); bytes outside the masks stay
    byte for byte (undecodable ones too), so a match clear of the masks is one in the file itself.

    Returns:
        The masked bytes, and for each line number with a mask its masks' (start, end) in the line.
    """
    text = data.decode("utf-8", errors="surrogateescape")
    found = redact_lines(text)
    if not any(found):
        return None
    lines = text.split("\n")
    masks: dict[int, list[tuple[int, int]]] = {}
    shown: list[bytes] = []
    for number, (line, spans) in enumerate(zip(lines, found, strict=True), 1):
        if not spans:
            shown.append(line.encode("utf-8", errors="surrogateescape"))
            continue
        masked, places = mask_line(line, spans)
        in_bytes = []
        for start, end in places:
            begin = len(masked[:start].encode("utf-8", errors="surrogateescape"))
            in_bytes.append((begin, begin + end - start))  # a mask is ASCII: a byte a character
        masks[number] = in_bytes
        shown.append(masked.encode("utf-8", errors="surrogateescape"))
    return b"\n".join(shown), masks


def _clear_of_masks(
    pattern: Any, data: bytes, line_start: int, line_end: int, masks: list[tuple[int, int]]
) -> int | None:
    """Where the first match on the line starts that neither overlaps nor touches a mask; None: none does.

    Each stretch between masks, a character away from each, is searched on its own, in the line's
    context (RE2 reads the text around `pos` and `endpos` for `^`, `$` and `\b`).
    """
    low = line_start
    for start, end in [*masks, (line_end - line_start + 1, line_end - line_start + 1)]:
        high = min(line_end, line_start + start - 1)
        if low <= high:
            found = pattern.search(data, low, high)
            if found is not None:
                return int(found.start())
        low = line_start + end + 1
    return None


def _matching_lines(
    pattern: Any,
    data: bytes,
    *,
    first_only: bool = False,
    masks: dict[int, list[tuple[int, int]]] | None = None,
) -> Iterator[tuple[int, int, int, int]]:
    """(line number, line start, line end, match start) of each line with a match, one per line; on a
    line with `masks`, only a match clear of them."""
    position, line, counted_to = 0, 1, 0
    while True:
        found = pattern.search(data, position)
        # An empty match after the last line break is no line at all.
        if found is None or (found.start() == len(data) and (not data or data.endswith(b"\n"))):
            return
        start = found.start()
        line_start = data.rfind(b"\n", 0, start) + 1
        line_end = data.find(b"\n", start)
        line_end = len(data) if line_end == -1 else line_end
        line += data.count(b"\n", counted_to, line_start)
        counted_to = line_start
        clear = start if masks is None or line not in masks else None
        if clear is None and masks is not None and line in masks:
            clear = _clear_of_masks(pattern, data, line_start, line_end, masks[line])
        if clear is None:
            position = line_end + 1
            if position > len(data):
                return
            continue
        yield line, line_start, line_end, clear
        # One result per line, as grep gives: go on after this line.
        position = line_end + 1
        if first_only or position > len(data):
            return


def _context(
    data: bytes, line_start: int, line_end: int, before: int, after: int
) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """The lines around one, each with its distance from it: above nearest last, below nearest first."""
    above: list[tuple[int, bytes]] = []
    position = line_start
    while len(above) < before and position > 0:
        previous = data.rfind(b"\n", 0, position - 1) + 1
        above.append((len(above) + 1, data[previous : position - 1]))
        position = previous
    above.reverse()
    below: list[tuple[int, bytes]] = []
    position = line_end
    while len(below) < after and position + 1 < len(data):
        end = data.find(b"\n", position + 1)
        end = len(data) if end == -1 else end
        below.append((len(below) + 1, data[position + 1 : end]))
        position = end
    return above, below


def _context_text(raw: bytes) -> str:
    return raw.removesuffix(b"\r").decode("utf-8", errors="replace")[:LINE_TEXT_MAX]


def _dump(entry: FileCount, mode: str) -> dict[str, Any]:
    return {"path": entry.path} if mode == "files" else entry.model_dump()


def _match(relative: str, line: int, raw_line: bytes, before_match: bytes) -> tuple[SearchMatch, int]:
    """The match, and where in the line its text starts (a long line is cut to a window)."""
    text = raw_line.removesuffix(b"\r").decode("utf-8", errors="replace")
    column = len(before_match.decode("utf-8", errors="replace")) + 1
    if len(text) <= LINE_TEXT_MAX:
        return SearchMatch(path=relative, line=line, column=column, text=text), 0
    start = max(0, min(column - 1 - LINE_TEXT_MAX // 4, len(text) - LINE_TEXT_MAX))
    window = text[start : start + LINE_TEXT_MAX]
    return SearchMatch(path=relative, line=line, column=column, text=window, line_cut=True), start


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchLimits:
    """How far one search goes: past a limit it stops with what it found, and says so."""

    time_seconds: float = 20.0
    """Under the sandbox's default timeout, so a long search ends with partial results, not a timeout."""
    file_max_bytes: int = 4 * 1_048_576
    """Larger files (minified bundles, data dumps) are skipped and counted."""
    scan_entries: int = 200_000
    """Entries the walk visits, ignored ones included."""
    clock: Callable[[], float] = time.monotonic
    """What the time limit is read on (a test's own clock makes a search's stop independent of load)."""


SEARCH_LIMITS: Final = SearchLimits()


def search(
    workspace: Workspace,
    params: SearchParams,
    screen_helper: ScreenHelper | None = SCREEN_HELPER,
    withheld: WithheldPaths | None = None,
    limits: SearchLimits = SEARCH_LIMITS,
) -> ToolResult:
    """Search the project's text files for a pattern, line by line, respecting .gitignore and leaving
    out the paths the rules deny (`withheld`): neither their lines nor their counts are shown.

    `screen_helper` reads and screens files beside this thread (None: all here); results are the same.

    Raises:
        PathRefusedError, NotFoundError: The path is not a project folder or file.
    """
    start = workspace.contain(params.path)
    try:
        info = start.stat()
    except FileNotFoundError:
        raise NotFoundError("nothing at that path in the project") from None
    except OSError as exc:
        raise PathRefusedError("the path cannot be opened") from exc
    deadline = Deadline(limits.time_seconds, "search time", clock=limits.clock)
    pattern = compile_pattern(params.pattern, regex=params.regex, case_sensitive=params.case_sensitive)
    screen = ScreenQuery(params.pattern, params.regex, params.case_sensitive, limits.file_max_bytes)
    # What decides the pages; max_results and max_chars only cut them.
    query = ("search", str(workspace.root), str(start), *params.model_dump(exclude=_NOT_THE_QUERY).items())
    if params.cursor is not None:
        resume: WalkCursor | None = WalkCursor.decode(params.cursor)
    else:
        resume = PAGE_MARKS.recall(query, params.offset) if params.offset else None
    run = _Search(workspace, pattern, params, resume)
    stopped_early = False
    if stat.S_ISDIR(info.st_mode):
        matcher = glob_matcher(params.glob)
        start_at = None if resume is None else resume.path
        walk = ProjectWalk(
            workspace.root, start, limits.scan_entries, deadline, start_at=start_at, withheld=withheld
        )
        below = folder_prefix(workspace.relative(start))
        # Symlinks are not followed (as ripgrep does by default); the walk yields them as entries.
        # In files and count modes, the file a cursor names was shown whole on the page before.
        shown = resume.path if resume is not None and params.mode != "lines" else None
        runs = _searched_runs(walk.runs(), matcher, len(below), shown)
        screened = screen_in_order(runs, screen, run.counts, workspace.root, deadline, screen_helper)
        with closing(screened):
            for each in screened:
                run.file(each)
                if run.truncated:
                    break
        # A walk that stopped at its limit past where a full page ended stopped nothing this page shows.
        stopped_early = (walk.stopped_early and run.counts.all_given_out) or run.counts.stopped_early
    elif resume is None or params.mode == "lines":  # in files and count modes, a page names the file once
        verdict, data = _screen_one_file(workspace, str(start), screen)
        run.counts.add(bytes((verdict,)))
        if verdict == MATCH and data is not None:
            run.file(Screened(workspace.relative(start), data))
    # Masking may lengthen a line: the page is measured again as it goes out, with room for the cursor.
    entries: list[SearchMatch] | list[FileCount] = run.matches if params.mode == "lines" else run.files
    kept, cut = take_within(entries, params.max_chars)
    if cut or run.truncated:
        cursor_room = max((WalkCursor.size(entry.path) for entry in entries), default=0)
        kept, cut = take_within(entries, params.max_chars - cursor_room)
    matches: list[SearchMatch] = kept if params.mode == "lines" else []
    counts: list[FileCount] = [] if params.mode == "lines" else kept
    more = run.truncated or cut
    position = params.offset if resume is None else resume.position
    next_offset = position + len(kept) if more else None
    last = kept[-1] if more and kept else None
    next_cursor = None
    if next_offset is not None and last is not None:
        mark = WalkCursor(next_offset, last.path, last.line if isinstance(last, SearchMatch) else 0)
        PAGE_MARKS.remember(query, mark)
        next_cursor = mark.encode()
    output = SearchOutput(
        matches=matches,
        files=counts,
        files_searched=run.counts.searched,
        files_with_matches=run.files_with_matches,
        files_skipped=run.counts.skipped,
        truncated=more,
        stopped_early=stopped_early,
        next_offset=next_offset,
        next_cursor=next_cursor,
    )
    structured = output.model_dump(exclude_defaults=True)
    if params.mode == "lines":
        structured["matches"] = structured.get("matches", [])
    else:
        structured["files"] = [_dump(f, params.mode) for f in counts]
    return ToolResult(
        text=_text(output, params.mode),
        structured=structured,
        truncated=more or stopped_early,
        redactions=run.redactions,
    )


def _searched_runs(
    runs: Iterable[FolderRun], glob: pathspec.GitIgnoreSpec | None, below: int, shown: str | None
) -> Iterator[FileRun]:
    """The walk's runs, each cut to the files a search reads: regular files (symlinks are not followed,
    as ripgrep does by default; the walk gives them as entries) that the glob takes, not `shown`."""
    for folder_fd, prefix, entries in runs:
        names = [entry.name for entry in entries if entry.is_file(follow_symlinks=False)]
        if glob is not None:
            names = [name for name in names if glob.match_file((prefix + name)[below:])]
        if shown is not None:
            names = [name for name in names if prefix + name != shown]
        if names:
            yield folder_fd, prefix, names


def _screen_one_file(workspace: Workspace, path: str, query: ScreenQuery) -> tuple[int, bytes | None]:
    try:
        fd = workspace.open_regular_file(path)
    except OctError:
        return SKIPPED, None
    try:
        return screen_descriptor(fd, os.fstat(fd).st_size, query.matcher(), query.file_max_bytes)
    except OSError:
        return SKIPPED, None
    finally:
        os.close(fd)


def _text(output: SearchOutput, mode: str) -> str:
    lines: list[str] = []
    for m in output.matches:
        name = quote_name(m.path)
        lines += [f"{name}-{m.line - len(m.before) + i}-{t}" for i, t in enumerate(m.before)]
        lines.append(f"{name}:{m.line}:{m.text}")
        lines += [f"{name}-{m.line + 1 + i}-{t}" for i, t in enumerate(m.after)]
    for f in output.files:
        lines.append(quote_name(f.path) if mode == "files" else f"{quote_name(f.path)}:{f.count}")
    if output.files_with_matches:
        summary = (
            f"{len(output.matches) + len(output.files)} shown; {output.files_with_matches} file(s) match"
        )
    else:
        summary = f"no matches in {output.files_searched} file(s) searched"
    if output.files_skipped:
        summary += f"; {output.files_skipped} binary, oversized or unreadable file(s) skipped"
    if output.next_offset is not None:
        summary += (
            f"; more follow: call again with cursor={output.next_cursor} (or offset={output.next_offset}), "
            "or narrow path or glob"
        )
    if output.stopped_early:
        summary += "; the search hit its time or size limit before every file was searched"
    return "\n".join([*lines, f"[oct-mcp: {summary}]"])


def _plan_search(params: SearchParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(partial(search, env.workspace, params, withheld=env.withheld))


SEARCH: Final = ToolSpec(
    name="oct_search",
    title="Search project files",
    description=(
        "Search text files for a string, or with regex=true an RE2 expression, skipping ignored and binary "
        "files. mode: lines (with before/after context), files or count. Paged by next_cursor. Prefer it to "
        "grep."
    ),
    params=SearchParams,
    output=SearchOutput,
    risk=Risk.READ,
    plan=_plan_search,
)
