"""Adaptive item selection (Algorithm 1): Fluid Benchmarking and its random baselines.

Paper, section "Adaptive selection (Algorithm 1)": start at ``theta_hat = 0`` with no items;
until the budget ``K`` is spent, pick the unused item with the largest Fisher information
``I_j(theta_hat) = a_j^2 P_j (1 - P_j)``, observe the model's response, and update
``theta_hat`` by MAP on all responses so far. The loop is parameterised by a *selection rule*
and an *estimator*:

==============  =====================  ==========================
method          selector               estimator
==============  =====================  ==========================
Fluid           :class:`MaxInformation` :class:`MapEstimator`
Random          :class:`RandomSelection` :class:`MeanScoreEstimator`
Random IRT      :class:`RandomSelection` :class:`MapEstimator`
==============  =====================  ==========================

:func:`run_adaptive` runs the loop for many models at once (every array operation is over all
models) and returns a :class:`Trajectory`: the item given at every step and the estimate after
it, so one run to the largest budget gives every smaller budget. :func:`run_adaptive_reference`
is the straightforward one-model-at-a-time loop, kept as the executable specification that tests
and ``benchmarks/bench_adaptive.py`` compare against.

Choices the paper leaves open (all parameters):

- *Offline replay of a response matrix.* A model is only ever given items it has a response
  for: NaN (unobserved) items are unavailable to that model and are masked out of selection,
  which is what replaying a fixed matrix must do. A model that runs out of available items is
  *exhausted*: its later steps have item ``-1`` and carry the last estimate forward.
- *Ties* in information go to the lowest item index (``numpy.argmax``).
- *Random selection* gives every model its own uniformly random order of its available items,
  drawn from the run's seeded generator.
- *Warm start.* After each step the MAP is re-found by damped Newton started from the previous
  estimate. The log posterior of the 2PL with a Normal prior is strictly concave, so Newton
  from any start converges to the same mode; the warm start only saves iterations (1-2 instead
  of 6-8). The iteration is :func:`irtlib.map_ability`'s (steps capped at ``max_step``, iterates
  clipped to ``bounds``), and any model that has not converged in ``max_newton`` iterations is
  handed to :func:`irtlib.map_ability` itself (with its bisection fallback), so the estimates
  are those of :func:`irtlib.map_ability` on the administered items (the tests check agreement
  to 1e-7).

How it is fast (each exact; see :class:`MaxInformation` and :class:`MapEstimator`):

- selection keeps, per model, a short list of candidate items and Lipschitz bounds on every
  other item's information near the ``theta`` where the list was built, so most steps look at
  a few hundred items instead of all of them, and evaluates the information in single precision
  (SIMD ``exp``), falling back to double precision only where that cannot separate the best
  item from the runner-up;
- the MAP keeps Taylor moments of the score around a reference ``theta`` (updated in O(1) per
  item), so a Newton step costs O(1) instead of O(items given);
- models calibrated on different training sets can run together (per-model ``a``, ``b``), which
  spreads numpy's per-call overhead over many models: the agreement protocol runs the Fluid
  tests of several splits as one batch. Every model's test depends only on its own row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.special import expit

from irtlib._typing import ArrayLike, Seed
from irtlib.core.ability import THETA_BOUNDS, map_ability
from irtlib.core.kernels import fisher_information, score_and_information
from irtlib.errors import InputError

__all__ = [
    "Trajectory", "Selector", "Estimator", "MaxInformation", "RandomSelection", "MapEstimator",
    "MleEstimator", "MeanScoreEstimator", "run_adaptive", "run_adaptive_reference",
]


# ---------------------------------------------------------------------------- result
@dataclass(frozen=True)
class Trajectory:
    """Everything an adaptive run did, step by step.

    Attributes
    ----------
    items : ndarray of int, shape (n_models, budget)
        ``items[m, t]`` is the item (column of the response matrix) model ``m`` was given at
        step ``t`` (0-based), or -1 once the model had no available item left.
    estimate : ndarray of float, shape (n_models, budget)
        ``estimate[m, t]`` is the estimate after ``t + 1`` items (MAP ability or mean safety
        score, depending on the estimator); NaN at steps that were not recorded.
    steps : ndarray of int
        The test lengths (1-based) at which ``estimate`` was recorded.
    """

    items: np.ndarray
    estimate: np.ndarray
    steps: np.ndarray

    @property
    def budget(self) -> int:
        """Number of steps run."""
        return self.items.shape[1]

    def at(self, k: int) -> np.ndarray:
        """Estimates after ``k`` items, shape ``(n_models,)``.

        Raises
        ------
        ValueError
            If ``k`` is outside ``1..budget`` or was not recorded.
        """
        k = int(k)
        if not 1 <= k <= self.budget:
            raise InputError(f"k must be between 1 and the budget {self.budget}, got {k}")
        if not np.isin(k, self.steps):
            raise InputError(f"the estimate after {k} items was not recorded (recorded: "
                             f"{self.steps.size} steps; pass record=... to run_adaptive)")
        return self.estimate[:, k - 1]


# ---------------------------------------------------------------------------- protocols
class SelectorRun(Protocol):
    def select(self, theta: np.ndarray | None) -> np.ndarray:
        """Next item of every model (-1 when exhausted); the items are marked used."""


class Selector(Protocol):
    """A selection rule. ``adaptive`` says whether it needs the current ability."""

    adaptive: bool

    def begin(self, a: np.ndarray, b: np.ndarray, available: np.ndarray,
              rng: np.random.Generator) -> SelectorRun:
        """Start a run over the items ``a``, ``b`` with ``available`` (n_models, n_items)."""


class EstimatorRun(Protocol):
    def push(self, a: np.ndarray, b: np.ndarray, x: np.ndarray) -> None:
        """Add one administered item per model (``x`` NaN: no response, the model is exhausted)."""

    def estimate(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(estimate, ability)`` after the items pushed so far (ability None if not IRT)."""


