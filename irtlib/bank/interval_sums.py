"""The interval check's score intervals with a vectorised ``exp``: one C pass of three probabilities a cell.

:func:`irtlib.bank.coverage.interval_check` computes, at each of ten test lengths, the score interval
(:func:`irtlib.bank.intervals.score_interval`) of up to 200 models on the whole bank: three 2PL probabilities
a model and item (the estimate and the interval's two ends), about 120 million on a 20,000-item bank, whose
cost is the C library's scalar ``exp`` (:mod:`irtlib.bank.interval_kernel` keeps that ``exp`` so the intervals
stay the numpy path's bit for bit). ``_interval_sums.c`` (beside this module) forms the four row sums the
interval needs in one pass with glibc's vector ``exp`` (libmvec) and sums in four lanes: the same intervals
to about 1e-15 relative, not bit for bit (the check's factors, 95th percentiles rounded to four decimals,
are unchanged: ``tests/bank/test_check_kernels.py``).

Compiled like :mod:`irtlib.bank.interval_kernel`; the first :func:`load` of a process loads libmvec, compares
the sums with :func:`~irtlib.bank.intervals.score_interval`'s on cells covering the range of ``a (theta - b)``
and returns the kernel only if every interval agrees to 1e-12 relative; otherwise, without a compiler or
libmvec, or with ``IRTLIB_INTERVAL_SUMS=0``, the check uses :func:`~irtlib.bank.intervals.score_interval`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

import numpy as np

from .intervals import Z95, score_interval

__all__ = ["SOURCE", "interval", "load"]

SOURCE = Path(__file__).with_name("_interval_sums.c")

_LOADED: dict = {}       # "lib": the library or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    name = ctypes.util.find_library("mvec")
    if name is None:
        raise OSError("no libmvec (glibc's vector math library)")
    ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)          # the kernel's vector exp comes from it
    lib = ctypes.CDLL(str(path))
    i64, ptr, f64 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    lib.interval_sums.argtypes = [i64, i64, ptr, ptr, f64, ptr, ptr, i64, ptr, ptr]
    lib.interval_sums.restype = ctypes.c_int
    return lib


def interval(lib: ctypes.CDLL, a: np.ndarray, b: np.ndarray, theta: np.ndarray, se: np.ndarray, *,
             known_items: np.ndarray, known_sum: np.ndarray, filtered_sum: float, n_full: int,
             z: float = Z95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~irtlib.bank.intervals.score_interval` of many models, known items by index, no item errors.

    Parameters and returns as there (``inflation`` 1); equal to its result to about 1e-15 relative.
    """
    a, b = np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(b, dtype=np.float64)
    theta, se = np.ascontiguousarray(theta, dtype=np.float64), np.ascontiguousarray(se, dtype=np.float64)
    known = np.ascontiguousarray(known_items, dtype=np.int64)
    if known.ndim != 2 or known.shape[0] != theta.size or (known.size and known.max() >= a.size):
        raise ValueError("known_items must have one row per model and item indices below the bank's size")
    sums = np.empty((theta.size, 4))
    if lib.interval_sums(theta.size, a.size, theta.ctypes.data, se.ctypes.data, float(z), a.ctypes.data,
                         b.ctypes.data, known.shape[1], known.ctypes.data, sums.ctypes.data):
        raise MemoryError("the interval kernel could not allocate its work array")
    mid, lo, hi, var = sums.T
    spread = z * np.sqrt(var)                     # score_interval's formulas from here on
    base = np.asarray(known_sum, float) + filtered_sum
    score = (mid + base) / n_full
    half_lo = np.hypot(mid - lo, spread) / n_full
    half_hi = np.hypot(hi - mid, spread) / n_full
    return score, np.clip(score - half_lo, 0.0, 1.0), np.clip(score + half_hi, 0.0, 1.0)


def _matches(lib: ctypes.CDLL) -> bool:
    """Whether the kernel's intervals equal :func:`score_interval`'s to 1e-12 relative (and its clips exactly)."""
    rng = np.random.default_rng(20261203)
    n, m = 40, 997
    a, b = np.exp(rng.normal(0.0, 1.5, m)), rng.normal(0.0, 6.0, m)
    theta = np.concatenate([rng.uniform(-8.0, 8.0, n - 4), [-8.0, 8.0, 0.0, 700.0]])
    se = rng.uniform(0.05, 2.0, n)
    known = np.where(rng.random((n, 5)) < 0.8, rng.integers(0, m, (n, 5)), -1)
    known_sum = rng.integers(0, 5, n).astype(float)
    kwargs = {"known_items": known, "known_sum": known_sum, "filtered_sum": 3.0, "n_full": m + 10}
    with np.errstate(over="ignore"):
        got = interval(lib, a, b, theta, se, **kwargs)
        want = score_interval(a, b, theta, se, **kwargs)
    return all(np.allclose(g, w, rtol=1e-12, atol=1e-15) for g, w in zip(got, want, strict=True))


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler or libmvec, ``IRTLIB_INTERVAL_SUMS=0``, or sums unlike numpy's).

    Decided once per process.
    """
    from irtlib.calibration.fused_kernel import verified

    return verified(SOURCE, _bind, switch="IRTLIB_INTERVAL_SUMS", matches=_matches, cache=_LOADED)
