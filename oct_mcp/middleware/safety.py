"""SafetyGate: the seed's HITL consent rules and dry-run defaults, and a human's answer on top."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from pydantic import Field

from oct_mcp.code_config import configures_code
from oct_mcp.config import McpConfig
from oct_mcp.consent import (
    CONFIRM_FIELD,
    CONFIRMATION_PREFIX,
    DECLINED_PREFIX,
    ConsentFacts,
    argument_digest,
)
from oct_mcp.consent_questions import confirmation_request_text, format_question
from oct_mcp.errors import ConsentReplayedError, ConsentUnavailableError
from oct_mcp.preview import Preview
from oct_mcp.spec import CallRisk, Risk, ToolSpec
from oct_mcp.types import (
    CallContext,
    CallNext,
    ConsentRequest,
    LayerRuntime,
    LayerSettings,
    LayerType,
    Outcome,
    ToolResult,
)

__all__ = ["CONFIRMATION_PREFIX", "LAYER", "SafetyDecision", "SafetyGate", "SafetySettings"]


@dataclass(frozen=True, slots=True)
class SafetyDecision:
    """Result of a SafetyGate.check() call."""

    proceed: bool
    """True: execution may continue. False: return the confirmation request to the AI host."""
    requires_confirmation: bool
    """True when the AI host must re-submit the call with confirm=True before it runs."""
    dry_run: bool
    """True: the executor runs the tool without changing anything."""
    reason: str
    """Human-readable explanation, forwarded to the audit log."""


class SafetySettings(LayerSettings):
    human_consent: Literal["when_client_can_ask", "required"] = "when_client_can_ask"
    """`required`: a call that needs consent runs only on a human's answer through the client."""
    confirm_execute: bool = False
    """Tools that run project code (tests) need consent too."""
    session_grant: bool = False
    """The question may offer a human to allow the tool's writes in the folders a change touches for
    the rest of the client session. Never where only a human's answer counts (`required`)."""
    session_grant_seconds: int | None = Field(default=None, ge=1, le=7 * 24 * 3600)
    """How long such a grant lasts; unset: as long as the client session. `oct_grants` lists and
    revokes them."""


