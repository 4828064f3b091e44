"""Selectors of the adaptive-testing engine: which item each model is given next.

One small class per rule, each with ``begin(items, available, random)`` returning a *run* that
holds one test's state for many models at once (every array operation is over all models):

==========================  =====================================================================
selector                    next item
==========================  =====================================================================
:class:`MaxInformation`     the most informative unused item at the current ability (Fluid
                            Benchmarking, paper section "Adaptive selection (Algorithm 1)")
:class:`RandomSelection`    the next item of the model's own random order (Random, Random IRT)
:class:`Randomesque`        uniformly among the ``k`` most informative (exposure control)
:class:`SympsonHetter`      the most informative, given with probability ``K_j``, else set aside
:class:`ContentBalanced`    Kingsbury-Zara: from the category furthest below its target share,
                            then by the rule ``within`` (one of the above)
:class:`DOptimal`           the largest gain in the determinant of the posterior information
                            (multidimensional models; one dimension: maximum information)
==========================  =====================================================================

A run has ``unused`` (models x items, bool: the items a model may still be given),
``select(theta, est=None, active=None)`` (the next item of every ``active`` model, -1 when it has
none left; ``theta`` is the current ability, ``est`` the estimator's run, which D-optimal asks
for the posterior covariance) and ``skipped(rows, items)`` (a proposed item turned out not to be
given; content balancing stops counting it). The chosen item is marked used at once: a session
that skips it never sees it again.

Randomness (:class:`Streams`): random orders are drawn once per run from the run's generator;
randomesque and Sympson-Hetter draw at select call ``t`` from :func:`step_rng` ``(seed, t)``, so a
replayed session proposes the same items, and a test is reproduced by its seed.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from irtlib._typing import ArrayLike, Seed
from irtlib.core.kernels import fisher_information
from irtlib.errors import InputError

from . import maxinfo_kernel, score_kernel
from .items import ItemModel, TwoPLItems

__all__ = [
    "Selector", "SelectorRun", "Streams", "step_rng", "MaxInformation", "RandomSelection", "Randomesque",
    "SympsonHetter", "ContentBalanced", "DOptimal", "ExposureControl", "ContentBalance", "choose_items",
    "kingsbury_zara_category", "selector_for",
]


# ---------------------------------------------------------------------------- protocols, randomness
class SelectorRun(Protocol):
    """One test's selection state for many models (see the module docstring)."""

    unused: np.ndarray

    def select(self, theta: np.ndarray | None, est: object = None, active: np.ndarray | None = None) -> np.ndarray:
        """Next item of every active model (-1: none); the items are marked used."""


class Selector(Protocol):
    """A selection rule. ``adaptive`` says whether it needs the current ability."""

    adaptive: bool

    def begin(self, items: ItemModel, available: np.ndarray, random: Streams | None) -> SelectorRun:
        """Start a run over ``items`` with ``available`` (n_models, n_items)."""


def step_rng(seed: Seed | None, t: int) -> np.random.Generator:
    """The random generator of select call ``t`` of a test seeded with ``seed``.

    Its draws depend only on ``(seed, t)`` (an int, a SeedSequence or None), so a batch run and a
    resumed session propose the same items at the same step. A Generator is used as it is
    (its draws then follow one another).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, int(t))))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(int(t),)))


class Streams:
    """The random streams of one test: ``generator`` (drawn from once, at the start) and ``at(t)``."""

    def __init__(self, seed: Seed | None = None):
        self.seed = seed
        self._generator = None

    @property
    def generator(self) -> np.random.Generator:
        """``numpy.random.default_rng(seed)``, made on first use."""
        if self._generator is None:
            self._generator = np.random.default_rng(self.seed)
        return self._generator

    def at(self, t: int) -> np.random.Generator:
        """The generator of select call ``t`` (:func:`step_rng`)."""
        return step_rng(self.seed, t)


# ---------------------------------------------------------------------------- maximum information
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
        The radii of the bounds, increasing. The choice is the exact argmax whatever they are; the
        two wide ones spare most full passes of a test whose ability moves by more than 0.03 a
        step (the authors' MLE early on; benchmarks/bench_adaptive.py ``--mle``).
    screen : bool
        Where :mod:`irtlib.selection.score_kernel` loads, the candidates are evaluated exactly
        in C (:func:`~irtlib.selection.score_kernel.best_candidates`) and the screen serves the
        full passes only. Compare information values in single precision (SIMD ``exp``, about ten times faster
        than the double-precision logistic on this kind of machine). Rounding moves
        ``z = a (theta - b)`` by at most ``2.4e-7 |a| (8 + |b|)``, so the single-precision
        information is within a relative ``delta`` (that plus 1e-6, computed from the run's
        largest ``|a|`` and ``|b|``; about 3e-5 on the simulated benchmarks) of the exact one, and
        two items more than ``4 delta`` apart compare the same way exactly. When the best item
        is not that far ahead of every other (twin items with equal ``a`` and ``b`` excepted: the
        lower index wins among them), the 8 best screened items are evaluated exactly, and if
        even those are within the margin, all of them. Bounds built from screened values are
        inflated by the margin. The choice is therefore the exact one, as with ``screen=False``
        (which is also used when ``delta`` would exceed 2.5e-3). Where the four-lane kernel loads
        (:mod:`irtlib.selection.maxinfo_kernel`; ``IRTLIB_MAXINFO_FULL=0`` keeps numpy), each step is
        one C call (the candidates, their bound, the marks) and each full pass another
        (:class:`~irtlib.selection.maxinfo_kernel.FullPass`: the exact argmax over the bank, the new
        candidates and bounds computed in logs with their own margin); the screen then serves only the
        rows that kernel leaves (values that are not numbers, ``|a (theta - b)|`` beyond 700). The
        picks are the same.
    """

    adaptive = True

    def __init__(self, *, cache_size: int = 256, radii=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3), screen: bool = True):
        radii = np.sort(np.asarray(radii, dtype=float))
        if cache_size < 0:
            raise InputError("cache_size must be >= 0")
        if radii.size == 0 or radii[0] < 0:
            raise InputError("radii must be non-empty and non-negative")
        self.cache_size, self.radii, self.screen = int(cache_size), radii, bool(screen)

    def begin(self, items: ItemModel, available: np.ndarray, random: Streams | None = None) -> SelectorRun:
        """Start selecting for one run: the item model, the available items (models x items), the random streams.

        A 2PL bank (:class:`~irtlib.selection.items.TwoPLItems` without ``c``) gets the cached and
        screened run described above. With lower asymptotes ``c`` the choice maximises Birnbaum's
        information (:func:`irtlib.core.kernels.fisher_information`), evaluated exactly over every
        item at every step: the cache and the screen rest on 2PL bounds and are switched off. Any
        other item model (graded, ...) gets the plain argmax of its ``information``.
        """
        available = np.asarray(available, dtype=bool)
        if isinstance(items, TwoPLItems):
            if items.c is not None:
                return _MaxInfoRun(items.a, items.b, available, 0, self.radii, False, c=items.c)
            return _MaxInfoRun(items.a, items.b, available, self.cache_size, self.radii, self.screen)
        return _RankedRun(items, available, random)

    def __repr__(self) -> str:
        return f"MaxInformation(cache_size={self.cache_size}, radii={tuple(self.radii)}, screen={self.screen})"


