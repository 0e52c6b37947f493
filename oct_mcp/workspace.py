"""The project root and the one containment function every path goes through."""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oct_mcp.display import has_format_characters
from oct_mcp.errors import NotFoundError, PathRefusedError
from oct_mcp.file_screen import read_at_most

__all__ = [
    "ENVIRONMENT_FOLDERS",
    "KEY_HOLDERS",
    "NO_FORMAT_CHARACTERS",
    "Workspace",
    "broad_root_problem",
    "contain",
    "contain_text",
    "descriptor_is_inside",
    "read_at_most",
    "read_project_file",
    "resolve_root",
]

_WINDOWS_DRIVE: Final = re.compile(r"^[A-Za-z]:")
# Unicode's Cc (C0, DEL, C1 controls) and Cs (lone surrogates, which no file name can hold).
_FORBIDDEN_CHARACTERS: Final = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_PATH_MAX_LENGTH: Final = 4_096
NO_FORMAT_CHARACTERS: Final = (
    "a path must not contain format characters (bidi controls such as U+202E, zero-width characters) "
    "or line and paragraph separators (U+2028, U+2029), which hide what it names"
)


def resolve_root(root: str | os.PathLike[str]) -> Path:
    """Resolve the project root once, at start-up.

    Raises:
        NotADirectoryError: The root does not exist or is not a directory.
    """
    resolved = Path(root).expanduser().resolve()
    if not resolved.is_dir():
        raise NotADirectoryError(f"project root {str(root)!r} is not an existing directory")
    return resolved


KEY_HOLDERS: Final = (".ssh", ".gnupg", ".aws", ".gitconfig")
"""Names whose presence says a folder is a home, not a project: a root there exposes keys and settings."""
ENVIRONMENT_FOLDERS: Final = frozenset(
    {
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
    }
)
"""A project's folders of installed packages and caches: list and search skip them below the folder
they start in, and the search for files holding secrets looks only at their own files."""


def user_home() -> Path | None:
    """The user's home folder; None without HOME and a passwd entry (the other root rules still hold)."""
    try:
        return Path.home()
    except (RuntimeError, KeyError):
        return None


def broad_root_problem(root: Path, home: Path | None) -> str | None:
    """Why `root` is too broad to serve as a project root, or None when it is a project's folder.

    Too broad: `/`, the home folder or any folder above it, and any folder that holds one of
    KEY_HOLDERS. MCP hosts often start servers in `/` or the home folder; a root there lets read
    tools read `~/.ssh` and write tools change `~/.gitconfig`.

    Args:
        root: The resolved project root.
        home: The user's home folder; None where it cannot be told.

    Returns:
        What is wrong, as a phrase safe to show (no path), or None.
    """
    if root == Path(root.anchor):
        return "the project root is the file system's root"
    resolved_home = home.resolve() if home is not None else None
    if root == resolved_home:
        return "the project root is the home folder"
    if resolved_home is not None and root in resolved_home.parents:
        return "the project root holds the home folder"
    for name in KEY_HOLDERS:
        if os.path.lexists(root / name):
            return f"the project root holds {name}, so it is a home folder rather than a project"
    return None


def contain(path: str, root: Path) -> Path:
    """Resolve `path` inside `root`, or refuse it: `contain_text(path, str(root))` as a Path."""
    return Path(contain_text(path, str(root)))


def contain_text(path: str, top: str) -> str:
    """Resolve `path` inside the root `top`, or refuse it.

    Refused: an empty or overlong path; NUL, control or format characters and line or
    paragraph separators; a leading
    `-` (a CLI would read it as an option); a Windows drive or UNC path; an
    absolute path outside the root; `..` that climbs out; a symlink on the way
    that leads outside. The root itself is allowed; a symlink loop is returned as
    written and refused where it is opened.

    Strings, not Path objects, from end to end: this runs on every path argument, often twice,
    and building Paths cost more than the checks (measured).

    Args:
        path: The path as the client sent it, relative to `top` or absolute inside it.
        top: The resolved project root.

    Returns:
        The resolved path, inside `top`. It may not exist.

    Raises:
        PathRefusedError: With a message that says which rule the path broke (never the path).
    """
    if not path or len(path) > _PATH_MAX_LENGTH:
        raise PathRefusedError(f"a path must have 1 to {_PATH_MAX_LENGTH} characters")
    if _FORBIDDEN_CHARACTERS.search(path):
        raise PathRefusedError("a path must not contain NUL, control characters or lone surrogates")
    if has_format_characters(path):
        raise PathRefusedError(NO_FORMAT_CHARACTERS)
    if path.startswith("-"):
        raise PathRefusedError("a path must not start with '-'; write ./-name for such a file")
    if _WINDOWS_DRIVE.match(path) or path.startswith(("\\\\", "//")):
        raise PathRefusedError("a path must not be a Windows drive or UNC path")
    is_absolute = os.path.isabs(path)
    absolute = path if is_absolute else os.path.join(top, path)
    # Lexical check first: it names the rule broken ('..' or absolute) before any symlink is followed.
    if not _is_inside(os.path.normpath(absolute), top):
        if is_absolute:
            raise PathRefusedError("an absolute path must lie inside the project root")
        raise PathRefusedError("a path must not climb out of the project root with '..'")
    resolved = _resolve_plain(absolute, top)
    if resolved is None:
        # strict=False never raises: a symlink loop stays as written, inside the root, and is refused
        # when it is opened (ELOOP), like any other path that cannot be opened safely.
        resolved = os.path.realpath(absolute, strict=False)
    if not _is_inside(resolved, top):
        raise PathRefusedError("a path must not pass through a symlink that leads outside the project root")
    return resolved


