"""A write's preview: what it would change, computed without changing anything, and what a consent binds.

A tool that can show its change before making it gives its spec a `preview` plan (see
`ToolSpec.preview`), a dry run whose result carries a `Preview`. The safety layer runs it before
asking, shows it, and binds the consent to each target's content as the preview saw it; the
sandbox checks those contents again just before the approved call runs (`verify_targets`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import orjson

from oct_mcp.diff_view import diff_counts
from oct_mcp.errors import NotFoundError, OctError, TargetChangedError
from oct_mcp.workspace import Workspace

__all__ = [
    "ABSENT",
    "FileChange",
    "Preview",
    "TargetState",
    "commit_target",
    "content_digest",
    "diff_counts",
    "verify_targets",
]

ABSENT: Final = "absent"
"""The digest of a target that does not exist (a file the change creates)."""
_CHUNK: Final = 1_048_576


@dataclass(frozen=True, slots=True, kw_only=True)
class FileChange:
    """One file of a preview: where it lands (relative to the root), what happens to it, the counts."""

    path: str
    action: str
    """`create`, `modify`, `replace`, `delete`, `rename`, `copy`, `format`, `fix`."""
    added: int
    removed: int
    original_path: str | None = None
    """The file a rename or copy starts from."""
    masked_kept: int = 0
    """Secrets the change keeps where the diff shows their masks on both sides: the file keeps them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetState:
    """A file a change reads or writes, and its content when the preview was made."""

    path: str
    """Relative to the project root; for a commit binding (`commit_target`), `git:<ref>`."""
    digest: str
    """`sha256:<hex>` of the bytes, or `absent`; for a commit binding, `commit:<id>` (`commit:none`
    before the first commit)."""

    @property
    def is_commit(self) -> bool:
        """A binding of a git ref to the commit the human was shown, not a file's content."""
        return self.digest.startswith(_COMMIT)


_COMMIT: Final = "commit:"


def commit_target(ref: str, commit: str | None) -> TargetState:
    """Binds `ref` to the commit a preview showed: a consent then covers that commit only.

    A ref can move while the human reads the question, and a switch, a commit's parent or a new
    branch's start would follow it to a commit nobody saw. The file holding a ref is no binding
    (refs can be packed), so the git tool that resolves the ref checks this before git runs.
    """
    return TargetState(path=f"git:{ref}", digest=f"{_COMMIT}{commit or 'none'}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Preview:
    """What a call would change: the files, their unified diff (whole), and the targets' contents."""

    files: tuple[FileChange, ...]
    diff: str
    targets: tuple[TargetState, ...]

    @property
    def changes_nothing(self) -> bool:
        return not self.files

    def digest(self) -> str:
        """A digest of everything the preview shows and binds: the audit's record of what was approved."""
        document = {
            "files": [
                [f.path, f.action, f.added, f.removed, f.original_path, f.masked_kept] for f in self.files
            ],
            "diff": self.diff,
            "targets": [[t.path, t.digest] for t in self.targets],
        }
        canonical = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
        return "sha256:" + hashlib.sha256(canonical).hexdigest()

    def folders(self) -> tuple[str, ...]:
        """The folders the change writes in (`.` for the root), each once, in order."""
        found: list[str] = []
        for change in self.files:
            for path in (change.path, change.original_path):
                if path is None:
                    continue
                folder = os.path.dirname(path) or "."
                if folder not in found:
                    found.append(folder)
        return tuple(found)


def content_digest(workspace: Workspace, path: str) -> str:
    """The digest of a project file's bytes now (`symlink:` before it for a link), `absent` for nothing.

    Raises:
        PathRefusedError: The path leaves the project, or is no regular file.
    """
    # The name as given, not only where it leads: a file swapped for a link to one with the same
    # content is a change (the write would land elsewhere).
    kind = ""
    try:
        if stat.S_ISLNK(os.lstat(os.path.join(workspace.root, path)).st_mode):
            kind = "symlink:"
    except FileNotFoundError:
        return ABSENT
    except OSError:
        pass  # the open below says why it cannot be read
    try:
        fd = workspace.open_regular_file(path)
    except NotFoundError:
        return ABSENT
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not-a-file"
        digest = hashlib.sha256()
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
    finally:
        os.close(fd)
    return f"{kind}sha256:{digest.hexdigest()}"


def verify_targets(workspace: Workspace, targets: Iterable[TargetState]) -> None:
    """Refuse a consented call when any target's content is not what the approved preview saw.

    Raises:
        TargetChangedError: A target changed, appeared, vanished or cannot be read; nothing ran.
    """
    changed = 0
    for target in targets:
        if target.is_commit:
            continue  # checked by the git tool, which resolves the ref (`commit_target`)
        try:
            now = content_digest(workspace, target.path)
        except (OctError, OSError):
            now = "unreadable"
        changed += now != target.digest
    if changed:
        raise TargetChangedError(
            f"{changed} file(s) changed on disk after the preview the user approved, so nothing was "
            "written; call the tool again to preview the change as the files are now"
        )