class Estimator(Protocol):
    """An estimator. ``provides_ability`` says whether it gives a theta a selector can use."""

    provides_ability: bool

    def begin(self, n_models: int, budget: int, theta0: ArrayLike) -> EstimatorRun:
        """Start estimating ``n_models`` models for up to ``budget`` items from ``theta0``."""
        ...


# ---------------------------------------------------------------------------- selectors
class MaxInformation:
    """Maximum Fisher information at the current ability (Fluid Benchmarking's rule).

    Picks, for every model, the available unused item with the largest ``a^2 P (1 - P)`` at
    the model's current ``theta`` (ties: lowest item index), computed exactly as
    :func:`irtlib.core.kernels.fisher_information` does.

    Parameters
    ----------
    cache_size : int
        Exact speed-ups (0 disables the cache). After a pass over all items at ``theta_c``,
        each model keeps its ``cache_size`` most informative unused items as candidates, with,
        for each radius ``r`` in ``radii``, a bound on what any other item can give anywhere in
        ``[theta_c - r, theta_c + r]``: ``log P (1 - P)`` is 1-Lipschitz in ``z = a (theta - b)``,
        so that is at most ``min(I_j(theta_c) exp(a_j r), a_j^2 / 4)``. At the next steps only the
        candidates are evaluated, and their best unused item is the exact argmax while it beats
        the bound for the current distance from ``theta_c``; otherwise the full pass is redone.
    radii : sequence of float
        The radii of the bounds, increasing.
    screen : bool
        Compare information values in single precision (SIMD ``exp``, about ten times faster
        than the double-precision logistic on this kind of machine). Rounding moves
        ``z = a (theta - b)`` by at most ``2.4e-7 |a| (8 + |b|)``, so the single-precision
        information is within a relative ``delta`` (that plus 1e-6, computed from the run's
        largest ``|a|`` and ``|b|``; about 3e-5 on the simulated benchmarks) of the exact one, and
        two items more than ``4 delta`` apart compare the same way exactly. When the best item
        is not that far ahead of every other (twin items with equal ``a`` and ``b`` excepted: the
        lower index wins among them), the 8 best screened items are evaluated exactly, and if
        even those are within the margin, all of them. Bounds built from screened values are
        inflated by the margin. The choice is therefore the exact one, as with ``screen=False``
        (which is also used when ``delta`` would exceed 2.5e-3).
    """

    adaptive = True

    def __init__(self, *, cache_size: int = 256, radii=(0.001, 0.003, 0.01, 0.03), screen: bool = True):
        radii = np.sort(np.asarray(radii, dtype=float))
        if cache_size < 0:
            raise InputError("cache_size must be >= 0")
        if radii.size == 0 or radii[0] < 0:
            raise InputError("radii must be non-empty and non-negative")
        self.cache_size, self.radii, self.screen = int(cache_size), radii, bool(screen)

    def begin(self, a: ArrayLike, b: ArrayLike, available: ArrayLike,
              rng: np.random.Generator | None = None, *, c: ArrayLike | None = None) -> _MaxInfoRun:
        """Start selecting for one run: item parameters, the available items (models x items), the random generator.

        With ``c`` (3PL lower asymptotes, shaped like ``a``) the choice maximises Birnbaum's
        information (:func:`irtlib.core.kernels.fisher_information`), evaluated exactly over every
        item at every step: the cache and the screen rest on 2PL bounds and are switched off.
        """
        if c is not None:
            return _MaxInfoRun(a, b, available, 0, self.radii, False, c=np.asarray(c, dtype=float))
        return _MaxInfoRun(a, b, available, self.cache_size, self.radii, self.screen)

    def __repr__(self) -> str:
        return f"MaxInformation(cache_size={self.cache_size}, radii={tuple(self.radii)}, screen={self.screen})"


#: The exact information: the kernel itself (theta (n, 1) against a, b (N,) or (n, C)).
_information = fisher_information

_SCREEN_TOP = 8          # near-ties (twin items have equal values): confirm this many exactly


def _information32(theta32, a32, b32, q32):
    """Single-precision ``a^2 e^-|z| / (1 + e^-|z|)^2`` (= ``a^2 P (1 - P)``): the screen.

    The one deliberate second form of the 2PL information (the allow-list of
    tests/test_kernels.py): float32 ``exp`` is about ten times faster than the double-precision
    logistic, and it only ranks items -- every choice it cannot make with certainty is decided
    by :func:`irtlib.core.kernels.fisher_information` (see :class:`MaxInformation`). Its values
    are tested against the kernel's to the relative margin ``MaxInformation`` assumes.
    """
    z = a32 * (theta32 - b32)
    np.abs(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    d = z + np.float32(1.0)
    d *= d
    z /= d
    z *= q32
    return z


def _screen(info32, twin, gap):
    """Argmax per row of screened values (blocked entries negative) and whether it is certain.

    Certain: every other item is more than the margin below the best, so the exact argmax is the same.

    ``twin`` (same shape) labels items with identical ``a`` and ``b``: their information is
    identical, so the first of them (the lowest index, which ``argmax`` returns) is the exact
    choice among them, and only the others need to be beaten by the margin.
    """
    r = np.arange(info32.shape[0])
    k = np.argmax(info32, axis=1)
    v1 = info32[r, k].copy()
    if info32.shape[1] == 1:
        return k, v1.astype(float), np.ones(r.size, dtype=bool)
    mine = twin[k] if twin.ndim == 1 else twin[r, k]    # (screening always labels twins: never None)
    v2 = np.where(twin == mine[:, None], np.float32(-np.inf), info32).max(axis=1)
    return k, v1.astype(float), v2 < v1 * np.float32(1.0 - gap)


def _twin_labels(a, b):
    """Labels (int32, same shape as ``a``) shared exactly by items with equal ``a`` and ``b``.

    Per row for per-model parameters; identical rows are labelled once.
    """
    if a.ndim == 1:
        return np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)[1].reshape(-1).astype(np.int32)
    out = np.empty(a.shape, dtype=np.int32)
    seen = {}
    for i in range(a.shape[0]):
        key = (a[i].tobytes(), b[i].tobytes())
        if key not in seen:
            seen[key] = _twin_labels(a[i], b[i])
        out[i] = seen[key]
    return out


