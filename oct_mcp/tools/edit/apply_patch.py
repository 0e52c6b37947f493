"""oct_apply_patch: a unified diff applied to project files, every hunk checked first, all or nothing.

Patches are parsed and applied here, in-process, not by `git apply`: the tool must work
in a project without git, it must see every target path to contain it and check it
against the protected paths before anything is written, and all-or-nothing needs the
old contents in hand to restore them. Hunks apply exactly (no fuzz) but may sit at
another line than their header says, as with `git apply`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, Field, StringConstraints

from oct_mcp.deadline import Deadline
from oct_mcp.diff_view import readable_diff
from oct_mcp.errors import PathRefusedError, SecretUnmaskedError
from oct_mcp.execution.changes import PathChange, Proposal
from oct_mcp.preview import ABSENT, FileChange
from oct_mcp.spec import Risk, StrictParams, ToolSpec
from oct_mcp.tools._text.diffs import Diff, truncate_diff, unified_diff
from oct_mcp.tools._text.hunks import apply_hunks
from oct_mcp.tools._text.masks import MaskError, kept_note, masked, unmask
from oct_mcp.tools._text.patch_parse import ParsedFile, PatchError, parse_patch
from oct_mcp.tools.edit.change_kit import ExistingFile, digest_of, named_if_other, plan_change, read_existing
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "APPLY_PATCH",
    "PATCH_MAX_CHARS",
    "ApplyPatchOutput",
    "ApplyPatchParams",
    "PatchedFile",
    "propose_patch",
]

PATCH_MAX_CHARS: Final = 2 * 1_048_576


class PatchedFile(BaseModel):
    path: str
    original_path: str | None = None
    """The file a rename or copy starts from."""
    action: Literal["create", "modify", "delete", "rename", "copy"]
    hunks: int
    added: int
    removed: int
    masked_kept: int = 0
    """Secrets kept behind the masks the patch's lines carry; the diff shows the masks."""


class ApplyPatchOutput(BaseModel):
    applied: bool
    """False for a dry run: nothing was written."""
    files: list[PatchedFile]
    added: int
    removed: int
    diff: str
    """The changes as they apply (at the lines where each hunk was found)."""
    diff_cut: bool


@dataclass(frozen=True, slots=True)
class _Planned:
    parsed: ParsedFile
    target: Path
    """Written, or deleted for a delete."""
    source: Path | None
    """Read by a rename or copy; deleted by a rename."""
    old: ExistingFile | None
    """What is at `target` now (at the source, for a rename or copy)."""
    new: bytes | None
    diff: Diff
    named: str
    """The target's path as the patch names it (before links inside are resolved)."""
    kept: int = 0
    """Secrets kept behind masks the patch carried."""


class ApplyPatchParams(StrictParams):
    patch: Annotated[str, StringConstraints(min_length=1, max_length=PATCH_MAX_CHARS)] = Field(
        description="Paths from the project root; a/ b/ optional."
    )
    dry_run: bool | None = Field(default=None, description="Unset: the server's default.")


def _contained(workspace: Workspace, path: str, parsed: ParsedFile) -> Path:
    where = f"file {parsed.number} of the patch"
    try:
        return workspace.contain(path)
    except PathRefusedError as exc:
        raise PathRefusedError(f"{where}: {exc.message}") from None


def _text_of(existing: ExistingFile, parsed: ParsedFile, path: str) -> str:
    text = existing.text
    if text is None:
        raise PatchError(
            f"file {parsed.number} of the patch ({path}): binary or not UTF-8; only text is patched"
        )
    return text