def _resolve_plain(absolute: str, top: str) -> str | None:
    """`absolute` resolved when nothing below `top` on its way is a symlink, a `..` or missing.

    The common case, answered with one lstat per component below the root; `os.path.realpath`
    lstats every component from `/` in Python (10 us for a path four folders down, measured).
    None where realpath must decide: a symlink, `..`, a component that is missing or not a folder,
    or a root that is no longer a real folder.
    """
    prefix = _folder_prefix(top)
    if not absolute.startswith(prefix):
        return None
    parts = [part for part in absolute[len(prefix) :].split(os.sep) if part not in ("", ".")]
    if not parts or ".." in parts:
        return None
    try:
        if not stat.S_ISDIR(os.lstat(top).st_mode):
            return None
        current = top.rstrip(os.sep)
        for part in parts:
            current = f"{current}{os.sep}{part}"
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return None
    except OSError:
        return None
    return current


def _is_inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    path, root = os.fspath(path), os.fspath(root)
    return path == root or path.startswith(_folder_prefix(root))


def _folder_prefix(folder: str) -> str:
    """What every path below `folder` starts with: the folder and one separator (`/` stays `/`)."""
    return folder if folder.endswith(os.sep) else folder + os.sep


@dataclass(frozen=True, slots=True)
class Workspace:
    """The one project root a server is bound to, resolved at start-up."""

    root: Path

    def root_is_present(self) -> bool:
        """The root is still an existing directory (one stat; os.path, a third of Path.is_dir's cost)."""
        return os.path.isdir(self.root)

    def contain(self, path: str) -> Path:
        """`contain(path, self.root)`."""
        return contain(path, self.root)

    def contain_text(self, path: str) -> str:
        """`contain_text(path, str(self.root))`: the resolved path as text, no Path built."""
        return contain_text(path, str(self.root))

    def relative(self, path: Path | str) -> str:
        """A contained path as the client should see it: relative, POSIX, `.` for the root."""
        # Strings, not Path.relative_to: this runs for every path a tool reports (3x faster, measured).
        text, top = str(path), str(self.root)
        if text == top:
            return "."
        prefix = _folder_prefix(top)
        if not text.startswith(prefix):
            raise ValueError(f"{text!r} is not inside the project root")
        return text[len(prefix) :]

    def open_regular_file(self, path: str) -> int:
        """`open_contained_file(path)`'s descriptor, which the caller must close."""
        return self.open_contained_file(path)[0]

    def open_contained_file(self, path: str) -> tuple[int, str]:
        """Open a project file for reading, re-checking containment on the opened descriptor.

        The final component is opened without following symlinks, and the path
        the kernel actually opened is checked against the root again, so a
        directory swapped for a symlink after `contain` cannot lead outside.

        Returns:
            A read-only file descriptor the caller must close, and the contained path it names (text).

        Raises:
            PathRefusedError: The path leaves the root, or is not a regular file.
            NotFoundError: Nothing is at the path.
        """
        resolved = self.contain_text(path)
        # O_NONBLOCK: opening a FIFO for reading must not hang the server.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(resolved, flags)
        except FileNotFoundError:
            raise NotFoundError("no file at that path in the project") from None
        except IsADirectoryError:
            raise PathRefusedError("the path is a directory, not a file") from None
        except OSError as exc:
            # ELOOP: the final component became a symlink after `contain` resolved it.
            raise PathRefusedError("the file cannot be opened safely") from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise PathRefusedError("the path is not a regular file")
            if not descriptor_is_inside(fd, self.root):
                raise PathRefusedError(
                    "a path must not pass through a symlink that leads outside the project root"
                )
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd, resolved


def descriptor_is_inside(fd: int, root: Path) -> bool:
    """The file or folder open at `fd` is inside `root`, where the platform can tell; else True."""
    opened = _opened_path(fd)
    return opened is None or _is_inside(opened, root)


def _opened_path(fd: int) -> str | None:
    """The path the kernel opened for `fd`, where the platform can tell."""
    if sys.platform.startswith("linux"):
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
    if sys.platform == "darwin":  # pragma: no cover - macOS only
        import fcntl

        try:
            raw = fcntl.fcntl(fd, fcntl.F_GETPATH, b"\0" * 1024)  # type: ignore[attr-defined]
        except OSError:
            return None
        return os.fsdecode(raw.rstrip(b"\0"))
    return None  # pragma: no cover - other POSIX systems keep the pre-open check only


def read_project_file(workspace: Workspace, name: str, limit: int) -> bytes | None:
    """A small file the server reads from the project for itself (a repository's config, an ignore
    file), opened as any project file is: contained, no link, a regular file (a link to
    `/dev/stdin` would have the server read its own protocol stream, a FIFO would block it).

    Returns:
        Its bytes; None when there is no such file.

    Raises:
        PathRefusedError: It leaves the project, is a link or no regular file, or is over `limit` bytes.
    """
    workspace.contain_text(name)
    try:
        # The name itself, not where it resolves: a link is refused, whatever it leads to.
        info = os.lstat(os.path.join(workspace.root, name))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PathRefusedError("the file cannot be opened safely") from exc
    if stat.S_ISLNK(info.st_mode):
        raise PathRefusedError("the file is a symbolic link; it must be a regular file")
    fd = workspace.open_regular_file(name)
    try:
        data = read_at_most(fd, limit, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise PathRefusedError(f"the file is larger than {limit} bytes")
    return data
