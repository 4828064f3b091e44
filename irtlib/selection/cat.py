"""The computerized adaptive test a practitioner expects: stopping rules, EAP, exposure control, content balancing.

Beyond the paper. Algorithm 1 (section "Adaptive selection") stops at a fixed budget, scores by
MAP and always gives the most informative item. This module runs the same loop for many models
at once (every step is one vectorised operation over models and items) with the tools of an
operational CAT:

- *stopping rules* (:class:`StoppingRule`): a budget, a standard-error target, and a minimum
  information (stop when no remaining item would add at least that much Fisher information at
  the current estimate: the bank has nothing left to say about this model);
- *estimators*: ``"map"`` (:func:`irtlib.map_ability`, the paper's) or ``"eap"`` (the posterior
  mean, :mod:`irtlib.core.eap`);
- *exposure control* (:class:`ExposureControl`): randomesque (draw uniformly among the ``k``
  most informative items) and Sympson-Hetter (the chosen item is administered with probability
  ``K_j``, else it is set aside for this model and the next is tried; :func:`sympson_hetter`
  calibrates ``K`` by simulation so no item is seen by more than a target share of models);
- *content balancing* (:class:`ContentBalance`): the Kingsbury-Zara rule -- give the next item
  from the category furthest below its target share, then the most informative item in it.

The item model is pluggable (:class:`ItemModel`): :class:`TwoPLItems` here (the 2PL of
:mod:`irtlib.core.kernels`), :class:`irtlib.extended.grm.GradedItems` for graded judgments.

Randomness: step ``t`` of a run draws from ``SeedSequence(seed, spawn_key=(t,))``, so a run is
reproduced exactly by its seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from scipy.special import log_expit

from irtlib._typing import ArrayLike, PathLike
from irtlib.core.ability import map_ability
from irtlib.core.eap import EAP_POINTS, eap_from_log_likelihood
from irtlib.core.kernels import fisher_information
from irtlib.core.quadrature import uniform_grid
from irtlib.errors import InputError

__all__ = [
    "StoppingRule", "ExposureControl", "ContentBalance", "ItemModel", "TwoPLItems", "CatResult", "run_cat",
    "sympson_hetter", "kingsbury_zara_category", "read_item_categories", "STOP_REASONS", "choose_items", "step_rng",
]

#: Why a model's test ended.
STOP_REASONS = ("max_items", "target_se", "min_information", "exhausted")


# ---------------------------------------------------------------------------- settings
def _positive(value, name, *, integer=False):
    if value is None:
        return None
    ok = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.integer, np.floating))
    if isinstance(value, (bool, np.bool_)) or not ok or not np.isfinite(value) or value <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise InputError(f"{name} must be {kind}, got {value!r}")
    return int(value) if integer else float(value)


@dataclass(frozen=True)
class StoppingRule:
    """When an adaptive test ends (whichever rule holds first).

    Parameters
    ----------
    max_items : int, optional
        The budget.
    target_se : float, optional
        Stop once the ability's standard error (MAP) or posterior SD (EAP) is at most this.
    min_information : float, optional
        Stop once the most informative remaining item would add less than this Fisher
        information at the current estimate.
    """

    max_items: int | None = None
    target_se: float | None = None
    min_information: float | None = None

    def __post_init__(self):
        for name in ("max_items", "target_se", "min_information"):
            object.__setattr__(self, name, _positive(getattr(self, name), name, integer=name == "max_items"))
        if self.max_items is None and self.target_se is None and self.min_information is None:
            raise InputError("give at least one stopping rule: max_items, target_se or min_information")

    def reasons(self, *, n_items: np.ndarray, se: np.ndarray, best_information: np.ndarray,
                left: np.ndarray) -> np.ndarray:
        """Reason each model stops now (an index into :data:`STOP_REASONS`), or -1 to go on.

        Parameters
        ----------
        n_items, se, best_information, left : ndarray, shape (n_models,)
            Items given, current SE, information of the best remaining item, items left.
        """
        checks = [(self.min_information is not None, best_information < (self.min_information or 0), 2),
                  (self.target_se is not None, (n_items > 0) & (se <= (self.target_se or 0)), 1),
                  (self.max_items is not None, n_items >= (self.max_items or 0), 0)]
        out = np.where(left == 0, 3, -1)
        for active, hit, code in checks:
            if active:
                out = np.where(hit, code, out)
        return out


@dataclass(frozen=True)
class ExposureControl:
    """Exposure control for item selection.

    Parameters
    ----------
    randomesque : int
        Draw the next item uniformly among this many most informative candidates (1: none).
    sympson_hetter : array_like, shape (n_items,), optional
        Exposure-control parameters ``K_j`` in [0, 1] (:func:`sympson_hetter` calibrates them):
        the selected item is given with probability ``K_j``; otherwise it is set aside for this
        model and the next candidate is tried (an item with ``K_j = 1`` is always given).
    """

    randomesque: int = 1
    sympson_hetter: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        _positive(self.randomesque, "randomesque", integer=True)
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


def read_item_categories(path: PathLike) -> dict:
    """``{item: category}`` from a CSV with columns ``item`` and ``category`` (for content balancing).

    Raises
    ------
    InputError
        The file is not such a CSV, a row has an empty item or category, or an item repeats;
        the message names the file and the row.
    """
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a CSV of item categories ({exc})") from None
    missing = {"item", "category"} - set(frame.columns)
    if missing:
        raise InputError(f"{path}: needs the columns 'item' and 'category' (missing: {', '.join(sorted(missing))})")
    empty = (frame["item"].str.strip() == "") | (frame["category"].str.strip() == "")
    if empty.any():
        raise InputError(f"{path}: row {int(np.flatnonzero(empty)[0]) + 2}: empty item or category")
    dup = frame["item"].duplicated()
    if dup.any():
        raise InputError(f"{path}: row {int(np.flatnonzero(dup)[0]) + 2}: item {frame['item'][dup].iloc[0]!r} "
                         "appears twice")
    return dict(zip(frame["item"], frame["category"], strict=True))


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


# ---------------------------------------------------------------------------- item models
class ItemModel(Protocol):
    """What the loop needs of an item response model (2PL, GRM)."""

    n_items: int

    def information(self, theta: np.ndarray) -> np.ndarray:
        """Fisher information of every item at each model's theta, shape (n_models, n_items)."""

    def grid_log_likelihood(self, items: np.ndarray, responses: np.ndarray, points: np.ndarray) -> np.ndarray:
        """Log-likelihood of one response per model at each grid point, shape (n_models, n_points)."""

    def map_estimate(self, items: np.ndarray, responses: np.ndarray, *, theta0: np.ndarray, prior_mean: float,
                     prior_sd: float) -> tuple[np.ndarray, np.ndarray]:
        """MAP ability and SE of each model from its given items (rows of ``items``, -1 padded)."""


