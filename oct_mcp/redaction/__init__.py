"""Secret redaction and path anonymisation: pure functions the redactor and the audit layers share."""

from oct_mcp.redaction.checks import mask
from oct_mcp.redaction.detectors import KINDS
from oct_mcp.redaction.engine import Finding, redact, redact_value, secret_field_name
from oct_mcp.redaction.paths import anonymise_paths

__all__ = ["KINDS", "Finding", "anonymise_paths", "mask", "redact", "redact_value", "secret_field_name"]
