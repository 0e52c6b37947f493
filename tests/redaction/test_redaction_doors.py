"""A door a tool does not use yet but could: a progress notification's message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from oct_mcp.transports.consent_adapter import progress_reporter

pytestmark = pytest.mark.anyio


@dataclass
class _Session:
    """The SDK session's one method a reporter calls, recording what would go to the client."""

    sent: list[tuple[Any, ...]] = field(default_factory=list)

    async def send_progress_notification(self, *args: Any, **kwargs: Any) -> None:
        self.sent.append((*args, kwargs))


@dataclass
class _Request:
    session: _Session
    request_id: Any = 7
    meta: Any = None
    protocol_version: str | None = None


async def test_a_progress_message_is_masked_before_it_is_sent() -> None:
    request = _Request(session=_Session(), meta={"progress_token": "t1"})
    report = progress_reporter(request)
    assert report is not None

    await report(3.0, 10.0, "pushing with AKIAQYLPMN5HHHFPZAM2")
    await report(4.0, 10.0, None)

    assert request.session.sent == [
        ("t1", 3.0, 10.0, "pushing with [REDACTED:aws_access_key_id]", {"related_request_id": "7"}),
        ("t1", 4.0, 10.0, None, {"related_request_id": "7"}),
    ]