@dataclass(frozen=True, slots=True)
class SafetyGate:
    """HITL consent and dry-run enforcement for every tool call.

    Reads `ctx.tool`, `ctx.params`, `ctx.spec`, `ctx.risk`, `ctx.confirmed`, `ctx.client`,
    `ctx.consent`, `ctx.session_grants`, `ctx.rule_verdict` (a rule's ask or allow); writes
    `ctx.dry_run`, `ctx.previewing`, `ctx.approved_targets`. Previews a write through the layers
    below before asking (the contract's preview step: `LayerType.previews`); answers the preview's
    error, a `ConsentRequest`, or a declined result. Raises `ConsentUnavailableError` when the
    profile requires a human the client cannot ask. Keeps no state and changes none: a session's
    grants belong to the transport that serves it, and a grant a human gives comes back in the
    result's `ConsentFacts` for the transport to record.
    """

    config: McpConfig
    settings: SafetySettings = field(default_factory=SafetySettings)

    def check(self, tool_name: str, spec: ToolSpec, args: dict[str, Any]) -> SafetyDecision:
        """Evaluate the HITL gate and dry-run rules for `tool_name`. Never raises.

        Args:
            tool_name: MCP tool name (e.g. "oct_format").
            spec: ToolSpec for tool_name. Anything else is treated as a destructive tool.
            args: Validated args dict (model.model_dump()), with `confirm` as the call carried it.

        Returns:
            The decision by the seed's five rules, on the call's own risk (`ToolSpec.risk_of`: a
            tool's rules live with its spec), with `auto_approve_read_tools`, `confirm_execute`
            and the call's own reason for consent (the network) deciding whether a call that
            changes nothing needs consent.
        """
        arguments: Mapping[Any, Any] = args if isinstance(args, Mapping) else {}
        call = _call_risk(spec, arguments)
        why = self._consent_needed(call)
        if why is None:
            return SafetyDecision(
                proceed=True, requires_confirmation=False, dry_run=False, reason=_unasked_reason(call)
            )
        if arguments.get(CONFIRM_FIELD) is not True:
            return SafetyDecision(
                proceed=False,
                requires_confirmation=True,
                dry_run=False,
                reason=f"confirmation required: {why}",
            )
        dry_run, how = self._dry_run_for(call, spec, arguments)
        return SafetyDecision(
            proceed=True, requires_confirmation=False, dry_run=dry_run, reason=f"confirmed ({why}); {how}"
        )

    def may_need_consent(self, spec: ToolSpec) -> bool:
        """Whether some call of `spec` may need consent under these settings, by the rule `check` applies.

        A tool whose arguments decide its risk (`call_risk`: oct_run's `writes` and `network`) may,
        whatever its own risk: which arguments a call will carry is not known before it comes.
        """
        if spec.call_risk is not None:
            return True
        return self._consent_needed(CallRisk(risk=spec.risk)) is not None

    def takes_confirm(self, spec: ToolSpec) -> bool:
        """Whether the model's `confirm=true` may settle a call of `spec`: what tools/list shows it for.

        Only where a call may need consent, and not where the profile takes a human's answer alone.
        """
        return self.settings.human_consent != "required" and self.may_need_consent(spec)

    def _consent_needed(self, call: CallRisk) -> str | None:
        """Why the call needs consent, or None: every write; the rest where the settings or the call say."""
        if call.risk is Risk.WRITE:
            return call.reason or "a destructive tool"
        if call.consent is not None:
            return call.consent
        if not self.config.auto_approve_read_tools:
            return f"a {call.risk.value} tool, and auto_approve_read_tools is off"
        if call.risk is Risk.EXECUTE and self.settings.confirm_execute:
            return "it runs project code, and the profile sets confirm_execute"
        return None

    def dry_run_when_confirmed(self, spec: ToolSpec, args: Mapping[str, Any]) -> tuple[bool, str]:
        """Whether a call that needs consent runs as a dry run once it has it, and why (rules 3-5).

        The call's own arguments first (oct_format's `apply`), then a `dry_run` field of the tool's,
        which the tool honours itself, then `dry_run_default_for_writes`. A call that changes
        nothing by its risk is never a dry run.
        """
        return self._dry_run_for(_call_risk(spec, args), spec, args)

    def _dry_run_for(self, call: CallRisk, spec: object, args: Mapping[str, Any]) -> tuple[bool, str]:
        if call.risk is not Risk.WRITE:
            return False, "it changes no file"
        if call.dry_run is not None:
            return call.dry_run, f"{call.reason}: {'a dry run' if call.dry_run else 'the changes are made'}"
        if _has_own_dry_run(spec) and args.get("dry_run") is not None:
            return False, "the tool honours its own dry_run"
        dry_run = self.config.dry_run_default_for_writes
        return dry_run, f"dry run by default: {'yes' if dry_run else 'no'}"

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        spec, params, call = ctx.spec, ctx.params, ctx.risk
        if spec is None or params is None or call is None:
            raise RuntimeError("the safety layer was reached without validated params")
        # Decided as if unconfirmed: where a human can be asked, the model's own confirm=true is not consent.
        why = self._consent_needed(call)
        verdict = ctx.rule_verdict
        asked = verdict is not None and verdict.effect == "ask"
        if why is None and not asked:
            # Most calls (reads) leave dry_run as it is: no copy of the context, no dump of the arguments.
            return await call_next(ctx if not ctx.dry_run else replace(ctx, dry_run=False))
        args = params.model_dump()
        dry_run, how = self._dry_run_for(call, spec, args)
        reason = f"{_unasked_reason(call) if why is None else f'confirmation required: {why}'}; {how}"
        human_required = self.settings.human_consent == "required"
        if verdict is not None and verdict.effect == "allow" and not human_required:
            # The user's own rule answers for them; never where the profile takes a human's answer alone.
            facts = ConsentFacts(
                given_by="rule", reason=f"allowed by rule {verdict.rule} ({verdict.tier} tier)"
            )
            return _with_facts(await call_next(replace(ctx, dry_run=dry_run)), facts)
        rule_line = ""
        if verdict is not None and asked:
            rule_line = (
                f"A rule asks about this call: {verdict.reason} (rule {verdict.rule}, {verdict.tier} tier)."
            )
            reason = f"asked by rule {verdict.rule} ({verdict.tier} tier); {how}"
        digest = argument_digest(args)
        consent = ctx.consent
        if consent is not None and consent.covers(ctx.tool, digest):
            if consent.replayed:
                raise ConsentReplayedError(
                    f"this answer to {ctx.tool}'s consent question was already used; each answer runs "
                    "the call once: call the tool again to be asked anew"
                )
            if not consent.approved:
                return ToolResult(
                    text=f"{DECLINED_PREFIX} the user declined {ctx.tool}; nothing ran.", is_error=True
                )
            # The grant is a value the result carries: the transport that owns the session's grants
            # records it (`oct_mcp.app.run_call`); the gate changes nothing it was handed.
            granted: tuple[str, ...] = ()
            if consent.grant_folders and self._grants_offered(ctx) and not human_required:
                granted = consent.grant_folders
            facts = ConsentFacts(
                given_by="elicitation",
                preview_digest=consent.preview_digest,
                granted_folders=granted,
                grant_seconds=self.settings.session_grant_seconds if granted else None,
                reason=reason,
            )
            approved = replace(ctx, dry_run=dry_run, approved_targets=consent.targets)
            return _with_facts(await call_next(approved), facts)
        changes_nothing = _changes_nothing(spec, args, call, dry_run)
        if (
            call.risk is Risk.WRITE
            and changes_nothing
            and call.consent is None
            and (ctx.client.can_elicit or _asks_for_a_dry_run(spec, args, call))
        ):
            # A dry run changes nothing: where a human would be asked, nobody is; a client that cannot
            # ask and asked for a dry run itself is not sent back to re-submit it with confirm=true.
            return await call_next(replace(ctx, dry_run=dry_run))
        if not ctx.client.can_elicit:
            if human_required:
                raise ConsentUnavailableError(
                    f"{ctx.tool} needs a human's consent in this profile, and this client cannot ask for "
                    "it; use an MCP client that supports elicitation, or a profile that accepts confirm=true"
                )
            if ctx.confirmed:
                confirmed = await call_next(replace(ctx, dry_run=dry_run))
                return _with_facts(confirmed, ConsentFacts(given_by="confirm", reason=reason))
        preview: Preview | None = None
        if call.risk is Risk.WRITE and spec.preview is not None:
            # Checked and previewed first: a call that cannot run is answered with why, and nobody is asked.
            previewed = await call_next(replace(ctx, previewing=True, dry_run=True))
            if not isinstance(previewed, ToolResult) or previewed.is_error or previewed.preview is None:
                return previewed
            preview = previewed.preview
            if ctx.client.can_elicit and preview.changes_nothing:
                return previewed
            if (
                ctx.client.can_elicit
                and not human_required
                and self._grants_offered(ctx)
                and ctx.session_grants is not None
                and not asked
                and _grantable(preview)
                and ctx.session_grants.covers(ctx.tool, preview.folders())
            ):
                facts = ConsentFacts(given_by="session_grant", preview_digest=preview.digest(), reason=reason)
                granted_call = replace(ctx, dry_run=dry_run, approved_targets=preview.targets)
                return _with_facts(await call_next(granted_call), facts)
        # A call without a preview (oct_run) may be granted as the command it is, exactly.
        command = spec.command_grant(args) if spec.command_grant is not None and preview is None else None
        grantable = not human_required and not asked and self._grants_offered(ctx)
        if (
            command is not None
            and grantable
            and ctx.client.can_elicit
            and ctx.session_grants is not None
            and ctx.session_grants.covers(ctx.tool, (command,))
        ):
            facts = ConsentFacts(given_by="session_grant", reason=reason)
            return _with_facts(await call_next(replace(ctx, dry_run=dry_run)), facts)
        offer: tuple[str, ...] = ()
        if grantable and preview is not None and _grantable(preview):
            offer = preview.folders()
        elif grantable and command is not None:
            offer = (command,)
        message = confirmation_request_text(
            ctx.tool,
            spec,
            args,
            digest,
            call=call,
            changes_nothing=changes_nothing,
            workspace=ctx.workspace,
            preview=preview,
        )
        question = format_question(
            ctx.tool,
            spec,
            args,
            call=call,
            changes_nothing=changes_nothing,
            workspace=ctx.workspace,
            preview=preview,
            grant_folders=offer,
        )
        if rule_line:
            # Said first, where a host that cuts a long question still shows it.
            first, _, rest = message.partition("\n")
            message = f"{first}\n{rule_line}\n{rest}"
            question = f"{rule_line}\n{question}"
        return ConsentRequest(
            tool=ctx.tool,
            digest=digest,
            message=message,
            question=question,
            human_required=human_required,
            preview=preview,
            grant_folders=offer,
            reason=reason,
        )

    def _grants_offered(self, ctx: CallContext) -> bool:
        return (
            self.settings.session_grant
            and ctx.session_grants is not None
            and (ctx.spec is None or ctx.spec.session_grants)
        )


