"""The assembled server state (config, workspace, catalog, chain) and the one place calls enter the chain."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from oct_mcp.audit import AuditSink
from oct_mcp.chain import Chain, build_chain
from oct_mcp.config import LoadedConfig, load_settings, merge_policy, tighten_with_repo_config
from oct_mcp.consent import Consent, SessionGrants, UsedConsents
from oct_mcp.diagnostics import get_logger, is_deep_trace
from oct_mcp.errors import INTERNAL_ERROR_CODE, INTERNAL_ERROR_MESSAGE, OctError
from oct_mcp.ignore_files import ignore_file_rules
from oct_mcp.metrics import MetricsEndpoint, create_metrics, serve_metrics
from oct_mcp.policy_source import MAX_POLICY_BYTES, PolicySourceError, fetch_policy, parse_policy
from oct_mcp.profiles import Profile, resolve_profile
from oct_mcp.registry import LayerRegistry, layer_registry
from oct_mcp.rules import RuleSource, read_admin_rules
from oct_mcp.spec import ToolSpec
from oct_mcp.telemetry import is_on as telemetry_on
from oct_mcp.telemetry import note_failure, start_telemetry, stop_telemetry
from oct_mcp.tools import default_catalog
from oct_mcp.types import (
    CallContext,
    ClientInfo,
    LayerRuntime,
    LayerType,
    Outcome,
    ProgressReporter,
    ToolResult,
)
from oct_mcp.workspace import Workspace, read_project_file, resolve_root

__all__ = ["App", "CallFailure", "build_app", "run_call"]

# Repo-level config, read only with trust_repo_config; it can only make the server stricter.
REPO_CONFIG_FILES: Final = (".octrc.json", "debug_config.json")

_log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class App:
    """Everything a server needs, built once at start-up."""

    loaded: LoadedConfig
    workspace: Workspace
    profile: Profile
    catalog: Mapping[str, ToolSpec]
    chain: Chain
    registry: LayerRegistry = field(default_factory=layer_registry)
    """The layers the profile could name, and where each came from (for doctor)."""
    audit: AuditSink | None = None
    """Where the audit layer records (for doctor); None when the app was assembled without one."""
    metrics: MetricsEndpoint | None = None
    """The running `/metrics` endpoint, when the server serves one."""
    used_consents: UsedConsents = field(default_factory=UsedConsents)
    """Sealed consent states already answered: each answer runs its call once."""
    rule_sources: tuple[RuleSource, ...] = ()
    """The files whose rules are in force, strongest tier first (the profile's are the policy layer's)."""
    telemetry: bool = False
    """This app started the OpenTelemetry export (`build_app(telemetry=True)`): its close flushes it."""

    def visible_tools(self) -> list[ToolSpec]:
        """The tools `tools/list` shows: the catalog minus what the chain hides."""
        return [spec for spec in self.catalog.values() if self.chain.is_visible(spec)]

    def close(self) -> None:
        """Stop the metrics endpoint, flush the telemetry this app started, and close the audit log."""
        if self.metrics is not None:
            self.metrics.close()
        if self.telemetry:
            stop_telemetry()
        if self.audit is not None:
            self.audit.writer.close()


@dataclass(frozen=True, slots=True)
class CallFailure:
    """A call that ended in an error: a stable code and a message safe for the client."""

    code: str
    message: str


def build_app(
    project_root: str | Path,
    *,
    profile: str | Profile | None = None,
    config_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    catalog: Mapping[str, ToolSpec] | None = None,
    serve_metrics_endpoint: bool = False,
    hosted: bool = False,
    development: bool = False,
    layers: Sequence[LayerType] = (),
    telemetry: bool = False,
) -> App:
    """Load the config, resolve the root and the profile, and build the chain.

    Args:
        project_root: The project the server is bound to.
        profile: A profile name that overrides the config and the environment, or a `Profile`
            made in code (an embedder's own layers and settings, no config file needed); its
            layers and settings are checked as a config file's are, when the chain is built.
        config_path: The config file; `~/.oct-mcp/config.json` when None.
        environ: The environment; `os.environ` when None.
        catalog: The tools to serve; oct's own catalog when None.
        serve_metrics_endpoint: Serve `/metrics` when the config sets `metrics_port` (the server
            does; one-shot commands do not).
        development: Development mode: the redactor may be off where the profile allows it.
        hosted: The chain guards another server's tools: the profile has no terminal layer,
            the host's handler is the endpoint, and the catalog fills as the host lists tools.
        layers: Layer types of your own, which a profile may name beside the shipped ones and
            those installed under the `oct_mcp.layers` entry point group.
        telemetry: Export traces and metrics when the OTEL_* variables ask for it (the server and
            an embedding guard do; one-shot commands do not).

    Raises:
        NotADirectoryError: The project root is not an existing directory.
        ConfigError: The profile does not exist or does not build, or a layer takes a name
            already taken.
    """
    registry = layer_registry(layers)
    workspace = Workspace(resolve_root(project_root))
    loaded = load_settings(config_path, environ)
    admin = read_admin_rules(os.environ if environ is None else environ)
    given = profile if isinstance(profile, Profile) else None
    if isinstance(profile, str):
        loaded = loaded.with_values({"profile": profile}, "cli")

    def chosen_profile() -> Profile:
        return given if given is not None else resolve_profile(loaded.config.profile, loaded.user_profiles)

    if loaded.config.policy_source is not None:
        network_allowed = chosen_profile().allows_network
        loaded = _apply_policy_source(loaded, loaded.config.policy_source, network_allowed=network_allowed)
    rule_sources: list[RuleSource] = [] if admin is None else [admin]
    if loaded.config.rules:
        from_policy = loaded.sources["rules"] == "policy" and loaded.config.policy_source is not None
        user_file = loaded.config.policy_source if from_policy else str(loaded.path)
        rule_sources.append(RuleSource(tier="user", file=str(user_file), rules=loaded.config.rules))
    ignored = ignore_file_rules(
        loaded.config.ignore_files, workspace, trust_repo=loaded.config.trust_repo_config
    )
    rule_sources.extend(source for source in ignored.sources if source.tier == "user")
    if loaded.config.trust_repo_config:
        loaded, repo_rules = _apply_repo_config(loaded, workspace)
        rule_sources.extend(repo_rules)
    rule_sources.extend(source for source in ignored.sources if source.tier == "repo")
    loaded = replace(loaded, ignore_status=ignored.status)
    chosen = chosen_profile()
    catalog = default_catalog() if catalog is None else catalog
    server_files = [str(loaded.path)]
    if loaded.config.policy_source is not None and "://" not in loaded.config.policy_source:
        server_files.append(loaded.config.policy_source)
    port = loaded.config.metrics_port
    metrics = create_metrics(catalog) if serve_metrics_endpoint and port is not None else None
    audit = AuditSink.from_config(loaded.config, metrics, project=workspace.root)
    runtime = LayerRuntime(
        config=loaded.config,
        workspace=workspace,
        catalog=catalog,
        server_files=tuple(server_files),
        audit=audit,
        open_catalog=hosted,
        development=development,
        rule_sources=tuple(rule_sources),
    )
    started = telemetry and not telemetry_on() and start_telemetry(environ).enabled
    chain = build_chain(chosen, runtime, endpoint=_forward_to_host if hosted else None, registry=registry)
    _log.info("chain_built", profile=chosen.name, layers=list(chosen.layers), root=str(workspace.root))
    endpoint = serve_metrics(metrics, port) if metrics is not None and port is not None else None
    return App(
        loaded=loaded,
        workspace=workspace,
        profile=chosen,
        catalog=catalog,
        chain=chain,
        registry=registry,
        audit=audit,
        metrics=endpoint,
        rule_sources=tuple(rule_sources),
        telemetry=started,
    )


async def _forward_to_host(ctx: CallContext, /) -> Outcome:
    """An embedded chain's endpoint: the host's own tool handler, which the transport put in the context."""
    if ctx.forward is None:
        raise RuntimeError("an embedded chain was called without the host's handler")
    return await ctx.forward(ctx)


def _apply_policy_source(loaded: LoadedConfig, source: str, *, network_allowed: bool) -> LoadedConfig:
    """Merge the policy over the config; on any failure keep the config as it is, and say so."""
    try:
        document = fetch_policy(source, network_allowed=network_allowed)
    except PolicySourceError as exc:
        # The seed: a load failure falls back to the built-in defaults. Loudly, though.
        _log.error("policy_source_failed", problem=exc.message)
        return replace(loaded, policy_status=f"failed, built-in defaults kept: {exc.message}")
    merged = merge_policy(loaded, document, origin="policy_source")
    return replace(merged, policy_status=f"loaded ({len(document)} fields)")


def _apply_repo_config(loaded: LoadedConfig, workspace: Workspace) -> tuple[LoadedConfig, list[RuleSource]]:
    """Tighten the config with the project's own `.octrc.json` and `debug_config.json`, if present.

    Returns:
        The config, and the files' rules, which join below the user's (a repository's may only
        deny or ask: `compile_rules` refuses its allow).
    """
    found: list[str] = []
    rules: list[RuleSource] = []
    for name in REPO_CONFIG_FILES:
        try:
            document = _read_repo_config(workspace, name)
        except OctError as exc:
            _log.error("repo_config_failed", file=name, problem=exc.message)
            found.append(f"{name} (ignored: {exc.message})")
            continue
        if document is None:
            continue
        if "rules" in document:
            raw = document.pop("rules")
            rules.append(
                RuleSource(tier="repo", file=name, rules=tuple(raw) if isinstance(raw, list) else (raw,))
            )
        loaded = tighten_with_repo_config(loaded, document, origin=name)
        found.append(name)
    status = "read: " + ", ".join(found) if found else "none found in the project"
    return replace(loaded, repo_status=status), rules


def _read_repo_config(workspace: Workspace, name: str) -> dict[str, Any] | None:
    """A repo config file, opened as any project file is: no link, a regular file, size capped.

    The repository chooses what the name is: a link to `/dev/stdin` would have the server read its
    own protocol stream, a FIFO would block the start-up.

    Returns:
        The document; None when there is no such file.

    Raises:
        OctError: The file is a link, not a regular file, too large, or not a JSON object.
    """
    data = read_project_file(workspace, name, MAX_POLICY_BYTES)
    if data is None:
        return None
    return parse_policy(data)


async def run_call(
    app: App,
    tool: str,
    arguments: Mapping[str, Any],
    client: ClientInfo,
    *,
    consent: Consent | None = None,
    progress: ProgressReporter | None = None,
    forward: Callable[[CallContext], Awaitable[Outcome]] | None = None,
    session_grants: SessionGrants | None = None,
) -> Outcome | CallFailure:
    """Run one call through the chain; every error becomes a CallFailure.

    An OctError keeps its code and safe message. Anything else is logged with its
    traceback to the diagnostics log and becomes a fixed message: exception text
    never reaches a client. Cancellation is never caught.
    """
    ctx = CallContext(
        tool=tool,
        arguments=arguments,
        client=client,
        # 128 random bits in hex, as uuid4().hex gives, at a quarter of its cost (measured).
        call_id=os.urandom(16).hex(),
        consent=consent,
        progress=progress,
        forward=forward,
        session_grants=session_grants,
    )
    _log.debug("call_start", call_id=ctx.call_id, tool=tool, transport=client.transport)
    if is_deep_trace():
        _log.debug("call_arguments", call_id=ctx.call_id, arguments=dict(arguments))
    try:
        outcome = await app.chain(ctx)
    except OctError as exc:
        _log.info("call_failed", call_id=ctx.call_id, tool=tool, code=exc.code)
        note_failure(exc.code, exc)
        return CallFailure(code=exc.code, message=exc.message)
    except Exception:  # noqa: BLE001 - the boundary: nothing unexpected may reach a client as text
        # The one boundary that turns an unexpected error into a fixed message.
        _log.exception("call_crashed", call_id=ctx.call_id, tool=tool)
        note_failure(INTERNAL_ERROR_CODE)
        return CallFailure(code=INTERNAL_ERROR_CODE, message=INTERNAL_ERROR_MESSAGE)
    _log.debug("call_done", call_id=ctx.call_id, tool=tool)
    if session_grants is not None:
        _record_grant(session_grants, tool, outcome)
    return outcome


def _record_grant(session_grants: SessionGrants, tool: str, outcome: Outcome) -> None:
    """Record the folders a human opened to `tool` with the answer this call ran on.

    The safety gate returns the grant as a fact of the result and changes nothing itself; the
    session's grants are the transport's, so they are changed here, once the call has come back.
    """
    facts = outcome.consent if isinstance(outcome, ToolResult) else None
    if facts is not None and facts.given_by == "elicitation" and facts.granted_folders:
        session_grants.grant(tool, facts.granted_folders, facts.grant_seconds)
