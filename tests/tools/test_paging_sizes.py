"""A page's entries are sized as a host writes their JSON: orjson where it can, `json` where it cannot."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from oct_mcp.tools._paging.results import json_size

_TEXT = st.text(st.characters(codec="utf-8"))
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=20,
)


def _written(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


@given(_VALUES)
def test_an_entry_is_sized_as_json_writes_it(value: Any) -> None:
    assert json_size(value) == _written(value)


def test_what_orjson_refuses_is_sized_by_json() -> None:
    # A name that is no UTF-8 comes as lone surrogates; an integer past 64 bits; a key that is no string.
    for value in ({"path": "caf\udce9.txt"}, {"size": 2**70}, {1: "one"}):
        assert json_size(value) == _written(value)
