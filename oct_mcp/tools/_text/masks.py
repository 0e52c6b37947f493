"""The file as the model saw it, secrets masked; and the way back from an edited view to the real text.

A model reads a settings file as `SECRET_KEY = "[REDACTED:secret]"` and writes back what it saw.
Written as it is, the mask would replace the secret. So an edit is made to the view, and the
masks in the result are put back to what they stand for, by place: a mask on a line the edit
left alone, or matched character by character inside a line it changed, is the same secret; a
mask anywhere else (moved to another line, or put where the file had none) stands for nothing
the model was shown, and the change is refused.

A secret kept by place may still be read back in clear: its line renamed (`DB_PASSWORD = "[...]"`
to `note = "[...]"`), moved into a comment, or the line above that named it changed. So the new
text is redacted as a read of the written file would be, and each secret put back must be masked
again, whole and as the same kind, or the change is refused. Every write that puts a secret back
does it through `unmask`, which makes that check itself: no write tool can leave it out.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from oct_mcp.deadline import CheckedMatcher, Deadline
from oct_mcp.errors import SecretUnmaskedError
from oct_mcp.redaction import KINDS, Finding, mask, redact
from oct_mcp.tools._text.lines import split_lines

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
    kinds: tuple[str | None, ...]
    """The kind of the secret each mask of the view stands for; None where the text had the mask."""
    secrets: int

    @property
    def has_secrets(self) -> bool:
        return self.secrets > 0


def masked(text: str) -> MaskedText:
    """`text` as the redactor shows it, with what each of the view's masks stands for."""
    view, findings = redact(text)
    secret_at: dict[int, Finding] = {}
    shift = 0
    for finding in sorted(findings, key=lambda found: found.start):
        secret_at[finding.start + shift] = finding
        shift += len(mask(finding.kind)) - (finding.end - finding.start)
    originals: list[str] = []
    kinds: list[str | None] = []
    for found in _ANY_MASK.finditer(view):
        secret = secret_at.get(found.start())
        originals.append(found.group() if secret is None else text[secret.start : secret.end])
        kinds.append(None if secret is None else secret.kind)
    return MaskedText(
        real=text, view=view, originals=tuple(originals), kinds=tuple(kinds), secrets=len(findings)
    )


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
        SecretUnmaskedError: A secret put back would be read in clear where it now stands, or
            masked as another kind (its name or the context that marked it changed).
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
    pieces: list[str] = []
    put_back: list[_PutBack] = []
    position = 0
    length = 0
    for place, mask_id in zip(_ANY_MASK.finditer(new_view), assigned, strict=True):
        kind = None if mask_id is None else old.kinds[mask_id]
        original = place.group() if mask_id is None else old.originals[mask_id]
        before = new_view[position : place.start()]
        pieces.append(before)
        length += len(before)
        if kind is not None:
            line = new_view.count("\n", 0, place.start()) + 1
            put_back.append(_PutBack(length, length + len(original), kind, line))
        pieces.append(original)
        length += len(original)
        position = place.end()
    pieces.append(new_view[position:])
    new_text = "".join(pieces)
    _ensure_masked_again(new_text, put_back)
    return new_text, len(put_back)


@dataclass(frozen=True, slots=True)
class _PutBack:
    """A secret put back: where it stands in the new text, its kind, its line in the new view."""

    start: int
    end: int
    kind: str
    line: int


def _ensure_masked_again(new_text: str, put_back: list[_PutBack]) -> None:
    """Refuse unless a read of `new_text` masks each secret put back, whole, as the same kind.

    The redaction runs on the whole new text, as a read of the written file does: a secret's mask
    may depend on a name or a line far from it (`- name: DB_PASSWORD` above `value: ...`, a PEM
    armour), which the edit may have changed though the secret's own line is as it was.

    Raises:
        SecretUnmaskedError: The first secret that would not be masked so, by its line in the view.
    """
    if not put_back:
        return
    _view, findings = redact(new_text)
    starts = [finding.start for finding in findings]
    for secret in put_back:
        index = bisect.bisect_right(starts, secret.start) - 1
        cover = findings[index] if index >= 0 else None
        if cover is not None and cover.end >= secret.end and cover.kind == secret.kind:
            continue
        where = f"line {secret.line} of the new text: the secret behind [REDACTED:{secret.kind}]"
        if cover is not None and cover.start <= secret.start and cover.end >= secret.end:
            raise SecretUnmaskedError(
                f"{where} would be read back as [REDACTED:{cover.kind}] there: a kept mask keeps its "
                "kind, so keep the name that marks it as it was, or write the value yourself instead of "
                "the mask; nothing was changed"
            )
        after = findings[index + 1] if index + 1 < len(findings) else None
        covered = (cover is not None and cover.end > secret.start) or (
            after is not None and after.start < secret.end
        )
        partly = " partly" if covered else ""
        raise SecretUnmaskedError(
            f"{where} would be read back{partly} in clear there: what marked it as a secret (the name "
            "it is assigned to, or a line around it) is changed or gone, so a read of the written file "
            "would not mask it. Keep the name or lines that mark it as a secret, or write the value "
            "yourself instead of the mask; nothing was changed"
        )


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
