"""The probabilities of :func:`irtlib.bank.intervals.score_interval` in C: one pass instead of four numpy ones.

:func:`~irtlib.bank.intervals.score_interval` evaluates the 2PL probability of every bank item for
every model at three abilities (the estimate and the interval's two ends), then zeroes the known
items and sums each row. In the interval check (:func:`irtlib.bank.coverage.interval_check`) that is
three passes over models x items at each of ten test lengths, most of the check's replay time on a
large bank. The numpy path makes four passes for each (``theta - b``, times ``a``, scipy's ``expit``,
zeroing through a mask); ``_interval_kernel.c`` (beside this module) writes each probability in
one, with the same operations in the same order, rounded alike (``exp`` the C library's, as scipy's
``expit`` calls it), and zeroes only the known cells. The row sums stay with numpy, so the score and
its interval are the numpy path's bit for bit.

Compiled like :mod:`irtlib.calibration.fused_kernel` (the same compiler, flags and per-user
directory). The first :func:`load` of a process compares the kernel's probabilities with the numpy
path's on cells spread over the whole range of ``a (theta - b)`` (overflowing ``exp`` included),
and returns the kernel only if every value is equal; otherwise, or without a compiler, or with
``IRTLIB_INTERVAL_KERNEL=0``, :func:`~irtlib.bank.intervals.score_interval` keeps its numpy path
(no warning: the numbers are the same, only slower).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
from scipy.special import expit

from irtlib.core.kernels import logit_z

__all__ = ["SOURCE", "load", "probabilities"]

SOURCE = Path(__file__).with_name("_interval_kernel.c")

_LOADED: dict = {}       # "lib": the library or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.interval_probabilities.argtypes = [i64, i64, ptr, ptr, ptr, i64, ptr, ptr]
    lib.interval_probabilities.restype = None
    return lib


def probabilities(lib: ctypes.CDLL, theta: np.ndarray, a: np.ndarray, b: np.ndarray, known: np.ndarray | None,
                  out: np.ndarray) -> np.ndarray:
    """``expit(a (theta - b))`` of every model (rows) and item (columns) into ``out``, 0 on the known cells.

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    theta : ndarray, shape (n_models,)
    a, b : ndarray, shape (n_items,)
    known : ndarray of int, shape (n_models, k), or None
        Each model's known items (-1: none).
    out : ndarray, shape (n_models, n_items), C-contiguous float64

    Returns
    -------
    ndarray
        ``out``.
    """
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    a, b = np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(b, dtype=np.float64)
    known = np.full((theta.size, 0), -1, dtype=np.int64) if known is None else \
        np.ascontiguousarray(known, dtype=np.int64)
    if out.shape != (theta.size, a.size) or not out.flags.c_contiguous or out.dtype != np.float64:
        raise ValueError("out must be a C-contiguous float64 array of shape (n_models, n_items)")
    if known.shape[0] != theta.size or (known.size and known.max() >= a.size):
        raise ValueError("known must have one row per model and item indices below the bank's size")
    lib.interval_probabilities(theta.size, a.size, theta.ctypes.data, a.ctypes.data, b.ctypes.data,
                               known.shape[1], known.ctypes.data, out.ctypes.data)
    return out


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """Whether the kernel's probabilities equal the numpy path's (``expit(logit_z(...))``, known cells 0).

    On cells covering the range of ``a (theta - b)``, with ``exp`` overflowing at both ends.
    """
    rng = np.random.default_rng(20261203)
    n, m = 64, 997
    a = np.exp(rng.normal(0.0, 1.5, m))
    b = rng.normal(0.0, 6.0, m)
    theta = np.concatenate([rng.uniform(-8.0, 8.0, n - 4), [-8.0, 8.0, 0.0, 700.0]])
    known = np.where(rng.random((n, 5)) < 0.8, rng.integers(0, m, (n, 5)), -1)
    got = probabilities(lib, theta, a, b, known, np.empty((n, m)))
    with np.errstate(over="ignore"):
        want = expit(logit_z(theta[:, None], a, b))
    rows = np.broadcast_to(np.arange(n)[:, None], known.shape)
    want[rows[known >= 0], known[known >= 0]] = 0.0
    return bool(np.array_equal(got, want))


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_INTERVAL_KERNEL=0``, or values unlike numpy's).

    Decided once per process.
    """
    from irtlib.calibration.fused_kernel import verified

    return verified(SOURCE, _bind, switch="IRTLIB_INTERVAL_KERNEL", matches=_matches_numpy, cache=_LOADED)