class _MaxInfoRun:
    def __init__(self, a, b, available, cache_size, radii, screen, c=None):
        self.a, self.b, self.c = a, b, c                          # (n_items,) or (n_models, n_items)
        self.per_model = a.ndim == 2
        self.unused = np.array(available, dtype=bool, copy=True)
        n_models, n_items = self.unused.shape
        self.rows = np.arange(n_models)
        self.left = self.unused.sum(axis=1)
        self.radii = radii
        # Single-precision error of a^2 P (1 - P), relative: |d log I / dz| <= 1, and rounding
        # a, theta, b, the difference and the product moves z = a (theta - b) by at most
        # 2.4e-7 |a| (|theta| + |b|), with |theta| <= 8; exp, divisions and products add < 1e-6.
        # Values more than 4x that apart (the margin) compare the same way in double precision.
        err = 2.4e-7 * float(np.abs(a).max()) * (8.0 + float(np.abs(b).max())) + 1e-6
        self.gap = 4.0 * err
        self.screen = screen and self.gap < 1e-2
        self.a32, self.b32 = a.astype(np.float32), b.astype(np.float32)
        self.q32 = self.a32 * self.a32
        self.twin = _twin_labels(a, b) if self.screen else None
        self.logpeak32 = np.log(self.q32 / np.float32(4.0) * np.float32(1.0 + self.gap))
        self.cache = cache_size if 0 < cache_size < n_items else 0
        self.full_passes = 0      # diagnostics: model-steps that needed a full pass
        if self.cache:
            c = self.cache
            self.items = np.zeros((n_models, c), dtype=np.intp)  # candidates, by item id
            self.ca, self.cb = np.ones((n_models, c)), np.zeros((n_models, c))
            self.ca32, self.cb32 = np.ones((n_models, c), np.float32), np.zeros((n_models, c), np.float32)
            self.cq32 = np.ones((n_models, c), np.float32)
            self.used = np.ones((n_models, c), dtype=bool)
            self.ctwin = np.zeros((n_models, c), dtype=np.int32)
            self.theta_c = np.full(n_models, np.inf)              # inf: not built yet
            # bound[m, i]: at least what any non-candidate can give within radii[i] of theta_c;
            # the extra last column (+inf) is what a theta outside every radius looks up.
            self.bound = np.full((n_models, radii.size + 1), np.inf)

    def _rows(self, arr, rows):
        return arr[rows] if self.per_model else arr

    def _cols(self, arr, rows, cols):
        return arr[rows[:, None], cols] if self.per_model else arr[cols]

    def _exact(self, rows, theta, cols=None):
        """Exact information of ``rows`` at ``theta`` over ``cols`` (default: every item)."""
        if self.c is not None:        # the 3PL: never cached or screened, so always every item
            return _information(theta[:, None], self._rows(self.a, rows), self._rows(self.b, rows),
                                self._rows(self.c, rows))
        if cols is None:
            return _information(theta[:, None], self._rows(self.a, rows), self._rows(self.b, rows))
        return _information(theta[:, None], self._cols(self.a, rows, cols), self._cols(self.b, rows, cols))

    def _full(self, rows, theta):
        """Exact argmax over all items for ``rows``; rebuilds their candidate lists."""
        th = theta[rows]
        blocked = ~self.unused[rows]
        self.full_passes += rows.size
        if not self.screen:
            info = self._exact(rows, th)
            info[blocked] = -np.inf
            pick = np.argmax(info, axis=1)
            if self.cache:
                self._build(rows, th, info.astype(np.float32), blocked)
            return pick
        a32 = self._rows(self.a32, rows)
        info32 = _information32(th.astype(np.float32)[:, None], a32, self._rows(self.b32, rows),
                                self._rows(self.q32, rows))
        info32[blocked] = -1.0
        pick, best, sure = _screen(info32, self._rows(self.twin, rows), self.gap)
        if self.cache:
            self._build(rows, th, info32, blocked, a32)
        unsure = np.flatnonzero(~sure & (best >= 0))             # near-ties: decide exactly
        if unsure.size:
            u = rows[unsure]
            tu = th[unsure]
            pick[unsure] = self._refine(info32[unsure], blocked[unsure], tu,
                                        lambda cols, sub=None: self._exact(u if sub is None else u[sub],
                                                                           tu if sub is None else tu[sub], cols))[0]
        return pick

    def _refine(self, info32, blocked, th, exact):
        """Exact argmax for rows whose screen was inconclusive.

        The ``_SCREEN_TOP`` best screened columns are evaluated exactly; when the last of them is
        more than the margin below the best, the exact argmax is among them (ties: lowest
        column); otherwise the whole row is evaluated exactly. ``exact(cols, sub)`` returns the
        exact information of rows ``sub`` (default all) at columns ``cols`` (None: all).
        """
        n, p = info32.shape
        r = np.arange(n)
        m = min(_SCREEN_TOP, p)
        top = np.sort(np.argpartition(info32, p - m, axis=1)[:, p - m:], axis=1)
        v = np.take_along_axis(info32, top, 1)
        info = exact(top)
        info[np.take_along_axis(blocked, top, 1)] = -np.inf
        j = np.argmax(info, axis=1)
        k, best = top[r, j], info[r, j]
        if m < p:
            hard = np.flatnonzero(v.min(axis=1) >= v.max(axis=1) * np.float32(1.0 - self.gap))
            if hard.size:
                full = exact(None, hard)
                full[blocked[hard]] = -np.inf
                k[hard] = np.argmax(full, axis=1)
                best[hard] = full[np.arange(hard.size), k[hard]]
        return k, best

    def _build(self, rows, th, info32, blocked, a32=None):
        """Candidates: the ``cache`` best unused items (by screened value), and the bounds."""
        c, n = self.cache, info32.shape[1]
        top = np.sort(np.argpartition(info32, n - c, axis=1)[:, n - c:], axis=1)
        self.items[rows] = top
        self.ca[rows], self.cb[rows] = self._cols(self.a, rows, top), self._cols(self.b, rows, top)
        self.ca32[rows], self.cb32[rows] = self.ca[rows], self.cb[rows]
        self.cq32[rows] = self.ca32[rows] * self.ca32[rows]
        self.used[rows] = np.take_along_axis(blocked, top, 1)
        if self.twin is not None:
            self.ctwin[rows] = self._cols(self.twin, rows, top)
        self.theta_c[rows] = th
        # bound over the unused non-candidates, in logs: log(I (1 + gap)) + a r, capped by the
        # log of the peak a^2 / 4 (both inflated by the screening margin)
        other = ~blocked
        np.put_along_axis(other, top, False, axis=1)
        with np.errstate(divide="ignore"):
            base = np.log(np.where(other, info32, np.float32(0.0)) * np.float32(1.0 + self.gap))
        if a32 is None:
            a32 = self._rows(self.a32, rows)
        peak = self._rows(self.logpeak32, rows)
        for i, r in enumerate(self.radii):
            lim = np.minimum(base + a32 * np.float32(r), peak).max(axis=1).astype(float)
            self.bound[rows, i] = np.exp(lim) * (1.0 + 1e-4)     # undo the logs, rounding margin

    def _candidates(self, theta):
        """Best unused candidate of every model.

        Returns (column, a value certainly not above its exact information, value known exactly).
        """
        if not self.screen:
            info = _information(theta[:, None], self.ca, self.cb)
            info[self.used] = -np.inf
            k = np.argmax(info, axis=1)
            return k, info[self.rows, k]
        info32 = _information32(theta.astype(np.float32)[:, None], self.ca32, self.cb32, self.cq32)
        info32[self.used] = -1.0
        k, best, sure = _screen(info32, self.ctwin, self.gap)
        low = np.where(best >= 0, best * (1.0 - self.gap), -np.inf)   # <= the exact value
        unsure = np.flatnonzero(~sure & (best >= 0))
        if unsure.size:
            ca, cb, th = self.ca[unsure], self.cb[unsure], theta[unsure]

            def exact(cols, sub=None):
                if sub is None:
                    return _information(th[:, None], np.take_along_axis(ca, cols, 1), np.take_along_axis(cb, cols, 1))
                return _information(th[sub, None], ca[sub], cb[sub])

            k[unsure], low[unsure] = self._refine(info32[unsure], self.used[unsure], th, exact)
        return k, low

    def select(self, theta):
        theta = np.asarray(theta, dtype=float)
        out = np.full(self.rows.size, -1, dtype=np.intp)
        live = self.left > 0
        if not self.cache:
            pending = np.flatnonzero(live)
        else:
            level = np.searchsorted(self.radii, np.abs(theta - self.theta_c))
            k, low = self._candidates(theta)
            ok = live & (low > self.bound[self.rows, level])
            hit = self.rows[ok]
            out[hit] = self.items[hit, k[ok]]
            pending = np.flatnonzero(live & ~ok)
        if pending.size:
            out[pending] = self._full(pending, theta)
        got = np.flatnonzero(out >= 0)
        chosen = out[got]
        self.unused[got, chosen] = False
        if self.cache:
            self.used[got] |= self.items[got] == chosen[:, None]
        self.left[got] -= 1
        return out