class TwoPLItems:
    """The 2PL item model (:mod:`irtlib.core.kernels`) for :func:`run_cat`.

    Parameters
    ----------
    a, b : array_like, shape (n_items,)
    """

    def __init__(self, a: ArrayLike, b: ArrayLike):
        self.a, self.b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if self.a.ndim != 1 or self.a.shape != self.b.shape or not np.isfinite(self.a).all() \
                or not np.isfinite(self.b).all():
            raise InputError("a and b must be finite 1-D arrays of one length")
        self.n_items = self.a.size
        self.valid = (0.0, 1.0)

    def information(self, theta: np.ndarray) -> np.ndarray:
        """``a^2 P (1 - P)`` at each model's theta (:func:`irtlib.core.kernels.fisher_information`)."""
        return fisher_information(np.asarray(theta, dtype=float)[:, None], self.a, self.b)

    def grid_log_likelihood(self, items: np.ndarray, responses: np.ndarray, points: np.ndarray) -> np.ndarray:
        """Bernoulli log-likelihood of each model's response to ``items`` at the grid points."""
        z = self.a[items][:, None] * (points[None, :] - self.b[items][:, None])
        return np.where(responses[:, None] == 1, log_expit(z), log_expit(-z))

    def map_estimate(self, items: np.ndarray, responses: np.ndarray, *, theta0: np.ndarray, prior_mean: float,
                     prior_sd: float) -> tuple[np.ndarray, np.ndarray]:
        """:func:`irtlib.map_ability` on the items given (``items`` -1 where not given)."""
        given = items >= 0
        jj = np.where(given, items, 0)
        x = np.where(given, responses, np.nan)
        est = map_ability(x, self.a[jj], self.b[jj], prior_mean=prior_mean, prior_sd=prior_sd, theta0=theta0)
        return np.asarray(est.theta, dtype=float), np.asarray(est.se, dtype=float)


