"""The masking both transports give the SDK's own errors: secrets masked, pydantic's cut reprs hidden."""

from __future__ import annotations

import mcp_types as types
import pytest
from pydantic import ValidationError

from oct_mcp.transports.error_masking import masked_error, masked_error_fields

KEY_ID = "AKIAQYLPMN5HHHFPZAM2"


def validation_text(document: object) -> str:
    with pytest.raises(ValidationError) as raised:
        types.jsonrpc_message_adapter.validate_python(document)
    return str(raised.value)


def test_a_repr_pydantic_cut_mid_secret_is_hidden_whole() -> None:
    text = validation_text({"jsonrpc": "2.0", "id": 3, "method": KEY_ID, "params": 5})
    assert KEY_ID[-8:] in text  # what pydantic shows: the secret's tail, which no detector knows

    message, _ = masked_error_fields(f"Validation error: {text}", None)

    assert KEY_ID[-8:] not in message
    assert "input_value=<hidden>, input_type=dict]" in message
    assert "Field required [type=missing" in message


def test_text_inside_the_repr_cannot_end_the_hidden_span_early() -> None:
    # A client can put pydantic's own marker in a value; the repr then shows it before the cut tail.
    crafted = f"{{'m': ', input_type=x] ...{KEY_ID[-9:]}'}}"
    line = f"  Field required [type=missing, input_value={crafted}, input_type=dict]"

    message, _ = masked_error_fields(line, None)

    assert message == "  Field required [type=missing, input_value=<hidden>, input_type=dict]"


def test_an_error_keeps_its_code_and_id_and_masks_message_and_data() -> None:
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=2,
        error=types.ErrorData(code=-32601, message=f"no {KEY_ID}", data={"method": f"tools/{KEY_ID}"}),
    )

    masked = masked_error(error)

    assert (masked.id, masked.error.code) == (2, -32601)
    assert masked.error.message == "no [REDACTED:aws_access_key_id]"
    assert masked.error.data == {"method": "tools/[REDACTED:aws_access_key_id]"}
