"""What the SDK and FastMCP guards share: a host's tool as the chain sees it, who is calling, the
arguments and the result across the boundary, the pinned definitions, and the hosted app."""

from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, create_model

from oct_mcp.app import App, CallFailure, build_app
from oct_mcp.consent import without_confirm
from oct_mcp.diagnostics import get_logger
from oct_mcp.embed.pins import ToolPins, default_pin_file, digest
from oct_mcp.errors import DryRunUnsupportedError, OctError, PinFileError, RuleExamplesError
from oct_mcp.execution.checkpoints import project_key
from oct_mcp.policy_command import rules_in_force
from oct_mcp.profiles import Profile
from oct_mcp.rules import example_failures
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.transports.consent_adapter import (
    RequestFacts,
    audit_refusal,
    client_info,
    to_call_tool_result,
)
from oct_mcp.types import CallContext, LayerType, ToolResult

_log = get_logger(__name__)

EMBEDDED_PROFILE: Final = "embedded"
DRY_RUN_FIELD: Final = "dry_run"
TRANSPORT: Final = "embedded"
BINARY_DROPPED_NOTE: Final = (
    "[oct-mcp: {count} binary content item(s) (image, audio or blob) left out: secrets in them cannot "
    "be masked; the server's guard passes them with keep_binary_content=True]"
)


@dataclass(frozen=True, slots=True)
class ForeignTool:
    """What oct-mcp should know about one of the host's tools, beyond its annotations."""

    risk: Risk | None = None
    """Overrides the risk read from the annotations (readOnlyHint: read; otherwise destructive)."""
    path_arguments: tuple[str, ...] = ()
    """Arguments that are paths: contained inside the project root like oct's own."""


PINS_WITHHELD_ALL: Final = (
    "every tool of this server is withheld: the file that pins its tool definitions cannot be read, or "
    "was changed by hand. The operator fixes or removes it (the server's log names the file and why)"
)
PINS_DEFAULT: Final = "default"
"""`guard(pin_file=...)`: the server's own pin file under `~/.oct-mcp/pins`, per project."""


def pins_for(
    app: App, server_name: str, pin_file: str | Path | None, *, allow_narrowing: bool
) -> ToolPins | None:
    """The pins of the server `server_name` guarded by `app`: None when `pin_file` is None (pinning off)."""
    if pin_file is None:
        return None
    if pin_file == PINS_DEFAULT:
        base = Path.home() / ".oct-mcp" / "pins" / project_key(app.workspace.root)
        path = default_pin_file(base, server_name)
    else:
        path = Path(pin_file).expanduser()
    pins = ToolPins(path, allow_narrowing=allow_narrowing)
    if pins.error is not None:
        _log.error("tool_pins_unusable", path=str(path), problem=pins.error.message)
    else:
        _log.info("tool_pins", path=str(path), pinned=len(pins.pinned_names()))
    return pins


async def review_pins(
    app: App,
    pins: ToolPins | None,
    listed: Mapping[str, Mapping[str, Any]],
    client_id: str,
) -> frozenset[str]:
    """The listed tools to withhold, their definitions held against the pins; each change audited once.

    Raises:
        PinFileError: The pin file is unusable: withhold every tool.
    """
    if pins is None:
        return frozenset()
    review = pins.review(listed)
    if review.first_seen:
        _log.info("tools_pinned", tools=list(review.first_seen), pin_file=str(pins.path))
    for name in review.newly_changed:
        # For the operator: which file to review and accept it in.
        _log.warning("tool_changed", tool=name, pin_file=str(pins.path))
        if app.audit is not None and "audit" in app.chain.layer_names:
            await app.audit.record(
                {
                    "event": "tool_changed",
                    "tool": name[:200],
                    "client": {"id": client_id, "transport": TRANSPORT},
                    "sha256": digest(listed[name]),
                }
            )
    return review.withheld


async def refuse_unpinned(
    app: App,
    pins: ToolPins | None,
    withheld: frozenset[str],
    params: types.CallToolRequestParams,
    request: RequestFacts,
    client_id: str,
) -> types.CallToolResult | None:
    """The answer to a call of a withheld tool (audited as a refusal); None when the call may go on."""
    if pins is None:
        return None
    if pins.error is not None:
        error: OctError = PinFileError(PINS_WITHHELD_ALL)
    elif params.name in withheld:
        error = pins.refusal(params.name)
    else:
        return None
    return await _refused(app, error, params, request, client_id)


async def _refused(
    app: App, error: OctError, params: types.CallToolRequestParams, request: RequestFacts, client_id: str
) -> types.CallToolResult:
    """A call refused before the chain: audited as a refusal, answered with the error's code and message."""
    client = client_info(request, TRANSPORT, client_id)
    await audit_refusal(app, client, params.name, error, params.arguments or {})
    return to_call_tool_result(CallFailure(code=error.code, message=error.message))


