"""Estimators of the adaptive-testing engine: the ability (or score) after the items given so far.

One small class per estimator, each with ``begin(items, n_models, capacity, theta0)`` returning a
*run* that holds the administered items of many models at once:

==========================  =====================================================================
estimator                   after each item
==========================  =====================================================================
:class:`MapEstimator`       posterior mode, Normal prior (the paper, section "Model: 2PL"); for the
                            2PL the fast path (Taylor moments, warm start), for the 3PL
                            :func:`irtlib.map_ability` with ``c``, for other unidimensional item
                            models the mode on a fine grid
:class:`MleEstimator`       the maximum-likelihood ability in [-8, 8] as the authors' released
                            Fluid runs it (2PL)
:class:`EapEstimator`       the posterior mean (and SD) on a grid: any item model, several dimensions
:class:`MeanScoreEstimator` the share of safe responses (the Random baseline; no ability)
==========================  =====================================================================

A run has ``push(j, x)`` (each model's item ``j``, -1 for none, and response ``x``, NaN for none),
``estimate()`` -> ``(value, ability)`` (``value`` is what a trajectory records; ``ability`` is
what an adaptive selector reads, None for the mean score), ``start()`` (the ability before any
item), ``standard_error()`` and ``covariance()`` (``(n_models, D, D)``).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from scipy.special import expit

from irtlib._typing import ArrayLike
from irtlib.core.ability import THETA_BOUNDS, check_prior, map_ability
from irtlib.core.eap import EAP_POINTS
from irtlib.core.kernels import fisher_information, probability, score_and_information
from irtlib.core.quadrature import posterior_weights
from irtlib.errors import InputError

from . import ability_kernel, map_kernel, score_kernel
from .ability_kernel import map_row_sums
from .items import ItemModel, TwoPLItems
from .portable_exp import portable_expit_pair

__all__ = ["Estimator", "EstimatorRun", "MapEstimator", "MleEstimator", "EapEstimator", "MeanScoreEstimator"]

# ``np.einsum`` without ``optimize`` is this call after a Python-level dispatch (the same result, bit
# for bit); the Taylor Newton below makes three per iteration on a few rows, where the dispatch counted.
# numpy's private module is ``numpy._core`` from 2.0 only (pyproject allows 1.26): np.einsum otherwise.
_c_einsum = getattr(getattr(getattr(np, "_core", None), "multiarray", None), "c_einsum", np.einsum)


class EstimatorRun(Protocol):
    """One test's estimates for many models (see the module docstring)."""

    def push(self, j: np.ndarray, x: np.ndarray) -> None:
        """Add one administered item per model (``j`` -1 or ``x`` NaN: none)."""

    def estimate(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(value, ability)`` after the items pushed so far (ability None if not IRT)."""


class Estimator(Protocol):
    """An estimator. ``provides_ability`` says whether it gives a theta a selector can use."""

    provides_ability: bool

    def begin(self, items: ItemModel, n_models: int, capacity: int, theta0: ArrayLike) -> EstimatorRun:
        """Start estimating ``n_models`` models (room for ``capacity`` items, grown on demand) from ``theta0``."""
        ...


def _grow(arrays, need):
    """The same arrays with at least ``need`` columns (doubling), the new columns zero."""
    cols = max(need, 2 * arrays[0].shape[1])
    return tuple(np.concatenate([arr, np.zeros((arr.shape[0], cols - arr.shape[1]), arr.dtype)], axis=1)
                 for arr in arrays)


def _unidimensional(items, who):
    if getattr(items, "dims", 1) != 1:
        raise InputError(f"{who} needs a unidimensional item model; for {items!r} use EapEstimator()")


# ---------------------------------------------------------------------------- mean score
class MeanScoreEstimator:
    """Share of safe responses among the items given so far (the Random baseline's score).

    NaN for a model with no response yet. It gives no ability, so it cannot drive
    :class:`~irtlib.selection.selectors.MaxInformation`.
    """

    provides_ability = False

    def begin(self, items: ItemModel, n_models: int, capacity: int = 0, theta0: ArrayLike = 0.0) -> _MeanRun:
        """Start estimating ``n_models`` models (the items, ``capacity`` and ``theta0`` are not needed)."""
        return _MeanRun(n_models)

    def __repr__(self) -> str:
        return "MeanScoreEstimator()"


class _MeanRun:
    def __init__(self, n_models):
        self.safe = np.zeros(n_models)
        self.seen = np.zeros(n_models)

    def push(self, j, x):
        self.push_block(np.asarray(j)[:, None], np.asarray(x, dtype=float)[:, None])

    def push_block(self, j, x):
        """Several items per model at once: arrays of shape (n_models, m)."""
        obs = (j >= 0) & ~np.isnan(x)
        self.safe += np.where(obs, x, 0.0).sum(axis=1)
        self.seen += obs.sum(axis=1)

    def estimate(self):
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.seen > 0, self.safe / self.seen, np.nan), None

    def start(self):
        return None

    def standard_error(self):
        """No ability, no standard error: NaN."""
        return np.full(self.seen.size, np.nan)


# ---------------------------------------------------------------------------- MAP
class MapEstimator:
    """MAP ability (Normal prior) on the items given so far, warm-started (see module notes).

    Parameters
    ----------
    prior_mean, prior_sd, max_step, bounds
        As in :func:`irtlib.map_ability` (the paper: 0, 1, 1.0 and [-8, 8]).
    tol : float
        A model has converged when its last Newton step was below ``tol`` (as in
        :func:`irtlib.map_ability`). Newton converges quadratically, so the estimate is then
        within about ``tol**2`` of the mode.
    max_newton : int
        Newton iterations before a model is handed to :func:`irtlib.map_ability`.
    order, radius : int, float
        Speed-up of the score and information sums (see Notes).

    Notes
    -----
    The score ``sum_s a_s (x_s - P_s(theta))`` and the information ``sum_s a_s^2 P_s (1 - P_s)``
    of ``t`` items cost ``t`` logistic evaluations each time Newton evaluates them. Instead,
    every model keeps the Taylor moments ``M_n = sum_s a_s^(n+1) sigma^(n)(a_s (theta_r - b_s))``
    (``n <= order + 1``) around a reference ``theta_r``, updated in O(order) per new item; the
    sums at ``theta = theta_r + d`` are then polynomials in ``d``. The logistic function is
    analytic and bounded by 1 in modulus within ``pi / 2`` of the real axis, so by Cauchy's
    estimate each item's truncation error is below ``q^(order+1) / (1 - q)`` with
    ``q = 2 a_s |d| / pi``. A model is re-centred (one exact pass over its items) whenever
    ``max_s a_s |d|`` exceeds ``radius``; with the defaults (8, 0.1) ``q^9 < 3e-11``, far
    below ``tol``, so the result is the exact mode for every practical purpose (the tests check
    agreement with :func:`irtlib.map_ability` to 1e-7). ``order=0`` switches this off: every
    Newton iteration is an exact pass.
    """

    provides_ability = True

    def __init__(self, *, prior_mean: float = 0.0, prior_sd: float = 1.0, tol: float = 1e-8,
                 max_step: float = 1.0, bounds: tuple[float, float] = THETA_BOUNDS, max_newton: int = 50,
                 order: int = 8, radius: float = 0.1, n_points: int = EAP_POINTS):
        self.prior_mean, self.prior_sd, self.bounds = check_prior(prior_mean, prior_sd, bounds)
        self.tol, self.max_step = float(tol), float(max_step)
        self.max_newton = int(max_newton)
        self.order, self.radius, self.n_points = int(order), float(radius), int(n_points)
        if self.order < 0 or self.radius <= 0:
            raise InputError("order must be >= 0 and radius > 0")

    def begin(self, items: ItemModel, n_models: int, capacity: int, theta0: ArrayLike = 0.0) -> EstimatorRun:
        """Start estimating ``n_models`` models, every model from ``theta0``.

        2PL items: the fast run (see Notes). 3PL items: every estimate is
        :func:`irtlib.map_ability` with ``c`` on the items given so far, warm-started from the
        previous one. Other unidimensional item models (graded): the posterior mode on an
        ``n_points`` grid over [-8, 8], refined by a parabola through the best point and its
        neighbours, with ``SE = 1 / sqrt(I(theta) + 1 / prior_sd^2)``.
        """
        _unidimensional(items, "MapEstimator")
        capacity = max(int(capacity), 1)
        if isinstance(items, TwoPLItems):
            if items.c is not None:
                return _GuessingMapRun(self, items, n_models, capacity, theta0)
            return _MapRun(self, items, n_models, capacity, theta0)
        return _GridRun(items, n_models, theta0, prior_mean=self.prior_mean, prior_sd=self.prior_sd,
                        n_points=self.n_points, mode=True)

    def __repr__(self) -> str:
        return (f"MapEstimator(prior_mean={self.prior_mean}, prior_sd={self.prior_sd}, tol={self.tol}, "
                f"order={self.order})")


_UNDECIDED = object()


def map_kernel_matches(lib: object) -> bool:
    """Whether :mod:`irtlib.selection.map_kernel`'s Newton gives the numpy path's numbers on random runs.

    Five random adaptive runs (1 to 64 models with per-model parameters, 12 to 30 items, 5% missing
    responses, a random ``max_newton``), each pushed and estimated by both paths side by side: every
    estimate, information, moment array and re-centring count must be equal. ``map_kernel.load``'s check.
    """
    rng = np.random.default_rng(20261205)
    for n_models, n_items, spread in [(1, 25, 0.5), (3, 30, 1.0), (40, 30, 1.0), (17, 30, 3.0), (64, 12, 0.2)]:
        a = rng.lognormal(0.0, 0.6 * spread, (n_models, n_items))
        b = rng.normal(0.0, 1.5 * spread, (n_models, n_items))
        x = (rng.random((n_models, n_items)) < probability(rng.normal(0.0, 1.5, n_models)[:, None], a, b)).astype(float)
        x[rng.random(x.shape) < 0.05] = np.nan
        order = np.argsort(rng.random((n_models, n_items)), axis=1)
        est = MapEstimator(max_newton=int(rng.integers(3, 51)))
        runs = [_MapRun(est, TwoPLItems(a, b), n_models, n_items, 0.0) for _ in range(2)]
        runs[0]._kernel, runs[1]._kernel = None, lib
        rows = np.arange(n_models)
        for t in range(n_items):
            j = order[:, t]
            out = [r.push(j, x[rows, j]) or r.estimate() for r in runs]
            if not (np.array_equal(out[0][0], out[1][0], equal_nan=True)
                    and np.array_equal(runs[0].info, runs[1].info, equal_nan=True)
                    and np.array_equal(runs[0].M, runs[1].M) and runs[0].recentred == runs[1].recentred):
                return False
    return True


def exact_newton_matches(lib: object) -> bool:
    """Whether :func:`irtlib.selection.ability_kernel.newton_rows` gives the exact pass's loop's numbers on random runs.

    ``MapEstimator(order=0)``'s Python loop on the kernel's row sums (which the kernel's own check compares with
    numpy's pass) against the C Newton, side by side on random adaptive runs (shared and per-model items, missing
    responses, steep items, priors, few Newton steps so that some models go to ``map_ability``, far starts),
    estimated after each block of items: every estimate, information and ability compared, with the sign of zero.
    ``ability_kernel.newton_library``'s check.
    """
    from .ability_kernel import row_sums

    prepare = row_sums(lib)
    rng = np.random.default_rng(20261205)
    for case in range(12):
        n_models, capacity = int(rng.integers(1, 25)), int(rng.integers(1, 40))
        shape = (n_models, capacity) if case % 2 else (capacity,)
        a = rng.lognormal(0.0, 1.0, shape) * (25.0 if case % 5 == 0 else 1.0)
        b = rng.normal(0.0, 2.0, shape)
        x = (rng.random((n_models, capacity)) < 0.6).astype(float)
        x[rng.random(x.shape) < 0.1] = np.nan
        est = MapEstimator(order=0, max_newton=[50, 3, 1, 0][case % 4], prior_mean=float(rng.normal(0.0, 0.5)),
                           prior_sd=float(rng.uniform(0.5, 2.0)), max_step=[1.0, 4.0][case % 2])
        theta0 = rng.normal(0.0, 4.0, n_models)
        runs = [_MapRun(est, TwoPLItems(a, b), n_models, capacity, theta0) for _ in range(2)]
        runs[0]._exact, runs[1]._exact = lib, None
        order = np.argsort(rng.random((n_models, capacity)), axis=1)
        done = 0
        while done < capacity:
            m = int(rng.integers(1, capacity - done + 1))
            j = order[:, done:done + m]
            for r in runs:
                r.push_block(j, np.take_along_axis(x, j, axis=1))
            done += m
            got, want = runs[0].estimate(), runs[1]._estimate_exact(runs[1]._exact_sums(prepare))
            for g, w in ((got[0], want[0]), (runs[0].info, runs[1].info), (runs[0].theta, runs[1].theta)):
                if not (np.array_equal(g, w, equal_nan=True) and np.array_equal(np.signbit(g), np.signbit(w))):
                    return False
    return True


def _sigmoid_derivative_polys(n_max: int) -> list[np.ndarray]:
    """Coefficients (increasing powers of s) of ``sigma^(n)`` as a polynomial in ``s = sigma``."""
    polys = [np.array([0.0, 1.0])]
    ds = np.array([0.0, 1.0, -1.0])          # d sigma / dz = s - s^2
    for _ in range(n_max):
        polys.append(np.polynomial.polynomial.polymul(np.polynomial.polynomial.polyder(polys[-1]), ds))
    return polys


def _powers(v: np.ndarray, n: int) -> np.ndarray:
    """``v, v^2, ..., v^n`` along a new last axis, each the previous times ``v``.

    The products of ``np.cumprod`` over ``n`` copies of ``v``, bit for bit, in ``n - 1`` passes over
    ``v`` instead of an accumulation per element (that was slow along a short last axis).
    """
    out = np.empty(v.shape + (n,))
    out[..., 0] = v
    for i in range(1, n):
        np.multiply(out[..., i - 1], v, out=out[..., i])
    return out


def _taylor_terms(d: np.ndarray, invfact: np.ndarray) -> np.ndarray:
    """The Taylor terms ``d^n / n!`` (``n = 0 .. invfact.size - 1``) of each value of ``d``, shape (d.size, n).

    The powers are repeated products (``1``, then each power the previous times ``d``: one correctly
    rounded IEEE product each, so the same bits on every machine), each times ``1 / n!``; the C
    kernel (:mod:`irtlib.selection.map_kernel`) multiplies in the same order. numpy's ``power`` is not
    correctly rounded and its results depend on the processor (SVML's on AVX-512, where a negative
    base also takes a slow path).
    """
    k = invfact.size
    terms = np.empty((d.size, k))
    terms[:, 0] = 1.0
    if k > 1:
        terms[:, 1] = d
    for i in range(2, k):
        np.multiply(terms[:, i - 1], d, out=terms[:, i])
    terms *= invfact
    return terms


class _MapRun:
    """Compact per-model arrays of the administered items and a warm-started Newton."""

    def __init__(self, est: MapEstimator, items, n_models, budget, theta0):
        self.e, self.items = est, items
        self.theta0 = np.broadcast_to(np.asarray(theta0, float), (n_models,)).astype(float)
        self.A = np.zeros((n_models, budget))     # a of the item given (0: no response)
        self.AB = np.zeros((n_models, budget))    # a * b
        self.B = np.zeros((n_models, budget))
        self.X = np.zeros((n_models, budget))     # response (0 where none; a = 0 there)
        self.sax = np.zeros(n_models)             # sum of a * x: the score's data term
        self.t = 0
        self.theta = np.clip(np.broadcast_to(np.asarray(theta0, float), (n_models,)).astype(float),
                             *est.bounds)
        self.info = np.zeros(n_models)            # likelihood information at theta
        self.fresh = True                         # theta / info are those after the previous item
        self.taylor = est.order > 0
        self.recentred = 0                        # diagnostics: exact passes (model count)
        self._kernel = _UNDECIDED                 # map_kernel's library (None: numpy), decided at the first estimate
        self._exact = _UNDECIDED                  # order 0: ability_kernel's library for the Newton (None: the loop)
        if self.taylor:
            polys = _sigmoid_derivative_polys(est.order + 1)
            self.coef = np.zeros((len(polys[-1]) - 1, len(polys)))   # s^1.. x derivative order
            for n, c in enumerate(polys):
                self.coef[:len(c) - 1, n] = c[1:]                    # no constant terms
            self.spow = np.arange(1, self.coef.shape[0] + 1, dtype=float)
            self.apow = np.arange(1, len(polys) + 1, dtype=float)
            invfact = 1.0 / np.cumprod(np.r_[1.0, np.arange(1, est.order + 1)])     # 1 / n!
            # score and information polynomials in d: rows 0 and 1 of coef_d pick M_n and M_(n+1)
            self.invfact = invfact
            self.theta_r = self.theta.copy()
            self.M = np.zeros((n_models, len(polys)))
            self.amax = np.zeros(n_models)

    # -- Taylor moments --------------------------------------------------------------------
    def _moments(self, a, s):
        """``sum over the last axis of a^(n+1) sigma^(n)(z)`` (``s = sigma(z)``), n = 0..order+1."""
        lib = self._kernel
        if lib is None or lib is _UNDECIDED:
            deriv = _powers(s, self.spow.size) @ self.coef             # sigma^(n)(z), (..., j, n)
            deriv *= _powers(a, self.apow.size)
        else:                                                       # the same products in one C pass each
            deriv = map_kernel.powers(lib, s, self.spow.size) @ self.coef
            deriv *= map_kernel.powers(lib, a, self.apow.size)
        return deriv.sum(axis=-2)

    def _recentre(self, rows, theta):
        lib = self._kernel
        if lib is not None and lib is not _UNDECIDED and self._contiguous():
            map_kernel.recentre(lib, self, rows, theta)       # the same numbers in two C passes (map_kernel)
            self.recentred += rows.size
            return
        t = self.t
        A = self.A[rows, :t]
        s = expit(A * theta[:, None] - self.AB[rows, :t])
        self.M[rows] = self._moments(A, s)
        self.theta_r[rows] = theta
        self.recentred += rows.size

    def push(self, j, x):
        """One administered item per model: ``j`` (-1: none) and the response ``x`` (NaN: none)."""
        a, b, _ = self.items.at(j)
        self._ensure(1)
        self._push(a, b, np.where(j >= 0, x, np.nan))

    def push_block(self, j, x):
        """Several items per model at once: ``j`` and ``x`` of shape (n_models, m)."""
        a, b, _ = self.items.at(j)
        self._ensure(j.shape[1])
        self._push_block(a, b, np.where(j >= 0, x, np.nan))

    def _ensure(self, m):
        """Room for ``m`` more items (a resumed session may outgrow its first budget)."""
        if self.t + m > self.A.shape[1]:
            self.A, self.AB, self.B, self.X = _grow((self.A, self.AB, self.B, self.X), self.t + m)

    def _push(self, a, b, x):
        if np.isnan(x).any():
            obs = ~np.isnan(x)
            a, b, x = np.where(obs, a, 0.0), np.where(obs, b, 0.0), np.where(obs, x, 0.0)
        t = self.t
        lib = self._kernel
        if self.taylor and lib is not None and lib is not _UNDECIDED and self._contiguous():
            map_kernel.push(lib, self, a, b, x, expit)        # the same numbers in two C passes (map_kernel)
            np.maximum(self.amax, a, out=self.amax)
            self.fresh = False
            self.t += 1
            return
        self.A[:, t], self.B[:, t], self.X[:, t] = a, b, x
        self.AB[:, t] = a * b
        self.sax += a * x
        if self.taylor:
            s = expit(a * (self.theta_r - b))
            self.M += self._moments(a[:, None], s[:, None])
            np.maximum(self.amax, a, out=self.amax)
        elif self.fresh:
            # Predictor: the score of the previous posterior is ~0 at theta, so the new score is
            # the new item's residual; one capped Newton step from there (O(1) per model).
            g, i = score_and_information(x, self.theta, a, b)
            h = self.info + i + 1.0 / self.e.prior_sd ** 2
            step = np.clip(g / h, -self.e.max_step, self.e.max_step)
            self.theta = np.clip(self.theta + step, *self.e.bounds)
        self.fresh = False
        self.t += 1

    def _contiguous(self) -> bool:
        """Whether the arrays :func:`irtlib.selection.map_kernel.push` writes are C-contiguous float64 (always here)."""
        return all(v.flags.c_contiguous and v.dtype == np.float64
                   for v in (self.A, self.B, self.X, self.AB, self.sax, self.theta_r, self.M))

    def _push_block(self, a, b, x):
        if np.isnan(x).any():
            obs = ~np.isnan(x)
            a, b, x = np.where(obs, a, 0.0), np.where(obs, b, 0.0), np.where(obs, x, 0.0)
        t, m = self.t, x.shape[1]
        sl = slice(t, t + m)
        self.A[:, sl], self.B[:, sl], self.X[:, sl] = a, b, x
        self.AB[:, sl] = a * b
        self.sax += (a * x).sum(axis=1)
        if self.taylor:
            s = expit(a * (self.theta_r[:, None] - b))
            self.M += self._moments(a, s)
            np.maximum(self.amax, a.max(axis=1), out=self.amax)
        self.fresh = False
        self.t += m

    def _grad_info(self, theta):
        """Log-posterior score and likelihood information at ``theta`` (all models)."""
        e, t = self.e, self.t
        prior = (theta - e.prior_mean) / e.prior_sd ** 2
        if not self.taylor:           # exact pass (cells without a response have a = 0: no term)
            g, i = score_and_information(self.X[:, :t], theta[:, None], self.A[:, :t], self.B[:, :t])
            return g.sum(axis=1) - prior, i.sum(axis=1)
        terms = self._terms(theta)
        M = self.M
        return self.sax - (M[:, :-1] * terms).sum(axis=1) - prior, (M[:, 1:] * terms).sum(axis=1)

    def _exact_sums(self, prepare=None):
        """The exact pass's C row sums over the administered cells, or None (Taylor model, or no kernel).

        :func:`irtlib.selection.ability_kernel.map_row_sums` (or ``prepare``, a :func:`~irtlib.selection.
        ability_kernel.row_sums` of a library); None leaves :meth:`_grad_info`'s numpy pass.
        """
        if self.taylor or self.t == 0:
            return None
        prepare = map_row_sums() if prepare is None else prepare
        if prepare is None:
            return None
        t = self.t
        # every cell counted: a cell without a response has a = 0 and x = 0, whose terms (-0.0 and 0.0) are the
        # numpy pass's, which sums them too
        return prepare(self.X[:, :t], np.ones((self.X.shape[0], t), dtype=bool), self.A[:, :t], self.B[:, :t])

    def _kernel_grad_info(self, sums, theta, done):
        """:meth:`_grad_info`'s exact pass by the C row sums (numpy's sums bit for bit).

        Only for the models not ``done`` (the Newton loop reads no other's: 0 there).
        """
        e = self.e
        prior = (theta - e.prior_mean) / e.prior_sd ** 2
        if not done.any():
            score, info = sums(None, theta)
            return score - prior, info
        rows = np.flatnonzero(~done)
        g, h = np.zeros(theta.size), np.zeros(theta.size)
        score, info = sums(rows, theta[rows])
        g[rows], h[rows] = score - prior[rows], info
        return g, h

    def _terms(self, theta):
        """``d^n / n!`` with ``d = theta - theta_r``, re-centring first the models ``radius`` away."""
        d = theta - self.theta_r
        far = self.amax * np.abs(d) > self.e.radius
        if far.any():
            rows = np.flatnonzero(far)
            self._recentre(rows, theta[rows])
            d[rows] = 0.0
        return _taylor_terms(d, self.invfact)

    def estimate(self):
        if self.taylor:
            return self._estimate_taylor()
        if self._exact is _UNDECIDED:      # IRTLIB_EXACT_NEWTON_KERNEL=0: the Python loop (on the C sums if they load)
            self._exact = ability_kernel.newton_library(exact_newton_matches)
        if self._exact is not None and self.t > 0 and self._exact_contiguous():
            return self._estimate_exact_kernel(self._exact)
        return self._estimate_exact(self._exact_sums())

    def _exact_contiguous(self) -> bool:
        """Whether the arrays :func:`irtlib.selection.ability_kernel.newton_rows` reads are C float64 (always here)."""
        return all(v.flags.c_contiguous and v.dtype == np.float64 and v.shape == self.X.shape
                   for v in (self.X, self.A, self.B)) and self.theta.shape == (self.X.shape[0],)

    def _estimate_exact_kernel(self, lib):
        """:meth:`_estimate_exact`'s Newton on the C row sums, every model's steps in one C call: the same numbers.

        (:func:`irtlib.selection.ability_kernel.newton_rows`; the models it leaves unconverged go to
        :meth:`_finish` as the loop's do.)
        """
        e = self.e
        theta = np.array(self.theta, dtype=np.float64, order="C")
        info = np.array(np.broadcast_to(self.info, theta.shape), dtype=np.float64, order="C")
        done = ability_kernel.newton_rows(lib, self.X, self.A, self.B, self.t, theta, info, prior_mean=e.prior_mean,
                                          prior_var=e.prior_sd ** 2, inv_var=1.0 / e.prior_sd ** 2,
                                          max_newton=e.max_newton, max_step=e.max_step, tol=e.tol, lo=e.bounds[0],
                                          hi=e.bounds[1])
        if e.max_newton > 0:
            self.info = info
        return self._finish(theta, done)

    def _estimate_exact(self, sums):
        """The exact pass's Newton loop (``order=0``): every model not converged one step at a time.

        ``sums``: :meth:`_exact_sums`' C row sums, or None (numpy's pass, :meth:`_grad_info`).
        """
        e = self.e
        lo, hi = e.bounds
        inv_var = 1.0 / e.prior_sd ** 2
        theta = self.theta
        done = np.zeros(theta.size, dtype=bool)
        for _ in range(e.max_newton):
            g, h = self._grad_info(theta) if sums is None else self._kernel_grad_info(sums, theta, done)
            new = np.clip(theta + np.clip(g / (h + inv_var), -e.max_step, e.max_step), lo, hi)
            moved = np.abs(new - theta)
            theta = np.where(done, theta, new)                     # converged models stay put
            info = h if not done.any() else np.where(done, self.info, h)
            self.info = info
            done |= moved < e.tol
            if done.all():
                break
        return self._finish(theta, done)


    def _finish(self, theta, done):
        """Models that Newton left unconverged get the full algorithm (bisection fallback)."""
        if not done.all():
            e, rows, t = self.e, np.flatnonzero(~done), self.t
            fit = map_ability(self.X[rows, :t], self.A[rows, :t], self.B[rows, :t],
                              prior_mean=e.prior_mean, prior_sd=e.prior_sd, theta0=theta[rows],
                              max_step=e.max_step, tol=e.tol, bounds=e.bounds)
            theta = theta.copy()
            theta[rows] = fit.theta
            self.info = self.info.copy()
            self.info[rows] = 1.0 / fit.se ** 2 - 1.0 / e.prior_sd ** 2
        self.theta, self.fresh = theta, True
        return theta.copy(), theta

    def _estimate_taylor(self):
        """Damped Newton on the Taylor model of the score (see :class:`MapEstimator`).

        A model stops when its last step was below ``tol`` or when the step just taken
        predicts a next step below ``tol / 10`` (quadratic convergence: the next step is about
        ``|H'| s^2 / (2 H)`` after a step ``s``, with ``H`` the posterior information), which
        saves the confirming iteration; the estimate is then within about ``tol / 10`` of the
        mode.

        Each iteration evaluates only the models still moving (a stopped model's estimate and
        information stay as they were); the models that stopped at the previous iteration are
        still re-centred if their last step took them ``radius`` away, as when every model was
        evaluated at every iteration, so the moments, and every estimate, are the same bit for bit.
        """
        e = self.e
        lo, hi = e.bounds
        inv_var = 1.0 / e.prior_sd ** 2
        cap = e.max_step
        n = self.theta.size
        theta, info = self.theta.copy(), np.array(self.info, dtype=float, copy=True)
        if info.shape != theta.shape:
            info = np.broadcast_to(info, theta.shape).copy()
        if self._kernel is _UNDECIDED:
            self._kernel = map_kernel.load(map_kernel_matches)
        if self._kernel is not None:      # the same iteration in C, the same numbers (map_kernel)
            act = map_kernel.newton(self._kernel, self, theta, info)
            self.info = info
            done = np.ones(n, dtype=bool)
            done[act] = False
            return self._finish(theta, done)
        act, prev, keep = np.arange(n), None, None   # the models still moving; before the last stops, which moved on
        for _ in range(e.max_newton):
            whole = act.size == n
            th = theta if whole else theta[act]
            terms = self._terms_of(act, th, prev, keep, theta)              # d^n / n!
            M = self.M if whole else self.M[act]
            sax = self.sax if whole else self.sax[act]
            g = sax - _c_einsum("ij,ij->i", M[:, :-1], terms) - (th - e.prior_mean) * inv_var
            h = _c_einsum("ij,ij->i", M[:, 1:], terms)
            dh = _c_einsum("ij,ij->i", M[:, 2:], terms[:, :-1])     # d information / d theta
            hp = h + inv_var
            raw = g / hp
            new = np.minimum(np.maximum(th + np.minimum(np.maximum(raw, -cap), cap), lo), hi)
            moved = np.abs(new - th)
            theta[act], info[act] = new, h
            stop = (moved < e.tol) | ((np.abs(dh) * raw * raw < 0.2 * e.tol * hp) & (np.abs(raw) < cap)
                                      & (new > lo) & (new < hi))
            prev, keep = act, ~stop
            act = act[keep]
            if not act.size:
                break
        self.info = info
        done = np.ones(n, dtype=bool)
        done[act] = False
        return self._finish(theta, done)

    def _terms_of(self, act, th, prev, keep, theta):
        """:meth:`_terms` of the models ``act`` (abilities ``th``), re-centring also those that just stopped.

        ``prev`` (sorted) are the models of the previous iteration and ``keep`` which of them still
        move (``act = prev[keep]``; None at the first iteration). The models far from their reference
        among ``prev`` (at ``theta``) are re-centred in one call, in row order, exactly those that
        :meth:`_terms` of every model would re-centre (the other models have not moved since their
        last check).
        """
        if prev is None or act.size == prev.size:
            return self._terms(th) if act.size == self.theta_r.size else self._terms_rows(act, th)
        d = theta[prev] - self.theta_r[prev]
        far = self.amax[prev] * np.abs(d) > self.e.radius
        if far.any():
            rows = prev[far]
            self._recentre(rows, theta[rows])
            d[far] = 0.0
        d = d[keep]
        return _taylor_terms(d, self.invfact)

    def _terms_rows(self, rows, th):
        """:meth:`_terms` of the models ``rows`` only (abilities ``th``)."""
        d = th - self.theta_r[rows]
        far = self.amax[rows] * np.abs(d) > self.e.radius
        if far.any():
            sub = rows[far]
            self._recentre(sub, th[far])
            d[far] = 0.0
        return _taylor_terms(d, self.invfact)

    # -- what the engine reads ------------------------------------------------------------------
    def start(self):
        """The ability the first item is chosen at: ``theta0``."""
        return self.theta0.copy()

    def _information_at(self, theta):
        """The likelihood information at ``theta`` (Taylor moments near their reference, else an exact pass)."""
        t = self.t
        if not self.taylor:
            return fisher_information(theta[:, None], self.A[:, :t], self.B[:, :t]).sum(axis=1)
        d = theta - self.theta_r
        far = self.amax * np.abs(d) > self.e.radius
        terms = _taylor_terms(np.where(far, 0.0, d), self.invfact)
        info = np.einsum("ij,ij->i", self.M[:, 1:], terms)
        if far.any():
            rows = np.flatnonzero(far)
            info[rows] = fisher_information(theta[rows, None], self.A[rows, :t], self.B[rows, :t]).sum(axis=1)
        return info

    def standard_error(self):
        """``1 / sqrt(I(theta) + 1 / prior_sd^2)`` at the current estimate, shape (n_models,)."""
        return 1.0 / np.sqrt(self._information_at(self.theta) + 1.0 / self.e.prior_sd ** 2)

    def covariance(self):
        """The squared standard error as (n_models, 1, 1) (one dimension)."""
        return (self.standard_error() ** 2)[:, None, None]


class _GuessingMapRun:
    """The 3PL's MAP on the items given so far: :func:`irtlib.map_ability` with ``c``, warm-started."""

    def __init__(self, est: MapEstimator, items, n_models, capacity, theta0):
        self.e, self.items, self.t = est, items, 0
        self.A, self.B, self.C = np.ones((n_models, capacity)), np.zeros((n_models, capacity)), \
            np.zeros((n_models, capacity))
        self.X = np.full((n_models, capacity), np.nan)          # NaN: no response (exhausted model)
        self.theta0 = np.broadcast_to(np.asarray(theta0, float), (n_models,)).astype(float)
        self.theta = np.clip(self.theta0, *est.bounds)
        self.se = np.full(n_models, est.prior_sd)

    def push(self, j, x):
        if self.t + 1 > self.A.shape[1]:
            self.A, self.B, self.C = _grow((self.A, self.B, self.C), self.t + 1)
            self.X = np.concatenate([self.X, np.full((self.X.shape[0], self.A.shape[1] - self.X.shape[1]), np.nan)],
                                    axis=1)
        t = self.t
        a, b, c = self.items.at(j)
        self.A[:, t], self.B[:, t], self.C[:, t], self.X[:, t] = a, b, c, np.where(j >= 0, x, np.nan)
        self.t += 1

    def estimate(self):
        e, t = self.e, self.t
        fit = map_ability(self.X[:, :t], self.A[:, :t], self.B[:, :t], c=self.C[:, :t], prior_mean=e.prior_mean,
                          prior_sd=e.prior_sd, theta0=self.theta, max_step=e.max_step, tol=e.tol, bounds=e.bounds)
        self.theta, self.se = np.asarray(fit.theta, dtype=float), np.asarray(fit.se, dtype=float)
        return self.theta.copy(), self.theta

    def start(self):
        return self.theta0.copy()

    def standard_error(self):
        return self.se.copy()

    def covariance(self):
        return (self.se ** 2)[:, None, None]


# ---------------------------------------------------------------------------- MLE
class MleEstimator:
    """Maximum-likelihood ability (no prior) in ``bounds``, as the authors' Fluid runs it.

    The authors' released code: its Fluid estimates the ability along its path by MLE
    in [-8, 8], started at the mean of the training models' MAP abilities (``run_adaptive``'s
    ``theta0``) and afterwards at the previous estimate. Per model and step, the same iteration
    as the released code, vectorised over models:

    1. up to ``max_newton`` Newton steps on the score ``T = sum a (x - P)``, stopping as soon as
       ``|T| < tol``; each step ``theta - T / T'`` is clipped to ``bounds`` and halved towards
       ``theta`` (up to ``max_halvings`` times; the last halving is kept unchecked) until ``|T|``
       decreases;
    2. if that has not stopped: bisection on ``bounds`` (``max_bisection`` iterations, stopping at
       ``|T| < tol``) when the score changes sign over them, else the bound the score points to.

    So after one safe item a model sits at +8 unless ``|T|`` falls below ``tol`` before the bound
    (an item with ``a (8 - b)`` beyond about ``log(a / tol)``); with ``tol=0`` the estimate is the
    exact bounded MLE (the bound for an all-safe or all-unsafe pattern). A Newton step that cannot
    move (stuck on a bound) would repeat identically to the end of the loop, so such a model goes
    straight to step 2: the result is the same.

    Parameters
    ----------
    bounds : (float, float)
        The range of the ability (the authors': [-8, 8]).
    tol : float
        Stop when the absolute score falls below it (the authors': 1e-6).
    max_newton, max_halvings, max_bisection : int
        The authors': 100, 15 and 80.
    """

    provides_ability = True

    def __init__(self, *, bounds: tuple[float, float] = THETA_BOUNDS, tol: float = 1e-6, max_newton: int = 100,
                 max_halvings: int = 15, max_bisection: int = 80):
        lo, hi = (float(v) for v in bounds)
        if not lo < hi or tol < 0:
            raise InputError("bounds must be increasing and tol non-negative")
        self.bounds, self.tol = (lo, hi), float(tol)
        self.max_newton, self.max_halvings, self.max_bisection = int(max_newton), int(max_halvings), int(max_bisection)

    def begin(self, items: ItemModel, n_models: int, capacity: int, theta0: ArrayLike = 0.0) -> _MleRun:
        """Start estimating ``n_models`` models from ``theta0`` (scalar or per model); 2PL items only."""
        if not isinstance(items, TwoPLItems) or items.c is not None:
            raise InputError(f"MleEstimator is the authors' 2PL estimator; it has no form for {items!r}")
        return _MleRun(self, items, n_models, max(int(capacity), 1), theta0)

    def __repr__(self) -> str:
        return f"MleEstimator(bounds={self.bounds}, tol={self.tol})"


class _MleRun:
    """The administered items of every model, and the authors' Newton iteration on them."""

    def __init__(self, est: MleEstimator, items, n_models, budget, theta0):
        self.e, self.items = est, items
        self.theta0 = np.broadcast_to(np.asarray(theta0, float), (n_models,)).astype(float)
        self.A = np.zeros((n_models, budget))     # a of the item given (0: no response: no term)
        self.B = np.zeros((n_models, budget))
        self.X = np.zeros((n_models, budget))
        self.t = 0
        self.theta = np.clip(np.broadcast_to(np.asarray(theta0, float), (n_models,)).astype(float), *est.bounds)
        self._work = None
        self._rows = np.arange(n_models)
        lib = score_kernel.load()
        self._terms = None if lib is None else score_kernel.RowTerms(lib)

    def push(self, j, x):
        given = j >= 0
        jj = np.where(given, j, 0)                 # items.at's lookup: -1 reads item 0's, masked below
        items = self.items
        if items.per_model:
            a, b = items.a[self._rows, jj], items.b[self._rows, jj]
        else:
            a, b = items.a[jj], items.b[jj]
        obs = given & ~np.isnan(x)
        if self.t + 1 > self.A.shape[1]:
            self.A, self.B, self.X = _grow((self.A, self.B, self.X), self.t + 1)
        t = self.t
        self.A[:, t] = np.where(obs, a, 0.0)
        self.B[:, t] = np.where(obs, b, 0.0)
        self.X[:, t] = np.where(obs, x, 0.0)
        self.t += 1

    def _score(self, rows, theta, slope=False):
        """Score ``sum a (x - P)`` (and its derivative ``-sum a^2 P (1 - P)``) of ``rows`` at ``theta``.

        :func:`irtlib.selection.portable_exp.score_and_information`'s operations in its order (the
        same numbers, bit for bit), in work arrays kept between calls, and the information only when
        ``slope`` asks for it: the estimate is re-solved on every administered item at every step,
        so this is where a long test spends its time. Where :mod:`irtlib.selection.score_kernel`
        loads, its C kernel writes the terms in one pass and keeps them, so the next step's first
        evaluation, at the same ability, computes only the new item's (the same numbers; numpy sums
        the rows alike); otherwise numpy computes them here.
        """
        t, n = self.t, rows.size
        if self._terms is not None:        # the same terms by the C kernel, the earlier items' kept
            g, info = self._terms.sums(rows, theta, self.X, self.A, self.B, t)
            return (g, -info) if slope else g
        if self._work is None or self._work.shape[1] < n * t:
            self._work = np.empty((2, n * t))
        s, q = (w[:n * t].reshape(n, t) for w in self._work)
        x, a, z = self.X[rows, :t], self.A[rows, :t], self.B[rows, :t]      # copies, overwritten below
        np.subtract(theta[:, None], z, out=z)
        np.multiply(a, z, out=z)                                   # z = a (theta - b)
        s[...], q[...] = portable_expit_pair(z)                    # the kernel's exp (portable_exp)
        if slope:
            np.multiply(a, a, out=z)
            np.multiply(z, s, out=z)
            info = np.multiply(z, q, out=z).sum(axis=1)
        np.multiply(x, q, out=q)                                   # x q
        np.subtract(1.0, x, out=x)
        np.multiply(x, s, out=s)                                   # (1 - x) s
        np.subtract(q, s, out=q)
        g = np.multiply(a, q, out=q).sum(axis=1)
        return (g, -info) if slope else g

    def estimate(self):
        e = self.e
        if self._terms is not None:        # the same iteration in C, model by model (score_kernel)
            theta = self.theta.copy()
            self._terms.estimate(theta, self.X, self.A, self.B, self.t, tol=e.tol, bounds=e.bounds,
                                 max_newton=e.max_newton, max_halvings=e.max_halvings, max_bisection=e.max_bisection)
            self.theta = theta
            return theta.copy(), theta
        lo, hi = e.bounds
        theta = self.theta.copy()
        active = np.arange(theta.size)
        fallback = []
        # the score and slope at a row's accepted step, from the step's check: the next Newton
        # step starts there, so it reuses them instead of evaluating the same point again
        known = np.zeros(active.size, dtype=bool)
        known_T, known_dT = np.empty(active.size), np.empty(active.size)
        for _ in range(e.max_newton):
            if not active.size:
                break
            th = theta[active]
            T, dT = known_T.copy(), known_dT.copy()
            fresh = np.flatnonzero(~known)
            if fresh.size:
                T[fresh], dT[fresh] = self._score(active[fresh], th[fresh], slope=True)
            done = np.abs(T) < e.tol
            broken = ~done & (~np.isfinite(dT) | (dT == 0.0))
            go = ~done & ~broken
            fallback.append(active[broken])
            rows, th, T, dT = active[go], th[go], T[go], dT[go]
            new = np.clip(th - T / dT, lo, hi)
            absT = np.abs(T)
            # a step that cannot move (clipped back onto its bound) halves to the same point every time
            # and leaves the model stuck there: no check can change that, so none is run for it
            pending = np.flatnonzero(new != th)
            known = np.zeros(rows.size, dtype=bool)
            known_T, known_dT = np.empty(rows.size), np.empty(rows.size)
            for _h in range(e.max_halvings):
                if not pending.size:
                    break
                Tn, dTn = self._score(rows[pending], new[pending], slope=True)
                accepted = (np.abs(Tn) < absT[pending]) | ~np.isfinite(Tn)
                hit = pending[accepted]
                known[hit], known_T[hit], known_dT[hit] = True, Tn[accepted], dTn[accepted]
                pending = pending[~accepted]
                new[pending] = 0.5 * (new[pending] + th[pending])
            stuck = new == th
            theta[rows] = new
            fallback.append(rows[stuck])
            active = rows[~stuck]
            known, known_T, known_dT = known[~stuck], known_T[~stuck], known_dT[~stuck]
        fallback.append(active)                   # not stopped within max_newton steps
        rows = np.concatenate(fallback) if fallback else np.empty(0, dtype=np.intp)
        if rows.size:
            theta[rows] = self._fallback(rows)
        self.theta = theta
        return theta.copy(), theta

    def _fallback(self, rows):
        """Bisection over the bounds where the score changes sign, else the bound it points to."""
        e = self.e
        lo, hi = e.bounds
        s_lo = self._score(rows, np.full(rows.size, lo))
        s_hi = self._score(rows, np.full(rows.size, hi))
        out = np.where((s_lo > 0) & (s_hi > 0), hi, lo)
        bracket = np.flatnonzero(s_lo * s_hi <= 0)
        if bracket.size:
            left, right = np.full(bracket.size, lo), np.full(bracket.size, hi)
            sl = s_lo[bracket].copy()
            result = np.full(bracket.size, np.nan)
            live = np.arange(bracket.size)
            for _ in range(e.max_bisection):
                if not live.size:
                    break
                mid = 0.5 * (left[live] + right[live])
                sm = self._score(rows[bracket[live]], mid)
                hit = np.abs(sm) < e.tol
                result[live[hit]] = mid[hit]
                same = (sl[live] * sm > 0) & ~hit
                up, down = live[same], live[~same & ~hit]
                left[up], sl[up] = mid[same], sm[same]
                right[down] = mid[~same & ~hit]
                live = live[~hit]
            result[live] = 0.5 * (left[live] + right[live])
            out[bracket] = result
        return out

    def start(self):
        """The ability the first item is chosen at: ``theta0``."""
        return self.theta0.copy()

    def standard_error(self):
        """``1 / sqrt(I(theta))`` at the estimate (no prior; inf with no information), shape (n_models,)."""
        rows = np.arange(self.theta.size)
        _, slope = self._score(rows, self.theta, slope=True)
        with np.errstate(divide="ignore"):
            return 1.0 / np.sqrt(-slope)

    def covariance(self):
        """The squared standard error as (n_models, 1, 1)."""
        return (self.standard_error() ** 2)[:, None, None]


# ---------------------------------------------------------------------------- grid: EAP and the grid mode
class EapEstimator:
    """The posterior mean and standard deviation on a grid (any item model, one or several dimensions).

    Beyond the paper (section "Model: 2PL" uses MAP). The log posterior of every model is kept on
    the item model's grid (:meth:`ability_grid`: for one dimension ``n_points`` equally spaced
    points over [-8, 8] with a Normal(prior_mean, prior_sd) prior; for the M2PL its own product
    grid and latent correlation) and grows by one log-likelihood row per item, so each estimate
    costs O(points), whatever the test length. Unlike MAP, EAP never ends on a bound.

    Parameters
    ----------
    prior_mean, prior_sd : float
        The Normal prior of a unidimensional model (the paper's MAP uses 0 and 1).
    n_points : int
        Grid points of a unidimensional model (default 801: spacing 0.02).
    value : {"theta", "score"}
        What a trajectory records: the posterior mean ability, or the posterior mean of the
        item model's predicted full-benchmark score (``items.score_at``; the M2PL's score).
    """

    provides_ability = True

    def __init__(self, *, prior_mean: float = 0.0, prior_sd: float = 1.0, n_points: int = EAP_POINTS,
                 value: str = "theta"):
        self.prior_mean, self.prior_sd, _ = check_prior(prior_mean, prior_sd, THETA_BOUNDS)
        self.n_points = int(n_points)
        if value not in ("theta", "score"):
            raise InputError(f"value must be 'theta' or 'score', got {value!r}")
        self.value = value

    def begin(self, items: ItemModel, n_models: int, capacity: int = 0, theta0: ArrayLike = 0.0) -> _GridRun:
        """Start estimating ``n_models`` models (one dimension: the first item is chosen at ``theta0``)."""
        return _GridRun(items, n_models, theta0, prior_mean=self.prior_mean, prior_sd=self.prior_sd,
                        n_points=self.n_points, mode=False, score=self.value == "score")

    def __repr__(self) -> str:
        return f"EapEstimator(prior_mean={self.prior_mean}, prior_sd={self.prior_sd}, value={self.value!r})"


class _GridRun:
    """Log posteriors on a grid: the mean (EAP) or the mode (refined by a parabola)."""

    def __init__(self, items, n_models, theta0, *, prior_mean, prior_sd, n_points, mode, score=False):
        self.items, self.mode, self.prior_sd = items, mode, prior_sd
        self.points, log_prior = items.ability_grid(prior_mean, prior_sd, n_points)
        self.log_post = np.broadcast_to(np.asarray(log_prior, float), (n_models, len(self.points))).copy()
        self.multi = np.ndim(self.points) == 2
        self.score_at = items.score_at(self.points) if score else None
        if self.multi:
            self.theta0 = None
        else:
            self.theta0 = np.broadcast_to(np.asarray(theta0, float), (n_models,)).astype(float)
        self.given = np.full((n_models, 0), -1, dtype=np.intp)       # the grid mode's SE needs the items
        self.t = 0
        self.w = None
        self._estimate()

    def push(self, j, x):
        ok = (j >= 0) & ~np.isnan(x)
        rows = np.flatnonzero(ok)
        if rows.size:
            self.log_post[rows] += self.items.grid_log_likelihood(j[rows], x[rows], self.points, rows=rows)
        if self.mode:
            if self.t + 1 > self.given.shape[1]:
                more = np.full((self.given.shape[0], max(1, self.given.shape[1])), -1, dtype=np.intp)
                self.given = np.concatenate([self.given, more], axis=1)
            self.given[:, self.t] = np.where(ok, j, -1)
            self.t += 1

    def _estimate(self):
        w, _ = posterior_weights(self.log_post, np.zeros(self.log_post.shape[1]))
        self.w = w
        if self.multi:
            mean = w @ self.points
            second = np.einsum("mq,qd,qe->mde", w, self.points, self.points)
            self.theta, self.cov = mean, second - mean[:, :, None] * mean[:, None, :]
            return
        if not self.mode:
            mean = w @ self.points
            var = w @ (self.points * self.points) - mean * mean
            self.theta, self.se = mean, np.sqrt(np.maximum(var, 0.0))
            return
        points, post = self.points, self.log_post
        i = np.clip(np.argmax(post, axis=1), 1, points.size - 2)
        r = np.arange(i.size)
        y0, y1, y2 = post[r, i - 1], post[r, i], post[r, i + 1]
        den = y0 - 2 * y1 + y2
        shift = np.where(den < 0, 0.5 * (y0 - y2) / np.where(den < 0, den, -1.0), 0.0)
        theta = points[i] + np.clip(shift, -1, 1) * (points[1] - points[0])
        given = self.given[:, :self.t]
        info = np.where(given >= 0, np.take_along_axis(self.items.information(theta), np.maximum(given, 0), 1),
                        0.0).sum(axis=1)
        self.theta, self.se = theta, 1.0 / np.sqrt(info + 1.0 / self.prior_sd ** 2)

    def estimate(self):
        self._estimate()
        value = self.w @ self.score_at if self.score_at is not None else self.theta
        return value, self.theta

    def start(self):
        return self.theta.copy() if self.theta0 is None else self.theta0.copy()

    def standard_error(self):
        """Posterior SD (EAP) or ``1 / sqrt(information + prior)`` (mode); one dimension only."""
        if self.multi:
            raise InputError("a multidimensional ability has no single standard error: use covariance()")
        return self.se.copy()

    def covariance(self):
        return self.cov.copy() if self.multi else (self.se ** 2)[:, None, None]

    def expectation(self, values: np.ndarray) -> np.ndarray:
        """Posterior mean of a function tabulated on the grid, shape (n_models,)."""
        return self.w @ np.asarray(values, dtype=float)
