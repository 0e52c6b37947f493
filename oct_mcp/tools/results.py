"""What a result costs a model, and how long results are cut to a budget and paged.

Hosts that see structured content pass the model `JSON.stringify(structuredContent)` and drop the
text, so a result's size is measured as that JSON. Claude Code replaces a result over 50,000
characters with a file path: every result stays under MODEL_VIEW_BUDGET unless its tool declares
a larger figure (`ToolSpec.max_result_chars`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import BaseModel, Field

__all__ = [
    "ENVELOPE_RESERVE",
    "MODEL_VIEW_BUDGET",
    "MODEL_VIEW_MIN",
    "BudgetField",
    "OffsetField",
    "json_size",
    "model_view",
    "take_within",
]

MODEL_VIEW_BUDGET: Final = 40_000
"""Characters of a result's model view by default: under the 50,000 a host shows inline."""
MODEL_VIEW_MIN: Final = 1_000
# What a cut result's envelope (counts, next offset, the note) costs, kept free inside the budget.
ENVELOPE_RESERVE: Final = 600


def BudgetField() -> Any:  # noqa: N802 - a Field factory, named as pydantic's
    return Field(
        default=MODEL_VIEW_BUDGET,
        ge=MODEL_VIEW_MIN,
        le=MODEL_VIEW_BUDGET,
        description="Most characters of the result; past it the result is cut at a whole entry.",
    )


def OffsetField() -> Any:  # noqa: N802 - a Field factory, named as pydantic's
    return Field(default=0, ge=0, le=10_000_000, description="Entries to skip: a cut result's next_offset.")


def json_size(value: Any) -> int:
    """Characters of `value` as a host's JSON.stringify writes it (no spaces, non-ASCII as is)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def model_view(structured: Mapping[str, Any] | None, text: str) -> str:
    """What a structured-content host passes the model: the JSON when there is some, else the text."""
    if structured is None:
        return text
    return json.dumps(structured, ensure_ascii=False, separators=(",", ":"))


def take_within(entries: Iterable[BaseModel | Any], budget: int) -> tuple[list[Any], bool]:
    """The leading entries whose JSON fits in `budget` less the envelope, and whether any were left.

    Entries are whole: a result is cut between them, never inside one.
    """
    room = budget - ENVELOPE_RESERVE
    kept: list[Any] = []
    for entry in entries:
        dumped = entry.model_dump() if isinstance(entry, BaseModel) else entry
        room -= json_size(dumped) + 1
        if room < 0:
            return kept, True
        kept.append(entry)
    return kept, False
