"""The computerized adaptive test a practitioner expects: stopping rules, EAP, exposure control, content balancing.

Beyond the paper. Algorithm 1 (section "Adaptive selection") stops at a fixed budget, scores by
MAP and always gives the most informative item. :func:`run_cat` is a thin entry point over the
engine (:mod:`irtlib.selection.engine`, driven by :func:`irtlib.selection.adaptive.run_adaptive`)
with the tools of an operational CAT:

- *stopping rules* (:class:`~irtlib.selection.stopping.StoppingRule`): a budget, a standard-error
  target, a minimum information, a certification decision (:mod:`irtlib.selection.certify`);
- *estimators*: ``"map"`` (the paper's) or ``"eap"`` (the posterior mean, :mod:`irtlib.core.eap`);
- *exposure control* (:class:`~irtlib.selection.selectors.ExposureControl`): randomesque (draw
  uniformly among the ``k`` most informative items) and Sympson-Hetter (the chosen item is
  administered with probability ``K_j``, else it is set aside for this model and the next is
  tried; :func:`sympson_hetter` calibrates ``K`` by simulation so no item is seen by more than a
  target share of models);
- *content balancing* (:class:`~irtlib.selection.selectors.ContentBalance`): the Kingsbury-Zara
  rule -- give the next item from the category furthest below its target share, then the most
  informative item in it.

The item model is pluggable: :class:`~irtlib.selection.items.TwoPLItems` (the 2PL of
:mod:`irtlib.core.kernels`), :class:`irtlib.extended.grm.GradedItems` for graded judgments.

Randomness: select call ``t`` of a run draws from ``SeedSequence(seed, spawn_key=(t,))``
(:func:`~irtlib.selection.selectors.step_rng`), so a run is reproduced exactly by its seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irtlib._typing import ArrayLike, PathLike
from irtlib.core.eap import EAP_POINTS
from irtlib.core.kernels import probability
from irtlib.errors import InputError

from .adaptive import run_adaptive
from .estimators import EapEstimator, MapEstimator
from .items import ItemModel, TwoPLItems
from .selectors import (
    ContentBalance,
    ExposureControl,
    choose_items,
    kingsbury_zara_category,
    selector_for,
    step_rng,
)
from .stopping import STOP_REASONS, StoppingRule

__all__ = [
    "StoppingRule", "ExposureControl", "ContentBalance", "ItemModel", "TwoPLItems", "CatResult", "run_cat",
    "sympson_hetter", "kingsbury_zara_category", "read_item_categories", "STOP_REASONS", "choose_items", "step_rng",
]


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


# ---------------------------------------------------------------------------- the entry point
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
        The ability after each item: posterior mode (:class:`~irtlib.selection.estimators.MapEstimator`)
        or posterior mean on an ``n_points`` grid over [-8, 8] (:class:`~irtlib.selection.estimators.EapEstimator`).
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
    if not isinstance(stopping, StoppingRule):
        raise InputError("stopping must be a StoppingRule")
    est = (MapEstimator(prior_mean=prior_mean, prior_sd=prior_sd) if estimator == "map" else
           EapEstimator(prior_mean=prior_mean, prior_sd=prior_sd, n_points=n_points))
    budget = min(items.n_items, stopping.max_items or items.n_items)
    traj = run_adaptive(x, items=items, budget=budget, selector=selector_for(exposure=exposure, content=content),
                        estimator=est, stopping=stopping, seed=seed, theta0=theta0)
    after = np.arange(budget)[None, :] >= traj.n_items[:, None]
    last = np.maximum(traj.n_items - 1, 0)
    rows = np.arange(x.shape[0])
    given = traj.n_items > 0
    set_aside = traj.set_aside if traj.set_aside is not None else np.zeros(items.n_items, dtype=int)
    return CatResult(items=traj.items, theta=np.where(after, np.nan, traj.estimate),
                     se=np.where(after, np.nan, traj.se), n_items=traj.n_items, stop_reason=traj.stop_reason,
                     final_theta=np.where(given, traj.estimate[rows, last], float(theta0)),
                     final_se=np.where(given, traj.se[rows, last], float(prior_sd)), set_aside=set_aside)


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
    p = probability(thetas[:, None], items.a, items.b)
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

