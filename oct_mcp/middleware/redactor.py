"""OutputRedactor: no secret and no host path leaves in what a tool answers."""

from __future__ import annotations

import getpass
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from oct_mcp.backends import SCRATCH_PREFIX
from oct_mcp.preview import Preview
from oct_mcp.redaction import (
    HostPath,
    ValueStrings,
    anonymise_paths,
    names_host_paths,
    redact,
    redact_value,
    server_paths,
    value_strings,
    warm_up,
)
from oct_mcp.types import CallContext, CallNext, LayerRuntime, LayerSettings, LayerType, Outcome, ToolResult

__all__ = ["DEVELOPMENT_ENV", "LAYER", "HostIdentity", "OutputRedactor", "RedactorSettings", "scrub"]

DEVELOPMENT_ENV: Final = "OCT_MCP_DEVELOPMENT"
"""`1` turns redaction off in development mode (also `--development`), where the profile allows it."""


class RedactorSettings(LayerSettings):
    always_on: bool = False
    """Redact even in development mode (strict and airgapped say so)."""


@dataclass(frozen=True, slots=True)
class HostIdentity:
    """Who and where the host is, which path anonymisation replaces: the project root, the home
    folder, the user name."""

    project_root: str
    home: str
    user: str
    others: tuple[HostPath, ...] = ()
    """The server's own folders (its venv, its interpreter, the runs' scratch folders)."""

    def anonymise(self, text: str) -> str:
        """`anonymise_paths` with this root, home, user name and server folders."""
        return anonymise_paths(
            text, project_root=self.project_root, home=self.home, user=self.user, others=self.others
        )

    def named_in(self, text: str) -> bool:
        """Whether `anonymise` could change `text`, or any of the texts it joins (`ValueStrings.joined`)."""
        return names_host_paths(
            text, project_root=self.project_root, home=self.home, user=self.user, others=self.others
        )


def scrub(result: ToolResult, who: HostIdentity) -> ToolResult:
    """Mask secrets and anonymise paths in every string a result carries.

    The text, the structured content, and an embedding host's other content items (a resource's
    text, URI and name, `_meta`, annotations): all but their binary payloads, which the embedding
    adapter drops unless the host opted in.

    Returns:
        The result, its `redactions` raised by the number of secrets masked.
    """
    text, findings = redact(result.text)
    text = who.anonymise(text)
    structured: Any = result.structured
    masked = 0
    if structured is not None:
        strings = value_strings(structured)
        # A read's structured content repeats its text: found clean once, it is not screened again.
        known_clean = frozenset((result.text,)) if result.text and not findings else frozenset()
        scrubbed, masked = redact_value(structured, strings, known_clean)
        # Nothing masked: any copy equals the value, whose strings were gathered, and one pass over
        # them says if a host path is among them (a second walk cost as much as the redaction).
        structured = _anonymise_value(scrubbed, who) if masked else _anonymise_value(structured, who, strings)
    content = result.passthrough_content
    if content:
        scrubbed_items = []
        for item in content:
            scrubbed_item, count = _scrub_content_item(item, who)
            scrubbed_items.append(scrubbed_item)
            masked += count
        content = tuple(scrubbed_items)
    preview, in_preview = _scrub_preview(result.preview, who)
    if (
        text is result.text
        and structured is result.structured
        and content == result.passthrough_content
        and preview is result.preview
    ):
        return result  # nothing masked or anonymised, as for most results: no copy (2 us, measured)
    return replace(
        result,
        text=text,
        structured=structured,
        passthrough_content=content,
        preview=preview,
        redactions=result.redactions + len(findings) + masked + in_preview,
    )


def _scrub_content_item(item: Mapping[str, Any], who: HostIdentity) -> tuple[dict[str, Any], int]:
    """Redact a content item's strings but its base64 payload: an image's or audio's `data`, or
    an embedded resource's `blob`. Bytes, not text, which masking would corrupt; the embedding
    adapter drops them unless the host opted in."""
    resource = item.get("resource")
    if item.get("type") == "resource" and isinstance(resource, Mapping):
        top = {key: value for key, value in item.items() if key != "resource"}
        scrubbed, masked = _scrub_mapping(top, who, binary="")
        scrubbed["resource"], count = _scrub_mapping(resource, who, binary="blob")
        return scrubbed, masked + count
    binary = "data" if item.get("type") in ("image", "audio") else ""
    return _scrub_mapping(item, who, binary=binary)


def _scrub_mapping(
    mapping: Mapping[str, Any], who: HostIdentity, *, binary: str
) -> tuple[dict[str, Any], int]:
    payload = mapping.get(binary) if binary else None
    rest = {key: value for key, value in mapping.items() if key != binary or not isinstance(payload, str)}
    redacted, masked = redact_value(rest)
    scrubbed: dict[str, Any] = _anonymise_value(redacted, who)
    if isinstance(payload, str):
        scrubbed[binary] = payload
    return scrubbed, masked


def _scrub_preview(preview: Preview | None, who: HostIdentity) -> tuple[Preview | None, int]:
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


def _anonymise_value(value: Any, who: HostIdentity, strings: ValueStrings | None = None) -> Any:
    # One check for a whole result: most name no host path, and a call a string cost 1 to 2 us.
    if isinstance(value, str):
        return who.anonymise(value)
    if not who.named_in((value_strings(value) if strings is None else strings).joined):
        return value
    return _anonymise_strings(value, who)


def _anonymise_strings(value: Any, who: HostIdentity) -> Any:
    if isinstance(value, str):
        return who.anonymise(value)
    if isinstance(value, dict):
        return {key: _anonymise_strings(item, who) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_anonymise_strings(item, who) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class OutputRedactor:
    """Redact what comes back from inside the chain.

    Reads the outcome only. Answers nothing itself and raises nothing of its own:
    a ToolResult coming back is masked (secrets as `[REDACTED:<kind>]`, the project
    root as `<project>`, the home as `~`); a ConsentRequest passes as it is.
    """

    who: HostIdentity
    active: bool

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        outcome = await call_next(ctx)
        if self.active and isinstance(outcome, ToolResult):
            return scrub(outcome, self.who)
        return outcome

    def warm_up(self) -> None:
        """Build the detectors and this host's path patterns, 100 to 200 ms the first call paid."""
        if self.active:
            warm_up()
            self.who.named_in("")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no USER variable: nothing to hide by name
        return ""


def _build(settings: RedactorSettings, runtime: LayerRuntime) -> OutputRedactor:
    development = runtime.development or os.environ.get(DEVELOPMENT_ENV, "").strip() == "1"
    active = not development or settings.always_on or runtime.config.redaction_always_on
    who = HostIdentity(
        project_root=str(runtime.workspace.root),
        home=str(Path.home()),
        user=_user(),
        others=server_paths(tempfile.gettempdir(), SCRATCH_PREFIX),
    )
    return OutputRedactor(who=who, active=active)


LAYER: Final = LayerType(name="redactor", settings=RedactorSettings, build=_build)
