"""JSON-RPC errors the SDK builds itself, masked before they reach the client, on every transport.

The SDK answers some requests before any layer sees them: an unknown method comes back with the
method's name as `data`, a body it cannot validate with pydantic's account of it. Whatever the
client put there, its secrets stay masked.
"""

from __future__ import annotations

import re
from typing import Any, Final, cast

import mcp_types as types
from mcp.shared.message import SessionMessage

__all__ = ["MaskedErrorStream", "masked_error", "masked_error_fields"]

# pydantic quotes the input it refused as a repr cut to about 50 characters: the cut can leave half
# a secret, which no detector recognises. The value is dropped whole, up to the line's last
# `input_type=` (pydantic writes it last, so text the client put inside the repr cannot end it early).
_INPUT_VALUE: Final = re.compile(r"input_value=.*, input_type=")
_INPUT_VALUE_HIDDEN: Final = "input_value=<hidden>, input_type="


def masked_error_fields(message: str, data: Any) -> tuple[str, Any]:
    """An error's message and data with client input hidden where cut and secrets masked."""
    # Loaded at the first error, not with this module: the stdio server imports it to answer the
    # host's `initialize` while a worker thread loads the chain, the redactor included (about
    # 22 ms of that answer, `python -X importtime`).
    from oct_mcp.redaction import redact, redact_value

    if "input_value=" in message:
        message = _INPUT_VALUE.sub(_INPUT_VALUE_HIDDEN, message)
    return redact(message)[0], redact_value(data)[0]


def masked_error(message: types.JSONRPCError) -> types.JSONRPCError:
    """The error with its message and data masked (see `masked_error_fields`)."""
    error = message.error
    text, data = masked_error_fields(error.message, error.data)
    return message.model_copy(update={"error": error.model_copy(update={"message": text, "data": data})})


class MaskedErrorStream:
    """An SDK write stream, with each JSON-RPC error masked on its way out."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage, /) -> None:
        if isinstance(item.message, types.JSONRPCError):
            item = SessionMessage(message=masked_error(item.message), metadata=item.metadata)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> MaskedErrorStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return cast("bool | None", await self._inner.__aexit__(*exc_info))
