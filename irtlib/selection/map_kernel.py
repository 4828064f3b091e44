"""Fluid's MAP estimate in C: the Taylor-moment Newton of every model of a step in one call.

:class:`irtlib.selection.estimators.MapEstimator` re-finds every model's MAP ability (paper, section
"Adaptive selection (Algorithm 1)": "update theta_hat by MAP on all responses so far") after each
administered item by a damped Newton on the Taylor moments of the score
(``_MapRun._estimate_taylor``). In numpy each Newton iteration is about twenty calls on arrays of
a few rows and ten columns (the powers ``d^n``, three einsums, the clipping and the stopping
test), so with 100 models a step costs about 0.4 ms of call overhead. ``_map_kernel.c`` (beside
this module) runs the same iteration, model by model, with the same operations in the same order:

- the powers ``d^n`` are repeated products in the numpy path's order
  (:func:`irtlib.selection.estimators._taylor_terms`: 1, then each power the previous times ``d``),
  IEEE products, so the same bits on every machine (numpy's ``power`` is not correctly rounded and
  depends on the processor);
- the einsums ``"ij,ij->i"`` are numpy's summation order for two contiguous rows (two lanes,
  blocks of eight products, see the C file);
- re-centring a model (one exact pass over its items, numpy and BLAS) stays in Python: the
  kernel returns the models to re-centre before an iteration, and is called again after;
- the moments' power tables (``_powers``: each power the previous times the value) are one C
  pass (:func:`powers`) instead of one numpy pass per power; their product with the
  derivative polynomials stays numpy's ``matmul`` (BLAS, whose rounding is its own).

So the estimates are the numpy path's bit for bit. The first :func:`load` of a process compares
the kernel with numpy's einsum on random rows and, through the estimator's check, with the numpy
path on random adaptive runs (estimates, information, the models re-centred, at every step), and
returns it only if every number is equal; otherwise, or without a compiler, or with
``IRTLIB_MAP_KERNEL=0``, the estimator keeps its numpy path (no warning: the numbers are the
same, only slower).

Layer rule: part of ``selection``; imports ``calibration`` (the compiler driver).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from irtlib.core.c_arrays import address as _address

__all__ = ["SOURCE", "load", "newton", "powers", "push", "recentre", "einsum_rows"]

SOURCE = Path(__file__).with_name("_map_kernel.c")

_LOADED: dict = {}


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr, f64 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    lib.map_newton.argtypes = [i64, ptr, ptr, i64, *[ptr] * 5, ptr, ptr, ptr, ptr, ptr,
                               f64, f64, f64, f64, f64, f64, f64, f64, i64]
    lib.map_newton.restype = i64
    lib.map_einsum_rows.argtypes = [i64, i64, ptr, i64, ptr, i64, ptr]
    lib.map_einsum_rows.restype = None
    lib.map_powers.argtypes = [i64, i64, ptr, ptr]
    lib.map_powers.restype = None
    lib.map_push_columns.argtypes = [i64, i64, i64, *[ptr] * 10]
    lib.map_push_columns.restype = None
    lib.map_push_moments.argtypes = [i64, i64, ptr, ptr, ptr]
    lib.map_push_moments.restype = None
    lib.map_recentre_powers.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, i64, ptr]
    lib.map_recentre_powers.restype = None
    lib.map_recentre_moments.argtypes = [i64, i64, i64, i64, *[ptr] * 6]
    lib.map_recentre_moments.restype = None
    return lib


def einsum_rows(lib: ctypes.CDLL, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The kernel's ``np.einsum("ij,ij->i", x, y)`` (rows contiguous, any row stride)."""
    n, count = x.shape
    out = np.empty(n)
    ptr = ctypes.c_void_p
    lib.map_einsum_rows(n, count, ptr(x.ctypes.data), x.strides[0] // 8, ptr(y.ctypes.data), y.strides[0] // 8,
                        out.ctypes.data)
    return out


def powers(lib: ctypes.CDLL, v: np.ndarray, n: int) -> np.ndarray:
    """:func:`irtlib.selection.estimators._powers` in one pass: ``v, v^2, ..., v^n`` along a new last axis."""
    v = np.ascontiguousarray(v, dtype=np.float64)
    out = np.empty(v.shape + (n,))
    lib.map_powers(v.size, n, _address(v), _address(out))
    return out


def push(lib: ctypes.CDLL, run: Any, a: np.ndarray, b: np.ndarray, x: np.ndarray, expit: Callable) -> None:
    """``run._push``'s Taylor update in two C passes around numpy's ``expit`` and ``matmul``: the same numbers.

    ``run`` is a :class:`irtlib.selection.estimators._MapRun` with Taylor moments (its arrays C-contiguous);
    ``a, b, x`` the new item's parameters and response per model (no NaN: masked before). Writes column
    ``run.t`` of ``A, B, X, AB``, adds ``a x`` to ``sax`` and the item's moments at ``theta_r`` to ``M``
    (``map_push_columns``, then ``expit`` and the powers' ``matmul`` with the derivative polynomials, which
    stay numpy's and BLAS's, then ``map_push_moments``); ``amax`` and ``t`` are left to the caller.
    """
    n = a.size
    a, b, x = (np.ascontiguousarray(v, dtype=np.float64) for v in (a, b, x))
    mine = (run.A, run.B, run.X, run.AB, run.sax, run.theta_r, run.M)
    kept = getattr(run, "_push_arrays", None)
    if kept is None or any(u is not v for u, v in zip(kept[0], mine, strict=True)):
        kept = run._push_arrays = (mine, tuple(v.ctypes.data for v in mine))   # fixed between steps: their addresses
    A, B, X, AB, sax, theta_r, M = kept[1]
    z = np.empty(n)
    lib.map_push_columns(n, run.t, run.A.shape[1], _address(a), _address(b), _address(x), A, B, X, AB, sax, theta_r,
                         _address(z))
    deriv = powers(lib, expit(z)[:, None], run.spow.size) @ run.coef
    lib.map_push_moments(n, run.M.shape[1], _address(deriv), _address(a), M)


