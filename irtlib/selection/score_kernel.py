"""Fluid's MLE score terms in C: one pass over the administered cells instead of a dozen numpy ones.

:class:`irtlib.selection.estimators.MleEstimator` re-solves every model's ability on all its
administered items at every step of the adaptive test, so a test of ``K`` items evaluates about
``3 K^2 / 2`` score terms per model (SafetyBench's 3,000 items: most of the protocol's time). The
numpy path (``_MleRun._score``) copies the rows' administered cells out and makes a dozen passes over
them; ``_mle_kernel.c`` (beside this module) reads the rows in place and writes each cell's score and
information terms in one pass, with the same operations in the same order, rounded alike. The row
sums stay with numpy, so the score and its slope are the numpy path's bit for bit.

Compiled like :mod:`irtlib.calibration.fused_kernel` (the same compiler, flags and per-user
directory). The first :func:`load` of a process compares the kernel's terms with
:func:`irtlib.core.kernels.score_and_information`'s on cells spread over the whole range of
``a (theta - b)``, and returns the kernel only if every term is equal; otherwise, or without a
compiler, or with ``IRTLIB_FUSED_KERNEL=0``, the estimator keeps its numpy path (no warning: the numbers
are the same, only slower).

Layer rule: part of ``selection``; imports ``calibration`` (the compiler driver) and below.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from irtlib.core.kernels import score_and_information

__all__ = ["SOURCE", "load", "score_terms"]

SOURCE = Path(__file__).with_name("_mle_kernel.c")

_LOADED: dict = {}       # "lib": the library or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.mle_terms.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.mle_terms.restype = None
    return lib


def score_terms(lib: ctypes.CDLL, rows: np.ndarray, theta: np.ndarray, x: np.ndarray, a: np.ndarray, b: np.ndarray,
                t: int, g: np.ndarray, h: np.ndarray | None) -> None:
    """Write the terms of ``rows`` (of the C-contiguous ``x``, ``a``, ``b``) over their first ``t`` columns.

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    rows : ndarray of int64, shape (n,)
    theta : ndarray of float64, shape (n,)
    x, a, b : ndarray of float64, shape (n_models, capacity), C-contiguous
    t : int
        Administered steps (``t <= capacity``).
    g, h : ndarray of float64, shape (n, t), C-contiguous
        Receive the score and information terms (``h`` None: not computed).
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    lib.mle_terms(rows.size, int(t), x.shape[1], rows.ctypes.data, theta.ctypes.data, x.ctypes.data,
                  a.ctypes.data, b.ctypes.data, g.ctypes.data, None if h is None else h.ctypes.data)


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """Whether the kernel's terms equal :func:`irtlib.core.kernels.score_and_information`'s.

    On cells covering the range of ``a (theta - b)``; the numpy path of ``_MleRun._score`` computes
    those terms, bit for bit.
    """
    rng = np.random.default_rng(20261202)
    n, t = 64, 997
    a = np.exp(rng.normal(0.0, 1.5, (n, t)))
    a[:, ::11] = 0.0
    b = rng.normal(0.0, 6.0, (n, t))
    x = (rng.random((n, t)) < 0.5).astype(float)
    theta = np.concatenate([rng.uniform(-8.0, 8.0, n - 4), [-8.0, 8.0, 0.0, 700.0]])
    g, h = np.empty((n, t)), np.empty((n, t))
    score_terms(lib, np.arange(n), theta, x, a, b, t, g, h)
    g0, h0 = score_and_information(x, theta[:, None], a, b)
    return bool(np.array_equal(g, g0) and np.array_equal(h, h0))


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_FUSED_KERNEL=0``, or terms unlike numpy's).

    Decided once per process.
    """
    if "lib" not in _LOADED:
        lib = None
        if os.environ.get("IRTLIB_FUSED_KERNEL", "1") != "0":
            from irtlib.calibration.fused_kernel import compile_kernel

            try:
                lib = _bind(compile_kernel(source=SOURCE))
            except OSError:
                lib = None
            if lib is not None and not _matches_numpy(lib):
                lib = None
        _LOADED["lib"] = lib
    return _LOADED["lib"]
