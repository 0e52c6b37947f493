"""SafetyGate (Layer 2.5): the seed's HITL consent rules and dry-run defaults, and a human's answer on top."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Final, Literal

import anyio
from pydantic import BaseModel, ConfigDict

from oct_mcp.chain import CallNext, LayerRuntime, LayerType
from oct_mcp.config import McpConfig
from oct_mcp.consent import CONFIRM_FIELD, CONFIRMATION_PREFIX, DECLINED_PREFIX, argument_digest
from oct_mcp.context import CallContext, ConsentRequest, Outcome, ToolResult
from oct_mcp.deadline import Deadline
from oct_mcp.display import quote_name
from oct_mcp.errors import ConsentReplayedError, ConsentUnavailableError, OctError
from oct_mcp.spec import Risk, ToolSpec
from oct_mcp.workspace import Workspace

__all__ = [
    "CONFIRMATION_PREFIX",
    "LAYER",
    "SafetyDecision",
    "SafetyGate",
    "SafetySettings",
]

FORMAT_TOOL: Final = "oct_format"
# Files whose change alters what runs later: pytest's and the build's config, the interpreter's.
_CODE_CONFIG_FILES: Final = frozenset(
    {
        "conftest.py",
        "pyproject.toml",
        "setup.cfg",
        "setup.py",
        "tox.ini",
        "noxfile.py",
        "pytest.ini",
        "sitecustomize.py",
        "usercustomize.py",
    }
)
_VENV_FOLDERS: Final = frozenset({".venv", "venv"})
_CONFIGURES_CODE: Final = "configures code that runs later: check it"


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


class SafetySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    human_consent: Literal["when_client_can_ask", "required"] = "when_client_can_ask"
    """`required`: a call that needs consent runs only on a human's answer through the client."""
    confirm_execute: bool = False
    """Tools that run project code (tests) need consent too."""


@dataclass(frozen=True, slots=True)
class SafetyGate:
    """HITL consent and dry-run enforcement for every tool call.

    Reads `ctx.tool`, `ctx.params`, `ctx.spec`, `ctx.client`, `ctx.consent`, `ctx.workspace`;
    writes `ctx.dry_run`. Answers a `ConsentRequest` when a call needs consent it does not
    have, and a declined result when the human said no. Raises `ConsentUnavailableError` when
    the profile requires a human and the client cannot ask one. Stateless.
    """

    config: McpConfig
    settings: SafetySettings = field(default_factory=SafetySettings)

    def check(self, tool_name: str, spec: ToolSpec, args: dict[str, Any]) -> SafetyDecision:
        """Evaluate the HITL gate and dry-run rules for `tool_name`. Never raises.

        Args:
            tool_name: MCP tool name (e.g. "oct_format").
            spec: ToolSpec for tool_name. Anything else is treated as a destructive tool.
            args: Validated args dict (model.model_dump()).

        Returns:
            The decision by the seed's five rules, with `auto_approve_read_tools`
            and `confirm_execute` deciding whether a non-destructive tool needs consent.
        """
        arguments: Mapping[Any, Any] = args if isinstance(args, Mapping) else {}
        confirmed = arguments.get(CONFIRM_FIELD) is True
        risk = spec.risk if isinstance(spec, ToolSpec) else None
        if risk is Risk.READ or risk is Risk.EXECUTE:
            needs_consent = not self.config.auto_approve_read_tools or (
                risk is Risk.EXECUTE and self.settings.confirm_execute
            )
            if not needs_consent:
                return SafetyDecision(True, False, False, f"{risk.value} tool: no consent needed")
            if confirmed:
                return SafetyDecision(True, False, False, f"{risk.value} tool confirmed")
            return SafetyDecision(
                False, True, False, f"{risk.value} tool needs consent in this configuration"
            )
        if not confirmed:
            return SafetyDecision(False, True, False, "destructive tool: confirmation required")
        if tool_name == FORMAT_TOOL:
            apply = arguments.get("apply")
            if apply is None:
                apply = not self.config.dry_run_default_for_writes
            if apply is True:
                return SafetyDecision(True, False, False, "oct_format confirmed with apply=True")
            return SafetyDecision(True, False, True, "oct_format confirmed without apply: dry run")
        if arguments.get("dry_run") is not None:
            return SafetyDecision(
                True, False, False, "destructive tool confirmed; it honours its own dry_run"
            )
        dry_run = self.config.dry_run_default_for_writes
        return SafetyDecision(
            True,
            False,
            dry_run,
            f"destructive tool confirmed; dry run by default: {'yes' if dry_run else 'no'}",
        )

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        spec, params = ctx.spec, ctx.params
        if spec is None or params is None:
            raise RuntimeError("the safety layer was reached without validated params")
        args = params.model_dump()
        unconfirmed = self.check(ctx.tool, spec, {**args, CONFIRM_FIELD: False})
        if not unconfirmed.requires_confirmation:
            # Most calls (reads) leave dry_run as it is: no copy of the context for them.
            if unconfirmed.dry_run == ctx.dry_run:
                return await call_next(ctx)
            return await call_next(replace(ctx, dry_run=unconfirmed.dry_run))
        once_confirmed = self.check(ctx.tool, spec, {**args, CONFIRM_FIELD: True})
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
            return await call_next(replace(ctx, dry_run=once_confirmed.dry_run))
        human_required = self.settings.human_consent == "required"
        # Where a human can be asked, the model's own confirm=true is not consent: the human answers.
        if not ctx.client.can_elicit:
            if human_required:
                raise ConsentUnavailableError(
                    f"{ctx.tool} needs a human's consent in this profile, and this client cannot ask for "
                    "it; use an MCP client that supports elicitation, or a profile that accepts confirm=true"
                )
            if args.get(CONFIRM_FIELD) is True:
                return await call_next(replace(ctx, dry_run=once_confirmed.dry_run))
        refusal = await _refusal_before_asking(spec, params, ctx.workspace, self.config)
        if refusal is not None:
            return refusal
        return ConsentRequest(
            tool=ctx.tool,
            digest=digest,
            message=_format_confirmation_request(
                ctx.tool, spec, args, digest, dry_run=once_confirmed.dry_run, workspace=ctx.workspace
            ),
            human_required=human_required,
        )