class RandomSelection:
    """Uniformly random items: every model gets its own random order of its available items.

    The order is drawn once per run from the run's generator (``run_adaptive(seed=...)``), so
    the first ``k`` items of a run to budget ``K`` are the run to budget ``k``.
    """

    adaptive = False

    def begin(self, a: ArrayLike, b: ArrayLike, available: ArrayLike, rng: np.random.Generator | None) -> _RandomRun:
        """Start selecting for one run: a random order of each model's available items, drawn from ``rng``."""
        return _RandomRun(np.asarray(available, dtype=bool), rng)

    def __repr__(self) -> str:
        return "RandomSelection()"


class _RandomRun:
    def __init__(self, available, rng):
        keys = rng.random(available.shape)
        keys[~available] = np.inf
        self.order = np.argsort(keys, axis=1, kind="stable")
        self.n_available = available.sum(axis=1)
        self.t = 0

    def select(self, theta=None):
        # the budget is at most the number of items, so t < order.shape[1]
        out = self.order[:, self.t].astype(np.intp)
        out[self.t >= self.n_available] = -1
        self.t += 1
        return out


# ---------------------------------------------------------------------------- estimators
class MeanScoreEstimator:
    """Share of safe responses among the items given so far (the Random baseline's score).

    NaN for a model with no response yet. It gives no ability, so it cannot drive
    :class:`MaxInformation`.
    """

    provides_ability = False

    def begin(self, n_models: int, budget: int, theta0: ArrayLike = 0.0) -> _MeanRun:
        """Start estimating ``n_models`` models (``budget`` and ``theta0`` are not needed)."""
        return _MeanRun(n_models)

    def __repr__(self) -> str:
        return "MeanScoreEstimator()"