def _unasked_reason(call: CallRisk) -> str:
    return f"{call.risk.value} tool: no consent needed"


def _with_facts(outcome: Outcome, facts: ConsentFacts) -> Outcome:
    return replace(outcome, consent=facts) if isinstance(outcome, ToolResult) else outcome


def _call_risk(spec: object, arguments: Mapping[Any, Any]) -> CallRisk:
    """The call's risk by its spec's rules; anything but a ToolSpec is a destructive tool."""
    if not isinstance(spec, ToolSpec):
        return CallRisk(risk=Risk.WRITE, reason="a tool the gate does not know")
    return spec.risk_of(arguments)


def _has_own_dry_run(spec: object) -> bool:
    """Only a tool with a `dry_run` field is known to honour one: a host's tool may not."""
    return isinstance(spec, ToolSpec) and "dry_run" in spec.params.model_fields


def _asks_for_a_dry_run(spec: ToolSpec, args: Mapping[str, Any], call: CallRisk) -> bool:
    """The call itself says it is a dry run (oct_format's `apply=false`, a tool's own `dry_run=true`),
    not the configured default: one that leaves it unset is answered with the question, which says
    what its confirmed call does."""
    if call.dry_run is not None:
        return call.dry_run
    return _has_own_dry_run(spec) and args.get("dry_run") is True


def _changes_nothing(spec: ToolSpec, args: Mapping[str, Any], call: CallRisk, dry_run: bool) -> bool:
    """The call, once confirmed, is a dry run: by its own arguments (`apply`), its own `dry_run`
    field, or the default; a tool that says neither is not known to honour a dry run."""
    if call.dry_run is not None:
        return call.dry_run
    if not _has_own_dry_run(spec):
        return call.honours_dry_run and dry_run
    own = args.get("dry_run")
    return own is True if own is not None else dry_run


def _grantable(preview: Preview) -> bool:
    """A change a session grant may cover: it writes files, none of which configures code."""
    paths = [p for change in preview.files for p in (change.path, change.original_path) if p is not None]
    return bool(paths) and not any(configures_code(path) for path in paths)


def _build(settings: SafetySettings, runtime: LayerRuntime) -> SafetyGate:
    return SafetyGate(runtime.config, settings)


LAYER: Final = LayerType(
    name="safety",
    settings=SafetySettings,
    build=_build,
    requires=frozenset({"spec", "params", "confirmed", "risk"}),
    provides=frozenset({"dry_run", "previewing", "approved_targets"}),
)