async def _refusal_before_asking(
    spec: ToolSpec, params: BaseModel, workspace: Workspace | None, config: McpConfig
) -> ToolResult | None:
    """The call checked and previewed before anyone is asked: why it cannot happen, or None.

    Raises what the tool would raise (a refused or protected path): nobody is asked about a change
    that cannot be made. The preview runs in a thread under the default time limit, as the tool would.
    """
    if spec.preview is None or workspace is None:
        return None
    deadline = Deadline(config.timeout_default_seconds)
    result = await anyio.to_thread.run_sync(partial(spec.preview, params, workspace, deadline))
    return result if result.is_error else None


def _format_confirmation_request(
    tool_name: str,
    spec: ToolSpec,
    args: Mapping[str, Any],
    digest: str,
    *,
    dry_run: bool,
    workspace: Workspace | None = None,
) -> str:
    """The text returned to the host when a call needs confirmation.

    It starts with `[oct-mcp requires_confirmation]`, names the tool, says what it
    would change (every file, whether it is a dry run), gives the argument digest,
    and says how to confirm. Each file is shown where it lands: resolved inside the
    project (`docs/x/../../conftest.py` is `conftest.py`), whole, with characters a reader
    cannot see escaped, and flagged when it configures code that runs later.
    """
    named: list[object] = [path for _field, path in spec.given_paths(args)]
    named.extend(_targets(spec, args))
    shown: list[str] = []
    for path in named:
        if isinstance(path, str):
            line = _shown_path(path, workspace)
            if line not in shown:
                shown.append(line)
    effect = {
        Risk.WRITE: "change files in the project",
        Risk.EXECUTE: "run project code",
        Risk.READ: "read the project",
    }[spec.risk]
    files = [f"Files ({len(shown)}):", *(f"  {line}" for line in shown)] if shown else ["Files: none named."]
    # Said before the list, which a host may show cut: how many of the files configure code.
    flagged = sum(line.endswith(f"({_CONFIGURES_CODE})") for line in shown)
    warning = [f"{flagged} of the files configure code that runs later; each is marked."] if flagged else []
    lines = [
        f"{CONFIRMATION_PREFIX} {tool_name} ({spec.title}) would {effect}.",
        *warning,
        *files,
        f"Dry run: {'yes, nothing will change' if dry_run else 'no, the changes are made'}.",
        f"Arguments digest: {digest}",
        "To confirm, re-submit the identical call with confirm=true. "
        "A consent covers these exact arguments only.",
    ]
    return "\n".join(lines)


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


def configures_code(relative: str) -> bool:
    """A project file that configures code which runs later: tests, builds, the interpreter itself."""
    parts = relative.split("/")
    name = parts[-1].casefold()
    return (
        name in _CODE_CONFIG_FILES
        or name.endswith(".pth")
        or any(part.casefold() in _VENV_FOLDERS for part in parts[:-1])
    )


def _targets(spec: ToolSpec, args: Mapping[str, Any]) -> Sequence[object]:
    """The paths the tool says a call would change beyond its path fields; none if it cannot tell."""
    if spec.targets is None:
        return ()
    try:
        return spec.targets(args)
    except Exception:  # noqa: BLE001 - the question must be asked whatever the arguments hold
        return ()


def _build(settings: SafetySettings, runtime: LayerRuntime) -> SafetyGate:
    return SafetyGate(runtime.config, settings)


LAYER: Final = LayerType(
    name="safety",
    settings=SafetySettings,
    build=_build,
    requires=frozenset({"spec", "params"}),
    provides=frozenset({"dry_run"}),
)