class _MeanRun:
    def __init__(self, n_models):
        self.safe = np.zeros(n_models)
        self.seen = np.zeros(n_models)

    # No item-by-item ``push``: an adaptive selector needs an ability estimate, which this estimator
    # does not give (run_adaptive refuses the pair), so its items are always chosen up front.
    def push_block(self, a, b, x):
        """Several items per model at once: arrays of shape (n_models, m)."""
        obs = ~np.isnan(x)
        self.safe += np.where(obs, x, 0.0).sum(axis=1)
        self.seen += obs.sum(axis=1)

    def estimate(self):
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.seen > 0, self.safe / self.seen, np.nan), None


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
    #: Accepts 3PL items (``begin(..., guessing=True)``; ``push(a, b, x, c)``).
    supports_guessing = True

    def __init__(self, *, prior_mean: float = 0.0, prior_sd: float = 1.0, tol: float = 1e-8,
                 max_step: float = 1.0, bounds: tuple[float, float] = THETA_BOUNDS, max_newton: int = 50,
                 order: int = 8, radius: float = 0.1):
        self.prior_mean, self.prior_sd = float(prior_mean), float(prior_sd)
        self.tol, self.max_step, self.bounds = float(tol), float(max_step), tuple(bounds)
        self.max_newton = int(max_newton)
        self.order, self.radius = int(order), float(radius)
        if self.order < 0 or self.radius <= 0:
            raise InputError("order must be >= 0 and radius > 0")

    def begin(self, n_models: int, budget: int, theta0: ArrayLike = 0.0, *,
              guessing: bool = False) -> _MapRun | _GuessingMapRun:
        """Start estimating ``n_models`` models for up to ``budget`` items, every model from ``theta0``.

        ``guessing=True``: 3PL items (each ``push`` carries the items' ``c``); every estimate is
        :func:`irtlib.map_ability` with ``c`` on the items given so far, warm-started from the
        previous one (the Taylor moments are the 2PL's).
        """
        if guessing:
            return _GuessingMapRun(self, n_models, budget, theta0)
        return _MapRun(self, n_models, budget, theta0)

    def __repr__(self) -> str:
        return (f"MapEstimator(prior_mean={self.prior_mean}, prior_sd={self.prior_sd}, tol={self.tol}, "
                f"order={self.order})")


def _sigmoid_derivative_polys(n_max: int) -> list[np.ndarray]:
    """Coefficients (increasing powers of s) of ``sigma^(n)`` as a polynomial in ``s = sigma``."""
    polys = [np.array([0.0, 1.0])]
    ds = np.array([0.0, 1.0, -1.0])          # d sigma / dz = s - s^2
    for _ in range(n_max):
        polys.append(np.polynomial.polynomial.polymul(np.polynomial.polynomial.polyder(polys[-1]), ds))
    return polys


