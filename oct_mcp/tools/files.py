"""oct_read_file and oct_list_files: in-process reads of the project, contained and bounded."""

from __future__ import annotations

import itertools
import os
import stat
from functools import partial
from typing import Any, Final, Literal, TypeAlias, cast

from pydantic import BaseModel, Field, model_validator

from oct_mcp.display import quote_name
from oct_mcp.errors import (
    BinaryFileError,
    FileTooLargeError,
    LineRangeError,
    NotFoundError,
    OctError,
    PathRefusedError,
)
from oct_mcp.file_screen import BINARY_SNIFF_BYTES
from oct_mcp.redaction import redact_excerpts
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, StrictParams, ToolEnv, ToolSpec
from oct_mcp.tools._paging.cursors import PAGE_MARKS, CursorField, WalkCursor, cursor_may_not_fit
from oct_mcp.tools._paging.results import (
    ENVELOPE_RESERVE,
    MODEL_VIEW_MIN,
    BudgetField,
    OffsetField,
    json_size,
    json_string_size,
)
from oct_mcp.tools._project.walk import Glob, ProjectWalk, folder_prefix, glob_matcher
from oct_mcp.tools._text.lines import count_lines, split_lines
from oct_mcp.types import ToolResult, WithheldPaths
from oct_mcp.workspace import Workspace, read_at_most

__all__ = [
    "LIST_FILES",
    "READ_FILE",
    "READ_FILES",
    "list_files",
    "read_file",
    "read_files",
]

# A read with a line range may scan files larger than max_output_bytes, up to this.
LINE_RANGE_SCAN_LIMIT: Final = 64 * 1_048_576
# Reads up to this size run on the event loop: such a read holds it no longer than the hop to a
# worker thread and back that it saves (measured: 128 KiB in 60 us as ASCII, 96 us as mixed UTF-8;
# 1 KiB in 20 us; the hop, 80 to 90 us).
INLINE_READ_BYTES: Final = 131_072
# A read's text may pass the default budget: a whole file is what a read is for. 100,000 characters
# is about 25,000 tokens (chars/4), Claude Code's default cap on an MCP result; declared to the host.
READ_RESULT_MAX_CHARS: Final = 100_000
READ_FILES_MAX: Final = 50
LIST_FILES_DEFAULT: Final = 1_000
LIST_FILES_MAX: Final = 10_000
# Bounds the walk itself (entries of any kind), so a huge tree cannot keep a call busy however few match.
LIST_FILES_SCAN_LIMIT: Final = 200_000
# A listed path's JSON beyond the path itself: its quotes and a comma, in `files` and, for a symlink,
# again in `symlinks`.
_PATH_JSON_SIZE: Final = len('"",')


class ReadFileParams(StrictParams):
    path: ProjectPath = Field()
    start_line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)
    tail: int | None = Field(default=None, ge=1, description="Not with start_line or end_line.")
    line_numbers: bool = Field(default=False, description="As cat -n.")
    max_chars: int = Field(
        default=READ_RESULT_MAX_CHARS,
        ge=MODEL_VIEW_MIN,
        le=READ_RESULT_MAX_CHARS,
    )

    @model_validator(mode="after")
    def _range_is_ordered(self) -> ReadFileParams:
        if self.start_line is not None and self.end_line is not None and self.end_line < self.start_line:
            raise ValueError("end_line must not be before start_line")
        if self.tail is not None and (self.start_line is not None or self.end_line is not None):
            raise ValueError("tail cannot be combined with start_line or end_line")
        return self

    @property
    def wants_range(self) -> bool:
        return self.start_line is not None or self.end_line is not None or self.tail is not None


class ReadFileOutput(BaseModel):
    path: str
    text: str
    """The lines read, as one string (with `cat -n` numbers when asked)."""
    start_line: int
    end_line: int
    total_lines: int
    next_start_line: int | None = None
    """Set when the read stopped at max_chars: the start_line that reads on."""


