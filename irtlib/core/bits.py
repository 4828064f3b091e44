"""Bit-for-bit equality of float arrays: the load checks' and the kept tables' test of "the same numbers"."""

from __future__ import annotations

import numpy as np

__all__ = ["same_bits"]


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    """Float64 arrays of one shape, equal bit for bit, but that a NaN may carry another sign or payload.

    No arithmetic can tell two NaNs apart, so a kernel that gives NaN where numpy does agrees with it; every
    other value, the sign of a zero included, must have the same bits.
    """
    x, y = np.ascontiguousarray(x, dtype=np.float64), np.ascontiguousarray(y, dtype=np.float64)
    if x.shape != y.shape:
        return False
    nan = np.isnan(x)
    return bool(np.array_equal(nan, np.isnan(y)) and np.array_equal(x[~nan].view(np.int64), y[~nan].view(np.int64)))