#: The exact information: the kernel itself (theta (n, 1) against a, b (N,) or (n, C)).
_information = fisher_information

_SCREEN_TOP = 8          # near-ties (twin items have equal values): confirm this many exactly
_TWIN_SHARE = 4          # twin groups above cache_size / this make a row's bounds leave twins out (speed only)


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

    Per row for per-model parameters; identical rows are labelled once. The label is the rank of the
    item's ``(a, b)`` among the distinct pairs in lexicographic order (``numpy.unique(..., axis=0)``'s
    inverse: a sort by ``b`` within ``a`` and a new label wherever ``a`` or ``b`` changes, without
    ``unique``'s structured view). Only which items share a label matters to the selector.
    """
    return _twin_groups(a, b)[0]


def _twin_groups(a, b):
    """:func:`_twin_labels` and the size of each row's largest group of twins (all items, used or not).

    Returns ``(labels, biggest)``: ``biggest`` an int for a shared bank, one per model otherwise. A row's
    rows equal to the previous one bit for bit (a split's test models share its parameters) take its labels.
    """
    if a.ndim == 1:
        order = np.lexsort((b, a))
        sa, sb = a[order], b[order]
        new = np.ones(a.size, dtype=bool)
        new[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
        labels = np.empty(a.size, dtype=np.int32)
        labels[order] = np.cumsum(new) - 1
        starts = np.flatnonzero(new)
        return labels, int(np.diff(starts, append=a.size).max()) if a.size else 0
    out = np.empty(a.shape, dtype=np.int32)
    biggest = np.zeros(a.shape[0], dtype=np.int64)
    ai, bi = a.view(np.int64) if a.dtype == np.float64 else a, b.view(np.int64) if b.dtype == np.float64 else b
    for i in range(a.shape[0]):
        if i and np.array_equal(ai[i], ai[i - 1]) and np.array_equal(bi[i], bi[i - 1]):
            out[i], biggest[i] = out[i - 1], biggest[i - 1]
        else:
            out[i], biggest[i] = _twin_groups(a[i], b[i])
    return out, biggest


def _largest_group(twin, unused):
    """Per row of ``unused`` (models x items), the most unused items that share one twin label (0: none unused).

    One ``bincount`` over (row, label) pairs: the length of the longest run of equal labels in the row's
    sorted labels, without sorting.
    """
    n_models, n_items = unused.shape
    labels = np.broadcast_to(twin, unused.shape)
    keys = (np.arange(n_models, dtype=np.int64)[:, None] * n_items + labels)[unused]
    if keys.size == 0:
        return np.zeros(n_models, dtype=np.int64)
    return np.bincount(keys, minlength=n_models * n_items).reshape(n_models, n_items).max(axis=1)


class _MaxInfoRun:
    def __init__(self, a, b, available, cache_size, radii, screen, c=None):
        self.a, self.b, self.c = a, b, c                          # (n_items,) or (n_models, n_items)
        self.per_model = a.ndim == 2
        self.unused = np.array(available, dtype=bool, copy=True, order="C")   # row-major: the C kernel's
        n_models, n_items = self.unused.shape
        self.rows = np.arange(n_models)
        self.left = self.unused.sum(axis=1)
        self.radii = radii
        self.radii32 = radii.astype(np.float32)
        # Single-precision error of a^2 P (1 - P), relative: |d log I / dz| <= 1, and rounding
        # a, theta, b, the difference and the product moves z = a (theta - b) by at most
        # 2.4e-7 |a| (|theta| + |b|), with |theta| <= 8; exp, divisions and products add < 1e-6.
        # Values more than 4x that apart (the margin) compare the same way in double precision.
        err = 2.4e-7 * float(np.abs(a).max()) * (8.0 + float(np.abs(b).max())) + 1e-6
        self.gap = 4.0 * err
        self.screen = screen and self.gap < 1e-2
        self.twin, biggest = _twin_groups(a, b) if self.screen else (None, 0)
        # rows whose available items include a group of twins (equal a and b) larger than a quarter of the
        # cache: only there is it worth leaving twins out of the bounds (small groups rarely straddle the cut)
        self.twinned = None
        if self.twin is not None:
            # only rows with a large enough group among all their items can have one among the unused
            self.twinned = np.broadcast_to(biggest > cache_size // _TWIN_SHARE, n_models).copy()
            if self.twinned.any():
                big = np.flatnonzero(self.twinned)
                twin = self.twin[big] if self.twin.ndim == 2 else self.twin
                self.twinned[big] = _largest_group(twin, self.unused[big]) > cache_size // _TWIN_SHARE
        self.cache = cache_size if 0 < cache_size < n_items else 0
        self.full_passes = 0      # diagnostics: model-steps that needed a full pass
        self.kernel = self.vector = self.fused = None
        if self.cache:
            c = self.cache
            # the C kernel evaluates the candidates exactly in one pass (no screen needed there)
            self.kernel = score_kernel.load()
            self.vector = maxinfo_kernel.load() if self.kernel is not None else None   # the same picks, faster
            self.items = np.zeros((n_models, c), dtype=np.intp)  # candidates, by item id
            self.ca, self.cb = np.ones((n_models, c)), np.zeros((n_models, c))
            self.ca32, self.cb32 = np.ones((n_models, c), np.float32), np.zeros((n_models, c), np.float32)
            self.cq32 = np.ones((n_models, c), np.float32)
            self.used = np.ones((n_models, c), dtype=bool)
            self.ctwin = np.zeros((n_models, c), dtype=np.int32)
            # guard[m, i]: candidate i's twins with higher indices were left out of the bound (_build)
            self.guard = np.zeros((n_models, c), dtype=bool)
            self.theta_c = np.full(n_models, np.inf)              # inf: not built yet
            # bound[m, i]: at least what any non-candidate can give within radii[i] of theta_c;
            # the extra last column (+inf) is what a theta outside every radius looks up.
            self.bound = np.full((n_models, radii.size + 1), np.inf)
        fused = os.environ.get("IRTLIB_MAXINFO_FULL", "1") != "0"       # 0: the numpy full pass and step
        if self.c is None and radii.size <= maxinfo_kernel.MAX_RADII and fused:
            lib = maxinfo_kernel.load() if score_kernel.load() is not None else None
            if lib is not None:            # full passes and steps in C, the same picks (maxinfo_kernel.FullPass)
                state = {"left": self.left}
                if self.cache:
                    state |= {"items": self.items, "ca": self.ca, "cb": self.cb, "used": self.used,
                             "guard": self.guard, "theta_c": self.theta_c, "bound": self.bound}
                    if self.twin is not None:
                        state["ctwin"] = self.ctwin
                self.fused = maxinfo_kernel.FullPass(lib, a, b, self.unused, radii, cache=self.cache, twin=self.twin,
                                                     twinned=self.twinned, state=state)

    # the single-precision bank of the screen: only the numpy full pass reads it (with the C kernel, the rows
    # it leaves), so it is made at its first use
    @functools.cached_property
    def a32(self) -> np.ndarray:
        return self.a.astype(np.float32)

    @functools.cached_property
    def b32(self) -> np.ndarray:
        return self.b.astype(np.float32)

    @functools.cached_property
    def q32(self) -> np.ndarray:
        return self.a32 * self.a32

    @functools.cached_property
    def logpeak32(self) -> np.ndarray:
        return np.log(self.q32 / np.float32(4.0) * np.float32(1.0 + self.gap))

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
        """Exact argmax over all items for ``rows``; rebuilds their candidate lists.

        In C where the kernel loads (:class:`~irtlib.selection.maxinfo_kernel.FullPass`: the pick,
        the candidates and the bounds in one pass per model); rows it leaves (values that are not
        numbers, parameters beyond its range) and runs without it take :meth:`_full_numpy`.
        """
        self.full_passes += rows.size
        if self.fused is None:
            return self._full_numpy(rows, theta[rows])
        pick, wild = self.fused(rows, theta[rows])
        if wild.any():
            w = np.flatnonzero(wild)
            pick[w] = self._full_numpy(rows[w], theta[rows[w]])
        return pick

    def _full_numpy(self, rows, th):
        """:meth:`_full` in numpy (single-precision screen, exact refinement, :meth:`_build`)."""
        blocked = ~self.unused[rows]
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
        part = np.argpartition(info32, n - c, axis=1)
        top = np.sort(part[:, n - c:], axis=1)
        if self.twin is not None and self.twinned[rows].any():
            top = self._lowest_ties(info32, part, top)
        self.items[rows] = top
        self.ca[rows], self.cb[rows] = self._cols(self.a, rows, top), self._cols(self.b, rows, top)
        self.ca32[rows], self.cb32[rows] = self.ca[rows], self.cb[rows]
        self.cq32[rows] = self.ca32[rows] * self.ca32[rows]
        self.used[rows] = np.take_along_axis(blocked, top, 1)
        if self.twin is not None:
            self.ctwin[rows] = self._cols(self.twin, rows, top)
        self.theta_c[rows] = th
        if self.fused is not None:
            self.fused.cready[rows] = 0             # new candidates: the C step ranks them again
        # bound over the unused non-candidates, in logs: log(I (1 + gap)) + a r, capped by the
        # log of the peak a^2 / 4 (both inflated by the screening margin)
        other = ~blocked
        np.put_along_axis(other, top, False, axis=1)
        if self.twin is not None:
            self._leave_out_twins(rows, other, top)
        with np.errstate(divide="ignore"):
            base = np.log(np.where(other, info32, np.float32(0.0)) * np.float32(1.0 + self.gap))
        if a32 is None:
            a32 = self._rows(self.a32, rows)
        peak = self._rows(self.logpeak32, rows)
        if self.kernel is not None and self.radii.size <= score_kernel.MAX_RADII:     # one pass in C, same floats
            lim = score_kernel.radius_bounds(self.kernel, base, a32, peak, self.radii32)
        else:
            lim = score_kernel.numpy_radius_bounds(base, a32, peak, self.radii32)
        self.bound[rows, :self.radii.size] = np.exp(lim.astype(float)) * (1.0 + 1e-4)  # undo the logs, rounding margin

    def _lowest_ties(self, info32, part, top):
        """The candidates with ties at the cut taken lowest index first (twins: the ones argmax reaches first).

        ``argpartition`` keeps an arbitrary part of the items tied with the ``cache``-th largest
        value; taking the lowest indices instead lets :meth:`_leave_out_twins` drop the others'
        twins from the bound. Rows with a NaN keep ``top``.
        """
        c, n = self.cache, info32.shape[1]
        thr = np.take_along_axis(info32, part[:, n - c:n - c + 1], 1)
        eq = info32 == thr
        need = c - (info32 > thr).sum(axis=1)
        if (eq.sum(axis=1) == need).all() or np.isnan(info32).any():
            return top                                     # no tie cut in two: the same set
        keep = (info32 > thr) | (eq & (np.cumsum(eq, axis=1) <= need[:, None]))
        return np.nonzero(keep)[1].reshape(-1, c)

    def _leave_out_twins(self, rows, other, top):
        """Leave out of the bound each non-candidate whose twin label has a candidate of lower index.

        Twins (equal ``a`` and ``b``) have equal information at every ability, and argmax takes the
        lowest index among them, so while any candidate of a label is unused, its twins of higher
        index cannot be the choice. Such candidates are marked in ``guard``; when the last unused
        candidate of a guarded label is used, :meth:`_unguard` voids the row's bounds (a full pass
        follows). ``other`` (rows x items) is updated in place.
        """
        if not self.twinned[rows].any():
            self.guard[rows] = False
            return
        n = other.shape[1]
        ctw = self.ctwin[rows]
        twin = self._rows(self.twin, rows)
        if twin.ndim == 1:
            twin = np.broadcast_to(twin, other.shape)
        r = np.arange(rows.size)[:, None]
        last = np.full((rows.size, n), -1, dtype=np.intp)          # per label: its last candidate's index
        np.maximum.at(last, (np.broadcast_to(r, top.shape), ctw.astype(np.intp)), top)
        at = np.take_along_axis(last, twin.astype(np.intp), 1)       # each item's label's last candidate
        dominated = other & (at >= 0) & (np.arange(n)[None, :] > at)
        if not dominated.any():
            self.guard[rows] = False
            return
        other &= ~dominated
        has = np.zeros((rows.size, n), dtype=bool)
        rr, jj = np.nonzero(dominated)
        has[rr, twin[rr, jj]] = True
        self.guard[rows] = np.take_along_axis(has, ctw.astype(np.intp), 1)

    def _unguard(self, rows, slots):
        """Void the bounds of ``rows`` whose just-used candidate ``slots`` left their guarded label without one."""
        g = self.guard[rows, slots]
        if not g.any():
            return
        rows, slots = rows[g], slots[g]
        lab = self.ctwin[rows, slots]
        left = ((self.ctwin[rows] == lab[:, None]) & ~self.used[rows]).any(axis=1)
        self.bound[rows[~left]] = np.inf

    def _candidates(self, theta):
        """Best unused candidate of every model.

        Returns (column, a value certainly not above its exact information). With the C kernel
        (:func:`irtlib.selection.score_kernel.best_candidates`, or its four-lane form
        :func:`irtlib.selection.maxinfo_kernel.best_candidates`) the exact argmax and its exact value.
        """
        if self.vector is not None:
            return maxinfo_kernel.best_candidates(self.vector, theta, self.ca, self.cb, self.used)
        if self.kernel is not None:
            return score_kernel.best_candidates(self.kernel, theta, self.ca, self.cb, self.used)
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

    def select(self, theta, est=None, active=None):
        theta = np.asarray(theta, dtype=float)
        if self.fused is not None:
            return self._select_c(theta, active)
        out = np.full(self.rows.size, -1, dtype=np.intp)
        live = self.left > 0
        if active is not None:
            live &= active
        if not self.cache:
            pending = np.flatnonzero(live)
        else:
            level = np.searchsorted(self.radii, np.abs(theta - self.theta_c))
            k, low = self._candidates(theta)
            ok = live & (low > self.bound[self.rows, level])
            hit, k_hit = self.rows[ok], k[ok]
            out[hit] = self.items[hit, k_hit]
            pending = np.flatnonzero(live & ~ok)
        if pending.size:
            out[pending] = self._full(pending, theta)
        got = np.flatnonzero(out >= 0)
        self.unused[got, out[got]] = False
        if self.cache:
            self.used[hit, k_hit] = True       # a candidate's own column (candidates are distinct items)
            redone = pending[out[pending] >= 0]  # rebuilt lists: wherever the chosen item is among them
            mine = self.items[redone] == out[redone][:, None]
            self.used[redone] |= mine
            if self.twin is not None:
                inside = mine.any(axis=1)
                self._unguard(np.concatenate((hit, redone[inside])),
                              np.concatenate((k_hit, np.argmax(mine[inside], axis=1))))
        self.left[got] -= 1
        return out

    def _select_c(self, theta, active):
        """:meth:`select` in C (:meth:`~irtlib.selection.maxinfo_kernel.FullPass.step` and the full pass).

        The same picks and the same state after them: the kernel marks every pick as given; rows its
        full pass leaves (``wild``) are decided and marked here as :meth:`select` does.
        """
        live = self.left > 0
        if active is not None:
            live &= active
        if self.cache:
            out, pending = self.fused.step(theta, live)
        else:
            out, pending = np.full(self.rows.size, -1, dtype=np.int64), np.flatnonzero(live)
        if pending.size:
            self.full_passes += pending.size
            pick, wild = self.fused(pending, theta[pending], mark=True)
            out[pending] = pick
            if wild.any():
                rows = pending[wild]
                j = self._full_numpy(rows, theta[rows])
                out[rows] = j
                self.unused[rows, j] = False
                self.left[rows] -= 1
                if self.cache:
                    mine = self.items[rows] == j[:, None]
                    self.used[rows] |= mine
                    if self.twin is not None:
                        inside = mine.any(axis=1)
                        self._unguard(rows[inside], np.argmax(mine[inside], axis=1))
        return out





class RandomSelection:
    """Uniformly random items: every model gets its own random order of its available items.

    The order is drawn once per run from the run's generator (``run_adaptive(seed=...)``), so
    the first ``k`` items of a run to budget ``K`` are the run to budget ``k``.
    """

    adaptive = False

    def begin(self, items: ItemModel, available: np.ndarray, random: Streams | None = None) -> _RandomRun:
        """Start selecting: a random order of each model's available items, drawn from ``random.generator``."""
        return _RandomRun(np.asarray(available, dtype=bool), (random or Streams()).generator)

    def __repr__(self) -> str:
        return "RandomSelection()"


