"""Static item subsets: one fixed subset of ``k`` items for every model.

Paper, section "Static subsets": every subset is chosen on the *training* models only; the
IRT methods use the calibrated item parameters and the training models' abilities (MAP on all
items). Five methods:

- :func:`total_fisher` -- the ``k`` items with the largest total information over the training
  abilities, ``sum_m I_j(theta_m)``.
- :func:`marginal_fisher` -- greedy: repeatedly add the item that most reduces the summed
  standard error of the training abilities, ``sum_m 1 / sqrt(sum_{j in S} I_j(theta_m))`` (the
  ML standard error, as the paper says).
- :func:`marginal_fisher_bq` -- the same greedy, constrained to cycle round-robin over the four
  quartile bins of ``b``.
- :func:`anchor_points` -- K-medoids on the Pearson-correlation distance between items' training
  score vectors; each medoid is weighted by the number of items it represents (appendix D).
- :func:`disco` -- items in decreasing binary entropy of their training safe rate (adapted DISCO).

Every function returns a :class:`Subset` (item positions, and weights for anchor points). Total
Fisher, both Marginal Fisher variants and DISCO are *nested*: the first ``j`` items of the
subset for ``k`` are the subset for ``j``, so one call at the largest ``k`` serves every smaller
budget. Anchor points is not nested; :func:`anchor_points_path` runs it for a list of budgets.

How a subset scores a model (section "Evaluation"): MAP ability on the subset for the IRT methods,
the safety score on the subset for DISCO (and Random), the weighted safety score for anchor
points -- see :func:`score_subset`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from irtlib._typing import ArrayLike, Seed
from irtlib.core.ability import PARAMETER_LIMIT, check_prior, map_ability
from irtlib.core.kernels import fisher_information
from irtlib.errors import InputError

from . import ability_kernel, anchor_kernel, fasterpam, greedy_kernel
from .greedy_kernel import numpy_gains

__all__ = [
    "Subset", "information_matrix", "total_fisher", "marginal_fisher", "marginal_fisher_bq",
    "anchor_points", "anchor_points_path", "disco", "correlation_features", "kmedoids_loss",
    "score_subset", "summed_se", "b_quantile_bins", "interleave_bins", "marginal_fisher_bq_interleaved",
    "anchor_points_fresh", "correlation_distances",
    "MarginalFisherOrder", "interleave_quota", "score_subsets_map",
]



@dataclass(frozen=True)
class Subset:
    """Chosen items, in selection order.

    Attributes
    ----------
    items : ndarray of int, shape (k,)
        Positions of the chosen items (columns of the response matrix / entries of ``a``, ``b``).
    weights : ndarray of float, shape (k,), or None
        Anchor points: the number of items each medoid represents (they sum to the number of
        items clustered). None for the unweighted methods.
    """

    items: np.ndarray
    weights: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.items.size)


def _check_k(k, n_items: int) -> int:
    k = int(k)
    if not 1 <= k <= n_items:
        raise InputError(f"k must be between 1 and the {n_items} items, got {k}")
    return k


def information_matrix(a: ArrayLike, b: ArrayLike, theta: ArrayLike) -> np.ndarray:
    """``I_j(theta_m)`` for every model and item, shape ``(n_models, n_items)``."""
    return fisher_information(np.asarray(theta, float)[:, None], np.asarray(a, float), np.asarray(b, float))


# ---------------------------------------------------------------------------- Fisher methods
def total_fisher(a: ArrayLike, b: ArrayLike, theta_train: ArrayLike, k: int, *,
                 info: np.ndarray | None = None) -> Subset:
    """Total Fisher: the ``k`` items with the largest ``sum_m I_j(theta_m)``.

    Ties go to the lower item position. Nested. ``info``: :func:`information_matrix` of these ``a``, ``b`` and
    ``theta_train``, computed already (the methods of one split share it: the same matrix).
    """
    info = information_matrix(a, b, theta_train) if info is None else info
    k = _check_k(k, info.shape[1])
    order = np.argsort(-info.sum(axis=0), kind="stable")
    return Subset(order[:k])


def summed_se(info_sum: ArrayLike, prior_information: float = 0.0) -> float:
    """``sum_m 1 / sqrt(prior_information + info_sum_m)``: the Marginal Fisher objective."""
    with np.errstate(divide="ignore"):
        return float((1.0 / np.sqrt(prior_information + np.asarray(info_sum, float))).sum())


def _greedy_se(info, k, *, prior_information=0.0, bins=None, start_bin=None, short=256):
    """The first ``k`` picks of :func:`_greedy_picks` (shape ``(k,)``)."""
    k = _check_k(k, np.shape(info)[1])
    picks = _greedy_picks(info, prior_information=prior_information, bins=bins, start_bin=start_bin, short=short)
    return np.fromiter(itertools.islice(picks, k), dtype=np.intp, count=k)


def _greedy_picks(info, *, prior_information=0.0, bins=None, start_bin=None, short=256, kernel=True):
    """Greedy minimisation of the summed SE, one pick at a time; optionally round-robin over item bins.

    ``info`` is ``(n_models, n_items)``. Lazy evaluation (Minoux): the objective is a sum of
    concave functions of modular functions of the subset, so it is submodular and an item's
    gain can only shrink as the subset grows; stale gains are therefore upper bounds, and an
    item whose fresh gain beats every other item's bound is the exact greedy choice. Each step
    re-evaluates the few items with the largest bounds (doubling the batch until the choice is
    proven), which makes thousands of picks over thousands of items affordable and gives the
    same picks as evaluating every candidate (ties: lowest position). A generator: it yields the
    picks in order until every item is chosen, so a caller takes as many as it needs and can come
    back for more (:class:`MarginalFisherOrder`).

    The picks after the first come from the C kernel of :mod:`irtlib.selection.greedy_kernel` where
    it loads, with bins one heap per bin (the same picks; ``kernel=False``: numpy).
    """
    info_t = np.ascontiguousarray(np.asarray(info, float).T)      # (n_items, n_models)
    n_items, n_models = info_t.shape
    if bins is None:
        bins = np.zeros(n_items, dtype=np.intp)
    n_bins = int(bins.max()) + 1
    members = [np.flatnonzero(bins == i) for i in range(n_bins)]

    # First pick: with no prior information the SE of an empty set is infinite, so the first
    # item is the one whose own summed SE is smallest (argmin_j sum_m I_mj^-1/2), which is
    # what "minimise the summed SE of S + {j}" means at S = {}. With prior information it is an
    # ordinary greedy step. Round-robin starts in ``start_bin``, or in the best item's bin.
    s = np.full(n_models, float(prior_information))
    if prior_information > 0:
        score = numpy_gains(s, info_t)
    else:
        with np.errstate(divide="ignore"):
            score = -(1.0 / np.sqrt(info_t)).sum(axis=1)
    if start_bin is None:
        j = int(np.argmax(score))
        cur = int(bins[j])
    else:
        cur = int(start_bin)
        while not members[cur].size:
            cur = (cur + 1) % n_bins
        j = int(members[cur][np.argmax(score[members[cur]])])
    yield j
    s = s + info_t[j]
    # Stale gains (upper bounds) per bin; chosen items get -inf. Each bin keeps a shortlist of
    # its ``short`` largest bounds and the largest bound left outside it (outside bounds are
    # never refreshed, so that number stays valid); picks only look at the shortlist until its
    # best fresh gain no longer beats the outside, then the shortlist is rebuilt.
    gains = numpy_gains(s, info_t)
    gains[j] = -np.inf
    # the kernel's heap needs finite gains; they stay finite once they are (s only grows)
    if n_bins == 1 and kernel and np.isfinite(gains[np.arange(n_items) != j]).all():
        lib = greedy_kernel.load()
        if lib is not None:               # the same picks, from C (irtlib.selection.greedy_kernel)
            yield from greedy_kernel.lazy_picks(lib, info_t, s, gains)
            return
    left = [m.size for m in members]
    left[cur] -= 1
    if n_bins > 1 and kernel and np.isfinite(gains[np.arange(n_items) != j]).all():
        lib = greedy_kernel.load()
        if lib is not None:               # the same picks, one heap per bin (greedy_kernel.binned_lazy_picks)
            yield from greedy_kernel.binned_lazy_picks(lib, info_t, s, gains, members, first_bin=cur, left=left)
            return
    bounds = [gains[m] for m in members]
    shortlists = [None] * n_bins

    def shortlist(i):
        ub = bounds[i]
        if ub.size <= short:
            return np.arange(ub.size), -np.inf
        part = np.argpartition(ub, ub.size - short - 1)
        return part[ub.size - short:], ub[part[ub.size - short - 1]]

    for _ in range(1, n_items):
        cur = (cur + 1) % n_bins
        while not left[cur]:
            cur = (cur + 1) % n_bins
        left[cur] -= 1
        ub, items = bounds[cur], members[cur]
        if shortlists[cur] is None:
            shortlists[cur] = shortlist(cur)
        batch, rebuilt = 16, False
        while True:
            cand, outside = shortlists[cur]
            sub = ub[cand]
            if batch >= sub.size:
                top, rest = np.arange(sub.size), outside
            else:
                part = np.argpartition(sub, sub.size - batch - 1)
                top, rest = part[sub.size - batch:], max(sub[part[sub.size - batch - 1]], outside)
            top = top[np.isfinite(sub[top])]
            pos = cand[top]
            fresh = numpy_gains(s, info_t[items[pos]]) if pos.size else np.empty(0)
            ub[pos] = fresh
            best = fresh.max() if fresh.size else -np.inf
            if best > rest:
                break
            if batch >= sub.size:                     # the outside may hold better items
                shortlists[cur] = shortlist(cur) if not rebuilt else (np.arange(ub.size), -np.inf)
                batch, rebuilt = 16, True
            else:
                batch *= 4
        pick = pos[fresh == best].min()                            # ties: lowest position
        yield int(items[pick])
        ub[pick] = -np.inf
        s = s + info_t[items[pick]]


class MarginalFisherOrder:
    """The unconstrained Marginal Fisher order of a bank, computed as far as it is asked and no further.

    One greedy run (:func:`_greedy_picks`) that every request continues: :meth:`first` gives the
    first ``n`` items (what :func:`marginal_fisher` gives for ``k = n``), :meth:`covering` the
    shortest prefix holding enough items of every bin (what the interleaved b-quartile rule
    needs, :func:`marginal_fisher_bq_interleaved`). Both methods of a split share one instance
    (:class:`irtlib.selection.methods.Training`), so the order is computed once, to the longer of
    the two lengths.

    Parameters
    ----------
    a, b : array_like, shape (n_items,)
    theta_train : array_like, shape (n_train,)
    prior_information : float
        As in :func:`marginal_fisher`.
    info : ndarray, shape (n_train, n_items), optional
        :func:`information_matrix` of these ``a``, ``b`` and ``theta_train``, computed already (shared by the
        methods of one split: the same matrix).
    """

    def __init__(self, a: ArrayLike, b: ArrayLike, theta_train: ArrayLike, *, prior_information: float = 0.0,
                 info: np.ndarray | None = None):
        info = information_matrix(a, b, theta_train) if info is None else info
        self.n_items = int(info.shape[1])
        self._picks = _greedy_picks(info, prior_information=prior_information)
        self._order: list[int] = []

    def first(self, n: int) -> np.ndarray:
        """The first ``n`` items of the order, shape ``(n,)``."""
        n = _check_k(n, self.n_items)
        self._order.extend(itertools.islice(self._picks, max(0, n - len(self._order))))
        return np.array(self._order[:n], dtype=np.intp)

    def covering(self, bins: ArrayLike, need: ArrayLike) -> np.ndarray:
        """A prefix of the order with at least ``need[q]`` items of every bin ``q``.

        The shortest one, or the part of the order computed already where that is longer (any such
        prefix serves :func:`marginal_fisher_bq_interleaved` alike).

        Parameters
        ----------
        bins : array_like of int, shape (n_items,)
            Bin of every item.
        need : array_like of int, shape (n_bins,)
            Items wanted per bin (at most the bin's size).

        Returns
        -------
        ndarray of int
        """
        bins, need = np.asarray(bins, dtype=np.intp), np.asarray(need, dtype=np.intp)
        counts = np.bincount(bins[np.asarray(self._order, dtype=np.intp)], minlength=need.size)
        missing = int(np.maximum(need - counts, 0).sum())
        for j in self._picks if missing else ():
            self._order.append(j)
            counts[bins[j]] += 1
            missing -= int(counts[bins[j]] <= need[bins[j]])
            if not missing:
                break
        return np.array(self._order, dtype=np.intp)


def marginal_fisher(a: ArrayLike, b: ArrayLike, theta_train: ArrayLike, k: int, *,
                    prior_information: float = 0.0) -> Subset:
    """Marginal Fisher: greedy minimisation of the training models' summed standard error.

    Parameters
    ----------
    a, b : array_like, shape (n_items,)
    theta_train : array_like, shape (n_train,)
        Training models' abilities (the paper: MAP on all items).
    k : int
    prior_information : float
        Added to every model's information before taking ``1 / sqrt``. 0 (default) is the
        paper's ML standard error ``1 / sqrt(sum_{j in S} I_j(theta_m))``; the first item is then
        the one minimising ``sum_m I_j(theta_m)^-1/2``. 1 would use the posterior SE under the
        Normal(0, 1) prior instead.

    Returns
    -------
    Subset
        Nested: the first ``j`` items are the greedy subset of size ``j``.
    """
    info = information_matrix(a, b, theta_train)
    return Subset(_greedy_se(info, k, prior_information=prior_information))


def b_quartile_bins(b, n_bins: int = 4) -> np.ndarray:
    """Bin index (0 = easiest) of every item by rank of ``b``: ``n_bins`` bins of equal size (+-1)."""
    b = np.asarray(b, float)
    rank = np.empty(b.size, dtype=np.intp)
    rank[np.argsort(b, kind="stable")] = np.arange(b.size)
    return (rank * n_bins) // b.size


def marginal_fisher_bq(a: ArrayLike, b: ArrayLike, theta_train: ArrayLike, k: int, *, n_bins: int = 4,
                       prior_information: float = 0.0,
                       start: str = "best", info: np.ndarray | None = None) -> Subset:
    """Marginal Fisher constrained to the quartiles of ``b``.

    Items are binned by rank of ``b`` into ``n_bins`` bins of equal size (quartiles for 4).
    Picks then cycle round-robin over the bins, in order of increasing ``b`` and wrapping
    around; each pick is the item of the current bin with the largest reduction of the summed
    SE given everything chosen so far (in every bin), so any prefix of ``4 r`` items holds ``r``
    items per quartile (difficulty coverage proportional to the bank's). A bin that runs out is
    skipped.

    Parameters
    ----------
    start : {"best", "lowest"}
        Which bin the cycle starts in: the bin of the unconstrained first pick (default: so
        ``k = 1`` agrees with :func:`marginal_fisher`) or the lowest-``b`` bin.
    n_bins, prior_information
        See above and :func:`marginal_fisher`.
    info : ndarray, shape (n_train, n_items), optional
        :func:`information_matrix` of these ``a``, ``b`` and ``theta_train``, computed already.
    """
    if start not in ("best", "lowest"):
        raise InputError(f"start must be 'best' or 'lowest', got {start!r}")
    info = information_matrix(a, b, theta_train) if info is None else info
    bins = b_quartile_bins(b, n_bins)
    return Subset(_greedy_se(info, k, prior_information=prior_information, bins=bins,
                             start_bin=None if start == "best" else 0))


# ---------------------------------------------------------------------------- DISCO
def disco(train_values: ArrayLike, k: int) -> Subset:
    """DISCO, adapted: items in decreasing binary entropy of their training safe rate.

    ``H(p) = -p log p - (1 - p) log(1 - p)`` with ``p`` the share of safe responses among the
    training models that saw the item (``0 log 0 = 0``). Ties go to the lower position. Nested.
    """
    x = np.asarray(train_values, float)
    k = _check_k(k, x.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.nanmean(x, axis=0)
        h = -(np.where(p > 0, p * np.log(p), 0.0) + np.where(p < 1, (1 - p) * np.log1p(-p), 0.0))
    h = np.nan_to_num(h, nan=-np.inf)                 # an item no training model saw: last
    return Subset(np.argsort(-h, kind="stable")[:k])


# ---------------------------------------------------------------------------- anchor points
def correlation_features(train_values: ArrayLike) -> np.ndarray:
    """Item vectors whose dot products are the Pearson correlations between items.

    Returns ``U`` of shape ``(n_items, n_train + 2)`` with unit rows: item ``j``'s centred
    training score vector divided by its norm, so ``1 - U U^T`` is the correlation distance
    ``1 - r``. Missing responses are filled with the item's training mean (they add nothing to
    the covariance). Items that are constant over the training models have no correlation;
    they get one of two extra unit coordinates (one for all-safe, one for all-unsafe), which
    puts them at distance 0 from the items constant at the same value and at distance 1
    (correlation 0) from every other item.
    """
    x = np.asarray(train_values, float)
    missing = np.isnan(x)
    if missing.any() or not (x.flags.c_contiguous or x.flags.f_contiguous):
        mean = np.nanmean(x, axis=0)
        z = np.where(missing, 0.0, x - mean)
    else:
        # nanmean without a NaN: the column sums of its copy of x (the same layout, so the same sums) over the
        # count of rows; nothing to fill
        mean = x.sum(axis=0) / x.shape[0]
        z = x - mean
    norm = np.sqrt((z * z).sum(axis=0))
    const = norm <= 1e-12 * np.sqrt(x.shape[0])
    u = np.zeros((x.shape[1], x.shape[0] + 2))
    u[~const, :-2] = (z[:, ~const] / norm[~const]).T
    u[const & (mean >= 0.5), -2] = 1.0
    u[const & (mean < 0.5), -1] = 1.0
    return u


def kmedoids_loss(u: ArrayLike, medoids: ArrayLike) -> float:
    """Sum over items of the correlation distance to the nearest medoid."""
    sim = u @ u[np.asarray(medoids)].T
    return float((1.0 - sim.max(axis=1)).sum())


def _stable_order(lab, k):
    """``np.argsort(lab, kind="stable")`` for labels in ``[0, k)``: the one stable order, by radix sort where it fits.

    numpy sorts 16-bit integers stably by radix sort (linear time), 64-bit ones by timsort; a stable
    order is unique, so narrowing the labels changes only the time.
    """
    if k <= np.iinfo(np.uint16).max + 1:
        return np.argsort(lab.astype(np.uint16), kind="stable")
    return np.argsort(lab, kind="stable")


def _alternate(u, med, *, max_iter, lab=None, best=None, weight=None, state=None):
    """Voronoi iteration (alternating k-medoids) with incremental reassignment.

    For the correlation distance ``1 - u_i . u_j`` (half the squared Euclidean distance between
    unit vectors), the medoid of a cluster -- the member with the smallest summed distance to
    the others -- is the member with the largest dot product with the cluster's sum, so the
    update step costs O(n d). After an update only points that belonged to a moved medoid are
    reassigned against every medoid; the others only need comparing with the moved medoids, and only
    the points of the clusters that gained or lost a point are scored again (:func:`_update_scores`: the same
    scores). The cluster sums and the update step's choice come from the kernel
    (:func:`irtlib.selection.anchor_kernel.cluster_sums` and ``cluster_top``: numpy's ``add.reduceat`` and the
    step's argmax, bit for bit, without sorting the points).
    ``weight`` gives each point a multiplicity (collapsed duplicate items).

    Every similarity comes from :func:`irtlib.selection.anchor_kernel.nearest`: one summation order
    whatever points or medoids a call holds (not a BLAS product, whose bits depend on its shape and on the
    machine's BLAS kernel), so these restrictions give exactly the labels of the full iteration (every
    point against every medoid, ties to the first; a test checks it), and the same medoids on every machine.
    The warm start and the reassignments ask it only for what can change a label (its threshold form: a new or
    moved medoid at least as similar as the point's current one; for a point of a moved medoid, at least the medoid
    that replaced its own), which it answers from a single-precision filter with the same numbers.

    ``state`` (a dict, optional) keeps what one budget of a path (:func:`anchor_points_path`) can pass to
    the next: the weighted points ``wu``, computed once, ``"best"``, every point's similarity to its
    medoid at the end (1 at the medoids), which the next budget starts from, and ``"settled"``, whether the
    iteration ended with no medoid moving (rather than at ``max_iter``). (Not the cluster sums: after a
    warm start 84% to 100% of the clusters have lost points to the new medoids, and summing those again
    costs more than the full pass.) It is updated in place.
    """
    if state is not None and "wu" in state:
        wu = state["wu"]
    else:
        wu = u if weight is None else u * weight[:, None]
    if state is not None and "prepared" in state:
        prepared = state["prepared"]
    else:
        prepared = anchor_kernel.prepare(u)             # the points in float, for the kernel's filter
        u = prepared["u"]
    med = np.array(med, dtype=np.intp)
    k = med.size
    if lab is None:
        lab, best = anchor_kernel.nearest(u, med)
    else:
        # warm start: ``lab``/``best`` hold the assignment to the first len(...) medoids, which are
        # unchanged; only the new medoids need comparing with every point
        old = int(lab.max()) + 1 if lab.size else 0
        lab, best = lab.copy(), best.copy()
        if old < k:
            l2, b2 = anchor_kernel.nearest(u, med[old:], above=best, prepared=prepared)  # -1, -inf: below
            better = np.flatnonzero(b2 > best)          # positions: one mask pass for the four gathers
            lab[better], best[better] = l2[better] + old, b2[better]
    lab[med] = np.arange(k)          # every medoid belongs to its own cluster (duplicates)
    best[med] = 1.0
    score = before = sums = None        # before: the labels the scores and sums were last taken over
    settled = False
    for _ in range(max_iter):
        # every cluster's sum (numpy's add.reduceat over the rows by cluster, then position: the kernel's bits);
        # after the first pass only the clusters that gained or lost a point are summed again (the others hold the
        # same rows in the same order: the same sums), and only their points scored again
        if score is None:
            sums = anchor_kernel.cluster_sums(wu, lab, k)
            score = np.einsum("ij,ij->i", u, sums.take(lab, axis=0))     # take: sums[lab]'s rows, copied faster
        else:
            touched = _touched(lab, before, k)
            if touched is not None:
                sums = anchor_kernel.cluster_sums(wu, lab, k, want=touched, sums=sums)
                _update_scores(u, lab, k, before, sums, score, touched=touched)
        # best member of every cluster: largest score; ties keep the current medoid, else the lowest position
        new = anchor_kernel.cluster_top(lab, score, med)
        moved = np.flatnonzero(new != med)
        if moved.size == 0:
            settled = True
            break
        med = new
        before = lab.copy()
        # points whose medoid moved: full reassignment; others: compare with the moved medoids
        lost = np.zeros(k, dtype=bool)
        lost[moved] = True
        lost = lost[lab]                                # np.isin(lab, moved), by lookup
        if lost.any():
            idx = np.flatnonzero(lost)
            # at least the similarity with the medoid that replaced theirs: every label found
            lab[idx], best[idx] = anchor_kernel.nearest(u, med, idx, hint=before[idx], prepared=prepared)
        keep = np.flatnonzero(~lost)
        if keep.size:
            j, s = anchor_kernel.nearest(u, med[moved], keep, above=best[keep], prepared=prepared)
            held = best[keep]
            better = np.flatnonzero((s > held) | ((s == held) & (moved[j] < lab[keep]) & (j >= 0)))
            lab[keep[better]], best[keep[better]] = moved[j[better]], s[better]
        lab[med] = np.arange(k)
        best[med] = 1.0
    if state is not None:
        state["wu"] = wu
        state["prepared"] = prepared
        state["best"] = best            # every point's similarity to its medoid (1 at the medoids)
        state["settled"] = settled      # no medoid moved in the last pass (not stopped by max_iter)
    return med, lab


def _touched(lab, before, k):
    """The clusters that gained or lost a point between labels ``before`` and ``lab`` (flags), or None if none did."""
    diff = np.flatnonzero(lab != before)
    if not diff.size:
        return None
    touched = np.zeros(k, dtype=bool)
    touched[before[diff]] = True
    touched[lab[diff]] = True
    return touched


def _update_scores(u, lab, k, before, sums, score, *, touched=None):
    """:func:`_alternate`'s scores after a reassignment, recomputed where a cluster changed.

    A cluster whose members did not change (labels ``before`` and ``lab`` agree on every point) has the same sum
    (the sum of the same rows in the same order), so its points keep their scores, each the dot product of one row
    with it (``einsum`` over one row does not depend on the other rows). The points of the clusters that gained or
    lost a point are scored again, so ``score`` is updated in place to what the full pass gives, bit for bit.
    ``touched``: :func:`_touched` of these labels, computed already.
    """
    if touched is None:
        touched = _touched(lab, before, k)
        if touched is None:
            return
    idx = np.flatnonzero(touched[lab])                  # their points, by position
    if 2 * idx.size > lab.size:                         # most points: the full pass (the same scores)
        score[:] = np.einsum("ij,ij->i", u, sums.take(lab, axis=0))
    else:
        score[idx] = np.einsum("ij,ij->i", u[idx], sums.take(lab[idx], axis=0))


def _unique_rows(u):
    """``np.unique(u, axis=0, return_index=True, return_inverse=True, return_counts=True)``, by ``np.lexsort``.

    The same four arrays (inverse flat): ``np.unique`` sorts the rows as records, stably where it returns
    first indices, comparing them field by field as floats; ``lexsort`` on the columns (the first as the
    primary key) is that stable lexicographic order, and rows equal as floats are one group. About a
    third of the time (no record comparisons). The order comes from the kernel's merge sort of whole rows
    (:func:`irtlib.selection.anchor_kernel.row_order`: lexsort's order, without sorting every column).
    """
    n = u.shape[0]
    order = anchor_kernel.row_order(u)              # np.lexsort(u.T[::-1]), comparing rows to their first difference
    rows = u[order]
    head = np.empty(n, dtype=bool)
    head[:1] = True
    head[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    starts = np.flatnonzero(head)
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = np.cumsum(head) - 1
    return rows[starts], order[starts], inverse, np.diff(np.r_[starts, n])


def _grow(u, med, k, best, rng, weight=None):
    """Add ``k - len(med)`` medoids by D-sampling.

    Probability proportional to the distance to
    the nearest current medoid, times the point's multiplicity, without replacement; uniform
    when there is none.
    """
    n = u.shape[0]
    taken = np.zeros(n, dtype=bool)
    taken[med] = True
    need = k - len(med)
    if need <= 0:
        return np.asarray(med, dtype=np.intp)
    w = np.where(taken, 0.0, np.maximum(1.0 - best, 0.0) if best is not None else 1.0)
    if weight is not None:
        w = w * weight
    if (w > 0).sum() < need:
        w = np.where(taken, 0.0, 1.0)
    extra = _weighted_draws(rng, w / w.sum(), need)
    return np.r_[np.asarray(med, dtype=np.intp), extra]


def _weighted_draws(rng, p, size):
    """``rng.choice(p.size, size=size, replace=False, p=p)``: the same draws and the same ``rng`` state after.

    numpy's weighted sampling without replacement draws ``size - found`` uniforms (``rng.random``), inverts the
    cumulative sum of ``p`` (normalised by its last element) with ``searchsorted(side="right")``, keeps the first
    occurrence of every new position, zeroes the found positions' probabilities and repeats until ``size`` are
    found. This is that loop without ``choice``'s checks and set-up (``p`` is :func:`_grow`'s, non-negative, summing
    to 1), which cost more than the loop on the path's many small calls (a test compares the draws and the
    generator's state with ``choice``'s). ``p`` is modified. Where ``choice`` would refuse ``p`` (not finite, fewer
    positive entries than ``size``), it is called, and refuses.
    """
    cdf = np.cumsum(p)
    if not np.isfinite(cdf[-1]) or np.count_nonzero(p) < size:
        return rng.choice(p.size, size=size, replace=False, p=p)
    found = np.empty(size, dtype=np.int64)
    n_found = 0
    while n_found < size:
        x = rng.random(size - n_found)
        if n_found:
            p[found[:n_found]] = 0
            cdf = np.cumsum(p)
        cdf /= cdf[-1]
        new = cdf.searchsorted(x, side="right")
        drawn = new.tolist()
        firsts = dict.fromkeys(drawn)                  # the first of each position, in draw order
        if len(firsts) < len(drawn):                   # (np.unique's first indices, sorted: the same positions)
            new = np.fromiter(firsts, dtype=new.dtype, count=len(firsts))
        found[n_found:n_found + new.size] = new
        n_found += new.size
    return found


def anchor_points_path(train_values: ArrayLike, ks: Sequence[int], *, seed: Seed = 0, solver: str = "auto",
                       max_iter: int = 100,
                       pam_max_items: int = 1000) -> dict[int, Subset]:
    """Anchor points for several budgets, each warm-started from the previous one.

    K-medoids on the correlation distance ``1 - r`` between items' training score vectors
    (:func:`correlation_features`), for every ``k`` in ``ks`` in increasing order; the medoids
    of the previous ``k`` plus new ones drawn by D-sampling start the next. Weights are the
    cluster sizes, so they sum to the number of items.

    Parameters
    ----------
    train_values : array_like, shape (n_train, n_items)
    ks : sequence of int
    seed : int, Generator or SeedSequence
    solver : {"auto", "fasterpam", "alternate"}
        ``"fasterpam"``: the ``kmedoids`` package's FasterPAM (Schubert and Rousseeuw) on the full
        ``n_items x n_items`` distance matrix, single-threaded: the reference, but each run
        costs several passes over ``n_items^2`` distances (about 1.5 s for 5,600 items).
        ``"alternate"``: alternating (Voronoi) k-medoids in the feature space, no distance
        matrix (see :func:`_alternate`), identical items collapsed into one point with a
        multiplicity. Its local optima are worse than FasterPAM's swaps: measured on the
        simulated release (one split's training models, the protocol's budgets), its loss
        (summed distance to the medoids) at the largest budgets is 10% to 40% above FasterPAM's
        (WMDP-Bio at k = 381: 184 against 161; Anthropic Red Team at k = 220: 33 against 23),
        for 6 to 25 times less time. ``"auto"``: FasterPAM up to ``pam_max_items`` items
        (HarmBench, SimpleSafetyTests and Anthropic Red Team after the variance filter),
        alternate above: FasterPAM's cost grows with the square of the items, about 0.8 s per
        split for WMDP-Bio's 1,270 (several times that on a busy machine), 20 s for AIR-Bench
        2024 and 80 s for SafetyBench, which the full protocol cannot afford.
    max_iter : int
        Iterations per ``k``.

    Returns
    -------
    dict mapping k to Subset (medoids in increasing position, weights = cluster sizes)
    """
    x = np.asarray(train_values, float)
    n_items = x.shape[1]
    ks = sorted({_check_k(k, n_items) for k in np.atleast_1d(ks)})
    if solver == "auto":
        solver = "fasterpam" if n_items <= pam_max_items else "alternate"
    if solver not in ("fasterpam", "alternate"):
        raise InputError(f"solver must be 'auto', 'fasterpam' or 'alternate', got {solver!r}")
    rng = np.random.default_rng(seed)
    u = correlation_features(x)
    out = {}
    med, best = np.empty(0, dtype=np.intp), None
    if solver == "fasterpam":
        diss = 1.0 - u @ u.T
        np.clip(diss, 0.0, 2.0, out=diss)
        np.fill_diagonal(diss, 0.0)
        diss = np.asfortranarray(diss)          # columns contiguous, as anchor_points_fresh (the same values)
        for k in ks:
            init = _grow(u, med, k, best, rng)
            _, med, lab = fasterpam.fasterpam_from(diss, init, max_iter=max_iter)
            best = 1.0 - diss[np.arange(n_items), med[lab]]
            out[k] = _as_subset(med, lab)
    else:
        # Identical items (identical training score vectors, common with few training models)
        # are one point with a multiplicity: the clustering cannot split them or waste two
        # medoids on them, and each is represented by its first occurrence.
        uniq, first, inverse, count = _unique_rows(u)
        lab = None
        state = {}                      # the weighted points, computed once for every budget
        weight = count.astype(float)
        for k in ks:
            kk = min(k, uniq.shape[0])
            init = _grow(uniq, med, kk, best, rng, weight=count)
            # every distinct item a medoid already, settled: the alternation would give these medoids and labels
            # again (its first pass sums and scores the same clusters and moves no medoid), so it is not run
            if not (init.size == med.size and state.get("settled")):
                med, lab = _alternate(uniq, init, max_iter=max_iter, lab=lab, best=best, weight=weight, state=state)
            best = state["best"]
            items, labels = first[med], lab[inverse]
            if k > kk:     # more medoids than distinct items: split duplicates off as their own
                spare = np.ones(n_items, dtype=bool)           # np.setdiff1d(np.arange(n_items), items), by mask
                spare[items] = False
                spare = np.flatnonzero(spare)[:k - kk]
                labels = labels.copy()
                labels[spare] = np.arange(kk, k)
                items = np.r_[items, spare]
            out[k] = _as_subset(items, labels)
    return out


def b_quantile_bins(b: ArrayLike, n_bins: int = 4) -> np.ndarray:
    """Bin (0 = lowest ``b``) of every item by the quantiles of ``b``, as ``pandas.qcut(b, n_bins)`` cuts.

    Edges are the ``0, 1/n_bins, ..., 1`` quantiles of ``b`` (linear interpolation); bins are
    right-closed intervals ``(e_i, e_(i+1)]``, the first one closed on the left too; repeated edges
    are merged (qcut's ``duplicates="drop"``), so there may be fewer than ``n_bins`` bins. This is
    the authors' binning (the authors' released code: b-quartile Marginal Fisher); unlike
    :func:`b_quartile_bins` (equal counts by rank), items tied on an edge share a bin.

    Returns
    -------
    ndarray of int, shape (n_items,)
    """
    b = np.asarray(b, float)
    edges = np.unique(np.quantile(b, np.linspace(0.0, 1.0, int(n_bins) + 1)))
    if edges.size < 2:
        return np.zeros(b.size, dtype=np.intp)
    return np.clip(np.searchsorted(edges, b, side="left") - 1, 0, edges.size - 2).astype(np.intp)


def interleave_bins(order: ArrayLike, bins: ArrayLike) -> np.ndarray:
    """Round-robin over bins (lowest bin first), each bin keeping the order its items have in ``order``.

    Parameters
    ----------
    order : array_like of int, shape (n,)
        Item positions, best first.
    bins : array_like of int, shape (n_items,)
        Bin of every item position.

    Returns
    -------
    ndarray of int, shape (n,)
        The first item of every bin (in bin order), then the second of every bin that has one, ...
    """
    order = np.asarray(order, dtype=np.intp)
    bin_of = np.asarray(bins)[order]
    # position of each item within its bin's sub-order
    within = np.empty(order.size, dtype=np.intp)
    for value in np.unique(bin_of):
        hit = np.flatnonzero(bin_of == value)
        within[hit] = np.arange(hit.size)
    return order[np.lexsort((bin_of, within))]


def interleave_quota(bins: ArrayLike, k: int) -> np.ndarray:
    """Items of each bin the first ``k`` items of :func:`interleave_bins` can draw on, over all items.

    Round ``r`` of the interleaving takes the ``r``-th item of every bin that has one, so the first
    ``R`` rounds need ``min(size_q, R)`` items of bin ``q``; ``R`` is the fewest rounds that hold
    ``k`` items. A prefix of an order with that many items of every bin interleaves, for its first
    ``k`` items, exactly as the whole order does.

    Parameters
    ----------
    bins : array_like of int, shape (n_items,)
        Bin of every item (:func:`b_quantile_bins`).
    k : int

    Returns
    -------
    ndarray of int, shape (n_bins,)
    """
    size = np.bincount(np.asarray(bins, dtype=np.intp))
    k = _check_k(k, int(size.sum()))
    rounds = np.arange(1, int(size.max()) + 1)
    held = np.minimum(size[None, :], rounds[:, None]).sum(axis=1)
    r = int(rounds[np.searchsorted(held, k)])
    return np.minimum(size, r)


def marginal_fisher_bq_interleaved(a: ArrayLike, b: ArrayLike, theta_train: ArrayLike, k: int, *,
                                   n_bins: int = 4, prior_information: float = 0.0,
                                   order: MarginalFisherOrder | None = None) -> Subset:
    """b-quartile Marginal Fisher as the authors' code runs it: an interleaving, not a constrained greedy.

    The unconstrained greedy order of every item (:func:`marginal_fisher`) is cut into bins by the
    quantiles of ``b`` (:func:`b_quantile_bins`) and interleaved round-robin, lowest-``b`` bin
    first, each bin keeping its greedy order (:func:`interleave_bins`); the first ``k`` items are
    the subset (the authors' released code). Nested. The greedy runs only as far as the first ``k``
    interleaved items need (:func:`interleave_quota`), not through every item: the same subset.

    Parameters
    ----------
    order : MarginalFisherOrder, optional
        The greedy order of these ``a``, ``b``, ``theta_train`` and ``prior_information``, shared
        with :func:`marginal_fisher`'s (default: a new one).
    """
    a = np.asarray(a, float)
    k = _check_k(k, a.size)
    if order is None:
        order = MarginalFisherOrder(a, b, theta_train, prior_information=prior_information)
    bins = b_quantile_bins(b, n_bins)
    prefix = order.covering(bins, interleave_quota(bins, k))
    return Subset(interleave_bins(prefix, bins)[:k])


def correlation_distances(train_values: ArrayLike, *, order: str = "C") -> np.ndarray:
    """The authors' item distances: ``1 - r`` with ``r = numpy.corrcoef`` over the training models.

    An undefined ``r`` (a constant item) is taken as 0 (distance 1, also between two constant
    items), the result clipped to [0, 2] with a zero diagonal (the authors' released code: Anchor
    Points). Shape ``(n_items, n_items)``; needs complete responses. ``order="F"``: the same matrix
    stored column-major (what FasterPAM reads fastest, :func:`anchor_points_fresh`), written there
    directly instead of copied. The same elements either way, and the same as
    ``1 - numpy.corrcoef`` with the steps above, bit for bit (a test compares them).

    ``numpy.corrcoef``'s own steps run in place on ``numpy.cov``'s matrix (``corrcoef`` calls ``cov`` so): each
    element divided by its row's standard deviation, then by its column's, clipped to [-1, 1]. Column-major, they
    run on the covariance's transpose, which holds the same elements where the covariance is symmetric, as
    numpy's product of a matrix with its own transpose is (checked; else on a column-major copy): one pass over
    the matrix per step, none of them strided.
    """
    x = np.asarray(train_values, float)
    if np.isnan(x).any():
        raise InputError("the authors' anchor points need complete training responses (no NaN)")
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = np.atleast_2d(np.cov(x.T))
        if order == "F":
            r = cov.T if np.array_equal(cov, cov.T) else np.asfortranarray(cov)
        else:
            r = np.ascontiguousarray(cov)
        stddev = np.sqrt(np.diag(r))
        r /= stddev[:, None]
        r /= stddev[None, :]
        np.clip(r, -1.0, 1.0, out=r)
    # 1 - r, with r in [-1, 1], is in [0, 2] (rounding is monotone and both ends are numbers): the clip to
    # [0, 2] changes no element; an undefined r (NaN) taken as 0: distance 1
    np.subtract(1.0, r, out=r)
    np.copyto(r, 1.0, where=np.isnan(r))
    np.fill_diagonal(r, 0.0)
    return r


def anchor_points_fresh(train_values: ArrayLike, ks: Sequence[int], *, seed: int = 42,
                        max_iter: int = 100) -> dict[int, Subset]:
    """Anchor points as the authors' code runs them: a fresh FasterPAM for every budget.

    Distance ``1 - r`` between items, ``r`` the Pearson correlation of their training score
    vectors (``numpy.corrcoef``), an undefined ``r`` (a constant item) taken as 0, clipped to
    [0, 2], zero diagonal; for each ``k`` the ``kmedoids`` package's FasterPAM from a random
    initialisation with ``random_state=seed`` (42), single-threaded; each medoid weighted by its
    cluster's size (the authors' released code: weight = cluster size / items, score = weighted sum,
    which :func:`score_subset`'s weighted mean with these weights equals). Not nested, and not
    warm-started (unlike :func:`anchor_points_path`).

    Returns
    -------
    dict mapping k to Subset (medoids in increasing position, weights = cluster sizes)
    """
    # column-major: FasterPAM's passes read the distances of every item to one candidate (a column), which
    # the extension then reads contiguously (the same matrix, so the same medoids; about 0.75x the time)
    diss = correlation_distances(train_values, order="F")
    n_items = diss.shape[0]
    out = {}
    for k in sorted({_check_k(k, n_items) for k in np.atleast_1d(ks)}):
        # the package's FasterPAM, called without importing scikit-learn (irtlib.selection.fasterpam)
        _, med, lab = fasterpam.random_fasterpam(diss, k, seed=int(seed), max_iter=max_iter)
        out[k] = _as_subset(med, lab)
    return out


def _as_subset(med, lab) -> Subset:
    sizes = np.bincount(lab, minlength=med.size).astype(float)
    order = np.argsort(med)
    return Subset(med[order], sizes[order])


def anchor_points(train_values: ArrayLike, k: int, *, seed: Seed = 0, solver: str = "auto", max_iter: int = 100,
                  pam_max_items: int = 1000) -> Subset:
    """Anchor points, adapted (appendix D): K-medoids medoids weighted by cluster size.

    The distance between two items is ``1 - r``, ``r`` the Pearson correlation of their score
    vectors over the training models (constant items: see :func:`correlation_features`). The
    subset is the ``k`` medoids; each is weighted by the number of items in its cluster, so
    the weights sum to the number of items, and a model's score on the subset is the weighted
    mean of its responses to the medoids (:func:`score_subset`). Not nested in ``k``.

    See :func:`anchor_points_path` for ``seed``, ``solver`` (default ``"auto"``: the ``kmedoids``
    package's FasterPAM up to ``pam_max_items`` items) and ``max_iter``.
    """
    return anchor_points_path(train_values, [k], seed=seed, solver=solver, max_iter=max_iter,
                              pam_max_items=pam_max_items)[_check_k(k, np.shape(train_values)[1])]


# ---------------------------------------------------------------------------- scoring
def score_subset(values: ArrayLike, subset: Subset, *, how: str, a: ArrayLike | None = None,
                 b: ArrayLike | None = None, prior_mean: float = 0.0,
                 prior_sd: float = 1.0, theta0: ArrayLike | None = None) -> np.ndarray:
    """How a subset scores models (paper, section "Evaluation").

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
        Responses (NaN: not observed, skipped).
    subset : Subset
    how : {"map", "mean", "weighted"}
        ``"map"``: MAP ability on the subset's items (the IRT methods; needs ``a`` and ``b``);
        ``"mean"``: safety score on the subset (DISCO, Random); ``"weighted"``: weighted safety
        score with the subset's weights (anchor points).
    theta0 : array_like, optional
        Newton's starting point for ``"map"`` (default: the prior mean). The posterior mode does
        not depend on it; a nearby start (the estimate on a smaller subset) only saves iterations.

    Returns
    -------
    ndarray, shape (n_models,)
        NaN for a mean score over no observed item.
    """
    x = np.asarray(values, float)[:, subset.items]
    if how == "map":
        if a is None or b is None:
            raise InputError("how='map' needs the item parameters a and b")
        return np.asarray(map_ability(x, np.asarray(a, float)[subset.items], np.asarray(b, float)[subset.items],
                                      prior_mean=prior_mean, prior_sd=prior_sd,
                                      theta0=prior_mean if theta0 is None else theta0).theta)
    if how == "mean":
        w = np.ones(subset.items.size)
    elif how == "weighted":
        if subset.weights is None:
            raise InputError("how='weighted' needs a subset with weights")
        w = subset.weights
    else:
        raise InputError(f"how must be 'map', 'mean' or 'weighted', got {how!r}")
    obs = ~np.isnan(x)
    den = obs @ w
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, np.where(obs, x, 0.0) @ w / den, np.nan)


def score_blocks_map(blocks: Sequence[tuple], *, prior_mean: float = 0.0, prior_sd: float = 1.0) -> list[np.ndarray]:
    """:func:`score_subset` with ``how="map"`` for subsets of several banks: one :func:`map_ability` call per size.

    The protocol scores every MAP method's subset of every split at each budget (section
    "Evaluation"); each split has its own test models and item parameters. A block is
    ``(values, subset, a, b, theta0)``: the split's test responses (shape ``(n_models, n_items)``),
    one subset of its items, its item parameters (shape ``(n_items,)``) and Newton's start (None: the
    prior mean). Blocks whose subsets have one size are stacked into one call with per-row item
    parameters; every model's Newton run only reads its own row, over the same items in the same
    order, so each result equals ``score_subset(values, subset, how="map", a=a, b=b, theta0=theta0)``
    bit for bit (a test checks it); subsets of different sizes are never stacked (padding would
    change the row sums). :func:`score_subsets_map` is the same for the subsets of one split.

    Returns
    -------
    list of ndarray, shape (n_models,) of each block, in the order of ``blocks``
    """
    lib = ability_kernel.load() if blocks else None
    if lib is not None:
        got = _score_blocks_kernel(lib, blocks, prior_mean=prior_mean, prior_sd=prior_sd)
        if got is not None:
            return got
    out: list[np.ndarray | None] = [None] * len(blocks)
    sizes = [len(block[1]) for block in blocks]
    sums = ability_kernel.map_row_sums() if blocks else None     # the C sums where they load: the same bits
    for size in dict.fromkeys(sizes):
        group = [i for i, z in enumerate(sizes) if z == size]
        counts = [np.shape(blocks[i][0])[0] for i in group]
        # The stacked rows are written in C order at once: concatenating the gathers (a column gather, a
        # broadcast row) gave Fortran-ordered arrays that the C sums then copied into C order, every call.
        x, rows_a, rows_b = (np.empty((sum(counts), size)) for _ in range(3))
        start = np.empty(sum(counts))
        at = 0
        for i, n in zip(group, counts, strict=True):
            values, subset, a, b, theta0 = blocks[i]
            items = subset.items
            x[at:at + n] = np.asarray(values, float)[:, items]
            rows_a[at:at + n] = np.asarray(a, float)[items]
            rows_b[at:at + n] = np.asarray(b, float)[items]
            start[at:at + n] = np.asarray(prior_mean if theta0 is None else theta0, float)
            at += n
        theta = np.asarray(map_ability(x, rows_a, rows_b, prior_mean=prior_mean, prior_sd=prior_sd, theta0=start,
                                       row_sums=sums, standard_errors=False).theta)
        at = 0
        for i, n in zip(group, counts, strict=True):
            out[i] = theta[at:at + n]
            at += n
    return out


def _score_blocks_kernel(lib, blocks, *, prior_mean, prior_sd):
    """:func:`score_blocks_map` from the ability kernel's blocks (:func:`irtlib.selection.ability_kernel.map_blocks`).

    Every row is solved from its block's responses, items and parameters as ``map_ability`` solves it in the
    stacked call (with its defaults: the same Newton steps, bisection and bracket), the same bits. None where a
    block is not of the kernel's form (responses not 2-D, items not integers, parameters not 1-D) or holds what
    ``map_ability`` refuses: the caller's stacked ``map_ability`` call then runs (and states the error).
    """
    defaults = map_ability.__kwdefaults__
    prior_mean_f, prior_sd_f, (lo, hi) = check_prior(prior_mean, prior_sd, defaults["bounds"])
    kept: dict[int, tuple] = {}          # each split's arrays converted once (by identity), with their addresses

    def c_array(arr, ndim):
        got = kept.get(id(arr))
        if got is None:
            c = np.ascontiguousarray(arr, dtype=np.float64)
            got = kept[id(arr)] = (c, c.ctypes.data if c.ndim == ndim else None)
        return got

    desc, items, starts = [], [], []
    at_items = at_rows = 0
    for values, subset, a, b, theta0 in blocks:
        (x, x_at), (aa, a_at), (bb, b_at) = c_array(values, 2), c_array(a, 1), c_array(b, 1)
        if x_at is None or a_at is None or b_at is None:
            return None
        n = x.shape[0]
        items.append(subset.items)
        starts.append(np.broadcast_to(np.asarray(prior_mean if theta0 is None else theta0, float), (n,)))
        desc.append((x_at, n, x.shape[1], at_items, len(subset.items), a_at, b_at, at_rows, min(aa.size, bb.size)))
        at_items += len(subset.items)
        at_rows += n
    items = np.concatenate(items) if items else np.empty(0, dtype=np.int64)
    if items.ndim != 1 or not np.issubdtype(items.dtype, np.integer):
        return None
    items = np.ascontiguousarray(items, dtype=np.int64)
    theta = np.clip(np.concatenate(starts), lo, hi)        # map_ability's clipped starts
    bad = ability_kernel.map_blocks(lib, np.array(desc, dtype=np.int64).reshape(-1, 9), items, theta,
                                    prior_mean=prior_mean_f, prior_var=prior_sd_f ** 2,
                                    max_newton=defaults["max_newton"], max_step=defaults["max_step"],
                                    tol=defaults["tol"], max_bisection=defaults["max_bisection"], lo=lo, hi=hi,
                                    limit=PARAMETER_LIMIT)
    if bad >= 0:
        return None
    ends = np.cumsum([d[1] for d in desc])
    return np.split(theta, ends[:-1]) if desc else []


def score_subsets_map(values: ArrayLike, subsets: Sequence[Subset], *, a: ArrayLike, b: ArrayLike,
                      theta0: Sequence[ArrayLike | None] | None = None, prior_mean: float = 0.0,
                      prior_sd: float = 1.0) -> list[np.ndarray]:
    """:func:`score_subset` with ``how="map"`` for several subsets, one :func:`map_ability` call per subset size.

    The protocol scores every MAP method's subset of each budget (section "Evaluation"); subsets of
    one size are stacked into one call with per-row item parameters. Every model's Newton run only
    reads its own row, over the same number of items in the same order, so each result equals
    ``score_subset(values, subset, how="map", a=a, b=b, theta0=theta0[i])`` bit for bit (a test
    checks it); subsets of different sizes are never stacked (padding would change the row sums).
    One split's blocks of :func:`score_blocks_map`.

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
    subsets : sequence of Subset
    a, b : array_like, shape (n_items,)
    theta0 : sequence, optional
        Newton's starting point per subset (None entries: the prior mean).

    Returns
    -------
    list of ndarray, shape (n_models,) each, in the order of ``subsets``
    """
    theta0 = [None] * len(subsets) if theta0 is None else list(theta0)
    if len(theta0) != len(subsets):
        raise InputError(f"theta0 has {len(theta0)} entries for {len(subsets)} subsets")
    return score_blocks_map([(values, subset, a, b, start) for subset, start in zip(subsets, theta0, strict=True)],
                            prior_mean=prior_mean, prior_sd=prior_sd)