def read_file(
    workspace: Workspace,
    params: ReadFileParams,
    max_output_bytes: int,
    range_scan_limit: int = LINE_RANGE_SCAN_LIMIT,
) -> ToolResult:
    """Read a UTF-8 text file of the project, whole or a range of lines.

    A range is read from a file of up to `range_scan_limit` bytes, a whole file up to `max_output_bytes`.

    Raises:
        PathRefusedError, NotFoundError: The path is not a project file.
        BinaryFileError: The file is not UTF-8 text.
        FileTooLargeError: A whole read over `max_output_bytes`, or any read over the scan limit.
    """
    fd, resolved = workspace.open_contained_file(params.path)
    try:
        size = os.fstat(fd).st_size
        wants_range = params.wants_range
        limit = range_scan_limit if wants_range else max_output_bytes
        if size > limit:
            hint = "" if wants_range else "; read part of it with start_line and end_line"
            raise FileTooLargeError(f"the file has {size} bytes, over the read limit of {limit} bytes{hint}")
        # One byte past the limit: the file may have grown since fstat.
        data = read_at_most(fd, limit, size)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise FileTooLargeError(f"the file grew past the read limit of {limit} bytes while being read")
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise BinaryFileError("the file is binary, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BinaryFileError("the file is not UTF-8 text") from None
    total = count_lines(text)
    first = max(1, total - params.tail + 1) if params.tail is not None else params.start_line or 1
    if first > total and total > 0:
        raise LineRangeError(f"the range starts past the end: the file has {total} lines")
    last = min(params.end_line or total, total)
    whole_fits = (
        not params.wants_range and not params.line_numbers and json_size(text) - 2 <= params.max_chars
    )
    # The whole file that fits: its lines counted, not split and joined again.
    lines = [] if whole_fits else split_lines(text)
    # Cut at a whole line where the lines' JSON would pass max_chars (what a host shows the model).
    room = params.max_chars
    cut = None
    for number in range(first, 0 if whole_fits else last + 1):
        room -= (
            json_size(_numbered(number, lines[number - 1]) if params.line_numbers else lines[number - 1]) - 2
        )
        if room < 0:
            cut = number
            break
    if cut == first:
        raise FileTooLargeError(
            "one line of the range is longer than max_chars; the file is not line-oriented"
        )
    if cut is not None:
        last = cut - 1
    redactions = 0
    if first == 1 and last == total and not params.line_numbers:
        selected = text
    else:
        start = sum(map(len, lines[: first - 1]))
        end = start + sum(map(len, lines[first - 1 : last]))
        # The range alone may not show its secrets (a key's body without its BEGIN line): they
        # are masked as the whole file shows them; the redactor still sees the range. Numbered
        # lines hide a secret's context from the redactor too (`- name: DB_PASSWORD` no longer
        # starts the line above `value: ...`), so a numbered read is masked before it is numbered.
        (selected,), redactions = redact_excerpts(text, [(start, end)])
    if params.line_numbers:
        selected = "".join(_numbered(n, line) for n, line in enumerate(split_lines(selected), first))
    output = ReadFileOutput(
        path=workspace.relative(resolved),
        text=selected,
        start_line=first,
        end_line=max(last, first - 1),
        total_lines=total,
        next_start_line=cut,
    )
    shown = selected
    if cut is not None:
        shown += f"\n[oct-mcp: stopped at line {last} of {total} (max_chars); read on with start_line={cut}]"
    return ToolResult(
        text=shown,
        structured=output.model_dump(exclude_none=True),
        redactions=redactions,
        truncated=cut is not None,
    )


def _numbered(number: int, line: str) -> str:
    return f"{number:>6}\t{line}"


class ReadFilesParams(StrictParams):
    paths: list[ProjectPath] = Field(min_length=1, max_length=READ_FILES_MAX)
    line_numbers: bool = Field(default=False, description="As cat -n.")
    max_chars: int = Field(
        default=READ_RESULT_MAX_CHARS,
        ge=MODEL_VIEW_MIN,
        le=READ_RESULT_MAX_CHARS,
        description="For all the files.",
    )


class UnreadFile(BaseModel):
    path: str
    problem: str
    """Why it was not read: `[code] message`, as a failed oct_read_file says."""


class ReadFilesOutput(BaseModel):
    files: list[ReadFileOutput]
    unread: list[UnreadFile] = Field(default_factory=list)


def read_files(workspace: Workspace, params: ReadFilesParams, max_output_bytes: int) -> ToolResult:
    """Read several files whole, in the order given, under one budget; a file that cannot be read
    is named with its problem and the others are still read."""
    files: list[ReadFileOutput] = []
    unread: list[UnreadFile] = []
    texts: list[str] = []
    room = params.max_chars
    redactions = 0
    for path in params.paths:
        if room < MODEL_VIEW_MIN:
            unread.append(
                UnreadFile(path=path, problem="[file_too_large] past max_chars: read it on its own")
            )
            continue
        one = ReadFileParams(path=path, line_numbers=params.line_numbers, max_chars=room)
        try:
            result = read_file(workspace, one, max_output_bytes)
        except OctError as exc:
            unread.append(UnreadFile(path=path, problem=f"[{exc.code}] {exc}"))
            continue
        output = ReadFileOutput.model_validate(result.structured)
        room -= json_size(output.model_dump(exclude_none=True))
        redactions += result.redactions
        files.append(output)
        texts.append(f"==> {quote_name(output.path)} <==\n{result.text}")
    texts += [f"==> {quote_name(u.path)} <== not read: {u.problem}" for u in unread]
    structured = ReadFilesOutput(files=files, unread=unread).model_dump(exclude_none=True)
    return ToolResult(text="\n".join(texts), structured=structured, redactions=redactions)


class ListFilesParams(StrictParams):
    path: ProjectPath = Field(default=".")
    glob: Glob | None = Field(
        default=None,
        description=".gitignore syntax: 'src/**/*.py'.",
    )
    max_results: int = Field(default=LIST_FILES_DEFAULT, ge=1, le=LIST_FILES_MAX)
    sizes: bool = Field(default=False)
    offset: int = OffsetField()
    cursor: str | None = CursorField()
    max_chars: int = BudgetField()

    @model_validator(mode="after")
    def _one_way_to_page(self) -> ListFilesParams:
        if self.cursor is not None:
            if self.offset:
                raise ValueError("pass offset or cursor, not both")
            WalkCursor.decode(self.cursor)
        return self


class ListFilesOutput(BaseModel):
    """A page of a listing, as paths.

    Plain strings, not an object an entry: a client checks every page against this schema, and
    with an object per entry that check was most of a page's time (jsonschema: about 14 ms against
    2.4 ms for a page of 576 paths, measured side by side); a page also holds more paths.
    """

    folder: str
    files: list[str]
    """Paths from the project root, sorted: files and symlinks (a symlink is listed, never followed)."""
    symlinks: list[str] | None = None
    """Those of `files` that are symlinks; absent when none are."""
    size_bytes: list[int] | None = None
    """With sizes=true: the size of each of `files`, in their order (a symlink's is its own)."""
    truncated: bool
    """More files follow (listed with next_offset), or the walk stopped at its entry limit."""
    next_offset: int | None = None
    """The offset that lists the files after these."""
    next_cursor: str | None = None
    """The same place as a cursor, which lists them without walking these again."""


def list_files(
    workspace: Workspace,
    params: ListFilesParams,
    withheld: WithheldPaths | None = None,
    scan_limit: int = LIST_FILES_SCAN_LIMIT,
) -> ToolResult:
    """List the files under a project folder, respecting .gitignore, in sorted order, bounded; the
    paths the rules deny (`withheld`) are left out. The walk stops after `scan_limit` entries seen.

    Raises:
        PathRefusedError, NotFoundError: The path is not a project folder.
    """
    folder = workspace.contain(params.path)
    try:
        info = folder.stat()
    except FileNotFoundError:
        raise NotFoundError("no folder at that path in the project") from None
    except OSError as exc:
        # ENAMETOOLONG, ENOTDIR, EACCES: nothing a client can list.
        raise PathRefusedError("the folder cannot be opened") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise PathRefusedError("the path is a file, not a folder")
    matcher = glob_matcher(params.glob)
    query = ("list", str(workspace.root), str(folder), params.glob)
    if params.cursor is not None:
        resume: WalkCursor | None = WalkCursor.decode(params.cursor)
    else:
        resume = PAGE_MARKS.recall(query, params.offset) if params.offset else None
    to_skip = 0 if resume is not None else params.offset
    start_at = None if resume is None else resume.path
    walk = ProjectWalk(workspace.root, folder, scan_limit, start_at=start_at, withheld=withheld)
    below = folder_prefix(workspace.relative(folder))
    page = _Page(params.max_chars - ENVELOPE_RESERVE, params.max_results, to_skip, params.sizes)
    runs = walk.runs()
    try:
        for _, prefix, run in runs:
            if start_at is not None and start_at.startswith(prefix):
                # The last entry of the page before: the walk starts at it.
                run = [entry for entry in run if prefix + entry.name != start_at]
            if matcher is not None:
                run = [entry for entry in run if matcher.match_file((prefix + entry.name)[len(below) :])]
            if not page.add(prefix, run):
                break
    finally:
        runs.close()
    files, shown, more = page.files, page.shown, page.more
    position = params.offset if resume is None else resume.position
    next_offset = position + len(files) if more else None
    next_cursor = None
    if more and files:
        mark = WalkCursor(position + len(files), files[-1])
        PAGE_MARKS.remember(query, mark)
        next_cursor = mark.encode()
    truncated = more or walk.stopped_early
    text = "\n".join(shown)
    if next_offset is not None:
        text += (
            f"\n[oct-mcp: {len(files)} files shown, more follow: list them with cursor={next_cursor} "
            f"(or offset={next_offset})]"
        )
    elif walk.stopped_early:
        text += f"\n[oct-mcp: listing stopped after {len(files)} files; narrow it with path or glob]"
    # ListFilesOutput, as its model_dump(exclude_none=True) would write it.
    structured: dict[str, Any] = {"folder": workspace.relative(folder), "files": files}
    if page.links:
        structured["symlinks"] = page.links
    if params.sizes:
        structured["size_bytes"] = page.sizes
    structured["truncated"] = truncated
    if next_offset is not None:
        structured["next_offset"] = next_offset
    if next_cursor is not None:
        structured["next_cursor"] = next_cursor
    return ToolResult(text=text, structured=structured, truncated=truncated)


_Kind: TypeAlias = Literal["file", "symlink"]
_KINDS: Final[dict[int, _Kind]] = {stat.S_IFREG: "file", stat.S_IFLNK: "symlink"}


def _lstat_or_none(entry: os.DirEntry[str]) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:
        return None


class _Page:
    """The entries of a listing that fit in a page, taken a folder's run at a time."""

    def __init__(self, room: int, max_results: int, to_skip: int, sizes: bool) -> None:
        self.room = room
        self.max_results = max_results
        self.to_skip = to_skip
        self.with_sizes = sizes
        # ListFilesOutput's lists, built here as the answer holds them.
        self.files: list[str] = []
        self.links: list[str] = []
        self.sizes: list[int] = []
        self.shown: list[str] = []
        """Each entry as the text shows it: a name with a newline would start a line of its own, so
        such names are quoted."""
        self.more = False

    def add(self, prefix: str, run: list[os.DirEntry[str]]) -> bool:
        """Take what is a file or a symlink in `run` (entries of the folder at `prefix`), as long as it
        fits; False when the page is full and an entry was left for the next."""
        paths = [prefix + entry.name for entry in run]
        kinds: list[_Kind | None]
        if self.with_sizes:
            try:
                infos: list[os.stat_result | None] = [entry.stat(follow_symlinks=False) for entry in run]
            except OSError:
                # Gone since it was listed: left out. (Each entry keeps the answer it got above.)
                infos = [_lstat_or_none(entry) for entry in run]
            kinds = [_KINDS.get(stat.S_IFMT(info.st_mode)) if info is not None else None for info in infos]
            sizes = [info.st_size if info is not None else 0 for info in infos]
        else:
            # The folder listing's own type for each name (d_type): no stat a file, as `rg --files`.
            kinds = [
                "file" if entry.is_file(follow_symlinks=False) else "symlink" if entry.is_symlink() else None
                for entry in run
            ]
            sizes = []
        listed_kinds: list[_Kind]
        if None in kinds:
            kept = [kind is not None for kind in kinds]
            paths = list(itertools.compress(paths, kept))
            sizes = list(itertools.compress(sizes, kept))
            listed_kinds = [kind for kind in kinds if kind is not None]
        else:
            listed_kinds = cast("list[_Kind]", kinds)
        if self.to_skip:
            skip = min(self.to_skip, len(paths))
            self.to_skip -= skip
            del paths[:skip], listed_kinds[:skip], sizes[:skip]
        if not paths:
            return True
        return self._add_all(paths, listed_kinds, sizes) or self._add_each(paths, listed_kinds, sizes)

    def _add_all(self, paths: list[str], kinds: list[_Kind], sizes: list[int]) -> bool:
        """Take the whole run when it surely fits (with room left for the cursor that would name any
        of its entries); False, taking nothing, when it may not."""
        if len(self.files) + len(paths) > self.max_results:
            return False
        joined = "".join(paths)
        # Most paths need no escaping, nor quoting as text: checked once for the run.
        if not (joined.isascii() and joined.isprintable()) or '"' in joined or "\\" in joined:
            return False
        links = [path for path, kind in zip(paths, kinds, strict=True) if kind == "symlink"]
        # The model sees the JSON (results.py): each path's string, a symlink's twice.
        cost = len(joined) + _PATH_JSON_SIZE * len(paths)
        cost += sum(map(len, links)) + _PATH_JSON_SIZE * len(links)
        if self.with_sizes:
            cost += sum(len(str(size)) + 1 for size in sizes)
        # `cursor_may_not_fit` is false for every entry with this much room left after the last.
        if self.room - cost < 6 * max(map(len, paths)) + 64:
            return False
        self.room -= cost
        self.files += paths
        self.links += links
        self.sizes += sizes
        self.shown += paths
        return True

    def _add_each(self, paths: list[str], kinds: list[_Kind], sizes: list[int]) -> bool:
        for index, (path, kind) in enumerate(zip(paths, kinds, strict=True)):
            # The entry's JSON counted without building it; most paths need no escaping, nor quoting as text.
            plain = path.isascii() and path.isprintable() and '"' not in path and "\\" not in path
            string_size = len(path) + 2 if plain else json_string_size(path)
            self.room -= string_size + 1
            if kind == "symlink":
                self.room -= string_size + 1
            if self.with_sizes:
                self.room -= len(str(sizes[index])) + 1
            # Room for the cursor that would name this entry as the last shown; the first entry
            # goes out whatever its size, or paging could never pass it (results.take_within).
            if len(self.files) == self.max_results or (self.files and cursor_may_not_fit(self.room, path)):
                self.more = True
                return False
            self.files.append(path)
            if kind == "symlink":
                self.links.append(path)
            if self.with_sizes:
                self.sizes.append(sizes[index])
            self.shown.append(path if plain else quote_name(path))
        return True


def _plan_read_file(params: ReadFileParams, env: ToolEnv) -> InProcessPlan:
    read = partial(read_file, env.workspace, params, env.max_output_bytes)
    return InProcessPlan(read, inline=_is_small_file(env.workspace, params.path))


def _is_small_file(workspace: Workspace, path: str) -> bool:
    """A regular file of at most INLINE_READ_BYTES: read on the event loop, not in a thread.

    Only a hint: the read itself contains and opens the path again, and refuses what it must.
    """
    try:
        info = os.stat(os.path.join(workspace.root, path))
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size <= INLINE_READ_BYTES


def _plan_read_files(params: ReadFilesParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(partial(read_files, env.workspace, params, env.max_output_bytes))


def _plan_list_files(params: ListFilesParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(partial(list_files, env.workspace, params, env.withheld))


READ_FILE: Final = ToolSpec(
    name="oct_read_file",
    title="Read a project file",
    description=(
        "Read a UTF-8 text file: whole, start_line..end_line (1-based, inclusive) or the last `tail` lines. "
        "A cut read gives next_start_line. Secrets show as [REDACTED:kind]."
    ),
    params=ReadFileParams,
    output=ReadFileOutput,
    risk=Risk.READ,
    plan=_plan_read_file,
    max_result_chars=READ_RESULT_MAX_CHARS + 1_000,
    names_only_its_paths=True,
)

READ_FILES: Final = ToolSpec(
    name="oct_read_files",
    title="Read several project files",
    description=(
        "Read several UTF-8 text files whole, under one size budget; a file that cannot be read is named "
        "with its problem. Secrets show as [REDACTED:kind]."
    ),
    params=ReadFilesParams,
    output=ReadFilesOutput,
    risk=Risk.READ,
    plan=_plan_read_files,
    max_result_chars=READ_RESULT_MAX_CHARS + 1_000,
    names_only_its_paths=True,
)

LIST_FILES: Final = ToolSpec(
    name="oct_list_files",
    title="List project files",
    description=(
        "List the files under a folder (default the root), sorted, skipping .git and what .gitignore "
        "ignores; glob filters; sizes=true adds sizes. Paged by next_cursor."
    ),
    params=ListFilesParams,
    output=ListFilesOutput,
    risk=Risk.READ,
    plan=_plan_list_files,
)