class _RandomRun:
    """Each model's order: its items by a uniform random key (unavailable ones last), ties by column.

    The order is ``numpy.argsort(keys, axis=1, kind="stable")``; only the positions a test reaches are
    computed (:meth:`prefix`), so a test of ``K`` items out of ``N`` does not sort all ``N`` keys.
    """

    def __init__(self, available, rng):
        keys = rng.random(available.shape)
        keys[~available] = np.inf
        self.keys = keys
        self._order = np.empty((available.shape[0], 0), dtype=np.intp)
        self.n_available = available.sum(axis=1)
        self.unused = available.copy()
        self.pos = np.zeros(available.shape[0], dtype=np.intp)     # next position in each model's order

    @property
    def order(self) -> np.ndarray:
        """Every model's whole order, shape (n_models, n_items)."""
        return self.prefix(self.keys.shape[1])

    def prefix(self, m: int) -> np.ndarray:
        """At least the first ``m`` positions of every model's order (the columns of the stable argsort).

        The ``m`` smallest keys (``argpartition``), sorted by column and then stably by key, are the
        first ``m`` of the stable argsort of the whole row wherever no key equal to the ``m``-th smallest
        is left out; rows where one is (ties at the cut, or fewer than ``m`` available items: their
        infinite keys) are sorted whole.
        """
        n_items = self.keys.shape[1]
        m = min(max(int(m), 0), n_items)
        if m <= self._order.shape[1]:
            return self._order
        m = min(max(m, 2 * self._order.shape[1], 64), n_items)
        keys = self.keys
        if 2 * m >= n_items:
            self._order = np.argsort(keys, axis=1, kind="stable")
            return self._order
        part = np.sort(np.argpartition(keys, m - 1, axis=1)[:, :m], axis=1)
        kp = np.take_along_axis(keys, part, 1)
        order = np.take_along_axis(part, np.argsort(kp, axis=1, kind="stable"), 1)
        cut = np.take_along_axis(kp, np.argmax(kp, axis=1)[:, None], 1)
        tied = np.flatnonzero((keys <= cut).sum(axis=1) != m)
        if tied.size:
            order[tied] = np.argsort(keys[tied], axis=1, kind="stable")[:, :m]
        self._order = order
        return order

    def select(self, theta=None, est=None, active=None):
        rows = np.arange(self.pos.size)
        live = self.pos < self.n_available
        if active is not None:
            live &= active
        out = np.full(rows.size, -1, dtype=np.intp)
        if live.any():
            order = self.prefix(int(self.pos[live].max()) + 1)
            out[live] = order[rows[live], self.pos[live]]
        self.unused[rows[live], out[live]] = False
        self.pos += live
        return out

    def select_block(self, m):
        """The next ``m`` items of every model at once, shape (n_models, m): ``m`` calls of :meth:`select`.

        -1 once a model's available items are spent.
        """
        step = self.pos[:, None] + np.arange(m)[None, :]
        live = step < self.n_available[:, None]
        order = self.prefix(int(step[live].max()) + 1 if live.any() else 0)
        if order.shape[1] == 0:
            return np.full(step.shape, -1, dtype=np.intp)
        out = np.where(live, np.take_along_axis(order, np.minimum(step, order.shape[1] - 1), axis=1), -1)
        rows, cols = np.nonzero(live)
        self.unused[rows, out[rows, cols]] = False
        self.pos += live.sum(axis=1)
        return out

    def skipped(self, rows, items):
        """Nothing to undo: the order moves on."""


