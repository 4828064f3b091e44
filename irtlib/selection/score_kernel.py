"""Fluid's MLE estimate in C, and maximum information's candidates: the adaptive loop's arithmetic.

:class:`irtlib.selection.estimators.MleEstimator` re-solves every model's ability on all its
administered items at every step of the adaptive test, so a test of ``K`` items evaluates about
``3 K^2 / 2`` score terms per model (SafetyBench's 3,000 items: most of the protocol's time). The
numpy path (``_MleRun._score`` inside ``_MleRun.estimate``'s vectorised Newton iteration) copies
the rows' administered cells out and makes a dozen passes over them at every evaluation;
``_mle_kernel.c`` (beside this module) reads the rows in place and writes each cell's score and
information terms in one pass, with the same operations in the same order, rounded alike, and
:class:`RowTerms` keeps them: the first evaluation of each step is at the previous step's estimate,
where every earlier item's terms are known, so only the new item's are computed.
:meth:`RowTerms.estimate` runs the whole iteration (Newton steps, halvings, the bisection
fallback) in C, model by model, summing the terms in numpy's pairwise order, so the estimates are
the numpy path's bit for bit without a dozen numpy calls and a ctypes call per Newton step. Each
evaluation still costs two ``exp`` per administered item (the logistic of ``z`` and of ``-z``, as
scipy's ``expit``): that is where the estimate's time goes now.

:func:`best_candidates` serves :class:`irtlib.selection.selectors.MaxInformation`: the exact
information of every model's cached candidates and numpy's argmax of it, in one pass.

Compiled like :mod:`irtlib.calibration.fused_kernel` (the same compiler, flags and per-user
directory). The first :func:`load` of a process compares the kernel's terms with
:func:`irtlib.selection.portable_exp.score_and_information`'s on cells spread over the whole range of
``a (theta - b)``, its row sums with numpy's on every length up to 400 and longer ones, and its
candidates' argmax with numpy's, and returns the kernel only if every number is equal; otherwise,
or without a compiler, or with ``IRTLIB_SCORE_KERNEL=0``, the estimator and the selector keep
their numpy paths (no warning: the numbers are the same, only slower).

Layer rule: part of ``selection``; imports ``calibration`` (the compiler driver) and below.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from irtlib.core.kernels import fisher_information

from .portable_exp import score_and_information

__all__ = ["SOURCE", "load", "RowTerms", "best_candidates", "radius_bounds", "numpy_radius_bounds"]

SOURCE = Path(__file__).with_name("_mle_kernel.c")
#: Added where the processor has AVX-512 (``IRTLIB_SCORE_KERNEL_AVX512=0``: not): the MLE's blocks of
#: eight cells in one vector.
AVX512_FLAGS = ("-mavx512f",)

_LOADED: dict = {}       # "lib": the library or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.mle_terms.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.mle_terms.restype = None
    lib.row_sums.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr]
    lib.row_sums.restype = None
    f64 = ctypes.c_double
    lib.mle_estimate.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, f64, f64, f64, i64, i64, i64]
    lib.mle_estimate.restype = i64
    lib.best_candidates.argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.best_candidates.restype = None
    lib.radius_bounds.argtypes = [i64, i64, i64, ptr, ptr, ptr, i64, ptr, ptr]
    lib.radius_bounds.restype = None
    return lib


def _terms(lib: ctypes.CDLL, rows: np.ndarray, theta: np.ndarray, start: np.ndarray, x: np.ndarray, a: np.ndarray,
           b: np.ndarray, t: int, g: np.ndarray, h: np.ndarray) -> None:
    """Columns ``start[i] <= j < t`` of row ``rows[i]`` of ``g`` and ``h`` (all C-contiguous float64 of one shape)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    start = np.ascontiguousarray(start, dtype=np.int64)
    lib.mle_terms(rows.size, int(t), a.shape[1], rows.ctypes.data, theta.ctypes.data, start.ctypes.data,
                  x.ctypes.data, a.ctypes.data, b.ctypes.data, g.ctypes.data, h.ctypes.data)


