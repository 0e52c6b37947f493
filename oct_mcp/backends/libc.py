"""The C library, loaded once for every backend module: each `ctypes.CDLL` builds its own function
classes (about 14 us), which the sandbox's per-run path paid several times a spawn."""

from __future__ import annotations

import ctypes
from functools import cache

__all__ = ["libc"]


@cache
def libc() -> ctypes.CDLL:
    """The process's C library, with errno kept per thread (`ctypes.get_errno`). Nobody sets
    `argtypes` or `restype` on it: every caller shares its functions."""
    return ctypes.CDLL(None, use_errno=True)
