"""Kept masks: what checking that every secret put back is masked again costs an oct_edit.

Goal (issue 29): the check redacts the new text once more, so an edit of a file with secrets
costs at most twice what it did without the check. One oct_edit plan (read, mask, edit the view,
put the secrets back, diff) on a 200 KiB settings file with 400 secrets, side by side in one run:
with the check, and with the check made a no-op. Then the check alone against the redaction of
the old text that every such edit already makes (`masked`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from _common import Comparison, arguments, interleave, print_table

from oct_mcp.deadline import Deadline
from oct_mcp.tools._text import masks
from oct_mcp.tools.edit.edit_strings import EditParams, propose_edit
from oct_mcp.workspace import Workspace

SECRETS: Final = 400


def _settings() -> str:
    lines = []
    for n in range(SECRETS):
        lines.append(f'DB_PASSWORD_{n} = "Zq8vR2mK9xL4pT7w{n:04d}"\n')
        lines.extend(f"OPTION_{n}_{k} = {k}  # an ordinary setting, for bulk\n" for k in range(8))
    return "".join(lines)


def _timed(call: Callable[[], object]) -> Callable[[], float]:
    def measure() -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    return measure


def main() -> None:
    options = arguments(__doc__ or "", default_rounds=15)
    check = masks._ensure_masked_again  # the one function measured against a no-op
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        text = _settings()
        (root / "settings.py").write_text(text)
        workspace = Workspace(root)
        params = EditParams.model_validate(
            {"path": "settings.py", "edits": [{"old": "DB_PASSWORD_7 =", "new": "DATABASE_PASSWORD_7 ="}]}
        )
        seen = masks.masked(text)
        new_text, _kept = masks.unmask(seen, seen.view.replace("DB_PASSWORD_7 =", "DATABASE_PASSWORD_7 ="))
        put_back = [
            masks._PutBack(found.start, found.end, found.kind, 1) for found in masks.redact(new_text)[1]
        ]

        def edit_with_check() -> None:
            masks._ensure_masked_again = check
            propose_edit(workspace, params, Deadline.unlimited())

        def edit_without_check() -> None:
            masks._ensure_masked_again = lambda _text, _put_back: None
            try:
                propose_edit(workspace, params, Deadline.unlimited())
            finally:
                masks._ensure_masked_again = check

        measures = [
            _timed(edit_with_check),
            _timed(edit_without_check),
            _timed(lambda: check(new_text, put_back)),
            _timed(lambda: masks.masked(text)),
        ]
        with_check, without_check, alone, masking = interleave(options.rounds, measures)
    print_table(
        [
            Comparison(
                f"oct_edit plan, 200 KiB, {SECRETS} secrets kept: with the check / without",
                with_check,
                without_check,
                2.0,
            ),
            Comparison("the check alone / masking the old text (its floor)", alone, masking, 1.5),
        ],
        options.rounds,
    )


if __name__ == "__main__":
    main()
