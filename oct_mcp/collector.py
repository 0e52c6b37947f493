"""The cyclic garbage collector, held back while oct-mcp imports itself and builds its server."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused(*, freeze: bool = False) -> Iterator[None]:
    """No cyclic collection inside; the caller's own setting afterwards (an embedder's included).

    With `freeze`, everything the process holds at the end is moved out of the collector's reach
    for good (`gc.freeze`): the collection that would follow walks none of it, nor does any later
    full collection, a pause of 30 to 60 ms in the middle of some call otherwise. It touches every
    object of the process, so only the long-lived server asks for it, once it is built; never an import.
    What became garbage while collection waited is frozen too (about 0.9 MB, once): collecting it
    first would cost the start-up about 47 ms.

    Importing oct-mcp builds about a hundred pydantic models and the tool catalog on top of the
    SDK's 550 models, and the collector, run by allocation counts, walks them over and over while
    they are built: 120 ms of a server's 860 ms of imports, in 30 collections (measured with
    `gc.callbacks`). Nothing built there is garbage, so collection waits until it is done.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
        if freeze:
            gc.freeze()
    finally:
        if collecting:
            gc.enable()
