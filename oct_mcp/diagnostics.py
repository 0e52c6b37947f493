"""The diagnostics log: structlog on stderr, levels L1 (errors) to L4 (deep trace)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Final, TextIO

import structlog

__all__ = ["DEBUG_LEVELS", "configure_diagnostics", "debug_level_from_env", "get_logger", "is_deep_trace"]

# L0 silent, L1 errors and warnings, L2 lifecycle, L3 debug, L4 deep trace (argument values included).
DEBUG_LEVELS: Final = range(5)
DEFAULT_DEBUG_LEVEL: Final = 1
_STDLIB_LEVELS: Final = {
    0: logging.CRITICAL + 10,
    1: logging.WARNING,
    2: logging.INFO,
    3: logging.DEBUG,
    4: logging.DEBUG,
}
_deep_trace = False
# The level configure_diagnostics set: a call below it is dropped before structlog builds a logger
# (measured: ~3 us a filtered call otherwise, two on every tool call's path). None: not ours to know.
_our_level: int | None = None


class DiagnosticsLogger:
    """Logs through structlog once an application has configured it, else through stdlib logging.

    An application that embeds the chain may never configure structlog, whose
    default prints to stdout, where a stdio MCP server speaks its protocol.
    Until someone configures it, records go to stdlib logging (stderr at most).
    """

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def _log(self, level: int, event: str, exc_info: bool, fields: dict[str, Any]) -> None:
        if _our_level is not None and level < _our_level:
            return
        if structlog.is_configured():
            method = getattr(structlog.get_logger(self._name), logging.getLevelName(level).lower())
            if exc_info:
                fields = {**fields, "exc_info": True}
            method(event, **fields)
            return
        stdlib = logging.getLogger(self._name)
        if stdlib.isEnabledFor(level):
            stdlib.log(level, "%s %s", event, fields, exc_info=exc_info)

    def debug(self, event: str, **fields: Any) -> None:
        self._log(logging.DEBUG, event, False, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._log(logging.INFO, event, False, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._log(logging.WARNING, event, False, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._log(logging.ERROR, event, False, fields)

    def exception(self, event: str, **fields: Any) -> None:
        """An error with the traceback of the exception being handled."""
        self._log(logging.ERROR, event, True, fields)


def get_logger(name: str) -> DiagnosticsLogger:
    """The diagnostics logger of a module; never writes to stdout."""
    return DiagnosticsLogger(name)


def is_deep_trace() -> bool:
    """True at L4: callers may log field values, which lower levels never carry."""
    return _deep_trace


def debug_level_from_env(default: int = DEFAULT_DEBUG_LEVEL) -> int:
    """The level `OCT_MCP_DEBUG` asks for, or `default` when it is unset or not a level."""
    raw = os.environ.get("OCT_MCP_DEBUG", "").strip()
    if raw.isdigit() and int(raw) in DEBUG_LEVELS:
        return int(raw)
    return default


class _CurrentStderr:
    """Writes to whatever `sys.stderr` is at the time of writing, not at configuration."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_diagnostics(level: int, stream: TextIO | None = None) -> None:
    """Send structlog and stdlib logging (the SDK's included) to stderr at `level`.

    Args:
        level: 0 to 4, as `--debug N`.
        stream: Where to write; stderr when None. Never stdout: it carries the protocol.
    """
    global _deep_trace, _our_level
    out: Any = stream if stream is not None else _CurrentStderr()
    stdlib_level = _STDLIB_LEVELS[level]
    _deep_trace = level >= 4
    _our_level = stdlib_level
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(stdlib_level),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(out)
    # The SDK logs through stdlib logging: render its records as the same JSON lines.
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processor=structlog.processors.JSONRenderer(),
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
            ],
        )
    )
    root.addHandler(handler)
    root.setLevel(stdlib_level)
