"""The data addresses the library's C kernels take (ctypes), read cheaply.

Every kernel wrapper passes numpy arrays to C as their data addresses. ``arr.ctypes.data`` builds a ctypes
helper object at each read (about 1 us); the buffer protocol (``ctypes.c_char.from_buffer``) gives the same
address in about a third of that where the array is writable. The wrappers on the adaptive runs' and the MAP
engine's hot paths call their kernels thousands of times a chapter, so they read addresses here.
"""

from __future__ import annotations

import ctypes

import numpy as np

__all__ = ["address", "addresses"]


def address(arr: np.ndarray) -> int:
    """The address of a C-contiguous array's data: ``arr.ctypes.data``, by the buffer protocol where writable."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(arr))
    except (TypeError, ValueError, BufferError):
        return arr.ctypes.data


def addresses(*arrays: np.ndarray) -> tuple[int, ...]:
    """:func:`address` of each array, in order."""
    return tuple(address(arr) for arr in arrays)
