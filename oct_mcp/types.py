"""What a layer is written against: the middleware protocol, the context, the outcome, the layer's type.

This module imports nothing of oct-mcp's at run time but its errors and `oct_mcp.base_types` (two
leaves, which import nothing of oct-mcp's): a layer, a tool and the chain all import it, and it
imports none of them. The heavier classes it names (ToolSpec, Workspace, McpConfig, ...) are
imported for the type checker only, as Starlette's `types` does for its requests; none of them
imports this module, so not even the type checker meets a cycle. What a layer raises
(`RefusedError` and its kin) and what it reads of a tool and a result (`Risk`, `ToolResult`) are
here too, so a layer imports this module alone.

The middleware contract is the docstring of `Middleware`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeAlias, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar as DefaultingTypeVar

from oct_mcp.base_types import ProgressReporter, Risk, RuleVerdict, ToolResult, WithheldPaths
from oct_mcp.errors import (
    ConfigError,
    ExecutionError,
    InvalidArgumentsError,
    OctError,
    PathRefusedError,
    RefusedError,
)

if TYPE_CHECKING:
    from oct_mcp.audit import AuditSink
    from oct_mcp.config import McpConfig
    from oct_mcp.consent import Consent, SessionGrants
    from oct_mcp.preview import Preview, TargetState
    from oct_mcp.rules import RuleSource
    from oct_mcp.spec import CallRisk, ToolSpec
    from oct_mcp.workspace import Workspace

__all__ = [
    "CallContext",
    "CallNext",
    "ClientInfo",
    "ConfigError",
    "ConsentGate",
    "ConsentRequest",
    "ExecutionError",
    "InvalidArgumentsError",
    "LayerRuntime",
    "LayerSettings",
    "LayerType",
    "ListFilter",
    "Middleware",
    "OctError",
    "Outcome",
    "PathRefusedError",
    "ProgressReporter",
    "RefusedError",
    "Risk",
    "RuleVerdict",
    "Slot",
    "ToolResult",
    "WarmsUp",
    "WithheldPaths",
]

T = TypeVar("T")
SettingsT = DefaultingTypeVar("SettingsT", bound=BaseModel, default=Any)
"""A layer's settings model. A bare `LayerType` holds any (PEP 696's default, from typing_extensions
until Python 3.13): registries and profiles hold layers of every kind."""

_EMPTY: Final[Mapping[str, object]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientInfo:
    """Who is calling, as far as the transport can tell."""

    client_id: str
    """What identifies one client on its transport (a stdio server has exactly one): over HTTP the
    bearer token's name, or for OAuth the person (`sub`), whose limits and grants are their own."""
    application: str | None = None
    """For OAuth, the application the person called through (`client_id`, else `azp`)."""
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
    confirmed: bool = False
    """Written by validator: the call carried `confirm=true`, the seed's stateless consent, which
    the validator took off the arguments before the tool's model saw them; the safety gate decides
    what it counts for (nothing where the client can ask a human)."""
    risk: CallRisk | None = None
    """Written by validator: what this call can do by its validated arguments (`ToolSpec.risk_of`),
    worked out once; the policy, the safety gate and the sandbox judge the call by it."""
    resolved_paths: tuple[tuple[str, str], ...] = ()
    """Written by validator: each path argument as given, and where it resolves (absolute, inside
    the project), so a layer that judges paths does not resolve them again."""
    rule_verdict: RuleVerdict | None = None
    """Written by policy: the rule that asks about or allows this call; None where none matched."""
    withheld: WithheldPaths | None = None
    """Written by policy: the paths a deny rule keeps out of this call's output; None where none can."""
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
    layer_data: Mapping[str, object] = field(default_factory=lambda: _EMPTY)
    """Written through `Slot.put` only, each entry by the one layer that declares its slot."""


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
CallNext: TypeAlias = Callable[[CallContext], Awaitable[Outcome]]


class Middleware(Protocol):
    """One layer of the chain: `async __call__(ctx, call_next, /) -> Outcome`.

    One call has exactly one of three moves:

    - **Pass on**: `return await call_next(ctx)`, or `call_next(replace(ctx, ...))` with the fields
      (or the slot, see `Slot`) this layer writes. A layer writes only what its `LayerType` declares
      in `provides` or `slots`; `build_chain` checks that whoever reads a field comes after its writer.
      What comes back may be returned changed (the redactor masks the result's text).
    - **Answer**: return an `Outcome` without calling `call_next` (the safety gate's ConsentRequest).
      Nothing inside the layer runs.
    - **Raise**: refuse the call with an `OctError` (`RefusedError` and its kind when nothing inside
      ran). The message says what was wrong and how to fix it, never an argument's value.

    `call_next` is called at most once per call, and only while `__call__` runs: not twice (a retry
    would run a tool, maybe a write, again), not from a task that outlives the call. One step is
    named as the exception, the **preview**: a layer that provides `previewing` (`LayerType.previews`:
    the safety gate) may first call it once with `previewing=True` and `dry_run=True`, a run that
    changes nothing and answers with what the call would change, before it passes the call itself
    on at most once. Layers below see a preview as a call like any other and pass it on as one.
    `oct_mcp.testing.LayerContract` holds a chain's layers to this. An error raised
    by `call_next` belongs to the layers inside: let it through, or record it and re-raise it
    (`try`/`finally` for timing), or translate a specific one with `raise New(...) from exc`; never
    catch `Exception` at large, never turn an error into a success.

    Cancellation: the host may cancel a call at any await, `call_next` included. The cancellation
    exception passes through every layer untouched: clean up in `finally` (or `except BaseException:
    ...; raise`), never swallow it and never `await` long in cleanup (shield a short, bounded step
    with `anyio.CancelScope(shield=True)` only when leaving it undone would corrupt shared state).

    Concurrency: one instance of a layer serves every call of the server at once, interleaved at each
    await. Per-call state lives in locals or travels in the context, never on `self`. What a layer
    keeps on `self` is its configuration, validated once when the chain is built (its settings and
    what it took from `LayerRuntime`), and state meant to outlive one call (a rate window, a budget
    per client): bounded in size, owned by the layer, and changed either with no await between
    reading and writing it, or under a lock (`anyio.Lock`; a `threading.Lock` where threads touch
    it), never held across an await of `call_next`.
    """

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome: ...


