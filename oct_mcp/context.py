"""CallContext, the one object a tool call carries through the chain, and the Outcome it comes back with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import BaseModel

from oct_mcp.consent import Consent, ConsentFacts, SessionGrants
from oct_mcp.preview import Preview, TargetState

if TYPE_CHECKING:
    from oct_mcp.spec import ToolSpec
    from oct_mcp.workspace import Workspace

__all__ = ["CallContext", "ClientInfo", "ConsentRequest", "Outcome", "ProgressReporter", "ToolResult"]

ProgressReporter: TypeAlias = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientInfo:
    """Who is calling, as far as the transport can tell."""

    client_id: str
    """What identifies one client on its transport (a stdio server has exactly one)."""
    transport: str
    """`stdio`, `memory` or `cli`."""
    name: str | None = None
    version: str | None = None
    protocol_version: str | None = None
    can_elicit: bool = False
    """The client declared the elicitation capability, so a human can be asked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """One tool call. Layers pass changed copies on with `dataclasses.replace`.

    Each optional field has exactly one writer, named beside it.
    """

    tool: str
    arguments: Mapping[str, Any]
    """As the host sent them: untrusted."""
    client: ClientInfo
    call_id: str
    """Unique per call; ties diagnostics and audit lines together."""
    forward: Callable[[CallContext], Awaitable[Outcome]] | None = None
    """Written by an embedding transport: runs the host's own tool, the chain's endpoint."""
    progress: ProgressReporter | None = None
    """Written by the transport when the client asked for progress: (progress, total, message)."""
    consent: Consent | None = None
    """Written by the transport (server or embedding), never by a layer: a human's answer for this call."""
    workspace: Workspace | None = None
    """Written by gateway: the project root this call is bound to."""
    params: BaseModel | None = None
    """Written by validator: the arguments, validated by the tool's model."""
    spec: ToolSpec | None = None
    """Written by validator: the tool that will run."""
    dry_run: bool = False
    """Written by safety: run the tool without changing anything."""
    session_grants: SessionGrants | None = None
    """Written by the transport: what a human allowed for the rest of this client session; None
    where the transport cannot tell one client session from another."""
    previewing: bool = False
    """Written by safety: run the tool's preview (a dry run whose result carries a `Preview`)."""
    approved_targets: tuple[TargetState, ...] | None = None
    """Written by safety: the target contents a consent was given for; the sandbox runs the call
    only while every target still has them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool answered, and facts about how it ran."""

    text: str
    structured: Mapping[str, Any] | None = None
    is_error: bool = False
    exit_code: int | None = None
    duration_seconds: float | None = None
    truncated: bool = False
    output_bytes: int | None = None
    """What the tool printed in all, when more than the text kept."""
    redactions: int = 0
    backend: str | None = None
    """The sandbox backend a subprocess ran under; None for in-process tools."""
    degraded: tuple[str, ...] = ()
    """Guarantees the run did not have, which the profile allowed to be missing."""
    passthrough_content: tuple[Mapping[str, Any], ...] = ()
    """An embedding host's content items that are not text (images, audio), carried as they are."""
    preview: Preview | None = None
    """A preview run's answer: what the call would change."""
    consent: ConsentFacts | None = None
    """How the call got the consent it needed, when it needed one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsentRequest:
    """An answer, not an error: a human must confirm this exact call before it runs."""

    tool: str
    digest: str
    """Digest of the canonical arguments: a consent covers this call and no other."""
    message: str
    """What to show the human, starting with `[oct-mcp requires_confirmation]`."""
    human_required: bool = False
    """The profile accepts only a human's answer through the client, not `confirm=True`."""
    question: str = ""
    """What a human is asked through the client: the change in words for a person."""
    preview: Preview | None = None
    """What the call would change, shown in both texts and bound by the consent."""
    grant_folders: tuple[str, ...] = ()
    """Folders a session grant is offered for; empty when none is offered."""
    reason: str = ""
    """The safety gate's reason: why the call needs consent."""


Outcome: TypeAlias = ToolResult | ConsentRequest