RULE_EXAMPLES_DISAGREE: Final = (
    "{count} rule example(s) over this server's tools disagree with their rule, so no tool is served "
    "until the rule or the example is fixed (the server's log names each; the config's `rules`)"
)


@dataclass
class HostExamples:
    """The rules' examples over a host's own tools, run when its listing shows them.

    oct-mcp's server checks every example at start-up; a host's tools are known only once it lists
    them, so they are checked then, and again when the listing changes. An example that disagrees
    with its rule withholds every tool (as it stops oct-mcp's server); one naming a tool this host
    does not list is left to the server that has it, since one config file may serve both.
    """

    app: App
    problem: RuleExamplesError | None = None
    _judged: frozenset[tuple[str, Risk, tuple[str, ...]]] | None = None

    def judge(self, listed: Mapping[str, ToolSpec]) -> RuleExamplesError | None:
        """The examples against the `listed` tools (each as the chain sees it): what is wrong, or None."""
        judged = frozenset(
            (name, spec.risk, tuple(spec.params.model_fields)) for name, spec in listed.items()
        )
        if judged == self._judged:
            return self.problem
        failures = example_failures(rules_in_force(self.app), listed, self.app.workspace, skip_unknown=True)
        for failure in failures:
            _log.error("rule_example_disagrees", example=failure.describe())
        self.problem = (
            RuleExamplesError(RULE_EXAMPLES_DISAGREE.format(count=len(failures))) if failures else None
        )
        self._judged = judged
        return self.problem

    async def refusal(
        self, params: types.CallToolRequestParams, request: RequestFacts, client_id: str
    ) -> types.CallToolResult | None:
        """The answer to a call while an example disagrees (audited as a refusal); None otherwise."""
        if self.problem is None:
            return None
        return await _refused(self.app, self.problem, params, request, client_id)


_OWNERS: OrderedDict[int, tuple[Any, str]] = OrderedDict()
"""id(what stands for a client: its connection or its server run) -> (that object, the client id)."""
_OWNERS_KEPT: Final = 4_096
_OWNER_NUMBERS: Final = itertools.count(1)


def session_client_id(request: RequestFacts) -> str:
    """Who is calling, for the rate limit and the audit: one id per client connection.

    On the handshake era a connection is one client's. On 2026-07-28 each request is its own
    connection: the server run's lifespan state stands for the client instead, which is one
    client's where the SDK runs the server per client (stdio, in memory) and shared where it is
    not (FastMCP): those clients share one window, as callers that cannot be told apart should.
    Over HTTP a stateful session's id stands for its client; stateless requests share one window.
    """
    headers = getattr(getattr(request, "request", None), "headers", None)
    if headers is not None:
        session_id = headers.get("mcp-session-id")
        if not session_id:
            return TRANSPORT
        # Hashed: the session id lets its holder speak for the session; the audit log must not hold it.
        return f"{TRANSPORT}-http-{hashlib.sha256(session_id.encode()).hexdigest()[:16]}"
    if request.protocol_version in MODERN_PROTOCOL_VERSIONS:
        owner = getattr(request, "lifespan_context", None)
    else:
        # The SDK's session is made per request; the connection it belongs to is the client's.
        owner = getattr(request.session, "_connection", None)
    if owner is None:
        return TRANSPORT
    # Held, so that its id is not reused while it names a client; the oldest go past the bound.
    known = _OWNERS.get(id(owner))
    if known is not None and known[0] is owner:
        return known[1]
    client_id = f"{TRANSPORT}-{next(_OWNER_NUMBERS)}"
    _OWNERS[id(owner)] = (owner, client_id)
    while len(_OWNERS) > _OWNERS_KEPT:
        _OWNERS.popitem(last=False)
    return client_id


def _not_run_here(params: BaseModel, env: ToolEnv) -> InProcessPlan:
    raise RuntimeError("a host's tool runs in the host: the embedded chain has no sandbox layer")


def _risk_from(tool: Mapping[str, Any]) -> Risk:
    # The MCP spec's defaults: a tool is destructive unless it says it only reads.
    annotations = tool.get("annotations") or {}
    return Risk.READ if annotations.get("readOnlyHint") is True else Risk.WRITE


