"""oct_write_file: create or replace one project file with the given text, with a diff preview."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Final, Literal

from pydantic import BaseModel, Field, StringConstraints, model_validator

from oct_mcp.deadline import Deadline
from oct_mcp.diff_view import readable_diff
from oct_mcp.execution.changes import PathChange, Proposal
from oct_mcp.preview import FileChange
from oct_mcp.redaction import redact
from oct_mcp.spec import ProjectPath, Risk, StrictParams, ToolSpec
from oct_mcp.tools._text.diffs import Diff, truncate_diff, unified_diff
from oct_mcp.tools._text.masks import MaskError, kept_note, masked, unmask
from oct_mcp.tools.edit.change_kit import digest_of, named_if_other, plan_change, read_existing
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = ["WRITE_FILE", "WRITE_MAX_BYTES", "WriteFileOutput", "WriteFileParams", "propose_write"]

WRITE_MAX_BYTES: Final = 2 * 1_048_576


class WriteFileParams(StrictParams):
    path: ProjectPath = Field()
    content: Annotated[str, StringConstraints(max_length=WRITE_MAX_BYTES)] = Field(
        description="The whole new text."
    )
    dry_run: bool | None = Field(default=None, description="Unset: the server's default.")

    @model_validator(mode="after")
    def _content_fits(self) -> WriteFileParams:
        if len(self.content.encode("utf-8", errors="surrogatepass")) > WRITE_MAX_BYTES:
            raise ValueError(f"content must be at most {WRITE_MAX_BYTES} bytes as UTF-8")
        return self


class WriteFileOutput(BaseModel):
    path: str
    action: Literal["create", "replace", "unchanged"]
    applied: bool
    """False for a dry run: nothing was written."""
    size_bytes: int
    added: int
    removed: int
    diff: str
    diff_cut: bool
    masked_kept: int = 0
    """Secrets the content keeps behind the masks the model wrote back; the diff shows the masks."""


def propose_write(
    workspace: Workspace, params: WriteFileParams, deadline: Deadline | None = None
) -> Proposal | ToolResult:
    """The change that creates or replaces a project file with `params.content`, and its diff.

    Raises:
        ToolTimeoutError: The deadline passed.
        PathRefusedError: Outside the project, through a symlink leading out, a folder, not a file.
    """
    target = workspace.contain(params.path)
    old = read_existing(workspace, target)
    relative = workspace.relative(target)
    old_text = None if old is None else old.text
    # The content is what the model wrote from the file as it read it: a mask it kept stands for
    # the secret at that place, which stays; the diff shows masks on both sides, never a secret.
    seen = masked(old_text or "")
    try:
        content, kept = unmask(seen, params.content, deadline)
    except MaskError as exc:
        return ToolResult(text=f"the write does not apply; nothing was changed.\n{exc}", is_error=True)
    new = content.encode("utf-8")
    if old is None:
        action: Literal["create", "replace", "unchanged"] = "create"
    else:
        action = "unchanged" if old.data == new else "replace"
    if old is not None and old_text is None:
        diff = Diff(f"Binary or non-UTF-8 file {relative} replaced ({len(old.data)} bytes)\n", 0, 0)
    else:
        shown_new = params.content if kept or not seen.has_secrets else redact(content)[0]
        shown_old = None if old_text is None else seen.view
        diff = unified_diff(shown_old, shown_new, f"a/{relative}", f"b/{relative}", deadline)
    text, cut = truncate_diff(diff.text)

    def answer(applied: bool) -> ToolResult:
        output = WriteFileOutput(
            path=relative,
            action=action,
            applied=applied and action != "unchanged",
            size_bytes=len(new),
            added=diff.added,
            removed=diff.removed,
            diff=text,
            diff_cut=cut,
            masked_kept=kept,
        )
        verb = {"create": "create", "replace": "replace", "unchanged": "leave unchanged"}[action]
        if not applied:
            head = f"dry run, nothing changed: would {verb} {relative} (+{diff.added} -{diff.removed})"
        elif action == "unchanged":
            head = f"{relative} already has this content; nothing written"
        else:
            done = "created" if action == "create" else "replaced"
            head = f"{done} {relative} ({len(new)} bytes, +{diff.added} -{diff.removed})"
        rendered = f"{head}{kept_note(kept)}\n{readable_diff(text)}".rstrip("\n")
        return ToolResult(text=rendered, structured=output.model_dump())

    if action == "unchanged":
        return Proposal(changes=(), files=(), diff=diff.text, answer=answer)
    change = PathChange(
        action="write",
        path=relative,
        read=digest_of(old),
        named=named_if_other(workspace, params.path, relative),
        data=new,
    )
    shown = FileChange(path=relative, action=action, added=diff.added, removed=diff.removed, masked_kept=kept)
    return Proposal(changes=(change,), files=(shown,), diff=diff.text, answer=answer)


WRITE_FILE: Final = ToolSpec(
    name="oct_write_file",
    title="Write a file",
    description=(
        "Create or replace a file with UTF-8 content (at most 2 MiB), making missing folders; atomic, mode "
        "kept. A dry run returns the diff. For part of a file use oct_edit."
    ),
    params=WriteFileParams,
    output=WriteFileOutput,
    risk=Risk.WRITE,
    plan=partial(plan_change, propose_write),
    preview=partial(plan_change, propose_write),
    idempotent=True,
    names_only_its_paths=True,
)
