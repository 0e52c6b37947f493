"""AuditLogger: one hash-chained JSONL record per call, refusals and consent rounds included."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

import anyio

from oct_mcp.audit import AuditSink
from oct_mcp.consent import DECLINED_PREFIX, argument_digest
from oct_mcp.diagnostics import is_deep_trace
from oct_mcp.errors import INTERNAL_ERROR_CODE, INTERNAL_ERROR_MESSAGE, OctError, RefusedError
from oct_mcp.redaction import redact, redact_value
from oct_mcp.types import (
    CallContext,
    CallNext,
    ConsentRequest,
    LayerRuntime,
    LayerSettings,
    LayerType,
    Outcome,
    ToolResult,
)

__all__ = ["LAYER", "AuditLogger", "AuditSettings", "audit_record"]

# Host-given names (tool, client) are recorded, but a host must not fill the log with one of them.
_MAX_NAME: Final = 200


class AuditSettings(LayerSettings):
    """The audit layer takes no settings: where it writes is the config's `audit_log_path`."""


@dataclass(frozen=True, slots=True)
class AuditLogger:
    """Record every call, whatever became of it; outermost, so it sees refusals too.

    Reads `ctx.tool`, `ctx.arguments`, `ctx.client`, `ctx.consent`, the outcome or the error.
    Writes nothing, never answers, never refuses: it records, then returns or re-raises as is
    (a cancelled call is recorded as `interrupted`). The arguments only at L4, redacted.
    """

    sink: AuditSink
    profile: str

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        started = time.perf_counter()
        outcome: Outcome | None = None
        error: BaseException | None = None
        try:
            outcome = await call_next(ctx)
        except BaseException as exc:
            error = exc
            raise
        else:
            return outcome
        finally:
            cancelled = error is not None and isinstance(error, anyio.get_cancelled_exc_class())
            await self.sink.record(
                audit_record(
                    ctx,
                    outcome,
                    error,
                    duration=time.perf_counter() - started,
                    profile=self.profile,
                    interrupted=cancelled,
                    deep=is_deep_trace(),
                )
            )


def audit_record(
    ctx: CallContext,
    outcome: Outcome | None,
    error: BaseException | None,
    *,
    duration: float,
    profile: str,
    interrupted: bool = False,
    deep: bool = False,
) -> dict[str, Any]:
    """The fields of one call's audit record (the writer adds `time`, `seq` and `prev`).

    Args:
        ctx: The call as it entered the chain.
        outcome: What the chain answered, or None if it raised.
        error: What the chain raised, or None.
        duration: Seconds the call spent in the chain.
        profile: The profile the chain was built from.
        interrupted: The call was cancelled (the error is the cancellation).
        deep: L4: record the arguments too, redacted.

    Returns:
        A JSON-ready dict. Never an exception's text: an unexpected error is `internal_error`.
    """
    client = ctx.client
    record: dict[str, Any] = {
        "call_id": ctx.call_id,
        "profile": profile,
        "client": {
            "id": _bounded(client.client_id),
            "transport": client.transport,
            "name": _bounded(client.name),
            "version": _bounded(client.version),
            "protocol_version": _bounded(client.protocol_version),
        },
        "tool": _bounded(ctx.tool),
    }
    if client.application is not None:
        record["client"]["application"] = _bounded(client.application)
    record.update(_outcome_fields(ctx, outcome, error, interrupted=interrupted))
    record["duration_ms"] = round(duration * 1000, 3)
    if isinstance(outcome, ToolResult):
        size = outcome.output_bytes
        record.update(
            exit_code=outcome.exit_code,
            output_bytes=size if size is not None else len(outcome.text.encode("utf-8", "surrogatepass")),
            truncated=outcome.truncated,
            redactions=outcome.redactions,
            backend=getattr(outcome, "backend", None),
        )
        if outcome.checkpoint is not None:
            # What undoes the call's changes: `oct-mcp checkpoints show` and oct_undo take this id.
            record["checkpoint"] = outcome.checkpoint
        degraded = getattr(outcome, "degraded", ())
        if degraded:
            record["degraded"] = list(degraded)
        facts = outcome.consent
        if facts is not None:
            # How the call got its consent: a human now, a grant a human gave this session, or the model.
            record["consent"] = {
                "given_by": facts.given_by,
                "preview_digest": facts.preview_digest,
                "granted_folders": list(facts.granted_folders),
                "reason": facts.reason,
            }
    record["args_digest"] = argument_digest(ctx.arguments)
    if deep:
        arguments, masked = redact_value(dict(ctx.arguments))
        record["arguments"] = arguments
        record["argument_redactions"] = masked
    return record


def _outcome_fields(
    ctx: CallContext, outcome: Outcome | None, error: BaseException | None, *, interrupted: bool
) -> dict[str, Any]:
    if interrupted or (error is not None and not isinstance(error, Exception)):
        return {"outcome": "interrupted", "code": None, "message": None}
    if isinstance(error, RefusedError):
        return {"outcome": "refused", "code": error.code, "message": redact(error.message)[0]}
    if isinstance(error, OctError):
        return {"outcome": "error", "code": error.code, "message": redact(error.message)[0]}
    if error is not None:
        # The exception's text may carry anything (paths, values): only its type is recorded.
        return {
            "outcome": "error",
            "code": INTERNAL_ERROR_CODE,
            "message": f"{INTERNAL_ERROR_MESSAGE} ({type(error).__name__})",
        }
    if isinstance(outcome, ConsentRequest):
        preview = None if outcome.preview is None else outcome.preview.digest()
        return {
            "outcome": "consent_requested",
            "code": None,
            "message": None,
            "digest": outcome.digest,
            "preview_digest": preview,
            "reason": outcome.reason,
        }
    if outcome is None:
        raise RuntimeError("a call with neither an outcome nor an error")
    consent = ctx.consent
    if (
        outcome.is_error
        and consent is not None
        and not consent.approved
        and outcome.text.startswith(DECLINED_PREFIX)
    ):
        return {"outcome": "declined", "code": None, "message": None}
    return {"outcome": "error" if outcome.is_error else "ok", "code": None, "message": None}


def _bounded(value: str | None) -> str | None:
    """A name the client chose (a tool's, its own), masked, then cut: a cut secret is no longer found."""
    if value is None:
        return None
    value = redact(value)[0]
    if len(value) <= _MAX_NAME:
        return value
    return value[:_MAX_NAME] + "..."


def _build(settings: AuditSettings, runtime: LayerRuntime) -> AuditLogger:
    sink = (
        runtime.audit
        if runtime.audit is not None
        else AuditSink.from_config(runtime.config, project=runtime.workspace.root)
    )
    return AuditLogger(sink=sink, profile=runtime.profile)


LAYER: Final = LayerType(name="audit", settings=AuditSettings, build=_build)