class _MapRun:
    """Compact per-model arrays of the administered items and a warm-started Newton."""

    def __init__(self, est: MapEstimator, n_models, budget, theta0):
        self.e = est
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
        if self.taylor:
            polys = _sigmoid_derivative_polys(est.order + 1)
            self.coef = np.zeros((len(polys[-1]) - 1, len(polys)))   # s^1.. x derivative order
            for n, c in enumerate(polys):
                self.coef[:len(c) - 1, n] = c[1:]                    # no constant terms
            self.spow = np.arange(1, self.coef.shape[0] + 1, dtype=float)
            self.apow = np.arange(1, len(polys) + 1, dtype=float)
            self.dpow = np.arange(est.order + 1, dtype=float)
            invfact = 1.0 / np.cumprod(np.r_[1.0, np.arange(1, est.order + 1)])     # 1 / n!
            # score and information polynomials in d: rows 0 and 1 of coef_d pick M_n and M_(n+1)
            self.invfact = invfact
            self.theta_r = self.theta.copy()
            self.M = np.zeros((n_models, len(polys)))
            self.amax = np.zeros(n_models)

    # -- Taylor moments --------------------------------------------------------------------
    def _moments(self, a, s):
        """``sum over the last axis of a^(n+1) sigma^(n)(z)`` (``s = sigma(z)``), n = 0..order+1."""
        spow = np.repeat(s[..., None], self.spow.size, axis=-1)
        np.cumprod(spow, axis=-1, out=spow)                        # s, s^2, ...
        deriv = spow @ self.coef                                   # sigma^(n)(z), (..., j, n)
        apow = np.repeat(a[..., None], self.apow.size, axis=-1)
        np.cumprod(apow, axis=-1, out=apow)                        # a, a^2, ...
        deriv *= apow
        return deriv.sum(axis=-2)

    def _recentre(self, rows, theta):
        t = self.t
        A = self.A[rows, :t]
        s = expit(A * theta[:, None] - self.AB[rows, :t])
        self.M[rows] = self._moments(A, s)
        self.theta_r[rows] = theta
        self.recentred += rows.size

    def push(self, a, b, x):
        if np.isnan(x).any():
            obs = ~np.isnan(x)
            a, b, x = np.where(obs, a, 0.0), np.where(obs, b, 0.0), np.where(obs, x, 0.0)
        t = self.t
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

    def push_block(self, a, b, x):
        """Several items per model at once: arrays of shape (n_models, m)."""
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
        d = theta - self.theta_r
        far = self.amax * np.abs(d) > e.radius
        if far.any():
            rows = np.flatnonzero(far)
            self._recentre(rows, theta[rows])
            d[rows] = 0.0
        terms = d[:, None] ** self.dpow
        terms *= self.invfact                                       # d^n / n!
        M = self.M
        return self.sax - (M[:, :-1] * terms).sum(axis=1) - prior, (M[:, 1:] * terms).sum(axis=1)

    def estimate(self):
        if self.taylor:
            return self._estimate_taylor()
        e = self.e
        lo, hi = e.bounds
        inv_var = 1.0 / e.prior_sd ** 2
        theta = self.theta
        done = np.zeros(theta.size, dtype=bool)
        for _ in range(e.max_newton):
            g, h = self._grad_info(theta)
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
        """
        e = self.e
        lo, hi = e.bounds
        inv_var = 1.0 / e.prior_sd ** 2
        cap = e.max_step
        theta = self.theta
        done = np.zeros(theta.size, dtype=bool)
        info = self.info
        for _ in range(e.max_newton):
            d = theta - self.theta_r
            far = self.amax * np.abs(d) > e.radius
            if far.any():
                rows = np.flatnonzero(far)
                self._recentre(rows, theta[rows])
                d[rows] = 0.0
            terms = d[:, None] ** self.dpow
            terms *= self.invfact                                   # d^n / n!
            M = self.M
            g = self.sax - np.einsum("ij,ij->i", M[:, :-1], terms) - (theta - e.prior_mean) * inv_var
            h = np.einsum("ij,ij->i", M[:, 1:], terms)
            dh = np.einsum("ij,ij->i", M[:, 2:], terms[:, :-1])     # d information / d theta
            hp = h + inv_var
            raw = g / hp
            new = np.minimum(np.maximum(theta + np.minimum(np.maximum(raw, -cap), cap), lo), hi)
            moved = np.abs(new - theta)
            if done.any():
                new = np.where(done, theta, new)
                h = np.where(done, info, h)
            theta, info = new, h
            done |= (moved < e.tol) | ((np.abs(dh) * raw * raw < 0.2 * e.tol * hp) & (np.abs(raw) < cap)
                                        & (new > lo) & (new < hi))
            if done.all():
                break
        self.info = info
        return self._finish(theta, done)


class _GuessingMapRun:
    """The 3PL's MAP on the items given so far: :func:`irtlib.map_ability` with ``c``, warm-started."""

    def __init__(self, est: MapEstimator, n_models, budget, theta0):
        self.e, self.t = est, 0
        self.A, self.B, self.C = np.ones((n_models, budget)), np.zeros((n_models, budget)), np.zeros((n_models, budget))
        self.X = np.full((n_models, budget), np.nan)              # NaN: no response (exhausted model)
        self.theta = np.clip(np.broadcast_to(np.asarray(theta0, float), (n_models,)).astype(float), *est.bounds)

    def push(self, a, b, x, c):
        t = self.t
        self.A[:, t], self.B[:, t], self.C[:, t], self.X[:, t] = a, b, c, x
        self.t += 1

    def estimate(self):
        e, t = self.e, self.t
        fit = map_ability(self.X[:, :t], self.A[:, :t], self.B[:, :t], c=self.C[:, :t], prior_mean=e.prior_mean,
                          prior_sd=e.prior_sd, theta0=self.theta, max_step=e.max_step, tol=e.tol, bounds=e.bounds)
        self.theta = np.asarray(fit.theta, dtype=float)
        return self.theta.copy(), self.theta


