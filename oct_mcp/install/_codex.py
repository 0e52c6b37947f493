"""Codex's config.toml: this server as a block appended between marks, checked by parsing the result."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any, Final

from oct_mcp.install._hosts import FileChange, HostConfigError, ServerCommand
from oct_mcp.install._json_files import config_text


def _begin_mark(name: str) -> str:
    return f"# >>> oct-mcp install ({name}): `oct-mcp uninstall codex` removes the lines down to <<<"


def _end_mark(name: str) -> str:
    return f"# <<< oct-mcp install ({name})"


def _line_mark(name: str) -> str:
    return f"# oct-mcp install ({name}): Codex's shell off, oct's tools instead"


def _load_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The message names the line and column ("Invalid value (at line 3, column 9)"), except at the
        # end of the file ("Unclosed array (at end of document)"): then the last line is named.
        where = "" if "at line" in str(exc) else f", line {max(len(text.splitlines()), 1)}"
        raise HostConfigError(f"{path}{where}: not TOML: {exc}; fix it first: nothing was changed") from exc


_FEATURES_HEADER: Final = re.compile(r"\s*\[\s*features\s*\]\s*(#.*)?")


def _toml_string(value: str) -> str:
    # JSON's string escapes (\", \\, \n, \uXXXX) are all TOML basic-string escapes.
    return json.dumps(value, ensure_ascii=False)


def _without_codex_marks(text: str, name: str) -> str:
    """The text with what an earlier install added taken out: its block, and its line in [features].

    The blank line install put before its block goes too; a file that had no final newline keeps the
    one install added (TOML reads the same).
    """
    lines = text.splitlines(keepends=True)
    begin, end = _begin_mark(name), _end_mark(name)
    starts = [index for index, line in enumerate(lines) if line.rstrip("\r\n") == begin]
    if starts:
        start = starts[0]
        stops = [index for index, line in enumerate(lines) if index > start and line.rstrip("\r\n") == end]
        if not stops:
            raise HostConfigError(
                f"the block oct-mcp install added has lost its end line ({end!r}); put it back or remove "
                "the block by hand: nothing was changed"
            )
        stop = stops[0]
        if start > 0 and lines[start - 1].strip() == "":
            start -= 1
        del lines[start : stop + 1]
    mark = _line_mark(name)
    lines = [line for line in lines if not line.rstrip("\r\n").endswith(mark)]
    return "".join(lines)


def codex_change(
    path: Path, name: str, server: ServerCommand | None, *, shell_off: bool
) -> tuple[FileChange, tuple[str, ...]]:
    """Codex's `.codex/config.toml` with the server (and `features.shell_tool = false`) added or removed.

    Shapes: `[mcp_servers.NAME]` with `command` and `args` (developers.openai.com/codex/mcp); a project's
    `.codex/config.toml` is read in a trusted project only (developers.openai.com/codex/config-basic);
    `features.shell_tool` is Codex's switch for its shell tool (openai/codex#6481, "Useful when using
    Codex with tools provided exclusively by MCP servers"). Text is appended, never re-serialised, so
    comments and layout stay byte for byte; the result is parsed and compared before it is written.
    """
    if server is None:
        what = f"Codex's MCP server {name}, and the shell switch install added"
    else:
        what = f"Codex's MCP server {name}" + (" and its shell tool off" if shell_off else "")
    before = config_text(path)
    text = before or ""
    _load_toml(path, text)
    base = _without_codex_marks(text, name)
    document = _load_toml(path, base)
    servers = document.get("mcp_servers", {})
    if server is None:
        if isinstance(servers, dict) and name in servers:
            raise HostConfigError(
                f"{path}: [mcp_servers.{name}] was not written by oct-mcp install (no marks around it); "
                "remove it by hand: nothing was changed"
            )
        if base == text:
            return FileChange(path, before, before, what), ()
        return FileChange(path, before, None if base == "" else base, what), ()
    if isinstance(servers, dict) and name in servers:
        raise HostConfigError(
            f"{path}: it already has [mcp_servers.{name}], not written by oct-mcp install; remove it, or "
            "pass --name with another name: nothing was changed"
        )
    notes: list[str] = []
    block = [
        _begin_mark(name),
        f"[mcp_servers.{name}]",
        f"command = {_toml_string(server.command)}",
        "args = [" + ", ".join(_toml_string(arg) for arg in server.args) + "]",
    ]
    expected = copy.deepcopy(document)
    expected.setdefault("mcp_servers", {})[name] = {"command": server.command, "args": list(server.args)}
    lines = base.splitlines(keepends=True)
    features = document.get("features")
    if shell_off:
        if isinstance(features, dict) and "shell_tool" in features:
            state = "off" if features["shell_tool"] is False else "on"
            notes.append(f"features.shell_tool is already set in {path} ({state}): left as it is")
        else:
            header = next(
                (
                    index
                    for index, line in enumerate(lines)
                    if _FEATURES_HEADER.fullmatch(line.rstrip("\r\n"))
                ),
                None,
            )
            if header is not None:
                lines.insert(header + 1, f"shell_tool = false  {_line_mark(name)}\n")
            else:
                block += ["", "[features]", "shell_tool = false"]
            expected.setdefault("features", {})["shell_tool"] = False
    block.append(_end_mark(name))
    head = "".join(lines)
    separator = "" if head == "" else ("\n" if head.endswith("\n") else "\n\n")
    after = head + separator + "\n".join(block) + "\n"
    try:
        parsed = tomllib.loads(after)
    except tomllib.TOMLDecodeError:
        parsed = None
    if parsed != expected:
        raise HostConfigError(
            f"{path}: its layout (an inline mcp_servers or features table?) leaves no place to add "
            f"[mcp_servers.{name}] safely; add it by hand (--print shows it): nothing was changed"
        )
    return FileChange(path, before, after, what), tuple(notes)