class RowTerms:
    """Every model's score and information terms at the ability it was last evaluated at, kept between calls.

    An adaptive test re-solves a model's ability after each new item starting from the previous
    estimate, where the last call evaluated every earlier item's terms: those are kept, and only
    the new item's are computed. A row evaluated at another ability is computed whole.

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    """

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.g = self.h = self.at = self.upto = None
        self.evaluated = 0        # diagnostics: cells whose terms :meth:`estimate` computed
        self._inputs = self._addresses = None

    def _fit(self, shape):
        if self.g is None or self.g.shape != shape:
            self.g, self.h = np.zeros(shape), np.zeros(shape)
            self.at, self.upto = np.full(shape[0], np.nan), np.zeros(shape[0], dtype=np.int64)
            self._inputs = None

    def _pointers(self, x: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[int, ...]:
        """The addresses of ``x``, ``a``, ``b`` and the kept terms, taken again only when an array changes.

        An adaptive run passes the same arrays at every step until it grows them; the arrays are held
        here with their addresses, so an address cannot outlive its array.
        """
        held = self._inputs
        if held is None or held[0] is not x or held[1] is not a or held[2] is not b:
            self._inputs = (x, a, b)
            self._addresses = tuple(arr.ctypes.data for arr in (x, a, b, self.g, self.h, self.at, self.upto))
        return self._addresses

    def sums(self, rows: np.ndarray, theta: np.ndarray, x: np.ndarray, a: np.ndarray, b: np.ndarray,
             t: int) -> tuple[np.ndarray, np.ndarray]:
        """The score ``sum a (x Q - (1 - x) P)`` and information ``sum a^2 P Q`` of ``rows`` on ``t`` items.

        Parameters
        ----------
        rows : ndarray of int, shape (n,)
        theta : ndarray, shape (n,)
        x, a, b : ndarray, shape (n_models, capacity), C-contiguous float64
            The administered responses and parameters (0 where nothing was given); columns below
            ``t`` must not change between calls.
        t : int

        Returns
        -------
        score, information : ndarray, shape (n,)
            numpy's row sums of the terms, so the numpy path's values bit for bit.
        """
        self._fit(a.shape)
        start = np.where(self.at[rows] == theta, np.minimum(self.upto[rows], t), 0)
        _terms(self.lib, rows, theta, start, x, a, b, t, self.g, self.h)
        self.at[rows], self.upto[rows] = theta, t
        return self.g[rows, :t].sum(axis=1), self.h[rows, :t].sum(axis=1)

    def estimate(self, theta: np.ndarray, x: np.ndarray, a: np.ndarray, b: np.ndarray, t: int, *, tol: float,
                 bounds: tuple[float, float], max_newton: int, max_halvings: int, max_bisection: int) -> None:
        """:meth:`irtlib.selection.estimators._MleRun.estimate` for every model, in C, ``theta`` updated in place.

        The same Newton iteration, halvings and fallback, model by model, on the same terms
        (kept between calls as :meth:`sums` keeps them) summed in numpy's order: the numpy
        path's estimates bit for bit, without a dozen numpy calls per Newton step.

        Parameters
        ----------
        theta : ndarray, shape (n_models,), C-contiguous float64
            The start (the previous estimate); overwritten with the estimate.
        x, a, b : ndarray, shape (n_models, capacity)
            As in :meth:`sums`.
        t : int
        tol, bounds, max_newton, max_halvings, max_bisection
            The estimator's settings (:class:`irtlib.selection.estimators.MleEstimator`).
        """
        self._fit(a.shape)
        lo, hi = bounds
        px, pa, pb, pg, ph, pat, pupto = self._pointers(x, a, b)
        self.evaluated += self.lib.mle_estimate(
            theta.size, int(t), a.shape[1], px, pa, pb, theta.ctypes.data, pg, ph, pat, pupto, float(tol),
            float(lo), float(hi), int(max_newton), int(max_halvings), int(max_bisection))


def best_candidates(lib: ctypes.CDLL, theta: np.ndarray, ca: np.ndarray, cb: np.ndarray,
                    used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's most informative unused candidate: the exact information, in one pass.

    :func:`irtlib.core.kernels.fisher_information` of row ``i``'s candidates at ``theta[i]``, the
    ``used`` ones set to ``-inf``, and numpy's ``argmax`` of each row (the first largest) with its
    value, without building the (rows, candidates) arrays.

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    theta : ndarray, shape (n,)
    ca, cb : ndarray, shape (n, c), C-contiguous float64
    used : ndarray of bool, shape (n, c), C-contiguous

    Returns
    -------
    k : ndarray of int, shape (n,)
    best : ndarray, shape (n,)
        The information of candidate ``k`` (-inf where every candidate is used).
    """
    n, c = ca.shape
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    k, best = np.empty(n, dtype=np.int64), np.empty(n)
    work = np.empty(c)
    lib.best_candidates(n, c, theta.ctypes.data, ca.ctypes.data, cb.ctypes.data, used.ctypes.data, k.ctypes.data,
                        best.ctypes.data, work.ctypes.data)
    return k, best


#: The most radii :func:`radius_bounds` takes (the kernel's stack arrays).
MAX_RADII = 64


def numpy_radius_bounds(base: np.ndarray, a32: np.ndarray, peak: np.ndarray, radii32: np.ndarray) -> np.ndarray:
    """``np.minimum(base + a32 * r, peak).max(axis=1)`` for every radius ``r``, shape ``(n, n_radii)``, float32.

    What :func:`radius_bounds` computes in one pass (single precision throughout; ``a32`` and
    ``peak`` of shape ``(n, m)`` or ``(m,)``).
    """
    out = np.empty((base.shape[0], radii32.size), dtype=np.float32)
    for i, r in enumerate(radii32):
        out[:, i] = np.minimum(base + a32 * r, peak).max(axis=1)
    return out


def radius_bounds(lib: ctypes.CDLL, base: np.ndarray, a32: np.ndarray, peak: np.ndarray,
                  radii32: np.ndarray) -> np.ndarray:
    """:func:`numpy_radius_bounds` in C, the same floats: one pass over the rows instead of four per radius.

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    base : ndarray of float32, shape (n, m)
        Each item's log bound at the centre (``-inf``: not a candidate for the bound).
    a32, peak : ndarray of float32, shape (n, m) or (m,)
        Discriminations and log peaks, per row or shared by every row.
    radii32 : ndarray of float32, shape (n_radii,), at most :data:`MAX_RADII`

    Returns
    -------
    ndarray of float32, shape (n, n_radii)
    """
    base = np.ascontiguousarray(base, dtype=np.float32)
    a32 = np.ascontiguousarray(a32, dtype=np.float32)
    peak = np.ascontiguousarray(peak, dtype=np.float32)
    radii32 = np.ascontiguousarray(radii32, dtype=np.float32)
    n, m = base.shape
    if a32.shape != peak.shape or a32.shape[-1] != m or (a32.ndim == 2 and a32.shape[0] != n):
        raise ValueError(f"a32 and peak must have shape ({n}, {m}) or ({m},), got {a32.shape} and {peak.shape}")
    if radii32.size > MAX_RADII:
        raise ValueError(f"at most {MAX_RADII} radii, got {radii32.size}")
    out = np.empty((n, radii32.size), dtype=np.float32)
    lib.radius_bounds(n, m, m if a32.ndim == 2 else 0, base.ctypes.data, a32.ctypes.data, peak.ctypes.data,
                      radii32.size, radii32.ctypes.data, out.ctypes.data)
    return out


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """Whether the kernel's terms are :func:`~irtlib.selection.portable_exp.score_and_information`'s, its sums numpy's.

    The terms on cells covering the range of ``a (theta - b)``, where the exponentials overflow
    too (the numpy path of ``_MleRun._score`` computes those terms, bit for bit); the row sums on every length up to
    400 and longer ones (:func:`_sums_match_numpy`).
    """
    rng = np.random.default_rng(20261202)
    n, t = 64, 997
    a = np.exp(rng.normal(0.0, 1.5, (n, t)))
    a[:, ::11] = 0.0
    b = rng.normal(0.0, 6.0, (n, t))
    x = (rng.random((n, t)) < 0.5).astype(float)
    theta = np.concatenate([rng.uniform(-8.0, 8.0, n - 4), [-8.0, 8.0, 0.0, 700.0]])
    g, h = np.empty((n, t)), np.empty((n, t))
    _terms(lib, np.arange(n), theta, np.zeros(n, dtype=np.int64), x, a, b, t, g, h)
    g0, h0 = score_and_information(x, theta[:, None], a, b)
    used = rng.random((n, t)) < 0.3
    used[-1] = True                                         # a row with every candidate used
    k, best = best_candidates(lib, theta, a, b, used)
    info = np.where(used, -np.inf, fisher_information(theta[:, None], a, b))
    k0 = np.argmax(info, axis=1)
    same_pick = np.array_equal(k, k0) and np.array_equal(best, info[np.arange(n), k0])
    return (bool(np.array_equal(g, g0) and np.array_equal(h, h0)) and same_pick and _sums_match_numpy(lib, rng)
            and _bounds_match_numpy(lib, rng))


def _bounds_match_numpy(lib: ctypes.CDLL, rng: np.random.Generator) -> bool:
    """Whether :func:`radius_bounds` equals :func:`numpy_radius_bounds`, per-row and shared parameters alike."""
    n, m = 16, 301
    radii = np.array([0.001, 0.003, 0.01, 0.03, 0.1, 0.3], dtype=np.float32)
    base = np.log(rng.random((n, m)).astype(np.float32) * np.exp(rng.normal(0.0, 3.0, (n, m))).astype(np.float32))
    base[rng.random((n, m)) < 0.2] = -np.inf
    a32 = np.exp(rng.normal(0.0, 1.0, (n, m))).astype(np.float32)
    peak = np.log(a32 * a32 / np.float32(4.0))
    return all(np.array_equal(radius_bounds(lib, base, a, p, radii), numpy_radius_bounds(base, a, p, radii))
               for a, p in ((a32, peak), (a32[0], peak[0])))


#: Row lengths the loader checks the sums on: every one up to three blocks of numpy's pairwise
#: summation (128 values), and longer ones, odd and even, up to a long test's.
_SUM_LENGTHS = (*range(0, 400), 511, 512, 513, 1000, 1023, 1025, 2047, 2999, 3001, 4097, 6007, 11435)


def _sums_match_numpy(lib: ctypes.CDLL, rng: np.random.Generator) -> bool:
    """Whether the kernel's row sums equal numpy's ``sum(axis=1)`` on :data:`_SUM_LENGTHS`.

    Values of widely different magnitudes and both signs, so that any other order of the
    additions rounds differently; one row and three rows at each length.
    """
    for n in _SUM_LENGTHS:
        for n_rows in (1, 3):
            g = rng.normal(size=(n_rows, n)) * np.exp(rng.normal(0.0, 6.0, (n_rows, n)))
            h = rng.normal(size=(n_rows, n)) * np.exp(rng.normal(0.0, 6.0, (n_rows, n)))
            sg, sh = np.empty(n_rows), np.empty(n_rows)
            lib.row_sums(n_rows, n, n, g.ctypes.data, h.ctypes.data, sg.ctypes.data, sh.ctypes.data)
            if not (np.array_equal(sg, g.sum(axis=1)) and np.array_equal(sh, h.sum(axis=1))):
                return False
    return True


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_SCORE_KERNEL=0``, or terms unlike numpy's).

    Decided once per process. Where the processor has AVX-512, a build with :data:`AVX512_FLAGS` is
    tried first and kept if it passes the same check; otherwise the default build (four lanes with AVX2).
    """
    from irtlib.calibration.fused_kernel import cpu_flags, verified

    if "lib" not in _LOADED and "avx512f" in cpu_flags() and os.environ.get("IRTLIB_SCORE_KERNEL_AVX512", "1") != "0":
        # eight cells per instruction instead of four (the MLE's terms in about 0.73 of the time): the
        # same operations lane by lane, so the same numbers, which the loader's check confirms before use
        wide = verified(SOURCE, _bind, switch="IRTLIB_SCORE_KERNEL", matches=_matches_numpy, cache={},
                        extra_flags=AVX512_FLAGS)
        if wide is not None:
            _LOADED["lib"] = wide
    return verified(SOURCE, _bind, switch="IRTLIB_SCORE_KERNEL", matches=_matches_numpy, cache=_LOADED)