def recentre(lib: ctypes.CDLL, run: Any, rows: np.ndarray, theta: np.ndarray) -> None:
    """``run._recentre``'s exact pass in two C passes around numpy's ``matmul``: the same moments, bit for bit.

    ``run`` is a :class:`irtlib.selection.estimators._MapRun` with Taylor moments (its ``A``, ``AB``, ``M`` and
    ``theta_r`` C-contiguous float64); ``rows`` distinct models, ``theta`` their abilities. For each model's items
    given so far, ``map_recentre_powers`` makes the logistic's powers at ``theta`` (``expit``: the C library's
    ``exp`` as scipy's; the powers repeated products as :func:`powers`'), numpy's ``matmul`` with the derivative
    polynomials makes the derivatives (BLAS, as before), and ``map_recentre_moments`` multiplies them by the powers
    of ``a`` and sums them over the items as numpy's ``sum(axis=-2)`` does, into ``M[rows]``, with
    ``theta_r[rows] = theta``. (``run.recentred`` is left to the caller.)
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    n, t, ld, ns = rows.size, run.t, run.A.shape[1], run.spow.size
    S = np.empty((n, t, ns))
    at_rows, at_theta = _address(rows), _address(theta)
    lib.map_recentre_powers(n, t, ld, at_rows, at_theta, run.A.ctypes.data, run.AB.ctypes.data, ns, _address(S))
    deriv = S @ run.coef
    lib.map_recentre_moments(n, t, ld, deriv.shape[-1], at_rows, at_theta, _address(deriv), run.A.ctypes.data,
                             run.M.ctypes.data, run.theta_r.ctypes.data)


def newton(lib: ctypes.CDLL, run: Any, theta: np.ndarray, info: np.ndarray) -> np.ndarray:
    """``run._estimate_taylor``'s Newton loop in C; ``theta`` and ``info`` updated in place.

    ``run`` is a :class:`irtlib.selection.estimators._MapRun` (not imported here: the estimators
    import this module); the models to re-centre are
    re-centred by ``run._recentre`` (numpy) between calls. Returns the models that did not
    converge within ``max_newton`` iterations (sorted).
    """
    n = theta.size
    work = getattr(run, "_newton_work", None)
    if work is None or not work.serves(run, n):
        work = run._newton_work = _Work(lib, run, n)
    act, far, state = work.act, work.far, work.state
    act[:] = work.order
    state[:] = (n, -1, 0)
    th, inf = _address(theta), _address(info)
    while True:
        k = lib.map_newton(n, th, inf, *work.fixed)
        if k == 0:
            return act[:state[0]].astype(np.intp)
        rows = far[:k].astype(np.intp)
        run._recentre(rows, theta[rows])


class _Work:
    """A run's buffers for :func:`newton` and the kernel's arguments that do not change between steps.

    The run's moment arrays are updated in place (never re-allocated), so their addresses are kept.
    """

    def __init__(self, lib, run, n):
        e = run.e
        self.n, self.order = n, np.arange(n, dtype=np.int64)
        self.act, self.prev, self.far = (np.empty(n, dtype=np.int64) for _ in range(3))
        self.state, self.terms = np.empty(3, dtype=np.int64), np.empty(run.M.shape[1])
        self.arrays = (run.M, run.sax, run.theta_r, run.amax, run.invfact)   # kept alive
        self.fixed = (run.M.shape[1], *(a.ctypes.data for a in self.arrays), self.act.ctypes.data,
                      self.prev.ctypes.data, self.state.ctypes.data, self.far.ctypes.data, self.terms.ctypes.data,
                      e.prior_mean, 1.0 / e.prior_sd ** 2, e.max_step, e.bounds[0], e.bounds[1], e.tol,
                      0.2 * e.tol, e.radius, e.max_newton)

    def serves(self, run, n: int) -> bool:
        """Whether these addresses are ``run``'s arrays (not a copied run's) for ``n`` models."""
        mine = (run.M, run.sax, run.theta_r, run.amax, run.invfact)
        return self.n == n and all(a is b for a, b in zip(self.arrays, mine, strict=True))


def _dots_match_numpy(lib: ctypes.CDLL) -> bool:
    """The kernel's dots equal ``np.einsum("ij,ij->i")`` on random rows of several lengths and strides."""
    rng = np.random.default_rng(20261204)
    for n, count in [(50, 9), (7, 8), (5, 1), (5, 2), (6, 3), (4, 17), (3, 16)]:
        x = rng.normal(size=(n, count + 2)) * 10.0 ** rng.integers(-6, 6, size=(n, count + 2))
        y = rng.normal(size=(n, count))
        if not np.array_equal(einsum_rows(lib, x[:, 1:-1], y), np.einsum("ij,ij->i", x[:, 1:-1], y)):
            return False
    return True


def load(runs_match: Callable[[ctypes.CDLL], bool]) -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_MAP_KERNEL=0``, or unlike the numpy path).

    ``runs_match(lib)`` is the estimator's own check (:func:`irtlib.selection.estimators.map_kernel_matches`:
    the C and numpy paths side by side on random runs); the dots are checked here. Decided once per process.
    """
    from irtlib.calibration.fused_kernel import verified

    return verified(SOURCE, _bind, switch="IRTLIB_MAP_KERNEL", cache=_LOADED,
                    matches=lambda lib: _dots_match_numpy(lib) and runs_match(lib))