# ---------------------------------------------------------------------------- result
@dataclass(frozen=True)
class CatResult:
    """What :func:`run_cat` did.

    Attributes
    ----------
    items : ndarray of int, shape (n_models, max_steps)
        Items given in order, -1 after the model's test ended.
    theta, se : ndarray, shape (n_models, max_steps)
        The estimate and its SE after each item (NaN after the end).
    n_items : ndarray of int, shape (n_models,)
    stop_reason : ndarray of str, shape (n_models,)
        One of :data:`STOP_REASONS`.
    final_theta, final_se : ndarray, shape (n_models,)
    set_aside : ndarray of int, shape (n_items,)
        How many models had each item set aside by Sympson-Hetter (selected, not given).
    """

    items: np.ndarray
    theta: np.ndarray
    se: np.ndarray
    n_items: np.ndarray
    stop_reason: np.ndarray
    final_theta: np.ndarray
    final_se: np.ndarray
    set_aside: np.ndarray

    def at(self, k: int) -> np.ndarray:
        """Estimates after ``k`` items (the final estimate for tests that ended earlier), shape (n_models,)."""
        k = int(k)
        if not 1 <= k <= self.items.shape[1]:
            raise InputError(f"k must be between 1 and {self.items.shape[1]}, got {k}")
        col = np.minimum(self.n_items, k) - 1
        out = self.theta[np.arange(col.size), np.maximum(col, 0)]
        return np.where(col >= 0, out, np.nan)

    def exposure(self, n_items: int) -> np.ndarray:
        """Share of models that were given each item, shape (n_items,)."""
        given = self.items[self.items >= 0]
        return np.bincount(given, minlength=n_items) / self.items.shape[0]


# ---------------------------------------------------------------------------- the loop
def step_rng(seed: int | None, t: int) -> np.random.Generator:
    """The random generator of step ``t`` of a test seeded with ``seed``.

    Its draws depend only on ``(seed, t)``, so that :func:`run_cat` and a resumed
    :class:`irtlib.bank.session.AdaptiveSession` propose the same items at the same step.
    """
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(int(t),)))


