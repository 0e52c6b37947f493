"""The audit log: the hash-chained writer, its rotation, and reading it back (verify, tail)."""

from oct_mcp.audit.records import GENESIS, line_digest, rotated_path
from oct_mcp.audit.sink import AuditSink
from oct_mcp.audit.verify import (
    Break,
    Verification,
    audit_files,
    describe_record,
    iter_records,
    read_tail,
    verify_chain,
)
from oct_mcp.audit.writer import AuditFailure, AuditWriter

__all__ = [
    "GENESIS",
    "AuditFailure",
    "AuditSink",
    "AuditWriter",
    "Break",
    "Verification",
    "audit_files",
    "describe_record",
    "iter_records",
    "line_digest",
    "read_tail",
    "rotated_path",
    "verify_chain",
]
