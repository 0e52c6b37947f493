"""What a human is asked before a write: the question a host shows (the tool, the paths it names,
the diff of what will be applied, the grant offered) and the text a client that cannot ask is sent."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

from oct_mcp.code_config import configures_code
from oct_mcp.consent import (
    CONFIRMATION_PREFIX,
    granted_action,
)
from oct_mcp.diff_view import shown_diff
from oct_mcp.display import quote_name
from oct_mcp.errors import OctError
from oct_mcp.preview import Preview
from oct_mcp.spec import CallRisk, Risk, ToolSpec
from oct_mcp.workspace import Workspace

__all__ = ["confirmation_request_text", "format_question"]

_CONFIGURES_CODE: Final = "configures code that runs later: check it"


def confirmation_request_text(
    tool_name: str,
    spec: ToolSpec,
    args: Mapping[str, Any],
    digest: str,
    *,
    changes_nothing: bool,
    call: CallRisk | None = None,
    workspace: Workspace | None = None,
    preview: Preview | None = None,
) -> str:
    """The text returned to the host when a call needs confirmation.

    It starts with `[oct-mcp requires_confirmation]`, names the tool, says what it
    would change (every file, whether it is a dry run), gives the argument digest,
    and says how to confirm; then, where the tool previewed the call, the change itself
    (each file's counts, the diff cut to what a dialog can show). Each file is shown where
    it lands: resolved inside the project (`docs/x/../../conftest.py` is `conftest.py`),
    whole, with characters a reader cannot see escaped, and flagged when it configures
    code that runs later. `call` is the call's risk as the validator worked it out; None: from
    `spec` and `args`.
    """
    if call is None:
        call = spec.risk_of(args)
    if preview is not None:
        shown = _preview_lines(preview, workspace)
    else:
        shown = [] if call.action is not None else _named_lines(spec, args, workspace)
    effect = (
        call.action
        or {
            # What the confirmed call does: a dry run shows a change and makes none.
            Risk.WRITE: "show the change it would make" if changes_nothing else "change files in the project",
            Risk.EXECUTE: "run project code",
            Risk.READ: "read the project",
        }[call.risk]
    )
    files = [f"Files ({len(shown)}):", *(f"  {line}" for line in shown)] if shown else []
    if not files and call.action is None:
        files = ["Files: none named."]
    lines = [
        f"{CONFIRMATION_PREFIX} {tool_name} ({spec.title}) would {effect}.",
        *([f"It needs consent because {call.consent}."] if call.consent is not None else []),
        *_warning(shown),
        *files,
        # What the confirmed call does: a tool's own dry_run=true changes nothing, whatever the default.
        f"Dry run: {'yes, nothing will change' if changes_nothing else 'no, the changes are made'}.",
        f"Arguments digest: {digest}",
        "To confirm, re-submit the identical call with confirm=true. "
        "A consent covers these exact arguments only.",
    ]
    if preview is not None:
        lines += ["", "The change:", *shown_diff(preview.diff)]
    return "\n".join(lines)


def format_question(
    tool_name: str,
    spec: ToolSpec,
    args: Mapping[str, Any],
    *,
    changes_nothing: bool,
    call: CallRisk | None = None,
    workspace: Workspace | None = None,
    preview: Preview | None = None,
    grant_folders: tuple[str, ...] = (),
) -> str:
    """What a human is asked through the client: the change itself, and what each answer does.

    Words for a person: the files with their counts, the diff cut to what a dialog can show,
    and the choices; no digest and no instruction meant for the model.
    """
    if preview is not None:
        shown = _preview_lines(preview, workspace)
        lines = [
            f"{tool_name} ({spec.title}) asks to change {len(shown)} file(s) in the project.",
            *_warning(shown),
            *(f"  {line}" for line in shown),
            "",
            *shown_diff(preview.diff),
            "",
            "Accept: exactly the change shown is made. If one of these files changes on disk before "
            "then, nothing is written and you are told.",
            "Decline or cancel: nothing changes.",
        ]
        lines += _grant_line(tool_name, grant_folders)
        return "\n".join(lines)
    if call is None:
        call = spec.risk_of(args)
    shown = [] if call.action is not None else _named_lines(spec, args, workspace)
    effect = (
        call.action
        or {
            Risk.WRITE: "change files in the project",
            Risk.EXECUTE: "run the project's code",
            Risk.READ: "read the project",
        }[call.risk]
    )
    files = [f"Files ({len(shown)}):", *(f"  {line}" for line in shown)] if shown else []
    lines = [
        f"{tool_name} ({spec.title}) asks to {effect}.",
        *([f"It needs consent because {call.consent}."] if call.consent is not None else []),
        *_warning(shown),
        *files,
    ]
    if call.risk is Risk.WRITE:
        lines.append("It is a dry run: nothing will change." if changes_nothing else "The changes are made.")
    lines.append("Accept: the call runs exactly as described. Decline or cancel: nothing runs.")
    lines += _grant_line(tool_name, grant_folders)
    return "\n".join(lines)


def _grant_line(tool: str, grants: tuple[str, ...]) -> list[str]:
    if not grants:
        return []
    return [
        f"You may also allow {tool} to {granted_action(grants)} for the rest of this session without "
        "asking; each such call is recorded in the audit log."
    ]


def _warning(shown: list[str]) -> list[str]:
    # Said before the list, which a host may show cut: how many of the files configure code.
    flagged = sum(f"({_CONFIGURES_CODE})" in line for line in shown)
    return [f"{flagged} of the files configure code that runs later; each is marked."] if flagged else []


def _named_lines(spec: ToolSpec, args: Mapping[str, Any], workspace: Workspace | None) -> list[str]:
    named: list[object] = [path for _field, path in spec.given_paths(args)]
    named.extend(_targets(spec, args))
    shown: list[str] = []
    for path in named:
        if isinstance(path, str):
            line = _shown_path(path, workspace)
            if line not in shown:
                shown.append(line)
    return shown


def _preview_lines(preview: Preview, workspace: Workspace | None) -> list[str]:
    shown = []
    for change in preview.files:
        name = _shown_path(change.path, workspace)
        if change.original_path is not None:
            name = f"{_shown_path(change.original_path, workspace)} -> {name}"
        kept = (
            f", {change.masked_kept} secret(s) kept where the diff shows [REDACTED:...]"
            if change.masked_kept
            else ""
        )
        shown.append(f"{name}: {change.action}, +{change.added} -{change.removed}{kept}")
    return shown


def _shown_path(path: str, workspace: Workspace | None) -> str:
    """One file of the question: where it lands in the project, quoted if need be, and flagged."""
    if workspace is None:
        relative = os.path.normpath(path)
    else:
        try:
            relative = workspace.relative(workspace.contain_text(path))
        except (OctError, ValueError):
            return f"{quote_name(path)} (outside the project or not a usable path: the tool refuses it)"
    shown = quote_name(relative)
    if configures_code(relative):
        shown += f" ({_CONFIGURES_CODE})"
    return shown


def _targets(spec: ToolSpec, args: Mapping[str, Any]) -> Sequence[object]:
    """The paths the tool says a call would change beyond its path fields; none if it cannot tell."""
    if spec.targets is None:
        return ()
    try:
        return spec.targets(args)
    except Exception:  # noqa: BLE001 - the question must be asked whatever the arguments hold
        return ()