def _foreign_spec(name: str, tool: Mapping[str, Any] | None, declared: ForeignTool | None) -> ToolSpec:
    declared = declared or ForeignTool()
    risk = declared.risk or (_risk_from(tool) if tool is not None else Risk.WRITE)
    fields: dict[str, Any] = dict.fromkeys(declared.path_arguments, (ProjectPath | None, None))
    if _declares_dry_run(tool):
        # The gate then knows the host's tool makes a dry run of its own (`host_arguments`).
        fields[DRY_RUN_FIELD] = (bool | None, None)
    # The host validates its own arguments; ours only contains declared paths (the validator has
    # taken the chain's `confirm` off before).
    params = create_model(
        f"{name.replace('-', '_')}_arguments", __config__=ConfigDict(extra="allow", frozen=True), **fields
    )
    return ToolSpec(
        name=name,
        title=str((tool or {}).get("title") or name),
        description=str((tool or {}).get("description") or ""),
        params=params,
        output=None,
        risk=risk,
        plan=_not_run_here,
        idempotent=risk is Risk.READ,
    )


def _declares_dry_run(tool: Mapping[str, Any] | None) -> bool:
    schema = (tool or {}).get("inputSchema") or {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    declared = properties.get(DRY_RUN_FIELD) if isinstance(properties, Mapping) else None
    return isinstance(declared, Mapping) and declared.get("type") == "boolean"


def spec_of(
    specs: dict[str, ToolSpec], tools: Mapping[str, ForeignTool], name: str, listed: Mapping[str, Any] | None
) -> ToolSpec:
    """`name` as the chain sees it, kept in `specs`: from its listing when given, else as known so far,
    else destructive (a tool never listed asks before it runs)."""
    if listed is not None or name not in specs:
        specs[name] = _foreign_spec(name, listed, tools.get(name))
    return specs[name]


def host_arguments(chain_ctx: CallContext) -> dict[str, Any]:
    """The arguments the host's tool is called with: the call's own, without the chain's `confirm`;
    with `dry_run=true` where the gate decided a dry run and the tool's schema has a boolean `dry_run`.

    Raises:
        DryRunUnsupportedError: The gate decided a dry run (`dry_run_default_for_writes`) for a tool
            that may change something. A host's handler has no dry run to be switched to; run for
            real, it would do what the human was told would not happen, and the audit would record
            a dry run.
    """
    arguments = without_confirm(chain_ctx.arguments)
    spec = chain_ctx.spec
    if not chain_ctx.dry_run or (spec is not None and spec.risk is Risk.READ):
        return arguments
    if spec is not None and DRY_RUN_FIELD in spec.params.model_fields:
        return {**arguments, DRY_RUN_FIELD: True}
    raise DryRunUnsupportedError(
        f"{chain_ctx.tool} is the host's own tool, and it has no boolean dry_run argument to make the dry "
        "run this configuration asks for (dry_run_default_for_writes); nothing ran. Set "
        "dry_run_default_for_writes to false in the config so that a confirmed call runs"
    )


def _is_binary(item: Mapping[str, Any]) -> bool:
    """An image, audio, or a resource given as a blob: bytes the redactor cannot look into."""
    resource = item.get("resource")
    return item.get("type") in ("image", "audio") or (isinstance(resource, Mapping) and "blob" in resource)


def host_result(
    content: Sequence[Mapping[str, Any]], structured: Any, *, is_error: bool, keep_binary: bool
) -> ToolResult:
    """A host's tool result as the chain's ToolResult: text items joined, other items carried.

    The redactor masks every string the other items hold (a resource's text and URI, names,
    `_meta`); binary items it cannot look into are dropped, with a note, unless `keep_binary`.

    Args:
        content: The result's content items, as wire dicts.
        structured: Its structured content.
        is_error: Whether the host marked it an error.
        keep_binary: The host opted in to pass images, audio and blobs unredacted.
    """
    texts = [str(item.get("text", "")) for item in content if item.get("type") == "text"]
    others = [item for item in content if item.get("type") != "text"]
    carried = tuple(item for item in others if keep_binary or not _is_binary(item))
    if len(carried) < len(others):
        texts.append(BINARY_DROPPED_NOTE.format(count=len(others) - len(carried)))
    return ToolResult(
        text="\n".join(texts),
        structured=structured if isinstance(structured, dict) else None,
        is_error=is_error,
        passthrough_content=carried,
    )


def hosted_app(
    project_root: str | Path,
    profile: str | Profile,
    config_path: Path | None,
    environ: Mapping[str, str] | None,
    layers: Sequence[LayerType],
) -> tuple[App, dict[str, ToolSpec]]:
    """The chain for a host that runs its own tools, and the catalog its middleware fills.

    Raises:
        ConfigError: The profile does not exist or does not build.
    """
    specs: dict[str, ToolSpec] = {}
    app = build_app(
        project_root,
        profile=profile,
        config_path=config_path,
        environ=environ,
        catalog=specs,
        hosted=True,
        layers=layers,
        telemetry=True,
    )
    return app, specs
