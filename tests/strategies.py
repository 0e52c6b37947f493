"""Hypothesis strategies shared by the tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from hypothesis import strategies as st

# What a careless or hostile client puts in a path: climbs, option-like names, Windows drive and
# UNC prefixes, NUL and other control characters (C0, DEL, C1), unicode that is not a control
# character, lone surrogates (legal in JSON text, yet no file name can hold U+D800), and the
# longest path allowed (joined with anything else, it is over the limit).
PATH_PIECES: Final[tuple[str, ...]] = (
    "",
    ".",
    "..",
    "...",
    "-",
    "-rf",
    "--help",
    "~",
    "C:",
    "c:x",
    "\\\\server",
    "\\",
    "/",
    "//",
    "\x00",
    "\t",
    "\n",
    "\x1b",
    "\x7f",
    "\x85",
    "\u2028",
    "\u202e",
    "é",
    "名前",
    "a b",
    "\ud800",
    "\udc80",
    "a" * 4_096,
    "." * 4_095,
)
_SEPARATORS: Final = ("/", "/", "/", "//", "\\")


@st.composite
def _joined(draw: st.DrawFn, pieces: st.SearchStrategy[str]) -> str:
    parts = draw(st.lists(pieces, min_size=1, max_size=6))
    text = parts[0]
    for part in parts[1:]:
        text += draw(st.sampled_from(_SEPARATORS)) + part
    return text


def path_texts(names: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """Path arguments as a client might send them, hostile ones included.

    Args:
        names: Names that exist on disk (files, folders, symlinks) and absolute paths
            such as the root, mixed into the pieces so paths reach real trees too.

    Returns:
        Text joined from pieces (hostile ones, `names`, printable text), or arbitrary text.
    """
    printable = st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=6)
    pieces = st.one_of(
        st.sampled_from(PATH_PIECES),
        *([st.sampled_from(tuple(names))] if names else []),
        printable,
    )
    return st.one_of(_joined(pieces), st.text())
