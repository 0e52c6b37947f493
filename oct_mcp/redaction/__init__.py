"""Secret redaction and path anonymisation: pure functions the layers and the reading tools share."""

from oct_mcp.redaction.checks import mask
from oct_mcp.redaction.detectors import KINDS
from oct_mcp.redaction.engine import (
    Finding,
    LineMasks,
    mask_line,
    redact,
    redact_excerpts,
    redact_lines,
    warm_up,
)
from oct_mcp.redaction.paths import HostPath, anonymise_paths, names_host_paths, server_paths
from oct_mcp.redaction.values import ValueStrings, redact_value, secret_field_name, value_strings

__all__ = [
    "KINDS",
    "Finding",
    "HostPath",
    "LineMasks",
    "ValueStrings",
    "anonymise_paths",
    "mask",
    "mask_line",
    "names_host_paths",
    "redact",
    "redact_excerpts",
    "redact_lines",
    "redact_value",
    "secret_field_name",
    "server_paths",
    "value_strings",
    "warm_up",
]