# ---------------------------------------------------------------------------- exposure, content
def _positive_int(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class ExposureControl:
    """Exposure control for item selection.

    Parameters
    ----------
    randomesque : int
        Draw the next item uniformly among this many most informative candidates (1: none).
    sympson_hetter : array_like, shape (n_items,), optional
        Exposure-control parameters ``K_j`` in [0, 1] (:func:`irtlib.selection.cat.sympson_hetter`
        calibrates them): the selected item is given with probability ``K_j``; otherwise it is set
        aside for this model and the next candidate is tried (an item with ``K_j = 1`` is always given).
    """

    randomesque: int = 1
    sympson_hetter: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        _positive_int(self.randomesque, "randomesque")
        if self.sympson_hetter is not None:
            k = np.asarray(self.sympson_hetter, dtype=float)
            if k.ndim != 1 or not np.all((k >= 0) & (k <= 1)):
                raise InputError("sympson_hetter must be a 1-D array of probabilities in [0, 1]")
            object.__setattr__(self, "sympson_hetter", k)


@dataclass(frozen=True)
class ContentBalance:
    """Kingsbury-Zara content balancing.

    Parameters
    ----------
    categories : array_like, shape (n_items,)
        The category of every item (any labels).
    targets : mapping label -> share, optional
        Target share of each category in a test; default: its share of the bank. Shares are
        normalised to sum to one; categories without a target get none (share 0).
    """

    categories: np.ndarray = field(repr=False)
    targets: dict | None = None

    def __post_init__(self):
        labels = np.asarray(self.categories)
        if labels.ndim != 1:
            raise InputError("categories must be one label per item")
        uniq, code = np.unique(labels, return_inverse=True)
        if self.targets is None:
            share = np.bincount(code, minlength=uniq.size) / labels.size
        else:
            unknown = set(self.targets) - set(uniq.tolist())
            if unknown:
                raise InputError(f"targets name categories no item has: {sorted(map(str, unknown))}")
            share = np.array([float(self.targets.get(u, 0.0)) for u in uniq.tolist()])
            if np.any(share < 0) or share.sum() <= 0:
                raise InputError("targets must be non-negative shares with a positive sum")
            share = share / share.sum()
        object.__setattr__(self, "_labels", uniq)
        object.__setattr__(self, "_code", code)
        object.__setattr__(self, "_share", share)

    @property
    def labels(self) -> np.ndarray:
        """The category labels, sorted."""
        return self._labels

    @property
    def code(self) -> np.ndarray:
        """Each item's category as an index into :attr:`labels`, shape (n_items,)."""
        return self._code

    @property
    def share(self) -> np.ndarray:
        """Target share of each category, shape (n_categories,), summing to one."""
        return self._share


def kingsbury_zara_category(counts: ArrayLike, share: ArrayLike, has_items: ArrayLike) -> np.ndarray:
    """The category each model's next item comes from: the largest shortfall against its target.

    Parameters
    ----------
    counts : array_like, shape (n_models, n_categories)
        Items given so far per category.
    share : array_like, shape (n_categories,)
        Target shares.
    has_items : array_like of bool, shape (n_models, n_categories)
        Whether the category still has an available item for that model.

    Returns
    -------
    ndarray of int, shape (n_models,)
        ``argmax over categories with items of (t + 1) share_c - counts_c`` (``t`` items given;
        ties: the lowest category), or -1 where no category has an item.
    """
    counts = np.asarray(counts, dtype=float)
    share = np.asarray(share, dtype=float)
    has = np.asarray(has_items, dtype=bool)
    t = counts.sum(axis=1, keepdims=True)
    deficit = np.where(has, (t + 1) * share - counts, -np.inf)
    best = np.argmax(deficit, axis=1)
    return np.where(has.any(axis=1), best, -1)


#: Ranks Sympson-Hetter looks at first (:func:`_sympson_hetter`); only rows it cannot decide there are ranked whole.
SYMPSON_HETTER_HEAD = 64


def _sympson_hetter(masked, avail, u, v, k_exposure, k):
    """Sympson-Hetter's choice (randomesque among the first ``k`` items it lets through, for ``k > 1``).

    Each row's items are ranked by ``masked`` (largest first; ties: the lowest index first), the
    item at rank ``r`` is let through when available and ``u[:, r] < k_exposure[item]``, and the
    first let through (the ``pick``-th, ``pick`` drawn from ``v``, for randomesque) is given; the
    available items tried before it are set aside. Only the first :data:`SYMPSON_HETTER_HEAD`
    ranks are ordered (a partition, then a sort of those), and the rows whose choice lies beyond
    them are ranked whole: the same choice as ranking
    every item of every row, in a fraction of the time on a bank of thousands of items.

    Parameters
    ----------
    masked : ndarray, shape (n_models, n_items)
        The criterion, -inf where an item is not available.
    avail : ndarray of bool, shape (n_models, n_items)
    u : ndarray, shape (n_models, n_items)
        Uniform draws, one per rank.
    v : ndarray, shape (n_models,), or None
        Uniform draws of the randomesque pick (``k > 1``).
    k_exposure : ndarray, shape (n_items,)
        The Sympson-Hetter parameters.
    k : int
        Randomesque's width (1: the first item let through).

    Returns
    -------
    item : ndarray of int, shape (n_models,)
        -1 where no item was let through.
    rejected : ndarray of bool, shape (n_models, n_items)
    """
    n_models, n_items = masked.shape
    item = np.full(n_models, -1)
    rejected = np.zeros((n_models, n_items), dtype=bool)
    todo = np.arange(n_models)
    head = SYMPSON_HETTER_HEAD
    if head < n_items:
        # the head of each row's ranking: the items above the head-th largest value, then the
        # lowest-indexed of those equal to it, ordered by value (stable: ties by index)
        neg = -masked
        cut = np.partition(neg, head - 1, axis=1)[:, head - 1:head]
        above, tie = neg < cut, neg == cut
        take = above | (tie & (np.cumsum(tie, axis=1) <= head - above.sum(axis=1, keepdims=True)))
        fine = np.flatnonzero(~np.isnan(cut[:, 0]))            # a NaN cut: fewer than head comparable values
        cols = np.nonzero(take[fine])[1].reshape(fine.size, head)
        order = np.take_along_axis(cols, np.argsort(np.take_along_axis(neg[fine], cols, axis=1), axis=1,
                                                    kind="stable"), axis=1)
        chosen, tried, enough = _sympson_hetter_ranked(order, avail[fine], u[fine], None if v is None else v[fine],
                                                       k_exposure, k)
        done = fine[enough]
        item[done] = chosen[enough]
        rejected[done[:, None], order[enough]] = tried[enough]
        todo = np.setdiff1d(todo, done)
    if todo.size:
        order = np.argsort(-masked[todo], axis=1, kind="stable")
        chosen, tried, _ = _sympson_hetter_ranked(order, avail[todo], u[todo], None if v is None else v[todo],
                                                  k_exposure, k)
        item[todo] = chosen
        rejected[todo[:, None], order] = tried
    return item, rejected


def _sympson_hetter_ranked(order, avail, u, v, k_exposure, k):
    """:func:`_sympson_hetter` along the ranks ``order`` (rows, width): every rank, or the first ones.

    Returns the chosen item (-1: none), the items tried and set aside per rank, and whether the
    ranks hold at least ``k`` items let through (then the choice does not depend on later ranks).
    """
    return _sympson_hetter_walk(order, np.take_along_axis(avail, order, axis=1), u, v, k_exposure, k)


def _sympson_hetter_walk(order, ok, u, v, k_exposure, k):
    """:func:`_sympson_hetter_ranked` given ``ok``, whether the item at each rank is available."""
    rows = np.arange(order.shape[0])
    width = order.shape[1]
    accept = (u[:, :width] < k_exposure[order]) & ok
    rank = np.cumsum(accept, axis=1)
    if k > 1:                  # randomesque among the first k items Sympson-Hetter lets through
        n_ok = np.minimum(rank[:, -1], k)
        pick = np.floor(v * np.maximum(n_ok, 1)).astype(int) + 1
        first = np.argmax(accept & (rank == pick[:, None]), axis=1)
    else:
        first = np.argmax(accept, axis=1)
    found = accept[rows, first]
    # everything tried before the administered item was set aside (all tried, if none accepted)
    tried = (np.arange(width)[None, :] < np.where(found, first, width)[:, None]) & ok & ~accept
    return np.where(found, order[rows, first], -1), tried, rank[:, -1] >= k


class RowDraws:
    """``rng.random(shape)``, drawn only where asked: the first columns of some rows.

    With numpy's default bit generator (PCG64) the rows asked for are drawn by jumping over the
    others (:meth:`numpy.random.PCG64.advance`: a float64 draw is one step), so they hold the values
    ``rng.random(shape)`` would; with any other generator the whole array is drawn at once. Either
    way ``rng`` is left where ``rng.random(shape)`` leaves it, so draws after it are unchanged.
    """

    def __init__(self, rng: np.random.Generator | None, shape: tuple[int, int]):
        self.shape = (int(shape[0]), int(shape[1]))
        self.rng, self.full = rng, None
        if rng is None:
            return
        bg = rng.bit_generator
        if type(bg) is np.random.PCG64:
            self.start = bg.state
            bg.advance(self.shape[0] * self.shape[1])
        else:
            self.full = rng.random(self.shape)

    @classmethod
    def of(cls, values: np.ndarray) -> RowDraws:
        """The draws already made, as an array of the full shape."""
        out = cls(None, values.shape)
        out.full = values
        return out

    def rows(self, rows: np.ndarray, width: int) -> np.ndarray:
        """``rng.random(shape)[rows, :width]`` (``rows`` increasing)."""
        if self.full is not None:
            return self.full[rows, :width]
        bg = self.rng.bit_generator
        end = bg.state
        bg.state = self.start
        out = np.empty((len(rows), int(width)))
        n_cols, at = self.shape[1], 0
        for i, r in enumerate(rows.tolist()):
            bg.advance(r * n_cols - at)
            out[i] = self.rng.random(int(width))
            at = r * n_cols + int(width)
        bg.state = end
        return out


class SympsonHetterCandidates:
    """Sympson-Hetter's choice on a 2PL bank from each model's few most informative items, exactly.

    :func:`choose_items` with Sympson-Hetter ranks every item of every model by its information at
    the model's ability, which is most of a calibration's time on a bank of thousands of items
    (:func:`irtlib.selection.cat.sympson_hetter`). The choice depends only on the first ranks, and
    the information of item ``j`` anywhere within ``r`` of an ability ``t`` is at most
    ``min(I_j(t) exp(|a_j| r), a_j^2 / 4)`` (``log P (1 - P)`` is 1-Lipschitz in ``z = a (theta - b)``).
    So the abilities are cut into cells of width ``width``; each cell keeps the ``n_candidates`` items
    with the largest such bound over the cell, and the largest bound of the others. A model's
    candidates whose information at its ability exceeds that bound are its first ranks, in order (ties:
    the lowest item first, as :func:`choose_items`), since no other item can come before them; where
    Sympson-Hetter's choice lies among them it is decided there, with the same draws. Other models
    (the choice further down, an ability outside the cells, no candidate available) are ranked
    whole by :func:`_sympson_hetter`. The information is computed by
    :func:`irtlib.core.kernels.fisher_information`, element by element the same values as on the
    whole bank, so the choices and the items set aside are those of :func:`choose_items`.

    Parameters
    ----------
    a, b : ndarray, shape (n_items,)
        The 2PL bank (shared by every model).
    n_candidates : int
    width : float
        Width of an ability cell.
    span : float
        The cells cover ``[-span, span]``.
    """

    #: Relative slack on the cells' bounds, far above the rounding of the information.
    SLACK = 1e-9

    def __init__(self, a, b, *, n_candidates: int = 128, width: float = 0.02, span: float = 6.0):
        self.a, self.b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        self.lo, self.width = -float(span), float(width)
        self.n_cells = int(round(2 * span / width))
        self.n_candidates = int(n_candidates)
        self._cells, self._tables = None, None          # built when first needed (the numpy path, the kernel's)

    def _cell_bounds(self, cells) -> np.ndarray:
        """Every item's bound over each of ``cells`` (rows), slack included; element by element the same values."""
        mid = self.lo + (np.arange(self.n_cells)[cells] + 0.5) * self.width
        return np.minimum(fisher_information(mid[:, None], self.a, self.b) * np.exp(np.abs(self.a) * self.width / 2),
                          self.a * self.a / 4) * (1.0 + self.SLACK)

    def _candidate_cells(self) -> tuple[np.ndarray, np.ndarray]:
        """``(bound, candidates)``: each cell's largest bound beyond its candidates, and its candidates (numpy path)."""
        if self._cells is None:
            n_items = self.a.size
            m = min(self.n_candidates, n_items)
            bound = self._cell_bounds(slice(None))
            if m < n_items:
                top = np.argpartition(-bound, m - 1, axis=1)[:, :m]
                rest = np.ones_like(bound, dtype=bool)
                np.put_along_axis(rest, top, False, axis=1)
                others = np.where(rest, bound, -np.inf).max(axis=1)
            else:
                top = np.broadcast_to(np.arange(n_items), (self.n_cells, n_items))
                others = np.full(self.n_cells, -np.inf)
            self._cells = (others, np.sort(top, axis=1))   # by item index: a stable sort then breaks ties by index
        return self._cells

    @property
    def bound(self) -> np.ndarray:
        """Each cell's largest bound of an item not among its candidates, shape (n_cells,)."""
        return self._candidate_cells()[0]

    @property
    def candidates(self) -> np.ndarray:
        """Each cell's candidates by item index, shape (n_cells, min(n_candidates, n_items))."""
        return self._candidate_cells()[1]

    def lazy_tables(self, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each cell's items by decreasing bound, and the bounds (:func:`sympson_hetter_kernel.lazy_tables`).

        Only the rows of ``cells`` are guaranteed filled: each cell is bounded and sorted the first time it is asked
        for.
        """
        from irtlib.selection.sympson_hetter_kernel import lazy_tables

        if self._tables is None:
            shape = (self.n_cells, self.a.size)
            self._tables = (np.zeros(shape, dtype=np.int32), np.zeros(shape), np.zeros(shape[0], dtype=bool))
        order, ub, ready = self._tables
        new = np.unique(cells)
        new = new[~ready[new]]
        if new.size:
            order[new], ub[new] = lazy_tables(self._cell_bounds(new), self.a, self.width)
            ready[new] = True
        return order, ub

    def choose(self, theta, avail, u, v, k_exposure, k, *, sparse=False):
        """:func:`_sympson_hetter`'s ``(item, rejected)`` for abilities ``theta`` (n_models,).

        ``u`` is a :class:`RowDraws` of ``avail``'s shape (or the uniform draws themselves). With
        ``sparse``, ``rejected`` is ``(rows, columns)`` of its True cells instead (a few per row:
        no (models x items) array to fill and read back).
        """
        if isinstance(u, np.ndarray):
            u = RowDraws.of(u)
        theta = np.asarray(theta, dtype=float)
        n_models, n_items = avail.shape
        item = np.full(n_models, -1)
        rejected = None if sparse else np.zeros((n_models, n_items), dtype=bool)
        cells = []                       # sparse: (rows, columns) of the items set aside
        with np.errstate(invalid="ignore"):
            cell = np.floor((theta - self.lo) / self.width)
        inside = np.isfinite(cell) & (cell >= 0) & (cell < self.n_cells)
        rows = np.flatnonzero(inside)
        todo = np.flatnonzero(~inside)
        lib = _sympson_hetter_kernel() if rows.size and u.full is None and u.rng is not None else None
        if lib is not None:                # each row's ranks walked lazily in C: the same choice and draws
            from irtlib.selection.sympson_hetter_kernel import choose_rows

            got, enough, set_rows, set_items = choose_rows(
                lib, self.lazy_tables(cell[rows].astype(np.intp)), rows=rows, theta=theta[rows],
                cell=cell[rows].astype(np.intp), a=self.a,
                b=self.b, avail=avail, k_exposure=k_exposure, k=k, v=None if v is None else v[rows], start=u.start)
            item[rows[enough]] = got[enough]
            if sparse:
                cells.append((set_rows, set_items))
            else:
                rejected[set_rows, set_items] = True
            todo = np.sort(np.concatenate([todo, rows[~enough]]))
        elif rows.size and self.candidates.shape[1]:
            c = cell[rows].astype(np.intp)
            cand = self.candidates[c]
            info = fisher_information(theta[rows, None], self.a[cand], self.b[cand])
            first = avail[rows[:, None], cand] & (info > self.bound[c][:, None])
            ranked = np.argsort(np.where(first, -info, np.inf), axis=1, kind="stable")
            n_first = first.sum(axis=1)
            span = max(int(n_first.max()), 1)
            order = np.take_along_axis(cand, ranked[:, :span], axis=1)
            ok = np.arange(span)[None, :] < n_first[:, None]
            chosen, tried, enough = _sympson_hetter_walk(order, ok, u.rows(rows, span), None if v is None else v[rows],
                                                         k_exposure, k)
            done = rows[enough]
            item[done] = chosen[enough]
            if sparse:
                rr, cc = np.nonzero(tried[enough])
                cells.append((done[rr], order[enough][rr, cc]))
            else:
                rejected[done[:, None], order[enough]] = tried[enough]
            todo = np.sort(np.concatenate([todo, rows[~enough]]))
        if todo.size:
            masked = np.where(avail[todo], fisher_information(theta[todo, None], self.a, self.b), -np.inf)
            got, set_aside = _sympson_hetter(masked, avail[todo], u.rows(todo, n_items), None if v is None else v[todo],
                                             k_exposure, k)
            item[todo] = got
            if sparse:
                rr, cc = np.nonzero(set_aside)
                cells.append((todo[rr], cc))
            else:
                rejected[todo] = set_aside
        if sparse:
            empty = np.zeros(0, dtype=np.intp)
            rejected = tuple(np.concatenate([c[i] for c in cells] + [empty]) for i in (0, 1))
        return item, rejected


def _sympson_hetter_kernel():
    """The lazy walk's C library (:mod:`irtlib.selection.sympson_hetter_kernel`), or None (numpy: the same choices)."""
    from irtlib.selection.sympson_hetter_kernel import load

    return load()


def sympson_hetter_candidates(items) -> SympsonHetterCandidates | None:
    """The :class:`SympsonHetterCandidates` of a bank shared by every model's 2PL, else None (kept on ``items``).

    A Sympson-Hetter calibration runs many tests on one bank; the cells are built once for it.
    """
    from irtlib.selection.items import TwoPLItems

    if type(items) is not TwoPLItems or items.c is not None or items.per_model:
        return None
    kept = getattr(items, "_sympson_hetter_candidates", None)
    if kept is None or kept.a is not items.a or kept.b is not items.b:
        kept = SympsonHetterCandidates(items.a, items.b)
        items._sympson_hetter_candidates = kept
    return kept


def choose_items(info: np.ndarray, avail: np.ndarray, rng: np.random.Generator,
                 exposure: ExposureControl | None) -> tuple[np.ndarray, np.ndarray]:
    """One item per row: the largest criterion, or randomesque/Sympson-Hetter; also the set-aside items.

    Parameters
    ----------
    info : ndarray, shape (n_models, n_items)
        The criterion (Fisher information at each model's current ability, or D-optimal's).
    avail : ndarray of bool, shape (n_models, n_items)
        The items each model may be given now.
    rng : numpy.random.Generator
        The step's generator (:func:`step_rng`).
    exposure : ExposureControl or None
        Randomesque and Sympson-Hetter exposure control; None: the largest criterion.

    Returns
    -------
    item : ndarray of int, shape (n_models,)
        The chosen item's column, -1 where none is available.
    rejected : ndarray of bool, shape (n_models, n_items)
        The items Sympson-Hetter set aside for that model.
    """
    n_models, n_items = info.shape
    rows = np.arange(n_models)
    masked = np.where(avail, info, -np.inf)
    rejected = np.zeros_like(avail)
    k = 1 if exposure is None else exposure.randomesque
    if exposure is not None and exposure.sympson_hetter is not None:
        u = rng.random((n_models, n_items))     # one draw per rank of the ranking
        v = rng.random(n_models) if k > 1 else None
        return _sympson_hetter(masked, avail, u, v, exposure.sympson_hetter, k)
    if k == 1:
        item = np.argmax(masked, axis=1)
    else:
        kk = min(k, n_items)
        top = np.argsort(-masked, axis=1, kind="stable")[:, :kk]
        n_ok = np.minimum(avail.sum(axis=1), kk)
        pick = np.floor(rng.random(n_models) * np.maximum(n_ok, 1)).astype(int)
        item = top[rows, pick]
    return np.where(avail.any(axis=1), item, -1), rejected


class _RankedRun:
    """Items ranked by a criterion at the current estimate: argmax, randomesque, Sympson-Hetter, content.

    The general run (any item model, any of the rules): the criterion of every item is computed
    at every step; :class:`MaxInformation`'s cached run is the fast special case of the 2PL's argmax.
    """

    def __init__(self, items, available, random, *, exposure=None, content=None, d_optimal=False):
        self.items, self.random = items, random or Streams()
        self.unused = np.array(available, dtype=bool, copy=True)
        n_models, n_items = self.unused.shape
        if exposure is not None and exposure.sympson_hetter is not None and exposure.sympson_hetter.size != n_items:
            raise InputError(f"sympson_hetter has {exposure.sympson_hetter.size} values for {n_items} items")
        if content is not None and content.code.size != n_items:
            raise InputError(f"content categories cover {content.code.size} items, the bank has {n_items}")
        self.exposure, self.content, self.d_optimal = exposure, content, d_optimal
        self.candidates = (sympson_hetter_candidates(items)
                           if exposure is not None and exposure.sympson_hetter is not None and not d_optimal else None)
        self.t = 0
        self.set_aside = np.zeros(n_items, dtype=int)
        if content is not None:
            self.counts = np.zeros((n_models, content.share.size))
            self.onehot = (content.code[:, None] == np.arange(content.share.size)[None, :]).astype(float)

    def _criterion(self, theta, est):
        if self.d_optimal:
            return self.items.trace_information(theta, est.covariance())
        return self.items.information(theta)

    def select(self, theta, est=None, active=None):
        rows = np.arange(self.unused.shape[0])
        pool = self.unused if active is None or active.all() else self.unused & active[:, None]
        if self.content is not None:
            has = (pool @ self.onehot) > 0
            cat = kingsbury_zara_category(self.counts, self.content.share, has)
            pool = pool & (self.content.code[None, :] == cat[:, None])
        rng = self.random.at(self.t)
        self.t += 1
        if self.candidates is not None:      # choose_items' draws and choice, from each model's first ranks
            n_models, n_items = pool.shape
            u = RowDraws(rng, (n_models, n_items))
            v = rng.random(n_models) if self.exposure.randomesque > 1 else None
            j, (rr, cc) = self.candidates.choose(theta, pool, u, v, self.exposure.sympson_hetter,
                                                 self.exposure.randomesque, sparse=True)
            if rr.size:                      # the items set aside: as below, from their cells
                self.set_aside += np.bincount(cc, minlength=n_items)
                self.unused[rr, cc] = False
        else:
            j, rejected = choose_items(self._criterion(theta, est), pool, rng, self.exposure)
            if rejected.any():
                self.set_aside += rejected.sum(axis=0)
                self.unused &= ~rejected
        got = j >= 0
        self.unused[rows[got], j[got]] = False
        if self.content is not None:
            np.add.at(self.counts, (rows[got], self.content.code[j[got]]), 1.0)
        return j

    def skipped(self, rows, items):
        """A proposed item was not given: it no longer counts towards its category's share."""
        if self.content is not None:
            np.add.at(self.counts, (rows, self.content.code[items]), -1.0)


class Randomesque:
    """Randomesque exposure control: uniformly among the ``k`` most informative unused items.

    Parameters
    ----------
    k : int
        How many of the most informative items to draw from (1: :class:`MaxInformation`).
    """

    adaptive = True

    def __init__(self, k: int):
        self.exposure = ExposureControl(randomesque=k)

    def begin(self, items: ItemModel, available: np.ndarray, random: Streams | None = None) -> _RankedRun:
        """Start selecting (draws from ``random.at(t)``)."""
        return _RankedRun(items, available, random, exposure=self.exposure)

    def __repr__(self) -> str:
        return f"Randomesque({self.exposure.randomesque})"


class SympsonHetter:
    """Sympson-Hetter exposure control: the chosen item is given with probability ``K_j``, else set aside.

    Parameters
    ----------
    parameters : array_like, shape (n_items,)
        ``K_j`` in [0, 1] (:func:`irtlib.selection.cat.sympson_hetter` calibrates them by simulation).
    randomesque : int
        Draw among the first ``randomesque`` items the rule lets through (1: the first).
    """

    adaptive = True

    def __init__(self, parameters: ArrayLike, *, randomesque: int = 1):
        self.exposure = ExposureControl(randomesque=randomesque, sympson_hetter=parameters)

    def begin(self, items: ItemModel, available: np.ndarray, random: Streams | None = None) -> _RankedRun:
        """Start selecting; the run counts the items it set aside (``set_aside``, per item)."""
        return _RankedRun(items, available, random, exposure=self.exposure)

    def __repr__(self) -> str:
        return f"SympsonHetter(randomesque={self.exposure.randomesque})"


class ContentBalanced:
    """Kingsbury-Zara content balancing around another rule.

    Parameters
    ----------
    balance : ContentBalance
        Every item's category and the target shares.
    within : MaxInformation, Randomesque or SympsonHetter, optional
        How the item is chosen inside the category (default: the most informative).
    """

    adaptive = True

    def __init__(self, balance: ContentBalance, *, within=None):
        if not isinstance(balance, ContentBalance):
            raise InputError("ContentBalanced needs a ContentBalance (the items' categories and target shares)")
        if within is not None and not isinstance(within, (MaxInformation, Randomesque, SympsonHetter)):
            raise InputError(f"within must be MaxInformation, Randomesque or SympsonHetter, got {within!r}")
        self.balance, self.within = balance, within

    def begin(self, items: ItemModel, available: np.ndarray, random: Streams | None = None) -> _RankedRun:
        """Start selecting: the category first, then the item."""
        exposure = getattr(self.within, "exposure", None)
        return _RankedRun(items, available, random, exposure=exposure, content=self.balance)

    def __repr__(self) -> str:
        return f"ContentBalanced({self.balance.labels.size} categories, within={self.within!r})"


class DOptimal:
    """D-optimal selection: the item that most increases the determinant of the posterior information.

    With ``F`` the posterior information and ``I_j`` item ``j``'s Fisher information at the
    posterior mean, ``det(F + I_j) = det(F) det(1 + S I_j)`` with ``S = F^-1`` the posterior
    covariance; to first order (exactly, for the M2PL's rank-one ``I_j = P (1 - P) a a'``, by the
    matrix determinant lemma) the item maximising ``tr(S I_j)`` wins. The estimator must give a
    covariance (:class:`~irtlib.selection.estimators.EapEstimator`). With one dimension
    ``tr(S I_j) = SE^2 I_j``: maximum information.
    """

    adaptive = True

    def begin(self, items: ItemModel, available: np.ndarray, random: Streams | None = None) -> _RankedRun:
        """Start selecting (every item's criterion at every step)."""
        return _RankedRun(items, available, random, d_optimal=True)

    def __repr__(self) -> str:
        return "DOptimal()"


def selector_for(*, exposure: ExposureControl | None = None, content: ContentBalance | None = None) -> Selector:
    """The selector of an operational CAT's settings: maximum information with exposure control and content balancing.

    ``exposure`` None or default and ``content`` None: :class:`MaxInformation`; randomesque only:
    :class:`Randomesque`; Sympson-Hetter: :class:`SympsonHetter`; with ``content``:
    :class:`ContentBalanced` around the one of those.
    """
    within = MaxInformation()
    if exposure is not None and exposure.sympson_hetter is not None:
        within = SympsonHetter(exposure.sympson_hetter, randomesque=exposure.randomesque)
    elif exposure is not None and exposure.randomesque > 1:
        within = Randomesque(exposure.randomesque)
    return within if content is None else ContentBalanced(content, within=within)
