"""What a call touches, as the rules see it: its paths as named and resolved, its argv, refs and risk."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Sequence
from typing import Final

from pydantic import BaseModel

from oct_mcp.errors import OctError
from oct_mcp.rules._model import STDIO_CLIENT, CallFacts
from oct_mcp.spec import Risk, ToolSpec
from oct_mcp.workspace import Workspace

REF_FIELDS: Final = ("branch", "base", "commit", "target", "ref", "revision", "start_point")
"""The params fields that name a git ref or branch."""


def call_facts(
    spec: ToolSpec,
    params: BaseModel,
    workspace: Workspace,
    *,
    risk: Risk,
    resolved: Sequence[tuple[str, str]] = (),
    with_targets: bool = True,
    client: str = STDIO_CLIENT,
    with_arguments: bool = False,
) -> CallFacts:
    """What a validated call touches, for the rules.

    Every path field, and the paths a patch or a move names inside (`targets`), each as named and as
    resolved in the project (a link to `secrets/` is `secrets/`); the command a run starts; the refs
    it names; its own risk.

    Args:
        risk: The call's own risk (`CallContext.risk`, by `ToolSpec.risk_of`).
        resolved: Paths as given and where they resolve, as the validator found them: not
            resolved again.
        client: The calling client's id.
        with_arguments: Keep the validated arguments, for rules that look into them (`When.fields`).

    Raises:
        OctError: A path leaves the project (the validator refused it already for a path field).
    """
    # The dump costs more than the rest together: only the tools that name paths inside (a patch)
    # need it.
    needed = with_arguments or spec.targets is not None
    args = params.model_dump() if needed else None
    # The validator's list is the path fields' own, in the same order: not walked again.
    named = [given for given, _landed in resolved] or [path for _field, path in spec.given_paths(params)]
    if with_targets and spec.targets is not None and args is not None:
        # A patch that cannot be read names nothing; the tool refuses it when it runs.
        with contextlib.suppress(OctError, ValueError, TypeError, KeyError):
            named.extend(p for p in spec.targets(args) if isinstance(p, str))
    known = dict(resolved)
    paths: list[str] = []
    for path in named:
        landed = known.get(path)
        if landed is None:
            landed = workspace.contain_text(path)
        as_named = _as_named(path, workspace)
        if as_named is not None and as_named not in paths:
            paths.append(as_named)
        if landed != f"{workspace.root}/{as_named}":
            shown = workspace.relative(landed)
            if shown not in paths:
                paths.append(shown)
    refs = tuple(
        value for name in _ref_fields(type(params)) if isinstance(value := getattr(params, name), str)
    )
    return CallFacts(
        tool=spec.name,
        risk=risk.value,
        paths=tuple(paths),
        argv=spec.runs(params) if spec.runs is not None else None,
        refs=refs,
        client=client,
        arguments=args if with_arguments else None,
    )


@functools.cache
def _ref_fields(model: type[BaseModel]) -> tuple[str, ...]:
    # Asked once per tool: a pydantic model answers a missing attribute slowly (it raises inside).
    return tuple(name for name in REF_FIELDS if name in model.model_fields)


def _as_named(path: str, workspace: Workspace) -> str | None:
    """The path as the call named it, relative and normalised, without following links."""
    framed = f"/{path}/"
    if not path.startswith("/") and "//" not in framed and "/./" not in framed and "/../" not in framed:
        return path  # already relative and normal, as most are
    root = str(workspace.root)
    joined = os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
    if joined == root:
        return "."
    if not joined.startswith(root.rstrip("/") + "/"):
        return None
    return joined[len(root.rstrip("/")) + 1 :]