class MleEstimator:
    """Maximum-likelihood ability (no prior) in ``bounds``, as the authors' Fluid runs it.

    SUMMARY.md, "Methods": the released code's Fluid estimates the ability along its path by MLE
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

    def begin(self, n_models: int, budget: int, theta0: ArrayLike = 0.0) -> _MleRun:
        """Start estimating ``n_models`` models for up to ``budget`` items from ``theta0`` (scalar or per model)."""
        return _MleRun(self, n_models, budget, theta0)

    def __repr__(self) -> str:
        return f"MleEstimator(bounds={self.bounds}, tol={self.tol})"


class _MleRun:
    """The administered items of every model, and the authors' Newton iteration on them."""

    def __init__(self, est: MleEstimator, n_models, budget, theta0):
        self.e = est
        self.A = np.zeros((n_models, budget))     # a of the item given (0: no response: no term)
        self.B = np.zeros((n_models, budget))
        self.X = np.zeros((n_models, budget))
        self.t = 0
        self.theta = np.clip(np.broadcast_to(np.asarray(theta0, float), (n_models,)).astype(float), *est.bounds)

    def push(self, a, b, x):
        obs = ~np.isnan(x)
        t = self.t
        self.A[:, t] = np.where(obs, a, 0.0)
        self.B[:, t] = np.where(obs, b, 0.0)
        self.X[:, t] = np.where(obs, x, 0.0)
        self.t += 1

    def _score(self, rows, theta, slope=False):
        """Score ``sum a (x - P)`` (and its derivative ``-sum a^2 P (1 - P)``) of ``rows`` at ``theta``."""
        t = self.t
        g, info = score_and_information(self.X[rows, :t], theta[:, None], self.A[rows, :t], self.B[rows, :t])
        if not slope:
            return g.sum(axis=1)
        return g.sum(axis=1), -info.sum(axis=1)

    def estimate(self):
        e = self.e
        lo, hi = e.bounds
        theta = self.theta.copy()
        active = np.arange(theta.size)
        fallback = []
        for _ in range(e.max_newton):
            if not active.size:
                break
            th = theta[active]
            T, dT = self._score(active, th, slope=True)
            done = np.abs(T) < e.tol
            broken = ~done & (~np.isfinite(dT) | (dT == 0.0))
            go = ~done & ~broken
            fallback.append(active[broken])
            rows, th, T, dT = active[go], th[go], T[go], dT[go]
            new = np.clip(th - T / dT, lo, hi)
            absT = np.abs(T)
            pending = np.arange(rows.size)
            for _h in range(e.max_halvings):
                if not pending.size:
                    break
                Tn = self._score(rows[pending], new[pending])
                pending = pending[~((np.abs(Tn) < absT[pending]) | ~np.isfinite(Tn))]
                new[pending] = 0.5 * (new[pending] + th[pending])
            stuck = new == th
            theta[rows] = new
            fallback.append(rows[stuck])
            active = rows[~stuck]
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


# ---------------------------------------------------------------------------- the loop
def _check_guessing(c, a):
    """The 3PL's lower asymptotes, shaped like ``a`` and in [0, 1) (InputError otherwise)."""
    c = np.asarray(c, dtype=float)
    if c.shape != a.shape:
        raise InputError(f"c must have the shape of a {a.shape}, got {c.shape}")
    if not (np.isfinite(c).all() and (c >= 0).all() and (c < 1).all()):
        raise InputError("c (the lower asymptotes) must lie in [0, 1)")
    return c


