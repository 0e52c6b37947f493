"""OutputRedactor (Layer 5): no secret and no host path leaves in what a tool answers."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from oct_mcp.chain import CallNext, LayerRuntime, LayerType
from oct_mcp.context import CallContext, Outcome, ToolResult
from oct_mcp.preview import Preview
from oct_mcp.redaction import anonymise_paths, redact, redact_value

__all__ = ["DEVELOPMENT_ENV", "LAYER", "OutputRedactor", "RedactorSettings", "scrub"]

DEVELOPMENT_ENV: Final = "OCT_MCP_DEVELOPMENT"
"""`1` turns redaction off in development mode (also `--development`), where the profile allows it."""


class RedactorSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    always_on: bool = False
    """Redact even in development mode (strict and airgapped say so)."""


@dataclass(frozen=True, slots=True)
class _Who:
    """What path anonymisation replaces: the project root, the home folder, the user name."""

    project_root: str
    home: str
    user: str

    def anonymise(self, text: str) -> str:
        """`anonymise_paths` with this root, home and user name."""
        return anonymise_paths(text, project_root=self.project_root, home=self.home, user=self.user)


def scrub(result: ToolResult, who: _Who) -> ToolResult:
    """Mask secrets and anonymise paths in a tool's text and structured content.

    Returns:
        The result, its `redactions` raised by the number of secrets masked.
    """
    text, findings = redact(result.text)
    text = who.anonymise(text)
    structured: Any = result.structured
    masked = 0
    if structured is not None:
        scrubbed, masked = redact_value(structured)
        scrubbed = _anonymise_value(scrubbed, who)
        if masked or scrubbed != structured:
            structured = scrubbed
    preview, in_preview = _scrub_preview(result.preview, who)
    if text is result.text and structured is result.structured and preview is result.preview:
        return result  # nothing masked or anonymised, as for most results: no copy (2 us, measured)
    return replace(
        result,
        text=text,
        structured=structured,
        preview=preview,
        redactions=result.redactions + len(findings) + masked + in_preview,
    )


def _scrub_preview(preview: Preview | None, who: _Who) -> tuple[Preview | None, int]:
    """A preview as a human and the model may see it: its diff and names masked; the digests kept,
    since they bind the consent to the real contents and say nothing of them."""
    if preview is None:
        return None, 0
    diff, findings = redact(preview.diff)
    diff = who.anonymise(diff)
    files = []
    masked = len(findings)
    for change in preview.files:
        path, found = redact(change.path)
        original, found_original = redact(change.original_path or "")
        masked += len(found) + len(found_original)
        files.append(replace(change, path=path, original_path=original if change.original_path else None))
    if diff == preview.diff and not masked:
        return preview, 0
    return replace(preview, diff=diff, files=tuple(files)), masked


def _anonymise_value(value: Any, who: _Who) -> Any:
    if isinstance(value, str):
        return who.anonymise(value)
    if isinstance(value, dict):
        return {key: _anonymise_value(item, who) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_anonymise_value(item, who) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class OutputRedactor:
    """Redact what comes back from inside the chain.

    Reads the outcome only. Answers nothing itself and raises nothing of its own:
    a ToolResult coming back is masked (secrets as `[REDACTED:<kind>]`, the project
    root as `<project>`, the home as `~`); a ConsentRequest passes as it is.
    """

    who: _Who
    active: bool

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        outcome = await call_next(ctx)
        if self.active and isinstance(outcome, ToolResult):
            return scrub(outcome, self.who)
        return outcome


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no USER variable: nothing to hide by name
        return ""


def _build(settings: RedactorSettings, runtime: LayerRuntime) -> OutputRedactor:
    development = runtime.development or os.environ.get(DEVELOPMENT_ENV, "").strip() == "1"
    active = not development or settings.always_on or runtime.config.redaction_always_on
    who = _Who(project_root=str(runtime.workspace.root), home=str(Path.home()), user=_user())
    return OutputRedactor(who=who, active=active)


LAYER: Final = LayerType(name="redactor", settings=RedactorSettings, build=_build)