def _plan_file(workspace: Workspace, parsed: ParsedFile, deadline: Deadline | None) -> _Planned:
    old_path, new_path = parsed.old_path, parsed.new_path
    where = f"file {parsed.number} of the patch ({new_path or old_path})"
    source = None
    if old_path is None:
        if new_path is None:
            raise PatchError(f"{where}: both sides are /dev/null")
        target = _contained(workspace, new_path, parsed)
        if read_existing(workspace, target) is not None:
            raise PatchError(f"{where}: the patch creates it, but it already exists")
        text = apply_hunks("", parsed.hunks, where, deadline)
        try:
            unmask(masked(""), text, deadline)
        except MaskError as exc:
            raise PatchError(f"{where}: {exc}") from None
        diff = unified_diff(None, text, "", f"b/{workspace.relative(target)}", deadline=deadline)
        return _Planned(parsed, target, None, None, text.encode("utf-8"), diff, new_path)
    old_target = _contained(workspace, old_path, parsed)
    if parsed.action in ("rename", "copy") and new_path is not None:
        source, target = old_target, _contained(workspace, new_path, parsed)
        if read_existing(workspace, target) is not None:
            raise PatchError(f"{where}: the patch {parsed.action}s onto a file that already exists")
    elif parsed.action == "modify" and new_path is not None and new_path != old_path:
        # Plain diff: `--- name.orig` / `+++ name`; patch the side that exists, the new one first.
        new_target = _contained(workspace, new_path, parsed)
        target = new_target if new_target.is_file() else old_target
    else:
        target = old_target
    named = new_path if new_path is not None and target != old_target else old_path
    existing = read_existing(workspace, source or target)
    if existing is None:
        raise PatchError(f"{where}: the file does not exist")
    old_text = _text_of(existing, parsed, old_path)
    seen = masked(old_text)
    # Written from the file as the model read it: applied to that view, the masks kept put back.
    # A patch without a mask goes the same way: it may still leave a secret's own line alone and
    # change what marked it (`- name: DB_PASSWORD` above `value: ...`), which `unmask` checks.
    new_view = apply_hunks(seen.view, parsed.hunks, where, deadline)
    try:
        new_text, kept = unmask(seen, new_view, deadline)
    except MaskError as exc:
        raise PatchError(f"{where}: {exc}") from None
    except SecretUnmaskedError as exc:
        raise SecretUnmaskedError(f"{where}: {exc.message}") from None
    old_name = f"a/{workspace.relative(source or target)}"
    if parsed.action == "delete":
        if new_text:
            raise PatchError(f"{where}: the patch deletes the file, but its hunks do not remove every line")
        deleted = unified_diff(seen.view, None, old_name, "", deadline)
        return _Planned(parsed, target, None, existing, None, deleted, old_path)
    diff = unified_diff(seen.view, new_view, old_name, f"b/{workspace.relative(target)}", deadline)
    return _Planned(parsed, target, source, existing, new_text.encode("utf-8"), diff, named, kept)


def _modes(old_mode: int | None, executable: bool | None) -> tuple[int | None, int]:
    """(the exact mode, or None for a new file; a new file's mode before the umask) under a mode change."""
    if old_mode is None:
        return None, 0o777 if executable else 0o666
    if executable is None:
        return old_mode, 0o666
    return (old_mode | ((old_mode & 0o444) >> 2) if executable else old_mode & ~0o111), 0o666


def _changes_of(workspace: Workspace, planned: list[_Planned]) -> tuple[PathChange, ...]:
    """The patch as changes for the applier: a rename writes its new file and deletes its source."""
    changes: list[PathChange] = []
    for change in planned:
        relative = workspace.relative(change.target)
        named = named_if_other(workspace, change.named, relative)
        where = f"file {change.parsed.number} of the patch"
        if change.parsed.action == "delete":
            changes.append(
                PathChange(
                    action="delete", path=relative, read=digest_of(change.old), named=named, where=where
                )
            )
            continue
        if change.new is None:
            raise RuntimeError("a planned write without content")
        old_mode = None if change.old is None else change.old.mode
        mode, new_mode = _modes(old_mode, change.parsed.executable)
        # A rename or copy writes a new file, whatever its source was.
        read = digest_of(change.old) if change.parsed.action == "modify" else ABSENT
        changes.append(
            PathChange(
                action="write",
                path=relative,
                read=read,
                named=named,
                data=change.new,
                mode=mode,
                new_mode=new_mode,
                where=where,
            )
        )
        if change.parsed.action == "rename" and change.source is not None:
            source = workspace.relative(change.source)
            named_source = named_if_other(workspace, change.parsed.old_path or source, source)
            changes.append(
                PathChange(
                    action="delete", path=source, read=digest_of(change.old), named=named_source, where=where
                )
            )
    return tuple(changes)