def _check_inputs(responses, a, b, budget):
    x = np.asarray(responses, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise InputError(f"responses must be a (n_models, n_items) array, got shape {np.shape(responses)}")
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.shape not in ((x.shape[1],), x.shape):
        raise InputError(f"a and b must have shape ({x.shape[1]},) or {x.shape} to match responses "
                         f"{x.shape}; got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise InputError("a and b must be finite")
    bad = ~np.isnan(x) & (x != 0) & (x != 1)
    if bad.any():
        raise InputError(f"responses must be 0, 1 or NaN; found {x[bad][0]!r}")
    budget = int(budget)
    if not 1 <= budget <= x.shape[1]:
        raise InputError(f"budget must be between 1 and the {x.shape[1]} items, got {budget}")
    return x, a, b, budget


def run_adaptive(responses: ArrayLike, a: ArrayLike, b: ArrayLike, *, budget: int, selector: Selector | None = None,
                 estimator: Estimator | None = None, seed: Seed | None = None, theta0: ArrayLike = 0.0,
                 record: Sequence[int] | None = None, c: ArrayLike | None = None) -> Trajectory:
    """Algorithm 1 for many models at once, replayed on their response rows.

    Parameters
    ----------
    responses : array_like, shape (n_models, n_items)
        1 safe, 0 unsafe, NaN unobserved (unavailable to that model: never selected).
    a, b : array_like, shape (n_items,) or (n_models, n_items)
        Calibrated item parameters, shared or per model (models calibrated on different
        training sets -- e.g. the test models of several protocol splits -- can run together).
    budget : int
        Number of steps (items per model), at most ``n_items``.
    selector : Selector, default MaxInformation()
    estimator : Estimator, default MapEstimator()
    seed : int, Generator, SeedSequence or None
        Seeds the selector (random orders); unused by :class:`MaxInformation`.
    theta0 : float or array_like, shape (n_models,)
        Starting ability (the paper: 0; the authors' code: the mean of the split's training
        abilities, one value per model when several splits run together).
    record : sequence of int, optional
        Test lengths at which to record the estimate. Default: every step. An adaptive
        selector needs the estimate after every step anyway, so with one the estimate is
        always recorded at every step; with a non-adaptive one (random) only the requested
        steps are estimated, which is what makes Random IRT cheap.
    c : array_like, shape of ``a``, optional
        Lower asymptotes of a 3PL bank (the model-check chapter); None (the paper) is the 2PL.
        With ``c``, :class:`MaxInformation` maximises Birnbaum's information and the estimator
        (one with ``supports_guessing``: :class:`MapEstimator`) is the 3PL's MAP; every item
        step runs the estimator.

    Returns
    -------
    Trajectory

    Examples
    --------
    >>> traj = run_adaptive(x, a, b, budget=50)                    # Fluid Benchmarking
    >>> traj.at(20)                                                  # abilities after 20 items
    >>> run_adaptive(x, a, b, budget=50, selector=RandomSelection(),
    ...              estimator=MeanScoreEstimator(), seed=0).at(20)  # Random
    """
    x, a, b, budget = _check_inputs(responses, a, b, budget)
    selector = MaxInformation() if selector is None else selector
    estimator = MapEstimator() if estimator is None else estimator
    if selector.adaptive and not estimator.provides_ability:
        raise InputError(f"{selector!r} needs an ability estimate; {estimator!r} gives none")
    if c is not None:
        c = _check_guessing(c, a)
        if not getattr(estimator, "supports_guessing", False):
            raise InputError(f"{estimator!r} has no 3PL form: with c, use MapEstimator()")
        return _run_guessing(x, a, b, c, budget=budget, selector=selector, estimator=estimator, seed=seed,
                             theta0=theta0)
    n_models = x.shape[0]
    rows = np.arange(n_models)
    if selector.adaptive or record is None:
        steps = np.arange(1, budget + 1)
    else:
        steps = np.unique(np.asarray(record, dtype=int))
        if steps.size == 0 or steps[0] < 1 or steps[-1] > budget:
            raise InputError(f"record must hold test lengths between 1 and {budget}")
    want = np.zeros(budget + 1, dtype=bool)
    want[steps] = True

    rng = np.random.default_rng(seed)
    sel = selector.begin(a, b, ~np.isnan(x), rng)
    est = estimator.begin(n_models, budget, theta0)
    items = np.full((n_models, budget), -1, dtype=np.intp)
    out = np.full((n_models, budget), np.nan)
    theta = np.broadcast_to(np.asarray(theta0, dtype=float), (n_models,)).astype(float)
    if not selector.adaptive and hasattr(est, "push_block"):
        # the items do not depend on the estimates: choose them all, then estimate in blocks
        for t in range(budget):
            items[:, t] = sel.select(None)
        got = items >= 0
        jj = np.where(got, items, 0)
        xa = np.where(got, np.take_along_axis(x, jj, 1), np.nan)
        aa = np.take_along_axis(a, jj, 1) if a.ndim == 2 else a[jj]
        bb = np.take_along_axis(b, jj, 1) if b.ndim == 2 else b[jj]
        done = 0
        for k in steps:
            est.push_block(aa[:, done:k], bb[:, done:k], xa[:, done:k])
            done = k
            out[:, k - 1] = est.estimate()[0]
        return Trajectory(items=items, estimate=out, steps=steps)
    for t in range(budget):
        j = sel.select(theta if selector.adaptive else None)
        got = j >= 0
        items[:, t] = j
        jj = np.where(got, j, 0)
        xt = np.where(got, x[rows, jj], np.nan)
        if a.ndim == 2:
            est.push(a[rows, jj], b[rows, jj], xt)
        else:
            est.push(a[jj], b[jj], xt)
        if want[t + 1]:
            value, ability = est.estimate()
            out[:, t] = value
            if ability is not None:
                theta = ability
    return Trajectory(items=items, estimate=out, steps=steps)


def _run_guessing(x, a, b, c, *, budget, selector, estimator, seed, theta0):
    """:func:`run_adaptive`'s loop for a 3PL bank: the estimate after every step."""
    n_models = x.shape[0]
    rows = np.arange(n_models)
    rng = np.random.default_rng(seed)
    kw = {"c": c} if selector.adaptive else {}
    sel = selector.begin(a, b, ~np.isnan(x), rng, **kw)
    est = estimator.begin(n_models, budget, theta0, guessing=True)
    items = np.full((n_models, budget), -1, dtype=np.intp)
    out = np.full((n_models, budget), np.nan)
    theta = np.broadcast_to(np.asarray(theta0, dtype=float), (n_models,)).astype(float)
    for t in range(budget):
        j = sel.select(theta if selector.adaptive else None)
        got = j >= 0
        items[:, t] = j
        jj = np.where(got, j, 0)
        xt = np.where(got, x[rows, jj], np.nan)
        cols = (rows, jj) if a.ndim == 2 else (jj,)
        est.push(a[cols], b[cols], xt, c[cols])
        out[:, t], theta = est.estimate()
    return Trajectory(items=items, estimate=out, steps=np.arange(1, budget + 1))


def run_adaptive_reference(responses: ArrayLike, a: ArrayLike, b: ArrayLike, *, budget: int, theta0: float = 0.0,
                           prior_mean: float = 0.0,
                           prior_sd: float = 1.0, warm_start: bool = False) -> Trajectory:
    """Fluid Benchmarking, one model and one step at a time: the straightforward loop.

    For each model: information of every item at the current theta
    (:func:`irtlib.core.kernels.fisher_information`), used and unobserved items masked out, argmax;
    then :func:`irtlib.map_ability` on the items given so far (from its default start, or from
    the previous estimate with ``warm_start=True``). Same rules as :func:`run_adaptive` with
    :class:`MaxInformation` and :class:`MapEstimator`, without any of its speed-ups; the
    reference its tests and benchmark compare against.
    """
    x, a, b, budget = _check_inputs(responses, a, b, budget)
    n_models = x.shape[0]
    items = np.full((n_models, budget), -1, dtype=np.intp)
    out = np.full((n_models, budget), np.nan)
    for m in range(n_models):
        am, bm = (a[m], b[m]) if a.ndim == 2 else (a, b)
        blocked = np.isnan(x[m])
        theta = float(theta0)
        given = []
        for t in range(budget):
            info = fisher_information(theta, am, bm)
            info[blocked] = -np.inf
            j = int(np.argmax(info))
            if np.isfinite(info[j]):
                blocked[j] = True
                given.append(j)
                items[m, t] = j
                theta = float(map_ability(x[m, given], am[given], bm[given], prior_mean=prior_mean,
                                          prior_sd=prior_sd, theta0=theta if warm_start else prior_mean).theta)
            out[m, t] = theta
    return Trajectory(items=items, estimate=out, steps=np.arange(1, budget + 1))
