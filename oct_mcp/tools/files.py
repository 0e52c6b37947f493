"""oct_read_file and oct_list_files: in-process reads of the project, contained and bounded."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Final, Literal

import pathspec
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from oct_mcp.context import ToolResult
from oct_mcp.errors import BinaryFileError, FileTooLargeError, NotFoundError, PathRefusedError
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.workspace import Workspace

__all__ = ["LIST_FILES", "READ_FILE", "list_files", "read_file"]

# Bytes looked at to tell text from binary, as git does: a NUL among them means binary.
BINARY_SNIFF_BYTES: Final = 8_192
# A read with a line range may scan files larger than max_output_bytes, up to this.
LINE_RANGE_SCAN_LIMIT: Final = 64 * 1_048_576
LIST_FILES_DEFAULT: Final = 1_000
LIST_FILES_MAX: Final = 10_000
# Bounds the walk itself (entries of any kind), so a huge tree cannot keep a call busy however few match.
LIST_FILES_SCAN_LIMIT: Final = 200_000
GLOB_MAX_LENGTH: Final = 256


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ReadFileParams(_Params):
    path: ProjectPath = Field(description="File to read, relative to the project root.")
    start_line: int | None = Field(default=None, ge=1, description="First line to return (1-based).")
    end_line: int | None = Field(default=None, ge=1, description="Last line to return (inclusive).")

    @model_validator(mode="after")
    def _range_is_ordered(self) -> ReadFileParams:
        if self.start_line is not None and self.end_line is not None and self.end_line < self.start_line:
            raise ValueError("end_line must not be before start_line")
        return self


class ReadFileOutput(BaseModel):
    path: str
    start_line: int
    end_line: int
    total_lines: int
    size_bytes: int


def read_file(workspace: Workspace, params: ReadFileParams, max_output_bytes: int) -> ToolResult:
    """Read a UTF-8 text file of the project, whole or a range of lines.

    Raises:
        PathRefusedError, NotFoundError: The path is not a project file.
        BinaryFileError: The file is not UTF-8 text.
        FileTooLargeError: A whole read over `max_output_bytes`, or any read over the scan limit.
    """
    fd = workspace.open_regular_file(params.path)
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        wants_range = params.start_line is not None or params.end_line is not None
        limit = LINE_RANGE_SCAN_LIMIT if wants_range else max_output_bytes
        if size > limit:
            hint = "" if wants_range else "; read part of it with start_line and end_line"
            raise FileTooLargeError(f"the file has {size} bytes, over the read limit of {limit} bytes{hint}")
        # Read one byte past the limit: the file may have grown since fstat.
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLargeError(f"the file grew past the read limit of {limit} bytes while being read")
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise BinaryFileError("the file is binary, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BinaryFileError("the file is not UTF-8 text") from None
    # Only "\n" ends a line, as for compilers, linters and grep, whose line numbers callers pass in.
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    first = params.start_line or 1
    last = min(params.end_line or len(lines), len(lines))
    selected = "".join(lines[first - 1 : last]) if first <= len(lines) else ""
    output = ReadFileOutput(
        path=workspace.relative(workspace.contain(params.path)),
        start_line=first,
        end_line=max(last, first - 1),
        total_lines=len(lines),
        size_bytes=len(data),
    )
    return ToolResult(text=selected, structured=output.model_dump())


class ListFilesParams(_Params):
    path: ProjectPath = Field(default=".", description="Folder to list, relative to the project root.")
    glob: (
        Annotated[
            str, StringConstraints(min_length=1, max_length=GLOB_MAX_LENGTH, pattern=r"^[^\x00-\x1f]*$")
        ]
        | None
    ) = Field(
        default=None,
        description="Only paths matching this pattern (.gitignore syntax: '*.py', 'src/**/*.ts').",
    )
    max_results: int = Field(default=LIST_FILES_DEFAULT, ge=1, le=LIST_FILES_MAX)


class ListedFile(BaseModel):
    path: str
    kind: Literal["file", "symlink"]
    size_bytes: int


class ListFilesOutput(BaseModel):
    folder: str
    files: list[ListedFile]
    count: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class _IgnoreRules:
    """The .gitignore files that apply in one folder, outermost first, each with its own base."""

    specs: tuple[tuple[Path, pathspec.GitIgnoreSpec], ...]

    def ignores(self, path: Path, is_dir: bool) -> bool:
        # Git's precedence: a deeper file's rules override the outer ones; within one file, the last match.
        verdict: bool | None = None
        for base, spec in self.specs:
            relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
            include = spec.check_file(relative).include
            if include is not None:
                verdict = include
        return bool(verdict)

    def entering(self, folder: Path) -> _IgnoreRules:
        spec = _read_ignore_file(folder / ".gitignore")
        return self if spec is None else _IgnoreRules((*self.specs, (folder, spec)))


def _read_ignore_file(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        info = path.lstat()
        # Only a regular file: a symlinked .gitignore could point anywhere on the machine.
        if not stat.S_ISREG(info.st_mode) or info.st_size > 1_048_576:
            return None
        return pathspec.GitIgnoreSpec.from_lines(
            path.read_text(encoding="utf-8", errors="replace").splitlines()
        )
    except OSError:
        return None


def _root_rules(root: Path, folder: Path) -> _IgnoreRules:
    """The rules in force in `folder`: .git/info/exclude, then each .gitignore from the root down."""
    rules = _IgnoreRules(())
    exclude = _read_ignore_file(root / ".git" / "info" / "exclude")
    if exclude is not None:
        rules = _IgnoreRules(((root, exclude),))
    current = root
    rules = rules.entering(root)
    for part in folder.relative_to(root).parts:
        current = current / part
        rules = rules.entering(current)
    return rules


def _sorted_entries(folder: Path) -> Iterator[os.DirEntry[str]]:
    """A folder's entries in the order git sorts paths: a folder's name counts as `name/`."""
    try:
        with os.scandir(folder) as scan:
            entries = list(scan)
    except OSError:
        return iter(())
    return iter(sorted(entries, key=lambda e: e.name + "/" if e.is_dir(follow_symlinks=False) else e.name))


@dataclass
class _Walk:
    """Files under a folder in sorted path order, skipping ignored paths and `.git`, never following symlinks.

    Stops after `limit` entries of any kind, ignored ones included, and says so in `stopped_early`.
    """

    root: Path
    folder: Path
    limit: int
    stopped_early: bool = False

    def __iter__(self) -> Iterator[tuple[Path, os.DirEntry[str]]]:
        stack = [(_sorted_entries(self.folder), _root_rules(self.root, self.folder))]
        seen = 0
        while stack:
            entries, rules = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            seen += 1
            if seen > self.limit:
                self.stopped_early = True
                return
            path = Path(entry.path)
            is_dir = entry.is_dir(follow_symlinks=False)
            if (is_dir and entry.name == ".git") or rules.ignores(path, is_dir):
                continue
            if is_dir:
                # Depth first, in name order: the listing comes out sorted by path, as git sorts it.
                stack.append((_sorted_entries(path), rules.entering(path)))
            else:
                yield path, entry


def list_files(workspace: Workspace, params: ListFilesParams) -> ToolResult:
    """List the files under a project folder, respecting .gitignore, in sorted order, bounded.

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
    matcher = pathspec.GitIgnoreSpec.from_lines([params.glob]) if params.glob else None
    files: list[ListedFile] = []
    truncated = False
    walk = _Walk(workspace.root, folder, LIST_FILES_SCAN_LIMIT)
    for path, entry in walk:
        if matcher is not None and not matcher.match_file(path.relative_to(folder).as_posix()):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        is_link = stat.S_ISLNK(info.st_mode)
        if not is_link and not stat.S_ISREG(info.st_mode):
            continue
        if len(files) == params.max_results:
            truncated = True
            break
        kind: Literal["file", "symlink"] = "symlink" if is_link else "file"
        files.append(ListedFile(path=workspace.relative(path), kind=kind, size_bytes=info.st_size))
    truncated = truncated or walk.stopped_early
    text = "\n".join(f.path for f in files)
    if truncated:
        text += f"\n[oct-mcp: listing stopped after {len(files)} files; narrow it with path or glob]"
    output = ListFilesOutput(
        folder=workspace.relative(folder), files=files, count=len(files), truncated=truncated
    )
    return ToolResult(text=text, structured=output.model_dump(), truncated=truncated)


def _plan_read_file(params: ReadFileParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(partial(read_file, env.workspace, params, env.max_output_bytes))


def _plan_list_files(params: ListFilesParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(partial(list_files, env.workspace, params))


READ_FILE: Final = ToolSpec(
    name="oct_read_file",
    title="Read a project file",
    description=(
        "Read a UTF-8 text file of the project, whole or from start_line to end_line (1-based, inclusive). "
        "Binary files and whole files over the server's size limit are refused; read large files by range."
    ),
    params=ReadFileParams,
    output=ReadFileOutput,
    risk=Risk.READ,
    plan=_plan_read_file,
)

LIST_FILES: Final = ToolSpec(
    name="oct_list_files",
    title="List project files",
    description=(
        "List the files under a project folder (the root by default), in sorted order, skipping what "
        ".gitignore ignores and .git itself. Filter with glob in .gitignore syntax; at most max_results."
    ),
    params=ListFilesParams,
    output=ListFilesOutput,
    risk=Risk.READ,
    plan=_plan_list_files,
)
