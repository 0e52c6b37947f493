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

import orjson
from pydantic import BaseModel, Field

__all__ = [
    "ENVELOPE_RESERVE",
    "MODEL_VIEW_BUDGET",
    "MODEL_VIEW_MIN",
    "BudgetField",
    "OffsetField",
    "cut_lines",
    "json_size",
    "json_string_size",
    "model_view",
    "page",
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
    )


def OffsetField() -> Any:  # noqa: N802 - a Field factory, named as pydantic's
    return Field(default=0, ge=0, le=10_000_000, description="A cut result's next_offset.")


def json_size(value: Any) -> int:
    """Characters of `value` as a host's JSON.stringify writes it (no spaces, non-ASCII as is).

    orjson writes what `json.dumps(value, ensure_ascii=False, separators=(",", ":"))` does for the
    strings, integers, lists and string-keyed objects a page holds (a float in its shortest form,
    `1e-7`, as JSON.stringify writes it), about five times sooner (a page
    sizes each entry: a paged search spent a twentieth of its time here); what it refuses (a lone
    surrogate from an undecodable name, a key that is no string) is sized by `json` as before.
    """
    try:
        dumped = orjson.dumps(value)
    except TypeError:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return len(dumped) if dumped.isascii() else len(dumped.decode("utf-8"))


def json_string_size(text: str) -> int:
    """`json_size(text)` for a string, without writing it when nothing in it needs escaping."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return len(text) + 2
    return json_size(text)


def model_view(structured: Mapping[str, Any] | None, text: str) -> str:
    """What a structured-content host passes the model: the JSON when there is some, else the text."""
    if structured is None:
        return text
    return json.dumps(structured, ensure_ascii=False, separators=(",", ":"))


def take_within(entries: Iterable[BaseModel | Any], budget: int) -> tuple[list[Any], bool]:
    """The leading entries whose JSON fits in `budget` less the envelope, and whether any were left.

    Entries are whole: a result is cut between them, never inside one. The first is kept whatever
    its size: a page without one would name its own offset as the next, and a client paging to the
    end would ask for it for ever (a match under a folder path longer than a small `max_chars`).
    """
    room = budget - ENVELOPE_RESERVE
    kept: list[Any] = []
    for entry in entries:
        dumped = entry.model_dump() if isinstance(entry, BaseModel) else entry
        room -= json_size(dumped) + 1
        if room < 0 and kept:
            return kept, True
        kept.append(entry)
    return kept, False


def page(entries: list[Any], offset: int, budget: int) -> tuple[list[Any], int | None]:
    """The entries from `offset` that fit in `budget`, and the offset of the next page (None: the last)."""
    kept, cut = take_within(entries[offset:], budget)
    return kept, offset + len(kept) if cut else None


def cut_lines(
    text: str, offset: int, budget: int, boundaries: tuple[str, ...] = ()
) -> tuple[str, int | None]:
    """Lines of `text` from line `offset` (0-based) whose JSON fits in `budget`, and the next offset.

    Past the budget the page ends before the last line that starts with one of `boundaries` (a
    file's or a hunk's header), or, with none on the page, at a whole line.
    """
    lines = text.splitlines(keepends=True)
    room = budget - ENVELOPE_RESERVE
    end = offset
    while end < len(lines):
        room -= json_size(lines[end]) - 2
        if room < 0:
            break
        end += 1
    else:
        return "".join(lines[offset:]), None
    starts = [n for n in range(offset + 1, end + 1) if lines[n].startswith(boundaries)] if boundaries else []
    end = starts[-1] if starts else max(end, offset + 1)
    return "".join(lines[offset:end]), end
