"""PolicyEngine: the profile's tool allowlist, and the protected paths no write may touch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from oct_mcp.errors import ConfigError, PolicyError
from oct_mcp.protected import ProtectedPaths
from oct_mcp.spec import Risk, ToolSpec
from oct_mcp.types import CallContext, CallNext, LayerRuntime, LayerType, Outcome

__all__ = ["ALL_TOOLS", "LAYER", "PolicyEngine", "PolicySettings"]

ALL_TOOLS: Final = "*"


class PolicySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: tuple[str, ...] = Field(default=(ALL_TOOLS,))
    """The tools this profile allows, by name; `*` allows every tool of the catalog."""


@dataclass(frozen=True, slots=True)
class PolicyEngine:
    """Refuse tools outside the allowlist, and writes to protected paths.

    Reads `ctx.tool`, `ctx.spec`, `ctx.params`, `ctx.workspace`. Raises `PolicyError`,
    whose message names the rule. Never answers. Hides refused tools from tools/list.
    """

    profile: str
    allowed: frozenset[str] | None
    """None: every tool."""
    protected: ProtectedPaths

    def is_visible(self, spec: ToolSpec) -> bool:
        return self.allowed is None or spec.name in self.allowed

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        if self.allowed is not None and ctx.tool not in self.allowed:
            raise PolicyError(f"the tool is not allowed in profile {self.profile!r} (rule: allowlist)")
        spec, params, workspace = ctx.spec, ctx.params, ctx.workspace
        if spec is None or params is None or workspace is None:
            raise RuntimeError("the policy layer was reached without validated params")
        if spec.risk is Risk.WRITE:
            for name, path in spec.given_paths(params):
                workspace.contain_text(path)
                # The name as given, not only where it leads: `.vscode` linked to `settings/`
                # is still `.vscode` to the IDE that reads it.
                given = Path(path) if Path(path).is_absolute() else workspace.root / path
                rule = self.protected.rule_for(given)
                if rule is not None:
                    raise PolicyError(
                        f"{spec.name} may not write to {rule.why} (protected path rule: {rule.name}, "
                        f"argument: {name})"
                    )
        return await call_next(ctx)


def _build(settings: PolicySettings, runtime: LayerRuntime) -> PolicyEngine:
    names = set(settings.tools)
    unknown = names - set(runtime.catalog) - {ALL_TOOLS}
    if unknown and not runtime.open_catalog:
        raise ConfigError(f"layer 'policy' allows tools that do not exist: {', '.join(sorted(unknown))}")
    config = runtime.config
    server_files = [config.audit_log_path, *runtime.server_files]
    return PolicyEngine(
        profile=runtime.profile,
        allowed=None if ALL_TOOLS in names else frozenset(names),
        protected=ProtectedPaths.for_root(runtime.workspace.root, server_files),
    )


LAYER: Final = LayerType(
    name="policy",
    settings=PolicySettings,
    build=_build,
    requires=frozenset({"workspace", "spec", "params"}),
)
