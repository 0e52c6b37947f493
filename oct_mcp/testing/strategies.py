"""Hypothesis strategies for property tests of layers and gate rules: contexts, specs, arguments, configs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from hypothesis import strategies as st

from oct_mcp.config import McpConfig
from oct_mcp.spec import Risk, ToolSpec
from oct_mcp.testing import TEST_CLIENT
from oct_mcp.types import CallContext, ClientInfo

__all__ = [
    "PATH_PIECES",
    "arguments",
    "client_infos",
    "configs",
    "contexts",
    "json_values",
    "path_texts",
    "tool_names",
    "tool_specs",
]

# What a careless or hostile client puts in a path: climbs, option-like names, Windows drive and
# UNC prefixes, NUL and other control characters (C0, DEL, C1), unicode that is not a control
# character, lone surrogates (legal in JSON text, yet no file name can hold U+D800), and the
# longest path allowed (joined with anything else, it is over the limit).
PATH_PIECES: Final[tuple[str, ...]] = (
    "",
    ".",
    "..",
    "...",
    "-",
    "-rf",
    "--help",
    "~",
    "C:",
    "c:x",
    "\\\\server",
    "\\",
    "/",
    "//",
    "\x00",
    "\t",
    "\n",
    "\x1b",
    "\x7f",
    "\x85",
    "\u2028",
    "\u202e",
    "é",
    "名前",
    "a b",
    "\ud800",
    "\udc80",
    "a" * 4_096,
    "." * 4_095,
)
_SEPARATORS: Final = ("/", "/", "/", "//", "\\")
# The fields the shipped gate rules read, and the seed's argument names they look at.
_RULE_ARGUMENTS: Final = (
    "path",
    "content",
    "apply",
    "dry_run",
    "confirm",
    "paths",
    "argv",
    "writes",
    "network",
    "cwd",
    "x",
)


@st.composite
def _joined(draw: st.DrawFn, pieces: st.SearchStrategy[str]) -> str:
    parts = draw(st.lists(pieces, min_size=1, max_size=6))
    text = parts[0]
    for part in parts[1:]:
        text += draw(st.sampled_from(_SEPARATORS)) + part
    return text


def path_texts(names: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """Path arguments as a client might send them, hostile ones included.

    Args:
        names: Names that exist on disk (files, folders, symlinks) and absolute paths
            such as the root, mixed into the pieces so paths reach real trees too.

    Returns:
        Text joined from pieces (hostile ones, `names`, printable text), or arbitrary text.
    """
    printable = st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=6)
    pieces = st.one_of(
        st.sampled_from(PATH_PIECES),
        *([st.sampled_from(tuple(names))] if names else []),
        printable,
    )
    return st.one_of(_joined(pieces), st.text())


def json_values() -> st.SearchStrategy[Any]:
    """What JSON can carry: null, booleans, numbers, short strings, and lists and objects of them."""
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=8,
    )


def arguments(keys: Sequence[str] = _RULE_ARGUMENTS) -> st.SearchStrategy[dict[str, Any]]:
    """A call's arguments: `keys` (by default the names gate rules read) and others, any JSON value each."""
    return st.dictionaries(st.sampled_from(tuple(keys)) | st.text(max_size=6), json_values(), max_size=6)


def configs(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[McpConfig]:
    """McpConfig with the switches the layers decide by drawn, the rest at their defaults.

    Args:
        fields: Strategies for further fields, or to replace the drawn ones.
    """
    drawn: dict[str, st.SearchStrategy[Any]] = {
        "auto_approve_read_tools": st.booleans(),
        "dry_run_default_for_writes": st.booleans(),
        "redaction_always_on": st.booleans(),
        "safe_mode": st.booleans(),
        "rate_limit_per_minute": st.integers(1, 1_000),
    }
    return st.builds(McpConfig, **{**drawn, **fields})


def tool_specs(specs: Sequence[ToolSpec] | None = None) -> st.SearchStrategy[ToolSpec]:
    """Tools of `specs` (oct's catalog when None), each with any risk: rules must hold for every risk."""
    if specs is None:
        from oct_mcp.tools import default_catalog

        specs = list(default_catalog().values())
    return st.sampled_from(list(specs)).flatmap(
        lambda spec: st.sampled_from(list(Risk)).map(lambda risk: replace(spec, risk=risk))
    )


def tool_names(known: Sequence[str] | None = None) -> st.SearchStrategy[str]:
    """Names of real tools (`known`, oct's catalog when None) and short arbitrary text."""
    if known is None:
        from oct_mcp.tools import default_catalog

        known = sorted(default_catalog())
    return st.sampled_from(list(known)) | st.text(max_size=12)


def client_infos() -> st.SearchStrategy[ClientInfo]:
    """Clients of each transport, that can or cannot ask a human."""
    return st.builds(
        ClientInfo,
        client_id=st.sampled_from([TEST_CLIENT.client_id, "stdio", "http:team", "embedded-1"]),
        transport=st.sampled_from(["stdio", "memory", "http", "embedded", "cli"]),
        can_elicit=st.booleans(),
        protocol_version=st.sampled_from([None, "2025-06-18", "2026-07-28"]),
    )


def contexts(
    tools: st.SearchStrategy[str] | None = None,
    call_arguments: st.SearchStrategy[Mapping[str, Any]] | None = None,
) -> st.SearchStrategy[CallContext]:
    """Contexts as a call enters the chain: a tool name, its arguments, a client.

    Args:
        tools: The tool names to draw; `tool_names()` when None.
        call_arguments: The arguments to draw; `arguments()` when None.
    """
    return st.builds(
        CallContext,
        tool=tool_names() if tools is None else tools,
        arguments=arguments() if call_arguments is None else call_arguments,
        client=client_infos(),
        call_id=st.text("0123456789abcdef", min_size=32, max_size=32),
    )
