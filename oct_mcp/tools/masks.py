"""The file as the model saw it, secrets masked; and the way back from an edited view to the real text.

A model reads a settings file as `SECRET_KEY = "[REDACTED:secret]"` and writes back what it saw.
Written as it is, the mask would replace the secret. So an edit is made to the view, and the
masks in the result are put back to what they stand for, by place: a mask on a line the edit
left alone, or matched character by character inside a line it changed, is the same secret; a
mask anywhere else (moved to another line, or put where the file had none) stands for nothing
the model was shown, and the change is refused.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from oct_mcp.deadline import CheckedMatcher, Deadline
from oct_mcp.redaction import KINDS, mask, redact
from oct_mcp.tools.files import split_lines

__all__ = ["MaskError", "MaskedText", "carries_masks", "kept_note", "masked", "unmask"]

# Longest first: no mask text is a prefix of another, but the order must not matter either way.
_ANY_MASK: Final = re.compile(
    "|".join(re.escape(mask(kind)) for kind in sorted(KINDS, key=len, reverse=True))
)
_CHECK_EVERY: Final = 1_024


class MaskError(Exception):
    """A mask in the new text stands for no secret at that place; the message says where and why."""


@dataclass(frozen=True, slots=True)
class MaskedText:
    """A text and its view: the view has a mask where the text has a secret."""

    real: str
    view: str
    originals: tuple[str, ...]
    """What each mask of the view stands for, in order: a secret, or the mask itself where the text
    already had one written out."""
    secrets: int

    @property
    def has_secrets(self) -> bool:
        return self.secrets > 0


def masked(text: str) -> MaskedText:
    """`text` as the redactor shows it, with what each of the view's masks stands for."""
    view, findings = redact(text)
    secret_at: dict[int, str] = {}
    shift = 0
    for finding in sorted(findings, key=lambda found: found.start):
        secret_at[finding.start + shift] = text[finding.start : finding.end]
        shift += len(mask(finding.kind)) - (finding.end - finding.start)
    originals = tuple(secret_at.get(found.start(), found.group()) for found in _ANY_MASK.finditer(view))
    return MaskedText(real=text, view=view, originals=originals, secrets=len(findings))


def carries_masks(text: str) -> bool:
    return _ANY_MASK.search(text) is not None


def kept_note(kept: int) -> str:
    """What a result says when masked values were kept: the diff shows masks, the disk keeps secrets."""
    if not kept:
        return ""
    return (
        f"; {kept} masked value(s) kept: the diff shows [REDACTED:...] where the real values stay as "
        "they are on disk"
    )


def unmask(old: MaskedText, new_view: str, deadline: Deadline | None = None) -> tuple[str, int]:
    """The real text for `new_view`, an edit of `old.view`: each kept mask back to its secret.

    Args:
        old: The text before the edit, and its view.
        new_view: The edited view, as the model wrote it.
        deadline: Checked as the views are compared.

    Returns:
        The real new text, and how many secrets it keeps behind masks.

    Raises:
        MaskError: A mask where the old view has none at that place (put there, or moved).
        ToolTimeoutError: The deadline passed.
    """
    if not carries_masks(new_view):
        return new_view, 0
    old_lines, new_lines = split_lines(old.view), split_lines(new_view)
    old_ids = _mask_ids(old_lines)
    new_masks = [len(_ANY_MASK.findall(line)) for line in new_lines]
    assigned: list[int | None] = []
    matcher = CheckedMatcher(old_lines, new_lines, deadline)
    for turn, (tag, i1, i2, j1, j2) in enumerate(matcher.get_opcodes()):
        if deadline is not None and not turn % _CHECK_EVERY:
            deadline.check()
        if not sum(new_masks[j1:j2]):
            continue
        if tag == "equal":
            for i in range(i1, i2):
                assigned.extend(old_ids[i])
            continue
        block_ids = [mask_id for ids in old_ids[i1:i2] for mask_id in ids]
        for row, mask_id in _matched_in_block(old_lines[i1:i2], block_ids, new_lines[j1:j2]):
            if mask_id is None:
                raise MaskError(
                    f"line {j1 + row + 1} of the new text has a mask ([REDACTED:...]) where the file has no "
                    "masked value at that place: a mask stands for a secret you were not shown, so it can "
                    "only stay where it was read. Keep that line's mask where it was, or write a real value"
                )
            assigned.append(mask_id)
    kept = 0
    pieces: list[str] = []
    position = 0
    for place, mask_id in zip(_ANY_MASK.finditer(new_view), assigned, strict=True):
        original = old.originals[mask_id] if mask_id is not None else place.group()
        kept += original != place.group()
        pieces.append(new_view[position : place.start()])
        pieces.append(original)
        position = place.end()
    pieces.append(new_view[position:])
    return "".join(pieces), kept


def _mask_ids(lines: list[str]) -> list[list[int | None]]:
    """For each line, the ordinals in the whole text of the masks on it."""
    ids: list[list[int | None]] = []
    counter = 0
    for line in lines:
        count = len(_ANY_MASK.findall(line))
        ids.append(list(range(counter, counter + count)))
        counter += count
    return ids


def _tokens(text: str) -> list[str]:
    """Characters, and each mask as one token: a mask matches only a whole mask."""
    tokens: list[str] = []
    position = 0
    for found in _ANY_MASK.finditer(text):
        tokens.extend(text[position : found.start()])
        tokens.append(found.group())
        position = found.end()
    tokens.extend(text[position:])
    return tokens


def _matched_in_block(
    old_block: list[str], old_ids: list[int | None], new_block: list[str]
) -> Iterator[tuple[int, int | None]]:
    """(row in the new block, the old mask it keeps or None) for each mask of the new block, in order.

    Inside lines the edit changed, a mask is kept where the characters around it line up with the
    old lines': `KEY = "[REDACTED:secret]"` edited to `API_KEY = "[REDACTED:secret]"` keeps it.
    """
    old_tokens = _tokens("".join(old_block))
    new_text = "".join(new_block)
    new_tokens = _tokens(new_text)
    old_ordinal = {}
    seen = 0
    for index, token in enumerate(old_tokens):
        if len(token) > 1:
            old_ordinal[index] = old_ids[seen]
            seen += 1
    kept: dict[int, int | None] = {}
    for tag, i1, i2, j1, _j2 in difflib.SequenceMatcher(
        None, old_tokens, new_tokens, autojunk=False
    ).get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                if len(old_tokens[i1 + offset]) > 1:
                    kept[j1 + offset] = old_ordinal[i1 + offset]
    row = 0
    for index, piece in enumerate(new_tokens):
        if piece == "\n":
            row += 1
        elif len(piece) > 1:
            yield row, kept.get(index)