@runtime_checkable
class ListFilter(Protocol):
    """A layer that also decides which tools `tools/list` shows (a hidden tool must also be refused)."""

    def is_visible(self, spec: ToolSpec) -> bool: ...


@runtime_checkable
class WarmsUp(Protocol):
    """A layer with work to do once before its first call (compiling, loading): a server runs it on a
    thread of its own while the host says hello, so the first call does not pay for it. It must be
    safe to run beside calls, which still build what they need themselves if they come first."""

    def warm_up(self) -> None: ...


@runtime_checkable
class ConsentGate(Protocol):
    """A layer that may answer a call with a consent request that the model's `confirm=true` settles:
    `tools/list` shows the `confirm` argument for each tool it names."""

    def takes_confirm(self, spec: ToolSpec) -> bool: ...


@dataclass(frozen=True, slots=True)
class Slot(Generic[T]):
    """A layer's own per-call datum, carried in the context without a field of its own.

    Named `<layer>.<name>` after the layer that declares it in `LayerType.slots`, which is its one
    writer; a layer that reads it names that key in its `requires`, and `build_chain` checks the
    writer comes first.
    """

    layer: str
    name: str
    kind: type[T]

    @property
    def key(self) -> str:
        return f"{self.layer}.{self.name}"

    def get(self, ctx: CallContext) -> T | None:
        """The value the declaring layer put in this call's context; None before it did."""
        value = ctx.layer_data.get(self.key)
        return value if isinstance(value, self.kind) else None

    def put(self, ctx: CallContext, value: T) -> CallContext:
        """A copy of `ctx` carrying `value` in this slot.

        Raises:
            TypeError: `value` is not of the slot's kind.
        """
        if not isinstance(value, self.kind):
            raise TypeError(f"slot {self.key!r} holds {self.kind.__name__}, not {type(value).__name__}")
        return replace(ctx, layer_data=MappingProxyType({**ctx.layer_data, self.key: value}))


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerRuntime:
    """What a layer may be built with, besides its profile settings."""

    config: McpConfig
    workspace: Workspace
    catalog: Mapping[str, ToolSpec]
    profile: str = "default"
    guarantees: frozenset[str] = frozenset()
    """What the profile needs of the sandbox (no_network, writes_confined, reads_confined)."""
    server_files: tuple[str, ...] = ()
    """The config and policy files this server was started with: protected from writes."""
    development: bool = False
    """Development mode (`--development`): the redactor may be off where the profile allows it."""
    open_catalog: bool = False
    """An embedding host adds its tools after start-up: tool names cannot be checked at build."""
    audit: AuditSink | None = None
    """Where the audit layer records; None: a writer at the config's audit_log_path, no metrics."""
    rule_sources: tuple[RuleSource, ...] = ()
    """The rules of the admin file, the user's config and a trusted repository's config, by tier."""


# What `requires` and `provides` may name besides slot keys; `layer_data` is reached through slots.
_CONTEXT_FIELDS: Final = frozenset(f.name for f in fields(CallContext)) - {"layer_data"}


class LayerSettings(BaseModel):
    """The base of a layer's settings: a key the model does not name is refused, and the settings
    are frozen once validated (one instance serves every call)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerType(Generic[SettingsT]):
    """A layer as a profile names it: its settings, what it reads and writes of the context, how to build it.

    `requires` and `provides` name CallContext fields, or slot keys (`<layer>.<name>`); a layer
    provides its own `slots` without listing them.
    """

    name: str
    settings: type[SettingsT]
    """Validates the profile's `[settings.<name>]` table; unknown keys must be refused (`LayerSettings`)."""
    build: Callable[[SettingsT, LayerRuntime], Middleware]
    """Makes the layer from its validated settings (typed as `settings` is) and the runtime."""
    requires: frozenset[str] = frozenset()
    provides: frozenset[str] = frozenset()
    slots: tuple[Slot[Any], ...] = ()
    """Per-call data this layer writes, each named after this layer."""
    terminal: bool = False
    """Runs the tool itself: it never calls `call_next`, so it must be last."""

    def __post_init__(self) -> None:
        foreign = sorted(slot.key for slot in self.slots if slot.layer != self.name)
        if foreign:
            raise ValueError(f"layer {self.name!r} declares slots named after another layer: {foreign}")
        unknown = {name for name in self.requires | self.provides if "." not in name} - _CONTEXT_FIELDS
        if unknown:
            raise ValueError(f"layer {self.name!r} names unknown context fields: {sorted(unknown)}")
        undeclared = {name for name in self.provides if "." in name} - {slot.key for slot in self.slots}
        if undeclared:
            raise ValueError(f"layer {self.name!r} provides slots it does not declare: {sorted(undeclared)}")

    @property
    def previews(self) -> bool:
        """May take the contract's preview step (`Middleware`): the layer that writes `previewing`."""
        return "previewing" in self.provides

    @property
    def writes(self) -> frozenset[str]:
        """The context fields and slot keys this layer writes."""
        return self.provides | {slot.key for slot in self.slots}