def _refuse_repeats(workspace: Workspace, parsed: list[ParsedFile]) -> None:
    """Every path in the patch contained, and no file named twice (the applier judges the protected paths).

    Raises:
        PathRefusedError: A path outside the project.
        PatchError: A file named twice (its second change would apply to the first one's result).
    """
    seen: set[Path] = set()
    for item in parsed:
        for path in {item.old_path, item.new_path} - {None}:
            resolved = _contained(workspace, str(path), item)
            if resolved in seen:
                raise PatchError(
                    f"file {item.number} of the patch ({path}): the patch names this file more than once; "
                    "give each file's changes in one place"
                )
            seen.add(resolved)


def propose_patch(
    workspace: Workspace, params: ApplyPatchParams, deadline: Deadline | None = None
) -> Proposal | ToolResult:
    """Check that every hunk of the patch applies, and propose the changes it makes.

    A patch that does not apply is an error result.

    Raises:
        PathRefusedError: A path in the patch leaves the project.
        ToolTimeoutError: The deadline passed.
    """
    try:
        parsed = parse_patch(params.patch)
        _refuse_repeats(workspace, parsed)
        planned = [_plan_file(workspace, item, deadline) for item in parsed]
    except PatchError as exc:
        return ToolResult(text=f"the patch does not apply; nothing was changed.\n{exc}", is_error=True)
    files = [
        PatchedFile(
            path=workspace.relative(change.target),
            original_path=None if change.source is None else workspace.relative(change.source),
            action=change.parsed.action,
            hunks=len(change.parsed.hunks),
            added=change.diff.added,
            removed=change.diff.removed,
            masked_kept=change.kept,
        )
        for change in planned
    ]
    whole = "".join(change.diff.text for change in planned)
    diff, cut = truncate_diff(whole)
    listing = "\n".join(
        f"  {f.action} {f.original_path + ' -> ' if f.original_path else ''}{f.path} "
        f"({f.hunks} hunk(s), +{f.added} -{f.removed}{kept_note(f.masked_kept)})"
        for f in files
    )

    def answer(applied: bool) -> ToolResult:
        output = ApplyPatchOutput(
            applied=applied,
            files=files,
            added=sum(f.added for f in files),
            removed=sum(f.removed for f in files),
            diff=diff,
            diff_cut=cut,
        )
        head = (
            f"applied the patch to {len(files)} file(s):"
            if applied
            else f"dry run, nothing changed; the patch applies cleanly to {len(files)} file(s):"
        )
        text = f"{head}\n{listing}\n\n{readable_diff(diff)}".rstrip("\n")
        return ToolResult(text=text, structured=output.model_dump())

    summary = tuple(
        FileChange(
            path=f.path,
            action=f.action,
            added=f.added,
            removed=f.removed,
            original_path=f.original_path,
            masked_kept=f.masked_kept,
        )
        for f in files
    )
    return Proposal(changes=_changes_of(workspace, planned), files=summary, diff=whole, answer=answer)


def _patch_targets(arguments: Mapping[str, Any]) -> list[str]:
    """The files a patch names, each side of a rename or copy included, for the consent question."""
    patch = arguments.get("patch")
    if not isinstance(patch, str):
        return []
    try:
        parsed = parse_patch(patch)
    except PatchError:
        return []  # the tool refuses it before anything is written
    names: list[str] = []
    for file in parsed:
        for side in (file.old_path, file.new_path):
            if side is not None and side not in names:
                names.append(side)
    return names


APPLY_PATCH: Final = ToolSpec(
    name="oct_apply_patch",
    title="Apply a patch",
    description=(
        "Apply a unified diff (git diff or diff -u) to project files: modify, create, delete, rename; every "
        "hunk checked first, all or nothing; a hunk that fails names its nearest place."
    ),
    params=ApplyPatchParams,
    output=ApplyPatchOutput,
    risk=Risk.WRITE,
    plan=partial(plan_change, propose_patch),
    preview=partial(plan_change, propose_patch),
    targets=_patch_targets,
    idempotent=False,
)