def choose_items(info: np.ndarray, avail: np.ndarray, rng: np.random.Generator,
                 exposure: ExposureControl | None) -> tuple[np.ndarray, np.ndarray]:
    """One item per row: max information, or randomesque/Sympson-Hetter; also the set-aside items.

    Parameters
    ----------
    info : ndarray, shape (n_models, n_items)
        Fisher information of every item at each model's current ability.
    avail : ndarray of bool, shape (n_models, n_items)
        The items each model may still be given.
    rng : numpy.random.Generator
        The step's generator (:func:`step_rng`).
    exposure : ExposureControl or None
        Randomesque and Sympson-Hetter exposure control; None: the most informative item.

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
        order = np.argsort(-masked, axis=1, kind="stable")            # ties: lowest index first
        ok = np.take_along_axis(avail, order, axis=1)
        accept = rng.random((n_models, n_items)) < exposure.sympson_hetter[order]
        accept &= ok
        if k > 1:                  # randomesque among the first k items Sympson-Hetter lets through
            rank = np.cumsum(accept, axis=1)
            n_ok = np.minimum(rank[:, -1], k)
            pick = np.floor(rng.random(n_models) * np.maximum(n_ok, 1)).astype(int) + 1
            first = np.argmax(accept & (rank == pick[:, None]), axis=1)
        else:
            first = np.argmax(accept, axis=1)
        found = accept[rows, first]
        item = np.where(found, order[rows, first], -1)
        # everything tried before the administered item was set aside (all tried, if none accepted)
        tried = (np.arange(n_items)[None, :] < np.where(found, first, n_items)[:, None]) & ok & ~accept
        rejected[rows[:, None], order] = tried
        return item, rejected
    if k == 1:
        item = np.argmax(masked, axis=1)
    else:
        kk = min(k, n_items)
        top = np.argsort(-masked, axis=1, kind="stable")[:, :kk]
        n_ok = np.minimum(avail.sum(axis=1), kk)
        pick = np.floor(rng.random(n_models) * np.maximum(n_ok, 1)).astype(int)
        item = top[rows, pick]
    return np.where(avail.any(axis=1), item, -1), rejected


def run_cat(responses: ArrayLike, items: ItemModel, *, stopping: StoppingRule, estimator: str = "map",
            exposure: ExposureControl | None = None, content: ContentBalance | None = None,
            prior_mean: float = 0.0, prior_sd: float = 1.0, theta0: float = 0.0, seed: int = 0,
            n_points: int = EAP_POINTS) -> CatResult:
    """Adaptive tests of many models, replayed on their response rows.

    Parameters
    ----------
    responses : array_like, shape (n_models, n_items)
        The models' responses (0/1 for :class:`TwoPLItems`, categories for graded items); NaN
        where a model has no response (that item is unavailable to it).
    items : ItemModel
        :class:`TwoPLItems` or :class:`irtlib.extended.grm.GradedItems`.
    stopping : StoppingRule
    estimator : {"map", "eap"}
        The ability after each item: posterior mode (with the 2PL, :func:`irtlib.map_ability`
        exactly) or posterior mean on an ``n_points`` grid over [-8, 8].
    exposure : ExposureControl, optional
    content : ContentBalance, optional
    prior_mean, prior_sd, theta0 : float
        The Normal prior and the starting ability (the paper: 0, 1 and 0).
    seed : int
        Seeds randomesque and Sympson-Hetter draws.

    Returns
    -------
    CatResult

    Notes
    -----
    The minimum-information rule is checked before each item: at the start the estimate is
    ``theta0``. Items with no response are treated as unavailable, never selected.
    """
    x = np.atleast_2d(np.asarray(responses, dtype=float))
    if x.ndim != 2 or x.shape[1] != items.n_items:
        raise InputError(f"responses must have shape (n_models, {items.n_items}), got {np.shape(responses)}")
    if estimator not in ("map", "eap"):
        raise InputError(f"estimator must be 'map' or 'eap', got {estimator!r}")
    check = getattr(items, "check_responses", None)      # graded items: categories 0..K-1 only
    if check is not None:
        check(x)
    if not isinstance(stopping, StoppingRule):
        raise InputError("stopping must be a StoppingRule")
    n_models, n_items = x.shape
    if exposure is not None and exposure.sympson_hetter is not None and exposure.sympson_hetter.size != n_items:
        raise InputError(f"sympson_hetter has {exposure.sympson_hetter.size} values for {n_items} items")
    if content is not None and content.code.size != n_items:
        raise InputError(f"content categories cover {content.code.size} items, the bank has {n_items}")
    max_steps = min(n_items, stopping.max_items or n_items)
    rows = np.arange(n_models)
    avail = ~np.isnan(x)
    given = np.full((n_models, max_steps), -1, dtype=np.intp)
    got = np.full((n_models, max_steps), np.nan)
    theta_path = np.full((n_models, max_steps), np.nan)
    se_path = np.full((n_models, max_steps), np.nan)
    theta = np.full(n_models, float(theta0))
    se = np.full(n_models, float(prior_sd))
    n_given = np.zeros(n_models, dtype=int)
    stop = np.full(n_models, -1)
    points = log_post = None
    if estimator == "eap":
        points, log_post = uniform_grid(n_points=n_points, prior_mean=prior_mean, prior_sd=prior_sd)
        log_post = np.broadcast_to(log_post, (n_models, points.size)).copy()
    counts = None if content is None else np.zeros((n_models, content.share.size))
    set_aside = np.zeros(n_items, dtype=int)
    for t in range(max_steps + 1):
        running = stop < 0
        info = items.information(theta)
        best = np.where(avail, info, -np.inf).max(axis=1)
        now = stopping.reasons(n_items=n_given, se=se, best_information=best, left=avail.sum(axis=1))
        stop = np.where(running & (now >= 0), now, stop)
        running = stop < 0
        if not running.any() or t == max_steps:
            break
        pool = avail.copy()
        if content is not None:
            has = np.zeros((n_models, content.share.size), dtype=bool)
            np.logical_or.at(has.T, content.code, pool.T)
            cat = kingsbury_zara_category(counts, content.share, has)
            pool &= content.code[None, :] == cat[:, None]
        rng = step_rng(seed, t)
        j, rejected = choose_items(info, pool, rng, exposure)
        rejected &= running[:, None]
        set_aside += rejected.sum(axis=0)
        avail &= ~rejected
        j = np.where(running, j, -1)
        live = j >= 0
        stop = np.where(running & ~live, 3, stop)       # Sympson-Hetter set every item aside
        if not live.any():
            break
        jj = np.where(live, j, 0)
        r = x[rows, jj]
        avail[rows[live], j[live]] = False
        given[live, t] = j[live]
        got[live, t] = r[live]
        n_given += live
        if content is not None:
            np.add.at(counts, (rows[live], content.code[j[live]]), 1.0)
        if estimator == "eap":
            log_post[live] += items.grid_log_likelihood(j[live], r[live], points)
            est = eap_from_log_likelihood(log_post[live], points, np.zeros(points.size))
            theta[live], se[live] = est.theta, est.se
        else:
            th, s = items.map_estimate(given[live, : t + 1], got[live, : t + 1], theta0=theta[live],
                                       prior_mean=prior_mean, prior_sd=prior_sd)
            theta[live], se[live] = th, s
        theta_path[live, t], se_path[live, t] = theta[live], se[live]
    stop = np.where(stop < 0, 0, stop)
    return CatResult(items=given, theta=theta_path, se=se_path, n_items=n_given,
                     stop_reason=np.asarray(STOP_REASONS, dtype=object)[stop], final_theta=theta, final_se=se,
                     set_aside=set_aside)


def sympson_hetter(items: ItemModel, *, max_exposure: float, max_items: int, thetas: ArrayLike | None = None,
                   n_simulees: int = 500, n_rounds: int = 20, estimator: str = "map", seed: int = 0,
                   tol: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """Calibrate Sympson-Hetter exposure parameters by simulation.

    Simulees with abilities ``thetas`` (default ``n_simulees`` draws from Normal(0, 1)) answer
    according to the item model's 2PL probabilities; each round runs their fixed-length tests
    with the current ``K`` and sets ``K_j = min(1, max_exposure / s_j)`` from each item's
    selection rate ``s_j`` (how often it was the candidate, given or set aside), until every
    item's exposure is at most ``max_exposure + tol``; the round with the smallest largest
    exposure is returned. Like every Sympson-Hetter calibration this holds exposure near the
    target, not exactly under it (measured in the tests: within 0.05 of it on fresh simulees).

    Parameters
    ----------
    items : TwoPLItems
    max_exposure : float
        The largest share of tests allowed to contain any one item (in (0, 1]).
    max_items : int
        The test length the parameters are for.

    Returns
    -------
    k : ndarray, shape (n_items,)
        Exposure-control parameters.
    exposure : ndarray, shape (n_items,)
        The exposure rates of the last round.
    """
    if not 0 < max_exposure <= 1:
        raise InputError(f"max_exposure must be in (0, 1], got {max_exposure!r}")
    if not isinstance(items, TwoPLItems):
        raise InputError("sympson_hetter simulates 0/1 answers: it needs TwoPLItems")
    if max_items * 1.0 / items.n_items > max_exposure:
        raise InputError(f"{max_items} items of {items.n_items} cannot keep every exposure below {max_exposure}")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(10**6,)))
    thetas = rng.standard_normal(int(n_simulees)) if thetas is None else np.asarray(thetas, dtype=float)
    p = 1.0 / (1.0 + np.exp(-items.a * (thetas[:, None] - items.b)))
    x = (rng.random(p.shape) < p).astype(float)
    k = np.ones(items.n_items)
    stopping = StoppingRule(max_items=max_items)
    best = (np.inf, k, None)
    for r in range(int(n_rounds)):
        exposure, selected = _run_with_selection_counts(x, items, stopping, k, estimator, seed=(seed, r))
        if exposure.max() < best[0]:
            best = (exposure.max(), k, exposure)
        if exposure.max() <= max_exposure + tol:
            break
        k = np.where(selected > max_exposure, max_exposure / np.maximum(selected, 1e-12), 1.0)
    return best[1], best[2]


def _run_with_selection_counts(x, items, stopping, k, estimator, *, seed):
    """Exposure rates and selection rates (given or set aside) of a Sympson-Hetter run."""
    s = np.random.SeedSequence(list(np.atleast_1d(seed)))
    res = run_cat(x, items, stopping=stopping, estimator=estimator,
                  exposure=ExposureControl(sympson_hetter=k), seed=int(s.generate_state(1)[0]))
    exposure = res.exposure(items.n_items)
    return exposure, exposure + res.set_aside / x.shape[0]

